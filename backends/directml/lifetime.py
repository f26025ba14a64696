"""Processes the DirectML backend starts (the runner, Xvfb) end with the process that started them.

The backend stops them when it is closed; but a run ended by SIGKILL (or a SIGTERM nobody handles)
closes nothing, and its Xvfb lived on, one per killed run. On Linux the kernel can send a child a
signal when its parent dies (prctl PR_SET_PDEATHSIG), set here in the child between fork and exec.
The parent is the thread that started the child: the backend starts its processes from the thread
that runs the cases, which lives as long as the run. Elsewhere this does nothing (None).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Callable

PR_SET_PDEATHSIG = 1


def _linux_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # resolved here, never in the forked child
    except (OSError, AttributeError):
        return None


_PRCTL = _linux_prctl()


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for subprocess.Popen that makes the child receive SIGKILL when its parent
    dies (None where the platform has no such thing). A parent already gone by then is caught too."""
    if _PRCTL is None:
        return None
    prctl = _PRCTL
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec
