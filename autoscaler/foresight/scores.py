"""How well a job's past forecasts matched: the confidence a forecast is said with is learned here.

Every basis' predicted peak is kept when it is made, and scored once its horizon has passed against the
peak that came (the highest bucket in that horizon): the error is ``|foreseen - came| / max(foreseen,
came)``, 0 for a perfect forecast and at most 1, about the relative error when small. Each basis keeps
the errors of its last forecasts; their mean is its record (``autoscaler.foresight.forecast.choose``).
A horizon whose buckets were mostly not sampled is not scored: nothing is known of what came.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from autoscaler.foresight.forecast import MAX_GAPS, Prediction
from autoscaler.foresight.series import LoadSeries

__all__ = ["Foreseen", "Scores", "peak_error"]


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

    def with_forecasts(self, made: int, horizon: int, predictions: Mapping[str, Prediction]) -> Scores:
        """These predictions, made at bucket ``made``, kept to be scored."""
        new = tuple(Foreseen(made, horizon, b, p.peak) for b, p in predictions.items())
        return Scores((*self.pending, *new), self.errors)
