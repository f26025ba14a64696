"""The runner process: start it (natively on Windows, under Wine + Xvfb elsewhere), exchange frames,
and notice crashes, hangs and removed devices.

Under Wine the runner is started by the stack's loader (wine64) in its own process group, inside a
WineSession (session.py: our Xvfb, a persistent wineserver and Wine's boot processes, detached),
so that only the runner holds its stdout and a crash is seen at once.

Frames: u32 magic 'DMLR', u32 JSON length, u32 buffer count, JSON, then per buffer u32 length + bytes.
A reader thread turns stdout into frames and a second one keeps the last lines of stderr (the
runner's and Wine's last words), so a timeout never blocks the harness.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .gpus import GpuChoiceError, pinned_environment
from .lifetime import die_with_parent
from .session import WineSession
from .stack import Stack, default_stack_dir
from .vulkan import VulkanDriver, resolve_vulkan

MAGIC = 0x524C4D44
STAGE_PREFIX = b"dmlrunner-stage "  # runner.c announces each stage on stderr before it begins
CRASH_PREFIX = b"dmlrunner-crash "  # and says so when it crashes, before it ends
ROOT = Path(__file__).resolve().parents[2]
# the stack set up by scripts/setup_directml.sh; DMLCONFORM_DIRECTML_STACK names another (an unpacked copy)
STACK_DIR = default_stack_dir()


class RunnerDied(Exception):
    """The runner crashed, hung or exited; `last_words` holds its last stderr lines."""

    def __init__(self, reason: str, last_words: str = "") -> None:
        super().__init__(reason + (f"; last words: {last_words}" if last_words else ""))
        self.reason = reason
        self.last_words = last_words


@dataclass
class RunnerConfig:
    runner: Path
    dll: Path
    adapter: int = 0
    warp: bool = False
    debug_layer: bool = False
    startup_timeout: float = 180.0
    stack: Stack | None = None  # None: the default stack (Linux)
    vulkan: VulkanDriver | None = None  # None: resolved from `auto`
    # WINEDEBUG: -all, unless DMLCONFORM_WINEDEBUG asks for channels (e.g. err+all,+vulkan,+d3d12 to
    # see why a device does not start); a pack traces module loads with +loaddll
    wine_debug: str = field(default_factory=lambda: os.environ.get("DMLCONFORM_WINEDEBUG") or "-all")
    stderr_log: Path | None = None  # also append the runner's and Wine's stderr here
    vk_device: int | None = None  # the one Vulkan device the runner sees (gpus.py); None: the drivers' first
    # compiled operators the runner keeps (None: its default, 512); DMLCONFORM_RUNNER_CACHE_MAX makes
    # it small to exercise eviction (a diagnostic: every descriptor is then compiled more often)
    cache_max: int | None = field(default_factory=lambda: int(os.environ["DMLCONFORM_RUNNER_CACHE_MAX"])
                                  if os.environ.get("DMLCONFORM_RUNNER_CACHE_MAX", "").isdigit() else None)


def wine_environment(stack: Stack | None = None, vulkan: VulkanDriver | None = None, display: str | None = None) -> dict[str, str]:
    """Environment for Wine + vkd3d + a Vulkan driver (default: the stack's own lavapipe)."""
    stack = stack or Stack(default_stack_dir())
    vulkan = vulkan or resolve_vulkan("lavapipe", stack.lavapipe_icd)
    return stack.environment(vulkan, display)


def to_windows_path(path: Path) -> str:
    return str(path) if sys.platform == "win32" else "Z:" + str(Path(path).resolve()).replace("/", "\\")


class RunnerProcess:
    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None
        self._frames: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_reader: threading.Thread | None = None
        self.stage: tuple[str, float] | None = None  # the runner's last "dmlrunner-stage" line and when it came
        self.starts = 0
        self.session: WineSession | None = None  # Xvfb + wineserver + boot processes (not on Windows)

    # --- life cycle ---------------------------------------------------------------------------
    def command(self) -> list[str]:
        c = self.config
        args = [to_windows_path(c.dll), "--adapter", str(c.adapter)]
        if c.warp:
            args.append("--warp")
        if c.debug_layer:
            args.append("--debug-layer")
        if c.cache_max is not None:
            args += ["--cache-max", str(c.cache_max)]
        if sys.platform == "win32":
            return [str(c.runner)] + args
        return [str(self._stack().wine_loader() or "wine"), str(c.runner)] + args

    def _stack(self) -> Stack:
        return self.config.stack or Stack(default_stack_dir())

    def _wine_session(self) -> dict[str, str]:
        """The runner's environment, with Xvfb, the wineserver and the boot processes running
        (started detached on first use; see session.py)."""
        if self.session is None:
            stack = self._stack()
            vulkan = self.config.vulkan or resolve_vulkan("auto", stack.lavapipe_icd)
            self.session = WineSession(stack, vulkan, self.config.wine_debug, self.config.stderr_log)
        return self.session.ensure(self.config.startup_timeout)

    def start(self) -> dict:
        self.stop()
        self._frames = queue.Queue()
        self._stderr.clear()
        self.stage = None
        try:
            env = None if sys.platform == "win32" else self._wine_session()
        except (OSError, RuntimeError) as exc:
            raise RunnerDied(f"the Wine session did not start: {exc}") from None
        if self.config.vk_device is not None and env is not None:
            try:
                env = {**env, **pinned_environment(self.config.vk_device, self._stack().device_pick_layer, env)}
            except GpuChoiceError as exc:
                raise RunnerDied(str(exc)) from None
        new_session, creationflags = True, 0  # the runner in its own process group (0: the default, POSIX's only value)
        if sys.platform == "win32":
            new_session, creationflags = False, subprocess.CREATE_NEW_PROCESS_GROUP
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, start_new_session=new_session, creationflags=creationflags,
                                     preexec_fn=die_with_parent())  # no runner outlives a killed run
        self.starts += 1
        threading.Thread(target=self._read_frames, args=(self.proc, self._frames), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(self.proc, self._frames), daemon=True)
        self._stderr_reader.start()
        hello, _ = self._receive(self.config.startup_timeout)
        if hello.get("status") != "ready":
            raise RunnerDied(f"runner did not start ({hello.get('status')})", self.last_words())
        return hello

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                if sys.platform == "win32":
                    proc.kill()
                else:
                    os.killpg(proc.pid, signal.SIGKILL)  # the runner (its own process group; Xvfb and Wine's services stay)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            if proc.stdin is not None:  # always a pipe (start)
                proc.stdin.close()
        except OSError:
            pass
        # stdout and stderr belong to their reader threads, which close them at EOF: closing a
        # stream here would wait for the thread's read, i.e. for every process that inherited the
        # pipe (Wine's debugger launch after a crash holds stderr for about a second)

    def close(self) -> None:
        """Stop the runner and the session's Xvfb (the backend is done)."""
        self.stop()
        if self.session is not None:
            self.session.stop()
            self.session = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def hung_stage(self) -> str:
        """`in STAGE I/N, S s after it began` for a hang message: the stage the runner announced
        last (create, compile, initialize, upload, execute, readback), or "" when it announced none."""
        if self.stage is None:
            return ""
        name, since = self.stage
        return f" in {name}, {time.monotonic() - since:.1f} s after it began"

    def last_words(self) -> str:
        return " | ".join(line for line in self._stderr if line.strip())[-1500:]

    # --- frames ----------------------------------------------------------------------------------
    @staticmethod
    def _read_exact(stream, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = stream.read(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _read_frames(self, proc: subprocess.Popen[bytes], frames: queue.Queue) -> None:
        try:
            while True:
                magic, jlen, nbuf = struct.unpack("<III", self._read_exact(proc.stdout, 12))
                if magic != MAGIC:
                    frames.put(("error", f"bad frame magic 0x{magic:08x}"))
                    return
                header = json.loads(self._read_exact(proc.stdout, jlen).decode("utf-8", "replace"))
                buffers = []
                for _ in range(nbuf):
                    (length,) = struct.unpack("<I", self._read_exact(proc.stdout, 4))
                    buffers.append(self._read_exact(proc.stdout, length))
                frames.put(("frame", (header, buffers)))
        except (EOFError, OSError, ValueError, struct.error) as exc:
            frames.put(("eof", str(exc)))
        finally:
            self._close_quietly(proc.stdout)

    def _read_stderr(self, proc: subprocess.Popen[bytes], frames: queue.Queue) -> None:
        stderr = proc.stderr
        assert stderr is not None  # always a pipe (start)
        try:
            log = open(self.config.stderr_log, "ab") if self.config.stderr_log else None
            try:
                for raw in iter(stderr.readline, b""):
                    if raw.startswith(STAGE_PREFIX):  # where the runner is: named if it hangs there
                        self.stage = (raw[len(STAGE_PREFIX):].decode("utf-8", "replace").strip(), time.monotonic())
                        continue
                    if raw.startswith(CRASH_PREFIX):  # the answer now, not when the pipes close
                        frames.put(("crashed", raw[len(CRASH_PREFIX):].decode("utf-8", "replace").strip()))
                    self._stderr.append(raw.decode("utf-8", "replace").rstrip())
                    if log is not None:
                        log.write(raw)
            finally:
                if log is not None:
                    log.close()
        except (ValueError, OSError):  # the stream was closed: the process is gone
            pass
        finally:
            self._close_quietly(proc.stderr)

    @staticmethod
    def _close_quietly(stream) -> None:
        try:
            stream.close()
        except (OSError, ValueError):
            pass

    def _receive(self, timeout: float) -> tuple[dict, list[bytes]]:
        try:
            kind, payload = self._frames.get(timeout=timeout)
        except queue.Empty:
            time.sleep(0.05)  # a stage line written just before the hang may still be in the pipe
            words, where = self.last_words(), self.hung_stage()
            self.stop()
            raise RunnerDied(f"runner did not answer within {timeout:.0f} s (hang{where})", words) from None
        if kind == "crashed":
            where = f" in {self.stage[0]}" if self.stage else ""
            words = self.last_words()
            self.stop()
            raise RunnerDied(f"runner crashed{where} ({payload})", words)
        if kind != "frame":
            code = self.proc.poll() if self.proc else None
            if self.proc is not None:
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            # its last stderr lines (the reason it gave) may still be in the pipe: read to the end
            # first (a loaded machine lost "DMLCONFORM_VK_DEVICE=1 but the Vulkan drivers list ..." here)
            if self._stderr_reader is not None and code is not None:
                self._stderr_reader.join(timeout=5)
            words = self.last_words()
            self.stop()
            raise RunnerDied(f"runner exited (code {code}): {payload}", words)
        return payload

    def request(self, header: dict, buffers: list[bytes], timeout: float) -> tuple[dict, list[bytes]]:
        if not self.alive:
            raise RunnerDied("runner not running", self.last_words())
        body = json.dumps(header, separators=(",", ":")).encode()
        frame = [struct.pack("<III", MAGIC, len(body), len(buffers)), body]
        for b in buffers:
            frame += [struct.pack("<I", len(b)), b]
        assert self.proc is not None and self.proc.stdin is not None  # alive; stdin is always a pipe (start)
        try:
            self.proc.stdin.write(b"".join(frame))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            words = self.last_words()
            self.stop()
            raise RunnerDied(f"runner pipe closed: {exc}", words) from None
        return self._receive(timeout)
