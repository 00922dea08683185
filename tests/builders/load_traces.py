"""Synthetic offered-load traces for the forecast's tests: one rate per 5-minute bucket, and a job's
history fed with them one sample per bucket (each sample closes the bucket before it)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from autoscaler.foresight.forecast import Forecast, ForecastParams, NoForecast
from autoscaler.foresight.history import LoadHistory

BUCKET_MS = 300_000
DAY = 288  # buckets
WEEK = 7 * DAY

Shape = Callable[[int], float]  # bucket index -> rate


def daily(mean: float = 1000.0, amplitude: float = 0.5) -> Shape:
    """A daily cycle: lowest at midnight, highest at noon."""
    return lambda i: mean * (1 - amplitude * math.cos(2 * math.pi * i / DAY))


def weekly(mean: float = 1000.0, weekend: float = 0.3) -> Shape:
    """Weekdays a daily cycle (busy 08:00 to 18:00), weekends flat at ``weekend`` x the mean."""

    def rate(i: int) -> float:
        day, minute = divmod(i, DAY)
        if day % 7 >= 5:
            return mean * weekend
        hour = minute / 12
        return mean * (0.4 + (1.2 * math.sin(math.pi * (hour - 8) / 10) if 8 <= hour <= 18 else 0.0))

    return rate


def ramp(start: float = 1000.0, per_bucket: float = 20.0) -> Shape:
    return lambda i: start + per_bucket * i


def steps(levels: Sequence[float], every: int) -> Shape:
    """The load jumps to the next level every ``every`` buckets (the last one stays)."""
    return lambda i: levels[min(i // every, len(levels) - 1)]


def flash_crowd(base: Shape, at: int, length: int = 6, factor: float = 5.0) -> Shape:
    """``base`` with a one-time burst of ``factor`` x for ``length`` buckets from ``at``."""
    return lambda i: base(i) * (factor if at <= i < at + length else 1.0)


def flat(level: float = 1000.0) -> Shape:
    return lambda i: level


def sample(shape: Shape, n: int, *, noise: float = 0.02, seed: int = 0, gaps: float = 0.0) -> list[float]:
    """``n`` buckets of ``shape`` with Gaussian noise (``noise`` x the rate) and a fraction ``gaps`` of
    them missing (NaN)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        rate = max(0.0, shape(i) * (1 + rnd.gauss(0, noise)))
        out.append(math.nan if rnd.random() < gaps else rate)
    return out


def feed(
    rates: Sequence[float], params: ForecastParams | None = None, *, history: LoadHistory | None = None
) -> tuple[LoadHistory, list[Forecast | NoForecast | None]]:
    """A history fed one sample per bucket (bucket ``i`` at ``i * bucket``; NaN: no sample), and what it
    said after each: the forecast made when bucket ``i - 1`` closed, at index ``i``."""
    params = params or ForecastParams(bucket_ms=BUCKET_MS)
    h = history or LoadHistory.empty(params)
    said: list[Forecast | NoForecast | None] = []
    for i, rate in enumerate(rates):
        if not math.isnan(rate):
            h = h.observe(i * params.bucket_ms, rate, params)
        said.append(h.latest)
    return h, said
