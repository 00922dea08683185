"""Plain (synchronous) plugin code on a thread of its own, which a stopping daemon may leave behind.

A plain ``apply`` or ``collect_external_metrics`` may block (a synchronous HTTP call without a timeout,
a lock). On the event loop it would freeze every cluster's tick, the health endpoints and the signal
handlers (issue 12), and once started it cannot be stopped. So each call runs on a thread started for
it, and its caller waits for it under a budget:

- a call that is still running when the same call is due again fails at once (:class:`StillRunning`)
  instead of taking another thread, so a hung plugin holds one thread, not one per tick;
- the thread is a daemon thread. The interpreter joins a ``ThreadPoolExecutor``'s workers at exit, so
  a plugin blocked on one kept a stopped daemon, and its Spark JVM, alive until SIGKILL (issue 35).
  What is still running when the daemon stops is listed by :func:`still_running`, so the process's
  last log line names the plugin calls it abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["StillRunning", "call_blocking", "describe", "still_running"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Running:
    label: str  # e.g. "executor plugin 'gate' (my_plugins.Gate).apply"
    since: float  # time.monotonic() when it started


_RUNNING: dict[Hashable, _Running] = {}
_LOCK = threading.Lock()


class StillRunning(Exception):
    """The same call, started earlier, has not returned: it is not started a second time."""


def describe(owner: object, name: str) -> str:
    """``'<name>' (<module>.<class>)``: the configured instance and its class path, for logs."""
    cls = type(owner)
    return f"{name!r} ({cls.__module__}.{cls.__qualname__})"


async def call_blocking(key: Hashable, label: str, func: Callable[[], T]) -> T:
    """``func()`` on a daemon thread of its own; its result (or exception) here.

    ``key`` says which calls are the same one (see the module doc); ``label`` names it in logs. Cancel
    the wait and the thread goes on: it stays listed in :func:`still_running` until it returns.
    """
    with _LOCK:
        if key in _RUNNING:
            raise StillRunning(f"{label}: its previous call has not returned yet (blocked?)")
        _RUNNING[key] = _Running(label, time.monotonic())
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        outcome: tuple[bool, object]
        try:
            outcome = (True, func())
        except Exception as exc:
            outcome = (False, exc)
        except BaseException as exc:  # a plugin's sys.exit() fails the call, it does not end the daemon
            outcome = (False, RuntimeError(f"{type(exc).__name__}: {exc}"))
        finally:
            with _LOCK:
                _RUNNING.pop(key, None)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(_settle, answer, *outcome)

    try:
        threading.Thread(target=run, name=f"plugin {label}", daemon=True).start()
    except BaseException:  # no thread (the process's limit): nothing runs, so nothing is running
        with _LOCK:
            _RUNNING.pop(key, None)
        raise
    return await answer


def _settle(answer: asyncio.Future[T], ok: bool, value: object) -> None:
    if answer.done():  # the caller stopped waiting (its budget ran out, the daemon stops)
        return
    if ok:
        answer.set_result(value)  # type: ignore[arg-type]
    else:
        answer.set_exception(value)  # type: ignore[arg-type]


def still_running(now: float | None = None) -> list[str]:
    """The plugin calls that have not returned, oldest first: ``<label>, running for <n> s``."""
    now = time.monotonic() if now is None else now
    with _LOCK:
        running = sorted(_RUNNING.values(), key=lambda r: r.since)
    return [f"{r.label}, running for {now - r.since:.0f} s" for r in running]
