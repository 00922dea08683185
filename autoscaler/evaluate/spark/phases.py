"""Where an evaluation's time went: the driver's window bookkeeping, Spark, the driver's arithmetic.

One number per tick (``flink_autoscaler_evaluation_duration_seconds``) says a fleet's evaluation got
slow, not why. The answer decides what to do: time in Spark shrinks with more cores or a cluster
(``spark://``), time in the driver does not, and only more daemons share it out
(``docs/operations.md``, "Capacity planning"). So the Spark evaluator times its tick in three phases,
which the daemon exports (``flink_autoscaler_evaluation_phase_duration_seconds{phase}``) and the
evaluator benchmark prints beside the tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["PHASES", "EvaluationPhases", "Phase", "PhaseTimer"]

Phase = Literal["window", "spark", "driver"]
PHASES: tuple[Phase, ...] = get_args(Phase)
"""``window``: every job's window bookkeeping in the driver and the new rows as Arrow tables;
``spark``: the Spark work the tick waits for (the last checkpoint, the new rows shipped, the window's
plan, its checkpoint when taken in the tick, the aggregation and its collection); ``driver``: the graph
propagation and the parallelism arithmetic for every job, and their results."""


@dataclass(frozen=True, slots=True)
class EvaluationPhases:
    """Seconds of one evaluation spent in each :data:`PHASES`; together, the whole evaluation."""

    window: float = 0.0
    spark: float = 0.0
    driver: float = 0.0

    def items(self) -> tuple[tuple[Phase, float], ...]:
        return tuple((phase, getattr(self, phase)) for phase in PHASES)

    @property
    def total(self) -> float:
        return self.window + self.spark + self.driver


class PhaseTimer:
    """Laps of one evaluation: each :meth:`lap` books the time since the last one to a phase."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()
        self._spent: dict[Phase, float] = dict.fromkeys(PHASES, 0.0)

    def lap(self, phase: Phase) -> None:
        now = self._clock()
        self._spent[phase] += now - self._last
        self._last = now

    def phases(self) -> EvaluationPhases:
        return EvaluationPhases(**self._spent)
