"""The Wine session a runner lives in: our own Xvfb, a persistent wineserver, and Wine's boot
processes, all started detached before the runner.

Why detached: the first Wine process of a session starts wineboot, which starts services.exe,
winedevice.exe, explorer.exe and others. Started by the runner, they inherit its stdout, so after a
runner crash the harness sees EOF only when they exit too (seconds later). Started here, each in its
own session with stdio on /dev/null, before the runner, only the runner holds its pipe: a crash is
seen as soon as the process is gone. The wineserver is started persistent (`-p`), so a runner's
death does not take the session down, and a restarted runner finds services running; it exits by
itself PERSIST_S seconds after its last client, and it is shared by every backend on the same prefix
(pytest-xdist workers each get a prefix of their own: private_prefix), so it is never killed here.

Xvfb (winex11.drv is Wine 8's only display driver that reaches Vulkan) is started with -displayfd,
which picks a free display number (fixed numbers collide with stale lock files), and it is stopped
when the backend closes.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from .lifetime import die_with_parent
from .stack import Stack
from .vulkan import VulkanDriver

PERSIST_S = 60  # the wineserver outlives its last client by this long (a restart finds it up)
STALE_PREFIX_S = 6 * 3600  # a set-aside worker prefix is removed after this long
PRIVATE_PREFIX_STAMP = ".dmlconform-private-prefix"  # in a worker's prefix: the base prefix it was linked from
XVFB_SCREEN = ["-screen", "0", "1280x1024x24", "-nolisten", "tcp", "-ac"]


class SessionError(RuntimeError):
    """Xvfb, the wineserver or wineboot did not start; the message says which, with its output."""


def _remove_stale_copies(where: Path, name: str) -> None:
    """Remove the set-aside copies of a worker's prefix older than STALE_PREFIX_S (their runs are
    long over: a wineserver outlives its last client by PERSIST_S)."""
    now = time.time()
    for old in where.glob(f".{name}.stale-*"):
        try:
            if now - int(old.name.rsplit(".stale-", 1)[1].split("-", 1)[0]) > STALE_PREFIX_S:
                shutil.rmtree(old, ignore_errors=True)
        except (ValueError, IndexError):
            continue


class WineSession:
    """Xvfb + wineserver + boot processes for one backend's runners (restarted runners reuse it)."""

    def __init__(self, stack: Stack, vulkan: VulkanDriver, debug: str = "-all", log: Path | None = None,
                 worker: str | None = None) -> None:
        self.stack, self.vulkan, self.debug, self.log = stack, vulkan, debug, log
        # a pytest-xdist worker's runners get a Wine prefix, hence a wineserver, of their own (see private_prefix)
        self.worker = worker if worker is not None else os.environ.get("PYTEST_XDIST_WORKER") or None
        self.prefix: Path | None = None
        self.xvfb: subprocess.Popen | None = None
        self.display: str | None = None
        self._xvfb_err: IO[bytes] | None = None
        self.booted = False

    # --- life cycle ---------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        env = self.stack.environment(self.vulkan, self.display, self.debug)
        if self.prefix is not None:
            env["WINEPREFIX"] = str(self.prefix)
        return env

    def private_prefix(self) -> Path | None:
        """This worker's Wine prefix: the stack's, hard-linked file by file (instant, no space), so
        that its runners talk to a wineserver of their own. Why: Wine 8 makes every wait and event a
        call to the prefix's one single-threaded wineserver; with 16 workers sharing it on an NVIDIA
        H200, an operator's initialisation (one submit and fence) took 3.5 s instead of
        milliseconds. Wine saves the registry by writing a new file and renaming it, so a link is
        never written through. Made again when the stack's prefix is newer (any run on the stack's
        own prefix saves its registry): the new copy is made aside and renamed into place, and the
        old one renamed away, not deleted, so that another run's runners of the same worker name,
        whose wineserver is keyed to the old directory, go on with their prefix whole (two runs
        on one stack share worker names: gw0, gw1). Old copies are removed STALE_PREFIX_S after
        they were set aside."""
        if not self.worker or not all(c.isalnum() or c in "-_" for c in self.worker):
            return None
        base = self.stack.prefix
        target = base.parent / f"{base.name}-{self.worker}"
        stamp = target / PRIVATE_PREFIX_STAMP
        marker = base / "system.reg"
        import fcntl  # POSIX only, as Wine sessions are (Windows runs the runner natively)
        try:
            with open(base.parent / f".{target.name}.lock", "a") as lock:  # two processes of one worker name
                fcntl.flock(lock, fcntl.LOCK_EX)
                if stamp.is_file() and marker.is_file() and stamp.stat().st_mtime >= marker.stat().st_mtime:
                    return target
                fresh = base.parent / f".{target.name}.new-{os.getpid()}"
                shutil.rmtree(fresh, ignore_errors=True)
                shutil.copytree(base, fresh, symlinks=True, copy_function=os.link)
                (fresh / PRIVATE_PREFIX_STAMP).write_text(str(base))
                if target.exists():
                    target.rename(base.parent / f".{target.name}.stale-{int(time.time())}-{os.getpid()}-{time.monotonic_ns()}")
                fresh.rename(target)
                _remove_stale_copies(base.parent, target.name)
        except OSError:  # another file system, a read-only stack: the shared prefix works, only slower
            return None
        return target

    def ensure(self, timeout: float = 120.0) -> dict[str, str]:
        """Start what is not running (Xvfb, then the wineserver and wineboot once) and return the
        runner's environment."""
        if self.prefix is None and self.worker:
            self.prefix = self.private_prefix()
        if self.xvfb is None or self.xvfb.poll() is not None:
            self._start_xvfb(min(timeout, 30.0))
            self.booted = False  # the boot processes hold the display they were started on
        env = self.environment()
        if not self.booted:
            self._start_wineserver(env, timeout)
            self._run_detached([str(self.stack.wine_loader()), "wineboot"], env, timeout, "wineboot")
            self.booted = True
        return env

    def stop(self) -> None:
        """Stop our Xvfb. The wineserver stays: other backends on the prefix may use it, and it
        exits PERSIST_S seconds after its last client."""
        proc, self.xvfb = self.xvfb, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except (ProcessLookupError, PermissionError, OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        if self._xvfb_err is not None:
            self._xvfb_err.close()
            self._xvfb_err = None
        self.display = None
        self.booted = False

    # --- pieces ---------------------------------------------------------------------------------
    def _output(self):
        """Where detached processes write: the trace log when one is asked for, else nowhere."""
        return open(self.log, "ab") if self.log else subprocess.DEVNULL

    def _start_xvfb(self, timeout: float) -> None:
        self.stop()
        xvfb = self.stack.xvfb()
        if xvfb is None:
            raise SessionError("Xvfb not found (Debian: apt-get install xvfb; or use a portable stack)")
        read_fd, write_fd = os.pipe()
        self._xvfb_err = tempfile.TemporaryFile()
        env = self.stack.environment(self.vulkan)
        try:
            self.xvfb = subprocess.Popen([str(xvfb), "-displayfd", str(write_fd), *XVFB_SCREEN, *self.stack.xvfb_arguments()],
                                         pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=self._xvfb_err, env=env, cwd=self.stack.xvfb_cwd(), start_new_session=True,
                                         preexec_fn=die_with_parent())  # no Xvfb outlives a killed run
        finally:
            os.close(write_fd)
        number = b""
        deadline = time.monotonic() + timeout
        try:
            while not number.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                    break
                chunk = os.read(read_fd, 16)
                if not chunk:
                    break
                number += chunk
        finally:
            os.close(read_fd)
        if not number.strip().isdigit():
            self._xvfb_err.seek(0)
            words = " | ".join(self._xvfb_err.read().decode("utf-8", "replace").strip().splitlines()[-6:])
            self.stop()
            raise SessionError(f"Xvfb did not start ({xvfb}): {words or 'no display number within %.0f s' % timeout}")
        self.display = f":{int(number)}"

    def _start_wineserver(self, env: dict[str, str], timeout: float) -> None:
        """`wineserver -pN` daemonises once its socket is ready; when a server already runs for
        the prefix, it returns at once (with a non-zero code) and that one is used."""
        self._run_detached([str(self.stack.wineserver()), f"-p{PERSIST_S}"], env, timeout, "wineserver", must_succeed=False)

    def _run_detached(self, command: list[str], env: dict[str, str], timeout: float, what: str,
                      must_succeed: bool = True) -> None:
        """Run `command` in its own session, stdio away from the runner's pipes, and wait for it."""
        out = self._output()
        try:
            proc = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                  start_new_session=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SessionError(f"{what} did not finish within {timeout:.0f} s") from None
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        if must_succeed and proc.returncode != 0:
            raise SessionError(f"{what} failed (exit code {proc.returncode}); run with WINEDEBUG=err+all to see why")
