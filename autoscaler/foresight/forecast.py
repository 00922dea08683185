"""A forecast of a job's offered load over a horizon, from its own history (issue 38, item 3).

At each closed bucket, every **basis** that the history supports predicts the load of the next
``horizon`` buckets, and the one with the best record says the forecast:

- ``level``: the load stays where it is (the median of the newest buckets): what reacting assumes. It
  is the baseline a pattern must match, never a forecast itself.
- ``trend``: a ramp continues. The slope is the median of the slopes between bucket pairs half the
  window apart (a robust line, Theil and Sen's idea at O(n)), over ``2 x horizon`` buckets (at least 12),
  and it counts only while the window is a line: a step or a burst leaves residuals far above the
  noise, and no ramp is extrapolated from them.
- a **period** (daily, weekly, or any ``forecast.periods``): the same time one period ago: how far the
  load rose from its level then (the mean of that bucket and its two neighbours, against the median of
  the newest buckets then), smoothed over up to three periods (the median; of two, the lower, so one
  flash crowd or step a period ago is not foreseen again), added to today's level. A period is a basis
  once the history holds one of it; while it holds only one, a rise that came in one jump (a step, a
  flash crowd) is not foreseen until it comes again, and one that built up over several buckets (a
  day's load) is.

Each basis' past forecasts are scored when their horizon has passed (``autoscaler.foresight.scores``):
the error of the peak it foresaw against the peak that came; while a basis learns, also on the part of
their horizon that has come. A forecast is said only when

1. the history is long and dense enough (``NoForecast``: ``short``, ``gappy``);
2. some pattern basis has been scored often enough, its errors average at most ``max_error`` and
   match reacting's on the same forecasts (a period's within 2 points; a trend's 40 % lower, since a
   line through noise that wanders fits as well as a ramp) (``short`` while learning, ``wrong``
   otherwise); of those with the best record (within 2 points), the longest period says it;
3. the peak it foresees is above the current level by more than the noise can explain (``no-rise``):
   ``RISE_SIGMAS`` times the spread its basis has on noise and at least 2 %. The noise is the robust
   spread of neighbouring buckets' differences; a period takes that of the differences one period
   apart if larger, and a trend's spread widens with its residuals' correlation (noise that wanders
   for hours is stationary, but its buckets' differences are small).

The third rule is why stationary noise never gives a forecast above the level that reacting sizes
for: a scale-up is never forecast-driven on noise (tests/unit/foresight: independent noise never,
noise correlated from bucket to bucket seldom and never beyond what it reaches itself). A decline is
never a forecast either: a decision never scales down on a forecast alone, so only a rise is worth
saying.

Plain Python: a prediction reads a few dozen buckets (the horizon, three periods back, the trend
window), where numpy's per-call cost would exceed the arithmetic.
"""

from __future__ import annotations

import itertools
import math
import statistics
import zlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from autoscaler.durations import format_duration, to_ms
from autoscaler.foresight.series import LoadSeries

if TYPE_CHECKING:
    from autoscaler.settings import AutoscalerOptions

__all__ = [
    "LEVEL",
    "TREND",
    "Forecast",
    "ForecastParams",
    "NoForecast",
    "Outlook",
    "Prediction",
    "Why",
    "choose",
    "outlook",
    "period_name",
]

LEVEL = "level"
TREND = "trend"

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
LEVEL_BUCKETS = 3  # the current level: the median of this many newest buckets
SMOOTHED_PERIODS = 3  # a period basis smooths over up to this many periods back
MIN_TREND_BUCKETS = 12
NOISE_BUCKETS = 48  # the noise is read from the differences of at most this many newest buckets
MAX_GAPS = 1 / 3  # more missing buckets than this in a window: too gappy to read
RISE_SIGMAS = 6.0  # a foreseen rise must exceed this many times its spread on noise ...
MIN_RISE = 0.02  # ... and this fraction of the level
MAX_JUMP = 0.5  # seen in one period only, a rise must not have come more than this much in one bucket
SINGLE_PERIOD_SPREAD = 1.5  # a rise seen in one period only spreads this much more on noise
LINEAR_SIGMAS = 2.0  # a ramp's residuals spread at most this many times the noise
LEFT_LINE_SIGMAS = 3.0  # and the current level is at most this many times the noise off its line
BETTER_THAN_LEVEL = 0.02  # a period may be this much worse than reacting and still be trusted ...
TREND_BEATS_LEVEL = 0.6  # ... a trend must have been this much better: a line through wandering noise
# fits as well as a ramp, and only its record against reacting's tells them apart


def period_name(period_ms: int) -> str:
    """How a period basis is called: ``daily``, ``weekly``, or ``every <duration>``."""
    if period_ms == DAY_MS:
        return "daily"
    if period_ms == WEEK_MS:
        return "weekly"
    return f"every {_duration(period_ms)}"


@dataclass(frozen=True, slots=True)
class ForecastParams:
    """How a job's load is bucketed and forecast (from its ``forecast.*`` options).

    ``periods_ms`` that are not a whole number of buckets, or not longer than the horizon (one period
    back would be in the future), are not bases.
    """

    bucket_ms: int = 300_000
    horizon_ms: int = 3_600_000
    periods_ms: tuple[int, ...] = (DAY_MS, WEEK_MS)
    max_error: float = 0.15
    scored: int = 36  # a basis' record: the errors of its last this many scored forecasts
    min_scored: int = 12  # ... of which at least this many before it is trusted
    phase_ms: int = 0  # the job's buckets begin this far into each bucket_ms of the epoch

    @classmethod
    def of(cls, options: AutoscalerOptions, job_key: str = "") -> ForecastParams:
        """A job's ``forecast.*`` options as the forecast reads them. Its buckets' phase comes from its
        key (a stable hash): the fleet's buckets close spread over a bucket's ticks, so no tick does
        every job's forecast and history write."""
        bucket_ms = to_ms(options.forecast_bucket)
        return cls(
            bucket_ms=bucket_ms,
            horizon_ms=to_ms(options.forecast_horizon),
            periods_ms=tuple(to_ms(p) for p in options.forecast_periods),
            max_error=options.forecast_max_error,
            phase_ms=zlib.crc32(job_key.encode()) % bucket_ms if job_key else 0,
        )

    def __post_init__(self) -> None:
        if self.bucket_ms <= 0 or self.horizon_ms <= 0:
            raise ValueError("forecast bucket and horizon must be positive")
        if not 0 <= self.phase_ms < self.bucket_ms:
            raise ValueError("forecast phase must be within a bucket")
        if not 1 <= self.min_scored <= self.scored:
            raise ValueError("forecast min_scored must be within [1, scored]")

    @property
    def horizon(self) -> int:
        """The horizon in buckets (at least one)."""
        return max(1, math.ceil(self.horizon_ms / self.bucket_ms))

    @property
    def trend_buckets(self) -> int:
        return max(MIN_TREND_BUCKETS, 2 * self.horizon)

    @property
    def history_needed(self) -> int:
        """Buckets of history before any basis predicts: the trend's window, or one period and the level
        then if shorter (a period basis does not wait for the trend's window)."""
        return min([self.trend_buckets, *(p + LEVEL_BUCKETS for p in self.periods.values())])

    @property
    def periods(self) -> dict[str, int]:
        """Each period basis' name and length in buckets."""
        return {
            period_name(p): p // self.bucket_ms
            for p in sorted(set(self.periods_ms))
            if p % self.bucket_ms == 0 and p // self.bucket_ms > self.horizon
        }

    @property
    def capacity(self) -> int:
        """How many buckets a job keeps: enough for every basis (three periods of the longest)."""
        longest = max(self.periods.values(), default=0)
        return max(longest * SMOOTHED_PERIODS + LEVEL_BUCKETS, NOISE_BUCKETS, self.trend_buckets) + 1


@dataclass(frozen=True, slots=True)
class Prediction:
    """What one basis foresees over the horizon from a closed bucket: the peak, how many buckets ahead
    (1 = the bucket now open), and how far noise alone could move it above the level."""

    peak: float
    ahead: int
    spread: float = math.nan  # one standard deviation of its rise over the level, on noise (NaN: none)
    periods: int = 0  # a period basis: how many periods back it smoothed over


@dataclass(frozen=True, slots=True)
class Outlook:
    """Every basis' prediction at the newest closed bucket, with what the choice weighs them against."""

    made: int  # the newest closed bucket's index
    level: float  # the current level (NaN: too few recent buckets)
    noise: float  # the buckets' noise, one standard deviation (NaN: too few to tell)
    predictions: Mapping[str, Prediction] = field(default_factory=dict)
    short: str = ""  # why the history is too short or gappy to forecast from, if it is
    gappy: bool = False


class Why(StrEnum):
    """Why there is no forecast: the decision then reacts, as without one."""

    SHORT = "short"  # too little history, or too few of its forecasts scored yet
    GAPPY = "gappy"  # too many buckets without a sample
    WRONG = "wrong"  # its forecasts were off by more than forecast.max-error
    NO_PATTERN = "no-pattern"  # no ramp or repeating pattern in the history
    NO_RISE = "no-rise"  # what it foresees is not above the current load beyond noise


@dataclass(frozen=True, slots=True)
class NoForecast:
    why: Why
    detail: str


@dataclass(frozen=True, slots=True)
class Forecast:
    """The load a job's history foresees: a peak above the current level within the horizon.

    ``peak_rate`` is the expected peak of the offered rate (records/s, bucket means) and ``peak_at_ms``
    the start of the bucket it is expected in; ``level_rate`` the current level it rises from;
    ``confidence`` one minus the mean error of the basis' scored peak forecasts (0.92: off by 8 % on
    average); ``basis`` what foresaw it (``trend``, ``daily``, ...).
    """

    peak_rate: float
    level_rate: float
    made_ms: int  # the end of the bucket it was made at
    peak_at_ms: int
    horizon_ms: int
    confidence: float
    basis: str

    @property
    def horizon_s(self) -> float:
        return self.horizon_ms / 1000

    def rise_over(self, rate: float) -> float:
        """The expected peak over the job's offered ``rate`` now: what a decision sizing its vertices for
        the peak multiplies their target rates by (infinite from 0, NaN from an unknown rate). Over the
        rate now, not the level the forecast rose from: a load already partway up the rise (the level
        is the newest closed buckets' median, behind it) is sized for the peak, not beyond it."""
        if math.isnan(rate):
            return math.nan
        return self.peak_rate / rate if rate > 0 else math.inf

    @property
    def until_ms(self) -> int:
        return self.made_ms + self.horizon_ms

    def peak_in_s(self, now_ms: int) -> float:
        """Seconds from ``now_ms`` to the bucket of the peak (0 once it has begun)."""
        return max(0.0, (self.peak_at_ms - now_ms) / 1000)


# ---------------------------------------------------------------------------------------- predictions
def outlook(
    series: LoadSeries,
    params: ForecastParams,
    made: int | None = None,
    horizon: int | None = None,
    bases: Collection[str] | None = None,
) -> Outlook:
    """Every basis' prediction from the newest closed bucket of ``series`` (bucketed as ``params``).

    ``made`` (an earlier bucket), ``horizon`` (fewer buckets) and ``bases`` (only these, and the level)
    make again what was foreseen then: the history up to ``made`` is all a prediction reads, so a
    forecast need not have been kept to be scored on the part of its horizon that has come
    (``autoscaler.foresight.scores``)."""
    made = series.last if made is None else made
    held = made - series.first + 1
    recent = series.rates(max(series.first, made - params.trend_buckets + 1), made + 1)
    level = _level(series, made)
    noise = _noise(series.rates(made - max(NOISE_BUCKETS, params.trend_buckets) + 1, made + 1))
    if held < params.history_needed:
        why = f"{max(0, held)} buckets of history, a forecast needs {params.history_needed}"
        return Outlook(made, level, noise, short=why)
    missing = sum(math.isnan(r) for r in recent)
    if missing > MAX_GAPS * len(recent) or math.isnan(level) or math.isnan(noise):
        why = f"{missing} of the last {len(recent)} buckets have no sample"
        return Outlook(made, level, noise, short=why, gappy=True)
    horizon = params.horizon if horizon is None else horizon
    predictions = {LEVEL: Prediction(level, 1)}
    if (bases is None or TREND in bases) and held >= params.trend_buckets:  # recent: the whole window
        trend = _trend(recent, level, noise, horizon)
        if trend is not None:
            predictions[TREND] = trend
    for name, period in params.periods.items():
        if bases is None or name in bases:
            seasonal = _seasonal(series, made, period, level, noise, horizon)
            if seasonal is not None:
                predictions[name] = seasonal
    return Outlook(made, level, noise, predictions)


def _level(series: LoadSeries, made: int) -> float:
    """The load now: the median of the newest buckets (NaN when fewer than two of them were sampled)."""
    return _robust_level(series.rates(made - LEVEL_BUCKETS + 1, made + 1))


def _robust_level(rates: list[float]) -> float:
    finite = [r for r in rates if not math.isnan(r)]
    return statistics.median(finite) if len(finite) >= 2 else math.nan


def _noise(rates: list[float]) -> float:
    """One bucket's noise: the robust spread (1.4826 x the median absolute deviation) of the differences
    of neighbouring buckets, over sqrt 2; a ramp's or a cycle's slope moves their median, not their
    spread. NaN when fewer than eight differences are known."""
    return _spread_of_differences(
        [b - a for a, b in itertools.pairwise(rates) if not (math.isnan(a) or math.isnan(b))]
    )


def _noise_apart(series: LoadSeries, made: int, period: int) -> float:
    """One bucket's noise as seen one period apart: the robust spread of the differences between the
    newest buckets and the same buckets a period before, over sqrt 2 (a level shift moves their median,
    not their spread). NaN when fewer than eight are known."""
    n = NOISE_BUCKETS
    now, then = series.rates(made - n + 1, made + 1), series.rates(made - period - n + 1, made - period + 1)
    return _spread_of_differences(
        [a - b for a, b in zip(now, then, strict=True) if not (math.isnan(a) or math.isnan(b))]
    )


def _spread_of_differences(diffs: list[float]) -> float:
    """One value's noise from differences of two values each: 1.4826 x their median absolute deviation
    (a standard deviation, robustly) over sqrt 2; NaN from fewer than eight."""
    if len(diffs) < 8:
        return math.nan
    centre = statistics.median(diffs)
    return 1.4826 * statistics.median(abs(d - centre) for d in diffs) / math.sqrt(2)


def _trend(recent: list[float], level: float, noise: float, horizon: int) -> Prediction | None:
    """A ramp continued from the current level over the horizon, or None when the window is no line (a
    step, a burst) or the newest buckets left it."""
    n, half = len(recent), len(recent) // 2
    slopes = [
        (recent[i + half] - recent[i]) / half
        for i in range(n - half)
        if not (math.isnan(recent[i]) or math.isnan(recent[i + half]))
    ]
    if len(slopes) < max(3, half // 2):
        return None
    slope = statistics.median(slopes)
    known = [(i - (n - 1), r) for i, r in enumerate(recent) if not math.isnan(r)]  # (buckets ago, rate)
    now = statistics.median(r - slope * x for x, r in known)  # the line's value at the newest bucket
    residuals = [r - (now + slope * x) for x, r in known]
    spread = 1.4826 * statistics.median(abs(e) for e in residuals)
    if spread > LINEAR_SIGMAS * noise + 1e-9 * abs(now):
        return None  # no line: a step, a burst, a bend
    if abs(level - now) > LEFT_LINE_SIGMAS * noise + 1e-9 * abs(now):
        return None  # the newest buckets left the line (a step just now): the ramp is over
    ahead = horizon if slope > 0 else 1
    # The median of n pair slopes, each of noise sqrt 2 x noise / half, spreads about 1.25 / sqrt n of
    # it; noise that wanders (each bucket like the one before: correlated, though stationary) draws
    # lines a ramp would, and counts as fewer independent pairs: (1 + r) / (1 - r) times fewer, r the
    # residuals' correlation with their neighbours.
    r = _neighbour_correlation([e for (x, _), e in zip(known, residuals, strict=True)], [x for x, _ in known])
    wander = math.sqrt((1 + r) / (1 - r))
    spread = wander * horizon * 1.25 * math.sqrt(2) * noise / (half * math.sqrt(len(slopes)))
    return Prediction(max(0.0, level + slope * ahead), ahead, spread)


def _neighbour_correlation(residuals: list[float], at: list[int]) -> float:
    """The lag-one correlation of residuals (of buckets ``at``, neighbours only), within [0, 0.95]."""
    pairs = [(a, b) for a, b, i, j in zip(residuals, residuals[1:], at, at[1:], strict=False) if j == i + 1]
    total = math.fsum(e * e for e in residuals)
    if not pairs or total <= 0:
        return 0.0
    r = math.fsum(a * b for a, b in pairs) / total
    return min(0.95, max(0.0, r))


def _seasonal(
    series: LoadSeries, made: int, period: int, level: float, noise: float, horizon: int
) -> Prediction | None:
    """The horizon as it went one to three periods ago, moved to today's level: how far the load rose
    from its level then, smoothed over the periods, added to the level now. None when the history holds
    less than one period (a one-off jump: less than two), or too few of those buckets were sampled."""
    back = min(SMOOTHED_PERIODS, (made + 1 - LEVEL_BUCKETS - series.first) // period)
    if back < 1:
        return None
    lagged = [
        series.rates(made - k * period - LEVEL_BUCKETS + 1, made - k * period + horizon + 2)
        for k in range(1, back + 1)
    ]
    then = [_robust_level(r[:LEVEL_BUCKETS]) for r in lagged]  # each period's level at this time
    held = sum(not math.isnan(t) for t in then)
    if held < 1:
        return None
    peak, ahead, known = -math.inf, 1, 0
    for h in range(1, horizon + 1):
        at = LEVEL_BUCKETS - 1 + h  # bucket made + h, k periods back
        rise = _smooth([_mean_known(r[at - 1 : at + 2]) - t for r, t in zip(lagged, then, strict=True)])
        if math.isnan(rise):
            continue
        known += 1
        if rise > peak:
            peak, ahead = rise, h
    if known < (1 - MAX_GAPS) * horizon:
        return None
    if held == 1:
        # One period's jump may have been a one-off: foreseen once it came twice. The jumps up to the
        # foreseen peak are weighed against the whole climb, followed a horizon further: the first
        # buckets of a long gradual rise at the horizon's edge are no jump.
        climb = series.rates(made - period + 1, made - period + 2 * horizon + 2)
        top = max((_mean_known(climb[i - 1 : i + 2]) for i in range(1, len(climb) - 1)), default=math.nan)
        whole = max(peak, top - then[0]) if not math.isnan(top) else peak
        if not _gradual(lagged[0][: LEVEL_BUCKETS + ahead + 1], whole, noise):
            return None
    # The highest of the horizon's smoothed rises: on noise it stays within about three times one
    # bucket's noise (measured), which is taken as its spread; the noise is the larger of the buckets'
    # and the periods' (of the differences one period apart), which noise that wanders for hours
    # (stationary, but correlated) has far above its buckets' differences.
    spread = max(noise, _noise_apart(series, made, period))
    if held == 1:
        spread *= SINGLE_PERIOD_SPREAD  # one period's rise, not smoothed: noise moves it further
    return Prediction(max(0.0, level + peak), ahead, spread, held)


def _gradual(rates: list[float], peak: float, noise: float) -> bool:
    """Whether a rise seen in one period only (``rates``: its buckets from the level to the peak) built
    up over several buckets, as a day's load does, and not in one jump, as a flash crowd or a step
    does: no bucket added more than ``MAX_JUMP`` of it (beyond noise). One period of a cycle is enough
    to foresee it; a jump must come twice, so that one crowd is never foreseen again a period later
    (the smoothing's lower of two)."""
    if peak <= 0:
        return True  # no rise: nothing to foresee wrongly
    jumps = [b - a for a, b in itertools.pairwise(rates) if not (math.isnan(a) or math.isnan(b))]
    return max(jumps, default=0.0) <= MAX_JUMP * peak + 3 * noise


def _mean_known(values: list[float]) -> float:
    """The mean of the sampled values (NaN when none was)."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


def _smooth(values: list[float]) -> float:
    """The same rise over several periods: the median of three or more, the lower of two (a rise that
    came in one of two periods only is not foreseen), the one of one (NaN from none)."""
    finite = sorted(v for v in values if not math.isnan(v))
    if not finite:
        return math.nan
    return finite[0] if len(finite) <= 2 else statistics.median(finite)


# ---------------------------------------------------------------------------------------- the choice
def choose(
    seen: Outlook,
    errors: Mapping[str, tuple[float, ...]],
    params: ForecastParams,
    partly: Mapping[str, tuple[tuple[float, float], ...]] | None = None,
) -> Forecast | NoForecast:
    """The forecast ``seen`` supports, judged by each basis' record of scored ``errors``; or why none.

    ``partly``: for a basis with fewer than ``min_scored`` errors, its waiting forecasts scored on the
    part of their horizon that has come, beside reacting's on the same buckets
    (:meth:`autoscaler.foresight.scores.Scores.partly_come`); they count towards its record while it
    learns, and reacting's beside them towards what it is weighed against."""
    if seen.short:
        return NoForecast(Why.GAPPY if seen.gappy else Why.SHORT, seen.short)
    patterns = [b for b in seen.predictions if b != LEVEL]
    if not patterns:
        return NoForecast(Why.NO_PATTERN, "no ramp, and no period the history holds (a jump: twice)")
    partly = partly or {}
    level_errors = errors.get(LEVEL, ())
    record: dict[str, float] = {}
    reacting: dict[str, float] = {}  # reacting's record over the same forecasts
    for b in patterns:
        full = errors.get(b, ())
        if len(full) >= params.min_scored:
            kept = full[-params.scored :]  # and reacting's on the same (the newest) forecasts
            record[b], reacting[b] = _mean(kept), _mean(level_errors[-len(kept) :])
            continue
        part = partly.get(b, ())
        if len(full) + len(part) >= params.min_scored:
            record[b] = _mean((*full, *(e for e, _ in part)))
            alongside = level_errors[-len(full) :] if full else ()
            reacting[b] = _mean((*alongside, *(e for _, e in part)))
    if not record:
        most = max(len(errors.get(b, ())) + len(partly.get(b, ())) for b in patterns)
        return NoForecast(
            Why.SHORT, f"learning: {most} of {params.min_scored} forecasts scored ({', '.join(patterns)})"
        )
    learned = list(record)
    trusted = [
        b
        for b in learned
        if record[b] <= params.max_error
        and (math.isnan(reacting[b]) or record[b] <= _as_good(b, reacting[b]))
    ]
    if not trusted:
        best = min(learned, key=lambda b: record[b])
        than = f", reacting's {reacting[best]:.0%}" if not math.isnan(reacting[best]) else ""
        return NoForecast(
            Why.WRONG,
            f"its forecasts were off: {best} by {record[best]:.0%} on average{than} "
            f"(at most {params.max_error:.0%})",
        )
    best = min(record[b] for b in trusted)
    spans = {TREND: 0, **params.periods}
    # Among the records as good as the best, the longest period: it holds the shorter ones (a week ago
    # is also the same time of day) and what they miss (the weekend). A period seen once only ranks with
    # the trend and after it: on a ramp, yesterday's rise is the trend's, read from a single day.
    spans = {b: 0 if p.periods == 1 else spans.get(b, 0) for b, p in seen.predictions.items()}
    basis = max((b for b in trusted if record[b] <= best + BETTER_THAN_LEVEL), key=lambda b: spans[b])
    predicted = seen.predictions[basis]
    confidence = max(0.0, 1.0 - record[basis])
    needed = max(RISE_SIGMAS * predicted.spread, MIN_RISE * seen.level)
    if predicted.peak - seen.level <= needed:
        return NoForecast(
            Why.NO_RISE,
            f"{basis} (confidence {confidence:.2f}) foresees no load above the current "
            f"{seen.level:.4g}/s beyond noise within {_duration(params.horizon_ms)}",
        )
    made_ms = (seen.made + 1) * params.bucket_ms + params.phase_ms
    return Forecast(
        peak_rate=predicted.peak,
        level_rate=seen.level,
        made_ms=made_ms,
        peak_at_ms=made_ms + (predicted.ahead - 1) * params.bucket_ms,
        horizon_ms=params.horizon_ms,
        confidence=confidence,
        basis=basis,
    )


def _as_good(basis: str, level_error: float) -> float:
    """The worst record a basis may have against reacting's and still be trusted."""
    return level_error * TREND_BEATS_LEVEL if basis == TREND else level_error + BETTER_THAN_LEVEL


def _duration(ms: int) -> str:
    return format_duration(timedelta(milliseconds=ms))


def _mean(values: tuple[float, ...]) -> float:
    return sum(values) / len(values) if values else math.nan
