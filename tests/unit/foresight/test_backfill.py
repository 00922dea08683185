"""A history completed from recorded samples holds the buckets live ticks would have given, the store's
buckets win where it has them, and bad samples are left out and counted."""

from __future__ import annotations

import math
import random
from array import array

from load_traces import BUCKET_MS, DAY, daily, feed, sample

from autoscaler.foresight.backfill import bucket_sums, complete, replayed_buckets
from autoscaler.foresight.forecast import Forecast, ForecastParams
from autoscaler.foresight.history import LoadHistory
from autoscaler.foresight.series import LoadSeries

PHASED = ForecastParams(bucket_ms=BUCKET_MS, phase_ms=123_456)
TICK_MS = 10_000


def ticks(rates: list[float], params: ForecastParams, *, seed: int = 1) -> list[tuple[int, float]]:
    """Samples every 10 s (with jitter) around bucket ``i``'s rate, over each bucket of ``params``."""
    rnd = random.Random(seed)
    out = []
    for i, rate in enumerate(rates):
        start = i * params.bucket_ms + params.phase_ms
        out += [
            (ts + rnd.randrange(500), rate * (1 + rnd.gauss(0, 0.01)))
            for ts in range(start, start + params.bucket_ms, TICK_MS)
        ]
    return out


def live(samples: list[tuple[int, float]], params: ForecastParams) -> LoadHistory:
    h = LoadHistory.empty(params)
    for ts, rate in samples:
        h = h.observe(ts, rate, params)
    return h


def test_recorded_ticks_become_the_buckets_live_ticks_give() -> None:
    """Same bucket and phase arithmetic as the stage: the series, the open bucket, the forecasts'
    record and the latest forecast are those of the history that saw every tick live."""
    samples = ticks(sample(daily(), 40), PHASED)
    done = complete(LoadHistory.empty(PHASED), samples, PHASED)
    seen = live(samples, PHASED)
    assert replayed_buckets(PHASED) >= 40, "short enough to be replayed whole"
    assert done.added == 40 and done.skipped == 0
    assert done.history.series == seen.series
    assert done.history.open is not None and seen.open is not None
    assert done.history.open.index == seen.open.index and done.history.open.count == seen.open.count
    assert math.isclose(done.history.open.total, seen.open.total)
    assert done.history.scores == seen.scores and done.history.latest == seen.latest
    # the next live tick goes on from it exactly as from the live history
    after = seen.open.index + 1
    ts = after * BUCKET_MS + PHASED.phase_ms + 5
    assert done.history.observe(ts, 1.0, PHASED).series == seen.observe(ts, 1.0, PHASED).series


def test_bucket_sums_use_the_series_buckets_and_leave_out_what_is_no_rate() -> None:
    series = LoadHistory.empty(PHASED).series
    start = PHASED.phase_ms
    sums, skipped = bucket_sums(
        [(start - 1, 5.0), (start, 1.0), (start + 10, math.nan), (start + 20, 3.0), (start + 30, -1.0)],
        series,
    )
    assert sums == {-1: (5.0, 1), 0: (4.0, 2)} and skipped == 2


def test_a_long_record_is_completed_and_forecasts_at_once() -> None:
    """Three days of a daily cycle, recorded: the completed history forecasts the morning's rise right
    away, as the history that saw the three days live does; the series is the live one."""
    rates = sample(daily(), 3 * DAY + 90, noise=0.01)
    recorded = [(i * BUCKET_MS, r) for i, r in enumerate(rates)]
    params = ForecastParams(bucket_ms=BUCKET_MS)
    done = complete(LoadHistory.empty(params), recorded, params)
    seen, said = feed(rates, params)
    assert done.history.series == seen.series
    assert isinstance(said[-1], Forecast) and isinstance(done.history.latest, Forecast)
    assert math.isclose(done.history.latest.peak_rate, said[-1].peak_rate, rel_tol=1e-6)
    assert done.history.latest.basis == said[-1].basis == "daily"


def test_the_stores_buckets_are_kept_and_older_recorded_ones_put_in_front() -> None:
    params = ForecastParams(bucket_ms=BUCKET_MS)
    rates = sample(daily(), 100)
    kept = LoadHistory.empty(params)  # what a state database started at bucket 60 holds
    for i, r in enumerate(rates[60:]):
        kept = kept.observe((60 + i) * BUCKET_MS, r, params)
    stored = LoadHistory(kept.series)  # buckets 60..98 closed, as read back
    recorded = [(i * BUCKET_MS, r * 2) for i, r in enumerate(rates)]  # the archive disagrees everywhere
    done = complete(stored, recorded, params)
    assert done.added == 60 + 1, "0..59 before the store's, 99 after its newest"
    series = done.history.series
    assert series.first == 0 and series.rates(60, 99) == stored.series.rates(60, 99)
    assert series.rates(0, 60) == list(array("f", [2 * r for r in rates[:60]]))
    assert done.history.open is not None and done.history.open.index == 99


def test_nothing_older_or_a_full_store_leaves_the_history_as_it_is() -> None:
    params = ForecastParams(bucket_ms=BUCKET_MS)
    stored, _ = feed(sample(daily(), 50), params)
    stored = LoadHistory(stored.series, scores=stored.scores)
    newer = [(i * BUCKET_MS, 1.0) for i in range(50, 60)]
    assert complete(stored, newer, params).history is stored
    assert complete(stored, [], params).history is stored
    full = LoadHistory(LoadSeries(BUCKET_MS, 1000, array("f", [1.0] * params.capacity).tobytes()))
    assert complete(full, [(0, 1.0)], params).history is full, "the store keeps all a forecast reads"


def test_recorded_samples_that_are_no_rate_leave_the_store_as_it_is() -> None:
    params = ForecastParams(bucket_ms=BUCKET_MS)
    empty = LoadHistory.empty(params)
    done = complete(empty, [(0, math.nan), (BUCKET_MS, math.inf), (2 * BUCKET_MS, -3.0)], params)
    assert done.history is empty and done.added == 0 and done.skipped == 3


def test_a_history_with_live_ticks_keeps_its_open_bucket_and_closes_the_recorded_ones_with_it() -> None:
    """The archive read after a few live ticks: the recorded buckets from the live one on are not taken,
    the live open bucket stays, and the history goes on as the one that saw every tick live."""
    params = ForecastParams(bucket_ms=BUCKET_MS)
    samples = ticks(sample(daily(), 30), params)
    cut = 25 * BUCKET_MS + 30_000
    recorded = [(ts, r) for ts, r in samples if ts < 24 * BUCKET_MS]  # the archive lags behind
    seen = live(samples[: next(n for n, (ts, _) in enumerate(samples) if ts >= cut)], params)
    started = live([(ts, r) for ts, r in samples if 24 * BUCKET_MS <= ts < cut], params)
    done = complete(started, [*recorded, (25 * BUCKET_MS + 1, 1e9)], params)
    assert done.history.open == started.open and done.history.open == seen.open
    assert done.history.series == seen.series and done.history.scores == seen.scores
