"""What a job's run costs, in slot-seconds: the one price every plan, real or hypothetical, is judged by.

A user pays for three things (issue 38): the slots a job holds, the restarts it takes, and the time its
lag is above what it may carry. :class:`CostModel` holds their prices in one unit, the slot-second (one
slot held for one second costs ``slot_second``, 1.0 by default), and :func:`price` adds them up over a
run described interval by interval (:class:`Interval`: slots held, offered rate, capacity, backlog).

How a restart is counted. Its cost is not one formula but what it does to the run, plus a fixed price:

- the pause: for ``restart pause`` seconds the job holds its slots and processes nothing, so the
  pause's slot-seconds are paid with nothing to show for them (they are in the slot-seconds);
- the backlog it builds: the records that arrive during the pause wait, and are drained afterwards at
  the spare capacity (capacity - offered rate). While they would not be drained in time the job is
  above its lag target (:func:`above_target`), and each such second costs ``lag_second``. Under the
  default target every second of a pause with records waiting is such a second (no capacity, so no
  catch-up), and so is every second after it while the new capacity is below the load;
- ``restart``: a fixed price on top, for what the pause and the lag do not show (the risk of a
  restart that fails, state restored, caches and connections rebuilt, downstream disturbance).

The prices and the target are a job's options (``job.autoscaler.cost.slot-second``, ``cost.restart``,
``cost.lag-second``, ``lag.target``; :meth:`CostModel.of`). The lag target (``lag_target_s``) is the lag
a job may carry, in seconds of backlog at its current offered rate: a backlog is above it when it
exceeds ``lag_target_s x rate``. Unset (the default), it is the reference's catch-up notion made a
bound: a backlog is above target when the job, at its capacity then, would not drain it within
``catch_up_s`` (the reference's ``catch-up.duration``), which is always the case while it restarts or
runs slower than its input. The decision bench's "backlog s" column has counted exactly that since issue
11.

What is not priced: a backlog left at the end of the priced span beyond the seconds it was already
above target (a plan gains nothing from it only as long as ``lag_second`` exceeds the slots it could
save by letting the backlog grow: keep it above the job's widest slot count), and records' latency
below the target (free by definition of a target).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from autoscaler.settings import AutoscalerOptions

__all__ = ["DEFAULT_CATCH_UP_S", "Cost", "CostModel", "Interval", "above_target", "price"]

DEFAULT_CATCH_UP_S = 1800.0
"""The reference's ``catch-up.duration`` default (30 min): the lag bound when no lag target is set."""


@dataclass(frozen=True, slots=True)
class CostModel:
    """The prices, in slot-seconds, and the lag target they apply to (:meth:`of` a job's options).

    The defaults: a restart is worth ten slot-minutes on top of its pause and lag (600), and a second
    above the lag target thirty slot-seconds (30): more than the lab job's widest size (8 slots), so
    running below the load never pays, and less than what holding one more slot through a 10-minute
    period costs for a burst shorter than 20 s (so a short burst is absorbed, not restarted for).
    """

    slot_second: float = 1.0
    restart: float = 600.0
    lag_second: float = 30.0
    lag_target_s: float | None = None  # None: the catch-up notion, with ``catch_up_s``
    catch_up_s: float = DEFAULT_CATCH_UP_S

    def __post_init__(self) -> None:
        for name in ("slot_second", "restart", "lag_second"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"the price of a {name.replace('_', '-')} must be >= 0 and finite: {value}")
        if self.lag_target_s is not None and not (
            math.isfinite(self.lag_target_s) and self.lag_target_s >= 0
        ):
            raise ValueError(f"the lag target must be >= 0 s and finite: {self.lag_target_s}")
        if not (math.isfinite(self.catch_up_s) and self.catch_up_s >= 0):
            raise ValueError(f"the catch-up duration must be >= 0 s and finite: {self.catch_up_s}")

    @staticmethod
    def of(options: AutoscalerOptions) -> CostModel:
        """The prices a job's ``job.autoscaler.cost.*`` options set, its ``lag.target`` and its
        ``catch-up.duration`` (0 there: any backlog is above target, as none is meant to last)."""
        target = options.lag_target
        return CostModel(
            slot_second=options.cost_slot_second,
            restart=options.cost_restart,
            lag_second=options.cost_lag_second,
            lag_target_s=None if target is None else target.total_seconds(),
            catch_up_s=options.catch_up_duration.total_seconds(),
        )


@dataclass(frozen=True, slots=True)
class Interval:
    """What one job did over ``seconds``: the slots it held, the offered rate (records/s), the records/s
    it could process (0 while restarting) and the backlog (records waiting) at the interval's end."""

    seconds: float
    slots: int
    rate: float
    capacity: float
    backlog: float


@dataclass(frozen=True, slots=True)
class Cost:
    """A run's cost: its three quantities and their priced ``total`` (slot-seconds)."""

    slot_seconds: float
    restarts: int
    lag_seconds: float  # seconds above the lag target
    total: float

    @staticmethod
    def of(slot_seconds: float, restarts: int, lag_seconds: float, model: CostModel) -> Cost:
        total = model.slot_second * slot_seconds + model.restart * restarts + model.lag_second * lag_seconds
        return Cost(slot_seconds, restarts, lag_seconds, total)


def above_target(backlog: float, rate: float, capacity: float, model: CostModel) -> bool:
    """Whether a backlog (records) is above the lag target at offered ``rate`` and ``capacity`` (records/s).

    Less than one record waiting is never above. With a lag target: above when the backlog exceeds
    ``lag_target_s x rate``. Without: above when the job would not drain it within ``catch_up_s`` at
    its spare capacity (always, when it has none). Both grow with the backlog, which the best plan in
    hindsight relies on (more backlog never costs less)."""
    if backlog < 1.0:
        return False
    if model.lag_target_s is not None:
        return backlog > model.lag_target_s * rate
    spare = capacity - rate
    return spare <= 0 or backlog / spare > model.catch_up_s


def price(intervals: Iterable[Interval], restarts: int, model: CostModel) -> Cost:
    """The cost of a run: every interval's slot-seconds, the restarts, and the seconds whose closing
    backlog is above the lag target (each interval judged at its end, as one reading a second is)."""
    if restarts < 0:
        raise ValueError(f"restarts must be >= 0: {restarts}")
    slot_seconds = 0.0
    lag_seconds = 0.0
    for step in intervals:
        slot_seconds += step.slots * step.seconds
        if above_target(step.backlog, step.rate, step.capacity, model):
            lag_seconds += step.seconds
    return Cost.of(slot_seconds, restarts, lag_seconds, model)
