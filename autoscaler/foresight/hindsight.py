"""The best plan in hindsight: knowing the whole offered load, the parallelisms that cost least.

The yardstick for every autoscaler (issue 38): no decision made without knowing the future can cost
less than this plan, so a profile's regret (its cost / this one's) says how much better it could still
do. Cost is :func:`autoscaler.foresight.cost.price`, the same function that prices a real run.

The model. The load is one offered rate per step of ``step_s`` seconds; a step is judged at its end, at
the backlog then and the rate offered then (the next step's), as a reading of a real run taken at that
instant is, so a plan and a run are priced alike. A plan runs the job at one parallelism at a time;
``capacity(p)`` is the records/s it processes at ``p`` (the simulator's is linear in ``p`` for the
bottleneck vertex). Running, a step processes what is waiting and what arrives, up to the capacity; the
rest is backlog. A restart to another parallelism may begin at any step the job is running: for
``pause_s`` (rounded up to whole steps) it holds its old slots and processes nothing, then runs at the
new parallelism. Restarts may follow each other without a gap (Flink's cooldown after a rescale is not
modelled: at the default prices two restarts within 30 s never pay).

The search: dynamic programming over time and parallelism. The backlog is continuous, so a state
``(t, p)`` keeps every path into it that no other path beats on both cost so far and backlog: the cost
still to come never falls as the backlog grows (the backlog's next value and :func:`above_target` are
both non-decreasing in it), so a path with no less cost and no less backlog than another can be
dropped, and the search is exact as long as no such Pareto front is cut. A front longer than
``max_labels`` is cut to that many labels spread over it (the cheapest and the least backlogged
kept), and the result then says it is not exact (:attr:`BestPlan.exact`). With ``max_labels=1`` it is
the classic "best path into each state" approximation.

How far from exact, measured against brute force over every plan (``tests/unit/foresight/
test_hindsight.py``, and 3,000 random instances of up to 7 steps and 3 levels): with no front cut the
search found the true optimum every time (asserted); cut to one label it was above the optimum on
4.7 % of the instances, by up to 7.5 times (a path kept for its lower cost whose larger backlog later
costs lag), to two labels on 1.2 % by up to 4.3 times, to four on 0.1 % by up to 1.01 times. Whatever
it keeps, it is never below the optimum: every answer is re-priced as the real plan it is.

Its work grows with steps x levels x labels x (levels + pause steps). Measured on 2-hour traces at 1 s
steps over 8 levels with a 10 s pause (noise, sine, bursts, a step): the fronts stayed within 40 labels,
so exact, in 1.0-2.2 s of plain Python each (0.4 s with one label).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoscaler.foresight.cost import Cost, CostModel, Interval, above_target, price

__all__ = ["DEFAULT_MAX_LABELS", "BestPlan", "Plan", "best_plan", "pause_steps", "plan_cost", "run_plan"]

DEFAULT_MAX_LABELS = 64
"""Paths kept per state before the search stops being exact (it says so when it happens)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A sequence of parallelisms: ``start`` at step 0, then each ``(step, parallelism)`` a restart
    that begins at that step (the job runs at the new parallelism once the pause is over)."""

    start: int
    restarts: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class BestPlan:
    """The plan that costs least in hindsight, its cost (re-priced with :func:`plan_cost`), whether the
    search was exact (no Pareto front cut), and the longest front it kept."""

    plan: Plan
    cost: Cost
    exact: bool
    widest_front: int


def pause_steps(pause_s: float, step_s: float) -> int:
    """Whole steps a restart pauses for: ``pause_s`` rounded up, and at least one (no restart is free of
    time, and a step is the finest the plan sees)."""
    if step_s <= 0 or not math.isfinite(step_s):
        raise ValueError(f"the step must be > 0 s: {step_s}")
    if pause_s < 0 or not math.isfinite(pause_s):
        raise ValueError(f"the restart pause must be >= 0 s: {pause_s}")
    return max(1, math.ceil(pause_s / step_s - 1e-9))


def run_plan(
    plan: Plan,
    rates: Sequence[float],
    step_s: float,
    capacity: Callable[[int], float],
    pause_s: float,
    backlog: float = 0.0,
    slots: Callable[[int], int] | None = None,
) -> list[Interval]:
    """What ``plan`` does to the job, step by step (the truth :func:`plan_cost` prices).

    Raises ValueError for a plan that cannot run: a restart during another's pause, one whose pause
    does not end within the load, out of order, or to the parallelism it already runs at. ``slots(p)``:
    the slots the job holds at ``p`` (``p`` itself when None)."""
    held = slots or _same
    k = pause_steps(pause_s, step_s)
    restarts = dict(plan.restarts)
    if len(restarts) != len(plan.restarts):
        raise ValueError("two restarts begin at one step")
    out: list[Interval] = []
    p = plan.start
    t = 0
    ends = _end_rates(rates)
    while t < len(rates):
        q = restarts.pop(t, None)
        if q is None:
            c = capacity(p)
            a = rates[t] * step_s
            backlog = backlog + a - min(backlog + a, c * step_s)
            out.append(Interval(step_s, held(p), ends[t], c, backlog))
            t += 1
            continue
        if q == p:
            raise ValueError(f"a restart at step {t} to the parallelism it runs at ({p})")
        if t + k > len(rates):
            raise ValueError(f"the restart at step {t} does not end within the load")
        for j in range(t, t + k):
            backlog += rates[j] * step_s
            out.append(Interval(step_s, held(p), ends[j], 0.0, backlog))
        p, t = q, t + k
    if restarts:
        raise ValueError(f"restarts at steps the plan does not run: {sorted(restarts)}")
    return out


def plan_cost(
    plan: Plan,
    rates: Sequence[float],
    step_s: float,
    capacity: Callable[[int], float],
    pause_s: float,
    model: CostModel,
    backlog: float = 0.0,
    slots: Callable[[int], int] | None = None,
) -> Cost:
    """What ``plan`` costs over ``rates``: :func:`price` of :func:`run_plan`."""
    intervals = run_plan(plan, rates, step_s, capacity, pause_s, backlog, slots)
    return price(intervals, len(plan.restarts), model)


def _same(p: int) -> int:
    return p


def _end_rates(rates: Sequence[float]) -> list[float]:
    """The offered rate at each step's end (the next step's; the last step's own): what an interval is
    judged by, as a reading taken at that instant is."""
    return [*rates[1:], rates[-1]] if rates else []


# A label: (cost so far, backlog, the label it came from as (step, level index, label index), or None).
_Label = tuple[float, float, tuple[int, int, int] | None]


def best_plan(
    rates: Sequence[float],
    step_s: float,
    capacity: Callable[[int], float],
    levels: Sequence[int],
    start: int,
    pause_s: float,
    model: CostModel,
    *,
    backlog: float = 0.0,
    slots: Callable[[int], int] | None = None,
    max_labels: int = DEFAULT_MAX_LABELS,
) -> BestPlan:
    """The cheapest plan over ``rates`` that starts running at ``start`` with ``backlog`` waiting and
    moves among ``levels`` (the parallelisms allowed; ``start`` need not be one of them, but a restart
    always goes to one). ``slots(p)``: the slots held at ``p`` (``p`` itself when None), for a job
    whose levels are not its slot counts."""
    if max_labels < 1:
        raise ValueError(f"max_labels must be >= 1: {max_labels}")
    held = slots or _same
    if any(held(p) < 0 for p in (start, *levels)):
        raise ValueError("a level cannot hold fewer than 0 slots")
    if any(not math.isfinite(r) or r < 0 for r in rates):
        raise ValueError("offered rates must be finite and >= 0")
    grid = sorted(set(levels) | {start})
    n = len(grid)
    caps = [capacity(p) for p in grid]
    widths = [held(p) for p in grid]
    k = pause_steps(pause_s, step_s)
    steps = len(rates)
    arrivals = [r * step_s for r in rates]
    ends = _end_rates(rates)
    slot_price, lag_price = model.slot_second * step_s, model.lag_second * step_s
    allowed = set(levels)
    targets = [i for i, p in enumerate(grid) if p in allowed]

    fronts: list[list[list[_Label]]] = [[[] for _ in range(n)] for _ in range(steps + 1)]
    fronts[0][grid.index(start)].append((0.0, backlog, None))
    exact = True
    widest = 1
    for t in range(steps):
        a, rate = arrivals[t], ends[t]
        pause_end = t + k
        for i in range(n):
            front, cut = _pareto(fronts[t][i], max_labels)
            exact = exact and not cut
            fronts[t][i] = front
            widest = max(widest, len(front))
            width, c = widths[i], caps[i]
            for j, (cost, b, _) in enumerate(front):
                here = (t, i, j)
                # Run one step at p.
                nb = b + a - min(b + a, c * step_s)
                step_cost = width * slot_price + (lag_price if above_target(nb, rate, c, model) else 0.0)
                fronts[t + 1][i].append((cost + step_cost, nb, here))
                # Or begin a restart: the pause's cost does not depend on where it goes.
                if pause_end > steps:
                    continue
                pb, pc = b, cost + model.restart
                for u in range(t, pause_end):
                    pb += arrivals[u]
                    pc += width * slot_price + (lag_price if above_target(pb, ends[u], 0.0, model) else 0.0)
                for q in targets:
                    if q != i:
                        fronts[pause_end][q].append((pc, pb, here))
    for i in range(n):
        fronts[steps][i] = _pareto(fronts[steps][i], max_labels)[0]
    # The start label reaches the end along the plan that never restarts, so there is always one.
    _, i, j = min((label[0], i, j) for i in range(n) for j, label in enumerate(fronts[steps][i]))
    plan = _trace_back(fronts, grid, steps, i, j, start)
    cost = plan_cost(plan, rates, step_s, capacity, pause_s, model, backlog, slots)
    return BestPlan(plan, cost, exact, widest)


def _pareto(labels: list[_Label], keep: int) -> tuple[list[_Label], bool]:
    """The labels no other beats on both cost and backlog, cheapest first; at most ``keep`` of them,
    spread over the front (its two ends always kept), and whether the front had to be cut for that."""
    if len(labels) <= 1:
        return labels, False
    front: list[_Label] = []
    least = math.inf
    for label in sorted(labels, key=lambda x: (x[0], x[1])):
        if label[1] < least:
            front.append(label)
            least = label[1]
    if len(front) <= keep:
        return front, False
    if keep == 1:
        return front[:1], True
    last = len(front) - 1
    picks = sorted({round(m * last / (keep - 1)) for m in range(keep)})
    return [front[m] for m in picks], True


def _trace_back(
    fronts: list[list[list[_Label]]], grid: Sequence[int], t: int, i: int, j: int, start: int
) -> Plan:
    """Follow the parents from the cheapest end back to step 0; a jump to another level is a restart."""
    restarts: list[tuple[int, int]] = []
    while True:
        parent = fronts[t][i][j][2]
        if parent is None:
            break
        pt, pi, pj = parent
        if pi != i:
            restarts.append((pt, grid[i]))
        t, i, j = pt, pi, pj
    return Plan(start, tuple(reversed(restarts)))
