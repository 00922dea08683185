"""How well a job's past forecasts matched: the confidence a forecast is said with is learned here.

Every basis' predicted peak is kept when it is made, and scored once its horizon has passed against the
peak that came (the highest bucket in that horizon): the error is ``|foreseen - came| / max(foreseen,
came)``, 0 for a perfect forecast and at most 1, about the relative error when small. Each basis keeps
the errors of its last forecasts; their mean is its record (``autoscaler.foresight.forecast.choose``).
A horizon whose buckets were mostly not sampled is not scored: nothing is known of what came.

While a basis has fewer scored forecasts than it needs to be trusted, its forecasts still waiting are
also scored on the part of their horizon that has come (:meth:`Scores.partly_come`, at least a quarter
of it), each beside reacting's on the same buckets: the forecast made again from the history as it was
then (it read nothing later), over those buckets only. So a period seen once is trusted a quarter
horizon and 11 buckets after it could first foresee, not a whole horizon and 11: for a daily pattern
in 5-minute buckets with an hour's horizon, 45 minutes sooner on its second day. These partial scores
are never kept; once a basis has its dozen full ones, they alone are its record.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from autoscaler.foresight.forecast import LEVEL, MAX_GAPS, ForecastParams, Prediction, outlook
from autoscaler.foresight.series import LoadSeries

__all__ = ["PART_COME", "Foreseen", "Scores", "peak_error"]

PART_COME = 0.25  # while a basis learns, a forecast is scored once this much of its horizon has come


class Foreseen(tuple[int, int, str, float]):
    """One kept forecast: made at bucket ``made`` for ``horizon`` buckets, by ``basis``, of ``peak``."""

    __slots__ = ()

    def __new__(cls, made: int, horizon: int, basis: str, peak: float) -> Foreseen:
        return super().__new__(cls, (made, horizon, basis, peak))

    @property
    def made(self) -> int:
        return self[0]

    @property
    def horizon(self) -> int:
        return self[1]

    @property
    def basis(self) -> str:
        return self[2]

    @property
    def peak(self) -> float:
        return self[3]

    @property
    def due(self) -> int:
        """The last bucket of its horizon: it is scored once that bucket has closed."""
        return self.made + self.horizon


def peak_error(foreseen: float, came: float) -> float:
    """How far a foreseen peak was from the one that came: 0 to 1 (both 0: a perfect forecast)."""
    top = max(foreseen, came)
    return abs(foreseen - came) / top if top > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Scores:
    """The forecasts waiting for their horizon to pass, and each basis' last errors (oldest first)."""

    pending: tuple[Foreseen, ...] = ()
    errors: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pending", tuple(self.pending))
        object.__setattr__(self, "errors", MappingProxyType({b: tuple(e) for b, e in self.errors.items()}))

    def settled(self, series: LoadSeries, keep: int) -> Scores:
        """The forecasts whose horizon ``series`` has closed, scored (each basis keeping its ``keep``
        newest errors); the others still waiting."""
        last = series.last
        due = [p for p in self.pending if p[0] + p[1] <= last]  # made + horizon: its due bucket
        if not due:
            return self
        errors = {b: list(e) for b, e in self.errors.items()}
        for p in due:
            came = [r for r in series.rates(p.made + 1, p.due + 1) if not math.isnan(r)]
            if len(came) >= (1 - MAX_GAPS) * p.horizon:
                errors.setdefault(p.basis, []).append(peak_error(p.peak, max(came)))
        waiting = tuple(p for p in self.pending if p[0] + p[1] > last)
        return Scores(waiting, {b: tuple(e[-keep:]) for b, e in errors.items()})

    def partly_come(
        self, series: LoadSeries, params: ForecastParams, bases: Collection[str]
    ) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each of ``bases``' waiting forecasts scored on the part of its horizon that has come (at least
        ``PART_COME`` of it, mostly sampled), beside reacting's on the same buckets: (its error, the
        level's), oldest first. Bases without any are left out."""
        last = series.last
        waiting: dict[int, list[str]] = {}  # made -> the bases whose forecast then is partly come
        for p in self.pending:
            if p.basis in bases and last - p.made >= max(1, math.ceil(PART_COME * p.horizon)):
                waiting.setdefault(p.made, []).append(p.basis)
        scored: dict[str, list[tuple[float, float]]] = {}
        for made, learning in waiting.items():  # one outlook per bucket, for all its bases
            came = [r for r in series.rates(made + 1, last + 1) if not math.isnan(r)]
            if len(came) < (1 - MAX_GAPS) * (last - made):
                continue
            then = outlook(series, params, made=made, horizon=last - made, bases=learning).predictions
            top = max(came)
            for b in learning:
                if b in then:
                    errors = (peak_error(then[b].peak, top), peak_error(then[LEVEL].peak, top))
                    scored.setdefault(b, []).append(errors)
        return {b: tuple(e) for b, e in scored.items()}

    def with_forecasts(self, made: int, horizon: int, predictions: Mapping[str, Prediction]) -> Scores:
        """These predictions, made at bucket ``made``, kept to be scored."""
        new = tuple(Foreseen(made, horizon, b, p.peak) for b, p in predictions.items())
        return Scores((*self.pending, *new), self.errors)
