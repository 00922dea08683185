"""Processes a test starts die with the test process, even when it is killed (SIGKILL, a CI timeout).

A test's ``with`` block or ``finally`` stops what it started, but not when pytest itself is killed:
then a daemon (and the Spark JVM under it) or a Spark server kept running, holding its ports, its state
file and a core, until someone found it. The kernel can end them instead: ``PR_SET_PDEATHSIG`` asks it to
signal the child when the thread that started it exits. It is set in the child between fork and exec
and kept across exec, so the PID a test knows stays the process's. (Linux only; elsewhere a no-op.)
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
from collections.abc import Callable

__all__ = ["dies_with_parent"]

_PR_SET_PDEATHSIG = 1


def dies_with_parent(sig: signal.Signals = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``sig`` when its parent dies.

    The parent is the *thread* that called Popen: a process started from a worker thread must be stopped
    before that thread ends."""

    def preexec() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))

    return preexec
