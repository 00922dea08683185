"""A job's history as the tick keeps it: a sum per tick, the work once per closed bucket, no bad data."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given
from hypothesis import strategies as st
from load_traces import BUCKET_MS, DAY, daily, feed, sample

from autoscaler.foresight.forecast import Forecast, ForecastParams, NoForecast, Why
from autoscaler.foresight.history import LoadHistory, OpenBucket
from autoscaler.settings import AutoscalerOptions

PARAMS = ForecastParams(bucket_ms=BUCKET_MS)


def test_samples_of_a_bucket_are_averaged_and_the_next_bucket_closes_it() -> None:
    h = LoadHistory.empty(PARAMS)
    for ts, rate in ((0, 100.0), (10_000, 200.0), (290_000, 300.0)):
        h = h.observe(ts, rate, PARAMS)
    assert h.open == OpenBucket(0, 600.0, 3) and len(h.series) == 0 and h.latest is None
    h = h.observe(BUCKET_MS + 5, 50.0, PARAMS)
    assert h.series.rates(0, 1) == [200.0] and h.open == OpenBucket(1, 50.0, 1)
    assert isinstance(h.latest, NoForecast) and h.latest.why is Why.SHORT
    assert h.observe(BUCKET_MS - 1, 999.0, PARAMS) is h, "a sample of a closed bucket changes nothing"


@given(st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1e-9]))
def test_what_cannot_be_a_rate_never_enters(bad: float) -> None:
    h = LoadHistory.empty(PARAMS).observe(0, 100.0, PARAMS)
    assert h.observe(BUCKET_MS, bad, PARAMS) is h and h.observe(10, bad, PARAMS) is h


def test_other_buckets_start_the_history_again() -> None:
    h, _ = feed(sample(daily(), 50))
    other = ForecastParams(bucket_ms=60_000)
    again = h.observe(50 * BUCKET_MS, 10.0, other)
    assert again.series.bucket_ms == 60_000 and len(again.series) == 0 and again.open is not None


def test_the_forecast_is_the_latest_while_buckets_keep_closing() -> None:
    h, said = feed(sample(daily(), 3 * DAY + 90, noise=0.01))
    assert isinstance(said[-1], Forecast), "a rising morning on day 4"
    now = (h.series.last + 1) * BUCKET_MS + 1000
    assert h.forecast(now) is h.latest
    stale = h.forecast(now + 3 * BUCKET_MS)
    assert isinstance(stale, NoForecast) and stale.why is Why.GAPPY
    fresh = LoadHistory(h.series, scores=h.scores).forecast(now)
    assert isinstance(fresh, NoForecast) and fresh.why is Why.SHORT, "restored: none until a bucket closes"


def test_a_jobs_buckets_have_its_own_phase_and_forecast_the_same() -> None:
    """The phase (from the job's key) only moves when its buckets close: the fleet's closes spread over
    a bucket's ticks; the forecast of a phased history is the unphased one's, moved by the phase."""
    phases = {ForecastParams.of(AutoscalerOptions(), f"c/job-{i}").phase_ms for i in range(100)}
    assert len(phases) > 90 and all(0 <= p < BUCKET_MS for p in phases)
    assert ForecastParams.of(AutoscalerOptions(), "c/a") == ForecastParams.of(AutoscalerOptions(), "c/a")
    phased = ForecastParams(bucket_ms=BUCKET_MS, phase_ms=123_456)
    rates = sample(daily(), 3 * DAY + 90, noise=0.01)
    plain, said = feed(rates)
    h = LoadHistory.empty(phased)
    for i, rate in enumerate(rates):
        h = h.observe(i * BUCKET_MS + 123_456, rate, phased)
    assert h.series.data == plain.series.data and h.series.start_ms(5) == 5 * BUCKET_MS + 123_456
    assert isinstance(said[-1], Forecast) and isinstance(h.latest, Forecast)
    assert h.latest == dataclasses.replace(
        said[-1], made_ms=said[-1].made_ms + 123_456, peak_at_ms=said[-1].peak_at_ms + 123_456
    )
    moved = h.observe(len(rates) * BUCKET_MS + 123_456, 1.0, PARAMS)  # the phase changed: start again
    assert len(moved.series) == 0 and moved.series.phase_ms == 0
