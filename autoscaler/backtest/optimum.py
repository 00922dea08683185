"""The best plan in hindsight for one job's recorded arrivals: what a configuration's regret is against.

Knowing every arrival of the history (``Workload.arrival``, the load every world carries), the plan
that costs least (``autoscaler.foresight.hindsight``), priced like every world: the slots it holds, its
restarts, and the seconds its sources are further behind than the lag target.

The job's sizes. A plan moves the whole job between sizes: size ``k`` carries ``k`` times the
throughput one subtask of its bottleneck carries (the vertex whose capacity per subtask, over the
records it receives per record offered, is least), with every vertex at the smallest parallelism that
carries it (capped by its max parallelism), and holds those vertices' slots (``slots_of``). The
offered load is the sum over the sources, spread over them as on average over the history. Size 0 is
the job as it started, at its recorded parallelism and with its recorded backlog. Vertices whose
capacity the history never measured (never busy) limit nothing. A restart pauses the job for the
workload's restart time, as in a replay.

The steps. The history's ticks are irregular, the plan's steps are not: a step is the history's
median tick interval, longer for a long history so that there are at most ``max_steps`` of them (the
search grows with steps x sizes^2). Each step carries the arrivals at its end, as the scorer counts
each tick for the time since the one before. A plan therefore restarts on the step grid only, which
can cost it a step of lag or slots a finer grid would save; its cost is still a real plan's. On the
grid it is exact unless a Pareto front grows past 64 paths (``hindsight.DEFAULT_MAX_LABELS``); then its
cost is still a real plan's, never below the optimum, possibly above it. Measured: 5.5 hours of 10 s ticks
over 7 sizes, the load stepping every 50 min with noise, exact (the widest front 29 paths) in 0.5 s;
a synthetic day of a 10-vertex job (``bench/history_gen.py``) in 2,000 steps of 43 s, 2.7-3.4 s, two
of three exact and one cut.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.backtest.history import JobHistory
from autoscaler.backtest.score import Trace, slots_of
from autoscaler.backtest.workload import Workload
from autoscaler.foresight.cost import CostModel
from autoscaler.foresight.hindsight import BestPlan, best_plan, run_plan
from autoscaler.model import VertexId

__all__ = ["Hindsight", "best_in_hindsight"]

MAX_STEPS = 2000
MAX_SIZES = 32


@dataclass(frozen=True, slots=True)
class Hindsight:
    """The best plan for a job's history, at ``step_s`` steps, and what it means in the report's terms."""

    best: BestPlan
    step_s: float
    below_capacity_s: float  # seconds its capacity was below the arrivals (restarts included)
    final_slots: int
    trace: Trace = ()  # each step's end: (ms, slots held, backlog), as a world's ticks
    restarts_ms: tuple[int, ...] = ()  # when each of its restarts begins


def best_in_hindsight(
    history: JobHistory, workload: Workload, model: CostModel, *, max_steps: int = MAX_STEPS
) -> Hindsight | None:
    """The best plan for ``history`` (see the module's docstring); None when there is nothing to plan:
    a history of one tick, no arrivals, or no vertex whose capacity is known."""
    ticks = history.ticks
    span_ms = ticks[-1] - ticks[0]
    gaps = [b - a for a, b in itertools.pairwise(ticks) if b > a]
    if span_ms <= 0 or not gaps:
        return None
    step_ms = max(statistics.median(gaps), span_ms / max_steps)
    steps = max(1, round(span_ms / step_ms))
    step_ms = span_ms / steps
    at = [round(ticks[0] + (t + 1) * step_ms) for t in range(steps)]
    rates = [sum(workload.arrival(ms).values()) for ms in at]
    sizes = _Sizes.of(history, workload, max(rates))
    if sizes is None:
        return None
    start = history.first
    backlog = sum(
        v.pending_records
        for vid, v in start.vertices.items()
        if vid in workload.sources and math.isfinite(v.pending_records)
    )
    step_s = step_ms / 1000
    pause_s = workload.restart_ms / 1000
    best = best_plan(
        rates,
        step_s,
        sizes.capacity,
        levels=range(1, sizes.largest + 1),
        start=0,
        pause_s=pause_s,
        model=model,
        backlog=backlog,
        slots=sizes.slots,
    )
    intervals = run_plan(best.plan, rates, step_s, sizes.capacity, pause_s, backlog, sizes.slots)
    below = sum(i.seconds for i in intervals if i.capacity < i.rate)
    trace = tuple((ms, i.slots, i.backlog) for ms, i in zip(at, intervals, strict=True))
    begins = tuple(round(ticks[0] + step * step_ms) for step, _ in best.plan.restarts)
    return Hindsight(best, step_s, below, intervals[-1].slots if intervals else sizes.slots(0), trace, begins)


@dataclass(frozen=True, slots=True)
class _Sizes:
    """The job's sizes: each one's capacity (records/s offered it carries) and slots; 0 as it started."""

    capacities: tuple[float, ...]
    widths: tuple[int, ...]

    @property
    def largest(self) -> int:
        return len(self.capacities) - 1

    def capacity(self, k: int) -> float:
        return self.capacities[k]

    def slots(self, k: int) -> int:
        return self.widths[k]

    @staticmethod
    def of(history: JobHistory, workload: Workload, peak: float) -> _Sizes | None:
        totals: dict[VertexId, float] = dict.fromkeys(workload.sources, 0.0)
        for tick in history.ticks:
            for vid, rate in workload.arrival(tick).items():
                totals[vid] = totals.get(vid, 0.0) + rate
        offered = sum(totals.values())
        if offered <= 0:
            return None
        per_unit = workload.inputs({vid: rate / offered for vid, rate in totals.items()})
        known = {
            vid: workload.capacity[vid]
            for vid, rate in per_unit.items()
            if rate > 0 and math.isfinite(workload.capacity[vid])
        }
        if not known:
            return None
        unit = min(cap / per_unit[vid] for vid, cap in known.items())
        topology = workload.topology

        def carries(parallelism: Mapping[VertexId, int]) -> float:
            return min(known[vid] * parallelism[vid] / per_unit[vid] for vid in known)

        first = history.first.topology.parallelisms
        started = {vid: first.get(vid, v.parallelism) for vid, v in topology.vertices.items()}
        capacities, widths = [carries(started)], [slots_of(topology, started)]
        largest = min(MAX_SIZES, max(1, math.ceil(peak / unit)) + 1)
        for k in range(1, largest + 1):
            need = k * unit
            parallelism = {
                vid: min(
                    v.max_parallelism,
                    max(1, math.ceil(need * per_unit[vid] / known[vid] - 1e-9) if vid in known else 1),
                )
                for vid, v in topology.vertices.items()
            }
            capacities.append(carries(parallelism))
            widths.append(slots_of(topology, parallelism))
        return _Sizes(tuple(capacities), tuple(widths))
