"""The forecast on synthetic traces (tests/builders/load_traces.py): what it foresees of daily and
weekly cycles and ramps, what it does not foresee (steps, a flash crowd, noise), and when it says none."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from load_traces import (
    BUCKET_MS,
    DAY,
    WEEK,
    Shape,
    daily,
    feed,
    flash_crowd,
    flat,
    ramp,
    sample,
    steps,
    weekly,
)

from autoscaler.foresight.forecast import (
    DAY_MS,
    LEVEL,
    TREND,
    WEEK_MS,
    Forecast,
    ForecastParams,
    NoForecast,
    Outlook,
    Prediction,
    Why,
    choose,
    outlook,
    period_name,
)
from autoscaler.foresight.series import LoadSeries

PARAMS = ForecastParams(bucket_ms=BUCKET_MS)  # a one-hour horizon: 12 buckets
H = PARAMS.horizon


def forecasts(said: list[Forecast | NoForecast | None]) -> list[tuple[int, Forecast]]:
    return [(i, f) for i, f in enumerate(said) if isinstance(f, Forecast)]


def peak_to_come(shape: Shape, i: int) -> float:
    """The true peak over the horizon of a forecast said at index ``i`` (made when bucket i-1 closed)."""
    return max(shape(j) for j in range(i, i + H))


def whys(said: list[Forecast | NoForecast | None]) -> Counter[Why]:
    return Counter(f.why for f in said if isinstance(f, NoForecast))


def test_a_daily_cycle_is_foreseen_before_its_peak_and_not_while_it_falls() -> None:
    shape = daily(amplitude=0.5)
    _, said = feed(sample(shape, 4 * DAY, noise=0.02))
    fourth = forecasts(said)
    fourth = [(i, f) for i, f in fourth if i >= 3 * DAY]
    assert fourth and {f.basis for _, f in fourth} == {"daily"}
    for i, f in fourth:
        assert abs(f.peak_rate - peak_to_come(shape, i)) <= 0.1 * peak_to_come(shape, i)
        assert f.peak_rate > f.level_rate and 0.9 <= f.confidence <= 1.0
        assert (i % DAY) < DAY // 2, "foreseen only while the load rises (midnight to noon)"
    rising = [i for i, _ in fourth]
    assert min(i % DAY for i in rising) < DAY // 4, "foreseen from the morning on, hours before the peak"


def test_a_daily_cycle_is_foreseen_from_its_second_day() -> None:
    """One day of history is enough for a load that builds up over hours: the second day's rise is
    foreseen (once a dozen of the basis' forecasts are scored), before two days are held. A rise seen
    once spreads more on noise than one smoothed over days, so this one is less noisy (1 %)."""
    shape = daily(amplitude=0.5)
    _, said = feed(sample(shape, 2 * DAY, noise=0.01))
    second = [(i, f) for i, f in forecasts(said) if f.basis == "daily"]  # the trend speaks too
    assert len(second) >= 6
    # Its first prediction closes a day and three buckets in; a dozen scored once a quarter of each
    # one's horizon came (3 buckets), not all of it (12): 40 min sooner than waiting for whole horizons.
    assert min(i for i, _ in second) <= DAY + 3 + math.ceil(H / 4) + PARAMS.min_scored
    for i, f in second:
        assert DAY < i < 2 * DAY
        assert abs(f.peak_rate - peak_to_come(shape, i)) <= 0.1 * peak_to_come(shape, i)
        assert (i % DAY) < DAY // 2, "foreseen only while the load rises"


def test_a_weekly_shape_foresees_monday_after_a_quiet_weekend() -> None:
    shape = weekly()
    _, said = feed(sample(shape, 3 * WEEK - 3 * DAY, noise=0.02))
    monday = 2 * WEEK  # week 3's first day
    morning = [(i, f) for i, f in forecasts(said) if monday + 84 <= i < monday + 120]  # 07:00 to 10:00
    assert morning and {f.basis for _, f in morning} == {"weekly"}
    for i, f in morning:
        assert abs(f.peak_rate - peak_to_come(shape, i)) <= 0.15 * peak_to_come(shape, i)
    first = min(i for i, _ in morning)
    assert shape(first) < 1.05 * shape(monday), "foreseen before the load left the weekend's level"


def test_a_ramp_continues() -> None:
    shape = ramp(1000, 10)
    _, said = feed(sample(shape, 2 * DAY, noise=0.01))
    second = [(i, f) for i, f in forecasts(said) if i >= DAY]
    assert len(second) > DAY // 3 and {f.basis for _, f in second} == {TREND}
    for i, f in second:
        assert abs(f.peak_rate - peak_to_come(shape, i)) <= 0.03 * peak_to_come(shape, i)
        assert f.peak_at_ms == f.made_ms + (H - 1) * BUCKET_MS, "a ramp peaks at the horizon's end"


@pytest.mark.parametrize(
    ("name", "shape", "n"),
    [
        ("steps", steps([1000, 3000, 1500, 4000, 800], 200), 1000),
        ("flash crowd on a cycle", flash_crowd(daily(), 2 * DAY + 100), 5 * DAY),
        ("flash crowd on a flat load", flash_crowd(flat(), 2 * DAY + 50, factor=3.0), 5 * DAY),
        # A day held once: a jump is not foreseen until it comes twice.
        ("flash crowd on the first day", flash_crowd(flat(), 100, factor=3.0), 2 * DAY),
        ("flash crowd on a cycle's first day", flash_crowd(daily(), 100), 2 * DAY),
    ],
)
def test_steps_and_bursts_are_not_foreseen(name: str, shape: Shape, n: int) -> None:
    """Neither continued (no ramp is read into a step) nor repeated a period later (one burst is no
    pattern): a forecast's peak is never above the load that came, but for noise."""
    base = {
        "flash crowd on a cycle": daily(),
        "flash crowd on a flat load": flat(),
        "flash crowd on the first day": flat(),
        "flash crowd on a cycle's first day": daily(),
    }.get(name, shape)
    _, said = feed(sample(shape, n, noise=0.02))
    for i, f in forecasts(said):
        assert f.peak_rate <= 1.1 * peak_to_come(base, i), (name, i, f)
        assert f.peak_rate - f.level_rate <= 0.1 * peak_to_come(base, i) + (
            peak_to_come(base, i) - base(i - 1)
        ), (name, i, f)


@settings(max_examples=40, deadline=None)
@given(
    level=st.floats(1.0, 1e7),
    noise=st.floats(0.0, 0.3),
    seed=st.integers(0, 2**32 - 1),
    gaps=st.sampled_from([0.0, 0.05, 0.2]),
    horizon_min=st.sampled_from([15, 60, 120]),
)
def test_stationary_noise_is_never_a_forecast(
    level: float, noise: float, seed: int, gaps: float, horizon_min: int
) -> None:
    """The property the decision relies on: on noise the forecast never goes above what reacting sizes
    for, so no scale-up is ever forecast-driven on noise. Short periods keep the example fast."""
    params = ForecastParams(
        bucket_ms=BUCKET_MS, horizon_ms=horizon_min * 60_000, periods_ms=(6 * 3_600_000, DAY_MS)
    )
    _, said = feed(sample(flat(level), DAY + DAY // 2, noise=noise, seed=seed, gaps=gaps), params)
    assert forecasts(said) == []


@pytest.mark.parametrize("phi", [0.5, 0.8, 0.9])
def test_noise_that_wanders_is_seldom_a_forecast_and_never_beyond_its_own_range(phi: float) -> None:
    """Stationary noise correlated from bucket to bucket (AR(1), 3 % spread) draws lines a ramp would:
    the residuals' correlation widens the trend's spread, the noise one period apart the period's, and
    the trend must have beaten reacting clearly. What is left foresees no load the noise itself did not
    reach. (Wander that lasts longer than the trend's record, phi 0.95 and above, can still pass for a
    short ramp of a few per cent.)"""
    rnd = random.Random(phi)
    said_all: list[Forecast | NoForecast | None] = []
    for _ in range(3):
        x, rates = 0.0, []
        for _ in range(3 * DAY):
            x = phi * x + rnd.gauss(0, 0.03 * math.sqrt(1 - phi * phi))
            rates.append(1000 * (1 + x))
        said = feed(rates)[1]
        assert all(f.peak_rate <= max(rates) for _, f in forecasts(said))
        said_all += said
    assert len(forecasts(said_all)) < 0.03 * len(said_all)


def test_a_short_history_is_no_forecast_then_learns() -> None:
    _, said = feed(sample(ramp(1000, 10), 60, noise=0.01))
    assert said[0] is None  # nothing closed yet
    assert all(f.why is Why.SHORT for f in said[1 : PARAMS.trend_buckets] if isinstance(f, NoForecast))
    learning = [f for f in said[PARAMS.trend_buckets + 1 :] if isinstance(f, NoForecast)]
    assert any("learning" in f.detail for f in learning)
    first = min(i for i, _ in forecasts(said))
    # the first prediction at the close of bucket trend_buckets - 1, scored while it learns once a quarter
    # of its horizon has come (3 buckets of 12), not the whole horizon: a dozen scores 9 buckets sooner
    assert first == PARAMS.trend_buckets - 1 + math.ceil(H / 4) + PARAMS.min_scored, (
        "once a dozen were scored"
    )


def test_a_gappy_history_is_no_forecast() -> None:
    _, said = feed(sample(daily(), 4 * DAY, gaps=0.5))
    assert forecasts(said) == []
    assert whys(said).most_common(1)[0][0] is Why.GAPPY


def test_a_pattern_that_broke_is_wrong_and_not_trusted() -> None:
    """Three days of a daily cycle, then the cycle shifted by twelve hours: the daily basis' forecasts
    miss, its record says so (``wrong``), and no forecast foresees the old cycle."""
    d = daily()

    def shape(i: int) -> float:
        return d(i) if i < 3 * DAY else d(i + DAY // 2)

    _, said = feed(sample(shape, 5 * DAY))
    assert whys(said[3 * DAY : 3 * DAY + 72])[Why.WRONG] > 0
    assert all(f.basis != "daily" for i, f in forecasts(said) if 3 * DAY <= i < 5 * DAY)
    for i, f in forecasts(said):
        assert f.peak_rate <= 1.1 * peak_to_come(shape, i)


def test_the_choice_reads_the_record() -> None:
    seen = Outlook(
        made=999,
        level=100.0,
        noise=1.0,
        predictions={
            LEVEL: Prediction(100.0, 1),
            TREND: Prediction(150.0, 12, 1.0),
            "daily": Prediction(130.0, 5, 1.0),
        },
    )
    good, bad = (0.05,) * 12, (0.3,) * 12
    f = choose(seen, {LEVEL: bad, TREND: good, "daily": good}, PARAMS)
    assert isinstance(f, Forecast) and f.basis == "daily", "as good a record: the longer period"
    assert f.peak_rate == 130.0 and f.confidence == pytest.approx(0.95)
    assert f.made_ms == 1000 * BUCKET_MS and f.peak_at_ms == f.made_ms + 4 * BUCKET_MS
    assert f.peak_in_s(f.made_ms) == 4 * BUCKET_MS / 1000 and f.peak_in_s(f.peak_at_ms + 1) == 0.0
    assert f.horizon_s == 3600 and f.until_ms == f.made_ms + 3_600_000 and f.rise_over(100.0) == 1.3
    assert f.rise_over(130.0) == 1.0 and f.rise_over(0.0) == math.inf and math.isnan(f.rise_over(math.nan))
    assert choose(seen, {LEVEL: bad, TREND: good, "daily": bad}, PARAMS).basis == TREND  # type: ignore[union-attr]
    wrong = choose(seen, {LEVEL: good, TREND: bad, "daily": bad}, PARAMS)
    assert isinstance(wrong, NoForecast) and wrong.why is Why.WRONG and "30%" in wrong.detail
    worse_than_reacting = choose(seen, {LEVEL: (0.01,) * 12, TREND: (0.1,) * 12}, PARAMS)
    assert isinstance(worse_than_reacting, NoForecast) and worse_than_reacting.why is Why.WRONG
    learning = choose(seen, {LEVEL: good, TREND: good[:5]}, PARAMS)
    assert isinstance(learning, NoForecast) and learning.why is Why.SHORT and "5 of 12" in learning.detail
    small = Outlook(999, 100.0, 1.0, {LEVEL: Prediction(100.0, 1), TREND: Prediction(105.0, 12, 1.0)})
    no_rise = choose(small, {LEVEL: bad, TREND: good}, PARAMS)
    assert isinstance(no_rise, NoForecast) and no_rise.why is Why.NO_RISE and "trend" in no_rise.detail
    alone = choose(Outlook(999, 100.0, 1.0, {LEVEL: Prediction(100.0, 1)}), {}, PARAMS)
    assert isinstance(alone, NoForecast) and alone.why is Why.NO_PATTERN


def test_while_learning_the_choice_counts_forecasts_scored_on_what_came() -> None:
    """A basis with fewer than a dozen full scores is learned with its forecasts scored on the part of
    their horizon that came, and weighed against reacting's on the same forecasts, not reacting's whole
    record (which holds whole horizons, harder to foresee)."""
    seen = Outlook(999, 100.0, 1.0, {LEVEL: Prediction(100.0, 1), "daily": Prediction(130.0, 5, 1.0)})
    full_level = (0.3,) * 12
    part = ((0.04, 0.05),) * 7
    f = choose(seen, {LEVEL: full_level, "daily": (0.05,) * 5}, PARAMS, {"daily": part})
    assert isinstance(f, Forecast) and f.basis == "daily", "5 full and 7 partial scores: learned"
    short = choose(seen, {LEVEL: full_level, "daily": (0.05,) * 5}, PARAMS, {"daily": part[:6]})
    assert isinstance(short, NoForecast) and short.why is Why.SHORT and "11 of 12" in short.detail
    # reacting did better on the same buckets: not trusted, though far better than reacting's record
    worse = choose(seen, {LEVEL: full_level}, PARAMS, {"daily": ((0.06, 0.01),) * 12})
    assert isinstance(worse, NoForecast) and worse.why is Why.WRONG and "reacting's 1%" in worse.detail
    # a dozen full scores: the partial ones no longer count
    done = choose(seen, {LEVEL: full_level, "daily": (0.05,) * 12}, PARAMS, {"daily": ((0.9, 0.0),) * 12})
    assert isinstance(done, Forecast)


def test_the_first_buckets_of_a_long_climb_are_no_jump() -> None:
    """One period held: a climb that builds up over a dozen buckets is foreseen while the horizon holds
    only its first buckets, though each is a large part of the rise the horizon holds: it is weighed
    against the whole climb, followed a horizon further. A flash crowd is still a jump."""
    period = 48
    params = ForecastParams(bucket_ms=BUCKET_MS, horizon_ms=12 * BUCKET_MS, periods_ms=(period * BUCKET_MS,))
    name = period_name(period * BUCKET_MS)

    def climb(i: int) -> float:
        return 1000.0 + 100.0 * max(0, min(i % period - 30, 12))

    def crowd(i: int) -> float:
        return 1000.0 + (1200.0 if 30 <= i % period < 42 else 0.0)

    for shape, foreseen in ((climb, True), (crowd, False)):
        history, _ = feed(sample(shape, period + 30 - 12 + 3, noise=0.002), params)
        seen = outlook(history.series, params)  # the horizon holds the first two buckets of the climb
        assert (name in seen.predictions) is foreseen, (shape, seen.predictions)


def test_periods_must_fit_the_buckets_and_outlast_the_horizon() -> None:
    params = ForecastParams(
        bucket_ms=BUCKET_MS, horizon_ms=3_600_000, periods_ms=(WEEK_MS, DAY_MS, 1_800_000, 7_777_777)
    )
    assert params.periods == {"daily": DAY, "weekly": WEEK}
    assert ForecastParams(periods_ms=(7_200_000,)).periods == {"every 2 h": 24}
    assert period_name(DAY_MS) == "daily" and period_name(3 * DAY_MS) == "every 3 d"
    assert params.capacity > 3 * WEEK + 3, "three weeks back, and the level then"
    with pytest.raises(ValueError, match="positive"):
        ForecastParams(bucket_ms=0)


def test_an_outlook_of_an_empty_or_gappy_series_says_why() -> None:
    empty = outlook(LoadSeries(BUCKET_MS), PARAMS)
    assert empty.short and not empty.gappy and math.isnan(empty.level)
    assert isinstance(choose(empty, {}, PARAMS), NoForecast)
