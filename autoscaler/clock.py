"""Time as a value: every tick reads the clock once and passes ``now`` down.

Decision code never calls ``time.time()``; tests drive a ``FakeClock`` and the demo a ``ScaledClock``
shared with the simulator.

A tick also *waits* on its clock (``sleep``): for the metric fetch it started to land on Flink
(``collect/fetch.py``). On a fake clock that wait takes fake time, so a simulated tick's reads come
after its start by as much as on a real cluster. That matters: with a 5 s loop on Flink's 5 s fetch
interval the fetch each tick waits for starts ~100 ms later than the last one's (Flink starts one only
for a query *more* than an interval after the last), and a simulator whose ticks took no time never
showed it (issue 36).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "ScaledClock", "SystemClock"]


class Clock(Protocol):
    # How many of this clock's seconds pass per wall-clock second: what a wall-time scheduler (the
    # cooldown retries, ``autoscaler.schedule``) divides by. 1 but for the demo's compressed minutes.
    speed: float

    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    speed = 1.0

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to; thread-safe so a served simulator can share it."""

    speed = 1.0  # it does not move with wall time: a wall-time scheduler treats it as wall time

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, seconds: float = 0.0, *, ms: int = 0) -> int:
        with self._lock:
            self._now_ms += round(seconds * 1000) + ms
            return self._now_ms

    def advance_to(self, now_ms: int) -> int:
        """Move to ``now_ms`` unless the clock is past it already (a tick that waited took that long):
        a scheduler's next fire time, whatever the last tick cost."""
        with self._lock:
            self._now_ms = max(self._now_ms, now_ms)
            return self._now_ms

    async def sleep(self, seconds: float) -> None:
        """The time passes at once; the event loop still gets its turn, as in a real wait. Waits that
        overlap (two clusters' ticks) each move the clock, so they add up where real ones would not: a
        test of several clusters sees its ticks take the sum of their waits."""
        self.advance(seconds)
        await asyncio.sleep(0)


class ScaledClock:
    """Wall time running ``speed`` times faster from a start point (the demo's compressed minutes)."""

    def __init__(self, speed: float = 1.0, start_ms: int | None = None) -> None:
        self.speed = speed
        self._t0 = time.monotonic()
        self._start_ms = start_ms if start_ms is not None else SystemClock().now_ms()

    def now_ms(self) -> int:
        return self._start_ms + round((time.monotonic() - self._t0) * 1000 * self.speed)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)
