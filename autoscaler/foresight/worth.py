"""Whether a rescale pays for itself: the cost of changing now against the cost of waiting (issue 38).

The utilization band says a job is outside where it should run; it does not say whether moving it is
worth a restart. A user pays for slots, restarts and lag (:mod:`autoscaler.foresight.cost`), so the
decision prices both futures over a horizon and keeps the cheaper:

- **waiting**: the job keeps its parallelism; its slots are paid all along, and if it processes less
  than it is offered its backlog grows, and every second that backlog is above the lag target is paid;
- **changing now**: one restart (its fixed price), its pause (the old slots held, nothing processed,
  the backlog growing by what arrives), then the new parallelism's slots and capacity for the rest.

Both are run by :func:`autoscaler.foresight.hindsight.plan_cost`, the same arithmetic that prices the
best plan in hindsight and the bench's runs, on a job seen as one queue (:class:`JobQueue`): the offered
rate at its sources, the records waiting there, and the records/s it processes now and would at the
proposed parallelism (the decision stage reads them off the evaluation: ``tick/decide.py``).

The horizon is ``cost.horizon``, and at least until the next rescale could be made (the cooldown): a
change not made now cannot be made before then, so waiting is priced at least that long. The load over
it is the rate now, or the forecast's peak where a forecast is given (never lower than now: a decision
never scales down on a forecast). What waiting costs beyond the horizon is not priced: a scale-down
that saves a slot pays only if the horizon is long enough for the slot-seconds to exceed the restart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.foresight.cost import Cost, CostModel
from autoscaler.foresight.hindsight import Plan, best_plan, plan_cost

__all__ = ["STEP_S", "JobQueue", "Weighing", "weigh"]

STEP_S = 5.0
"""The horizon's step: fine enough for a restart pause of seconds, coarse enough to weigh a 30-minute
horizon in a few hundred steps."""

_NOW, _THEN = 0, 1  # the two "levels" the plans move between: the current parallelism and the proposed


@dataclass(frozen=True, slots=True)
class JobQueue:
    """A job as one queue at its sources: offered ``rate`` (records/s), ``backlog`` (records waiting),
    the records/s it processes now and at the proposed parallelism, and the slots it holds at each."""

    rate: float
    backlog: float
    capacity_now: float
    capacity_then: float
    slots_now: int
    slots_then: int


@dataclass(frozen=True, slots=True)
class Weighing:
    """Both futures priced over ``horizon_s`` at offered ``rate`` (records/s): change now, or wait."""

    change: Cost
    wait: Cost
    horizon_s: float
    rate: float
    queue: JobQueue

    @property
    def worth_it(self) -> bool:
        """Changing now costs less than waiting (a tie keeps the job as it is: no restart for nothing)."""
        return self.change.total < self.wait.total

    def text(self) -> str:
        """Both costs, for the decision's detail and ``explain``."""
        q = self.queue
        return (
            f"over {_span(self.horizon_s)} at {self.rate:.6g} rec/s: changing now costs "
            f"{_cost_text(self.change)} ({q.slots_then} slots, {q.capacity_then:.6g} rec/s after the "
            f"restart), waiting costs {_cost_text(self.wait)} ({q.slots_now} slots, "
            f"{q.capacity_now:.6g} rec/s)"
        )


def _span(seconds: float) -> str:
    """A horizon as a person reads it: ``15 min``, ``22 min 40 s``, ``45 s``."""
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" if not rest else f"{minutes} min {rest} s"


def _cost_text(cost: Cost) -> str:
    lag = f", {cost.lag_seconds:.0f} s above the lag target" if cost.lag_seconds else ""
    restarts = f", {cost.restarts} restart" if cost.restarts else ""
    return f"{cost.total:.0f} slot-s ({cost.slot_seconds:.0f} slot-s held{restarts}{lag})"


def weigh(
    queue: JobQueue,
    model: CostModel,
    horizon_s: float,
    pause_s: float,
    *,
    rate: float | None = None,
    rise_in_s: float = 0.0,
    step_s: float = STEP_S,
) -> Weighing:
    """Price changing now against waiting over ``horizon_s`` (at least one pause and one step longer, so
    the change is seen running), the restart pausing the job ``pause_s``.

    The offered load is the queue's rate, rising (linearly) to ``rate`` (records/s, a forecast's peak;
    never lower than now) ``rise_in_s`` from now. With no rise ahead, waiting is keeping the parallelism:
    under a load that does not change, a change made later never costs less than the same change now.
    With a rise ahead, waiting may also be changing later, just before it: the cheapest plan over the
    two parallelisms (:func:`~autoscaler.foresight.hindsight.best_plan`) says whether now is the time,
    and waiting costs what that plan costs when it does not change now."""
    peak = max(queue.rate, rate) if rate is not None and math.isfinite(rate) else queue.rate
    pause_s = max(0.0, pause_s) if math.isfinite(pause_s) else 0.0
    horizon_s = max(horizon_s, pause_s + step_s)
    steps = max(1, math.ceil(horizon_s / step_s - 1e-9))
    rise = min(steps, max(0, math.floor(rise_in_s / step_s))) if peak > queue.rate else 0
    # Up to the peak the load ramps from now's (a forecast says the peak and when, not the way there:
    # a ramp crosses the capacity before the peak does, where a step would not).
    rates = [queue.rate + (peak - queue.rate) * (i + 1) / (rise + 1) for i in range(rise)]
    rates += [peak] * (steps - rise)
    capacities = (queue.capacity_now, queue.capacity_then)
    slots = (queue.slots_now, queue.slots_then)

    def price(plan: Plan) -> Cost:
        return plan_cost(
            plan,
            rates,
            step_s,
            capacities.__getitem__,
            pause_s,
            model,
            backlog=queue.backlog,
            slots=slots.__getitem__,
        )

    change = price(Plan(_NOW, ((0, _THEN),)))
    wait = price(Plan(_NOW))
    if rise > 0:
        best = best_plan(
            rates,
            step_s,
            capacities.__getitem__,
            (_NOW, _THEN),
            _NOW,
            pause_s,
            model,
            backlog=queue.backlog,
            slots=slots.__getitem__,
        )
        if not (best.plan.restarts and best.plan.restarts[0][0] == 0) and best.cost.total < wait.total:
            wait = best.cost  # changing later (just before the rise) is the cheaper way to wait
    return Weighing(change, wait, steps * step_s, peak, queue)
