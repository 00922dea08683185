"""Time as a value: every tick reads the clock once and passes ``now`` down.

Decision code never calls ``time.time()``; tests drive a ``FakeClock`` and the demo a ``ScaledClock``
shared with the simulator.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "ScaledClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told to; thread-safe so a served simulator can share it."""

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


class ScaledClock:
    """Wall time running ``speed`` times faster from a start point (the demo's compressed minutes)."""

    def __init__(self, speed: float = 1.0, start_ms: int | None = None) -> None:
        self.speed = speed
        self._t0 = time.monotonic()
        self._start_ms = start_ms if start_ms is not None else SystemClock().now_ms()

    def now_ms(self) -> int:
        return self._start_ms + round((time.monotonic() - self._t0) * 1000 * self.speed)
