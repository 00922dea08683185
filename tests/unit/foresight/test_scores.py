"""Past forecasts scored when their time comes: the record a forecast's confidence is learned from."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.foresight.forecast import ForecastParams, Prediction, outlook
from autoscaler.foresight.scores import Foreseen, Scores, peak_error
from autoscaler.foresight.series import LoadSeries

rates = st.floats(0, 1e9)


@given(rates, rates)
def test_a_peak_error_is_between_0_and_1_and_symmetric(a: float, b: float) -> None:
    e = peak_error(a, b)
    assert 0.0 <= e <= 1.0 and e == peak_error(b, a)
    assert (e == 0.0) == (a == b)


def test_small_errors_are_about_relative() -> None:
    assert (
        peak_error(110.0, 100.0) == 10 / 110 and peak_error(0.0, 0.0) == 0.0 and peak_error(0.0, 5.0) == 1.0
    )


def series(values: list[float]) -> LoadSeries:
    s = LoadSeries(1000)
    for i, v in enumerate(values):
        s = s.extended(i, v, 100)
    return s


def test_forecasts_are_scored_once_their_horizon_has_closed() -> None:
    scores = Scores().with_forecasts(2, 3, {"trend": Prediction(120.0, 3), "level": Prediction(100.0, 1)})
    assert scores.pending == (Foreseen(2, 3, "trend", 120.0), Foreseen(2, 3, "level", 100.0))
    early = scores.settled(series([100.0, 100.0, 100.0, 110.0, 105.0]), keep=10)  # bucket 5 not closed
    assert early is scores
    done = scores.settled(series([100.0, 100.0, 100.0, 110.0, 105.0, 120.0]), keep=10)
    assert done.pending == () and done.errors == {"trend": (0.0,), "level": (20 / 120,)}


def test_a_horizon_mostly_unsampled_is_not_scored_and_records_are_bounded() -> None:
    gappy = series([100.0, 100.0, 100.0, math.nan, math.nan, 100.0])
    assert Scores().with_forecasts(2, 3, {"trend": Prediction(1.0, 1)}).settled(gappy, 10).errors == {}
    scores = Scores(errors={"trend": (0.5, 0.4, 0.3)})
    scores = scores.with_forecasts(2, 3, {"trend": Prediction(100.0, 1)}).settled(series([100.0] * 6), keep=3)
    assert scores.errors["trend"] == (0.4, 0.3, 0.0)


def test_while_learning_a_forecast_is_scored_on_the_part_of_its_horizon_that_came() -> None:
    """A forecast made again from the history as it was (nothing later read), scored on the buckets
    that came once a quarter of its horizon did, beside reacting's on the same buckets; never kept."""
    params = ForecastParams(bucket_ms=1000, horizon_ms=8000, periods_ms=())  # 8 buckets: scored from 2
    ramp = [100.0 + 10 * i + (3.0 if i % 3 else -3.0) for i in range(params.trend_buckets)]  # some noise
    made = len(ramp) - 1
    seen = outlook(series(ramp), params)
    scores = Scores().with_forecasts(made, params.horizon, seen.predictions)
    assert scores.partly_come(series([*ramp, ramp[-1] + 10]), params, ["trend"]) == {}, "1 of 8 came"
    came = series([*ramp, ramp[-1] + 10, ramp[-1] + 20])
    partly = scores.partly_come(came, params, ["trend"])
    assert list(partly) == ["trend"] and len(partly["trend"]) == 1
    trend, reacting = partly["trend"][0]
    assert trend < 0.02, "the ramp over the two buckets that came"
    assert reacting == pytest.approx(peak_error(seen.level, ramp[-1] + 20)), "the level, on the same two"
    assert scores.partly_come(came, params, ["daily"]) == {}, "only the bases asked for"
    assert scores.settled(came, keep=10) is scores, "nothing kept: its horizon has not passed"
