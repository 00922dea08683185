"""How the ``run`` process ends on SIGTERM or SIGINT, whatever its plugins do (issue 35).

The stop itself is :meth:`autoscaler.daemon.Daemon.serve`'s: the running tick is cancelled, the leases
are handed back, Spark stops. Two kinds of plugin code could still keep the process, and its Spark JVM,
alive after that, until systemd or Kubernetes SIGKILLed it at the end of their stop timeout:

- a plain plugin call that never returns. It runs on a daemon thread (:mod:`autoscaler.plugins.calls`),
  which the interpreter does not wait for; but a daemon thread caught by interpreter shutdown while it
  holds a lock the shutdown needs (a write to stderr) can abort it. So when such calls are left,
  :func:`exit_process` writes the last log line, naming them, and ends the process with ``os._exit``;
- code that hangs the stop itself: an ``async`` plugin that blocks the event loop (the loop would never
  run a handler added with ``loop.add_signal_handler``), a custom evaluator stuck in a worker thread
  that ``asyncio.run`` waits for. So the signal handler is a plain ``signal.signal`` one, which Python
  runs between bytecodes even while the loop is blocked, and besides setting the stop event it arms
  :class:`StopWatchdog`, which ends the process ``STOP_GRACE_S`` later, logging what still ran.

The Spark driver JVM ends with the process either way: it reads its stdin, a pipe from this process,
and exits when that closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import FrameType

import structlog

from autoscaler.plugins.calls import still_running

__all__ = ["EXIT_STOP_FORCED", "STOP_GRACE_S", "StopWatchdog", "exit_process", "stop_on_signals"]

log = structlog.get_logger(__name__)

STOP_GRACE_S = 60.0
"""How long a stop may take before the watchdog ends the process. A clean stop takes seconds (the tick
is cancelled, Spark stops); a lease release may wait 30 s for a SQLite lock. Both systemd's unit
(``TimeoutStopSec``) and the Kubernetes Deployment (``terminationGracePeriodSeconds``) allow 90 s, so
the daemon ends itself, and says why, before they SIGKILL it."""
EXIT_STOP_FORCED = 1
"""The exit code of a stop the watchdog had to end; a clean stop exits 0."""


class StopWatchdog:
    """Armed by the first stop signal; ``grace_s`` later it logs what is still running and exits."""

    def __init__(self, grace_s: float = STOP_GRACE_S, exit: Callable[[int], object] = os._exit) -> None:
        self.grace_s = grace_s
        self._exit = exit
        self._timer: threading.Timer | None = None
        self._main = threading.main_thread().ident

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.grace_s, self._force)
            self._timer.name = "stop-watchdog"
            self._timer.daemon = True  # a stop that ends in time is not held up by it
            self._timer.start()

    def _force(self) -> None:
        log.error(
            "stop_forced",
            grace_s=self.grace_s,
            exit_code=EXIT_STOP_FORCED,
            abandoned=still_running(),
            main_thread=_where(self._main),
            detail=f"the stop did not end within {self.grace_s:g} s: ending the process",
        )
        _flush()
        self._exit(EXIT_STOP_FORCED)


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event, watchdog: StopWatchdog | None = None) -> Iterator[StopWatchdog]:
    """Within this context, SIGTERM and SIGINT set ``stop`` (on its loop) and arm the watchdog."""
    loop = asyncio.get_running_loop()
    dog = watchdog or StopWatchdog()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process is ending anyway
            loop.call_soon_threadsafe(stop.set)
        dog.arm()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield dog
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_process(code: int) -> int:
    """The process's last log line, ``daemon_exited``; it names the plugin calls left running, and with
    any left, the process ends here (``os._exit``, see the module doc). Otherwise ``code``, to return."""
    abandoned = still_running()
    if not abandoned:
        log.info("daemon_exited", exit_code=code)
        return code
    log.warning(
        "daemon_exited",
        exit_code=code,
        abandoned=abandoned,
        detail="plugin calls that never returned are abandoned with the process",
    )
    _flush()
    os._exit(code)


def _where(ident: int | None, depth: int = 3) -> list[str]:
    """The innermost frames of a thread, ``file:line in function``: where a blocked loop is stuck."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return []
    return [f"{f.filename}:{f.lineno} in {f.name}" for f in traceback.extract_stack(frame)[-depth:]]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
