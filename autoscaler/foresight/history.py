"""One job's load history as the tick keeps it: the closed buckets, the bucket still open, the scored
forecasts, and the forecast made when the last bucket closed.

A tick adds the job's offered rate (:meth:`LoadHistory.observe`); the work is done once per bucket,
when a sample of a later bucket closes the open one: the series grows by one value, the forecasts whose
horizon passed are scored (and, for a basis still learning, those whose horizon has partly come), every
basis predicts the next horizon, and the forecast is chosen. Between closes a tick only adds to a sum,
so a fleet of a thousand jobs pays one forecast per job and bucket, not per tick.

What cannot be a rate (NaN, infinite, negative) is not added: bad data never enters the history, and
a bucket without a sample is a gap, which the forecast counts as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from autoscaler.foresight.forecast import LEVEL, Forecast, ForecastParams, NoForecast, Why, choose, outlook
from autoscaler.foresight.scores import Scores
from autoscaler.foresight.series import LoadSeries

__all__ = ["LoadHistory", "OpenBucket"]


@dataclass(frozen=True, slots=True)
class OpenBucket:
    """The bucket the newest samples fall in: the sum and count of their rates."""

    index: int
    total: float
    count: int

    @property
    def mean(self) -> float:
        return self.total / self.count


@dataclass(frozen=True, slots=True)
class LoadHistory:
    """A job's bucketed offered load, its forecasts' record, and its latest forecast (module doc)."""

    series: LoadSeries
    open: OpenBucket | None = None
    scores: Scores = field(default_factory=Scores)
    # made when the newest bucket closed; None before any closed in this process (e.g. just restored)
    latest: Forecast | NoForecast | None = None

    @classmethod
    def empty(cls, params: ForecastParams) -> LoadHistory:
        return cls(LoadSeries(params.bucket_ms, phase_ms=params.phase_ms))

    def observe(self, ts_ms: int, rate: float, params: ForecastParams) -> LoadHistory:
        """The history with the offered ``rate`` sampled at ``ts_ms`` added (and, if it is of a later
        bucket than the open one, that bucket closed and the forecast made again)."""
        if not (math.isfinite(rate) and rate >= 0):
            return self
        if (params.bucket_ms, params.phase_ms) != (self.series.bucket_ms, self.series.phase_ms):
            return LoadHistory.empty(params).observe(ts_ms, rate, params)  # other buckets: start again
        index = self.series.index_of(ts_ms)
        current = self.open
        if current is not None and index == current.index:
            return replace(self, open=OpenBucket(index, current.total + rate, current.count + 1))
        if (current is not None and index < current.index) or index <= self.series.last:
            return self  # time ran back (a replayed tick): nothing to add
        opened = OpenBucket(index, rate, 1)
        if current is None:
            return replace(self, open=opened)
        return self._closed(current, params, opened)

    def _closed(self, bucket: OpenBucket, params: ForecastParams, opened: OpenBucket) -> LoadHistory:
        series = self.series.extended(bucket.index, bucket.mean, params.capacity)
        seen = outlook(series, params)
        scores = self.scores.settled(series, params.scored)
        learning = [
            b for b in seen.predictions if b != LEVEL and len(scores.errors.get(b, ())) < params.min_scored
        ]
        partly = scores.partly_come(series, params, learning) if learning else {}
        latest = choose(seen, scores.errors, params, partly)
        if seen.predictions:
            scores = scores.with_forecasts(seen.made, params.horizon, seen.predictions)
        return LoadHistory(series, opened, scores, latest)

    def forecast(self, now_ms: int) -> Forecast | NoForecast:
        """The forecast for a decision at ``now_ms``: the latest, while the buckets keep closing."""
        if self.latest is None:
            return NoForecast(Why.SHORT, "no bucket has closed since the history was loaded")
        made = self.series.start_ms(self.series.last + 1)
        if now_ms - made > 2 * self.series.bucket_ms:
            return NoForecast(Why.GAPPY, f"no load sampled for {(now_ms - made) // 1000} s")
        return self.latest
