"""How a job fared: restarts, time below the needed capacity, time with its backlog above target, and
the slots it held.

Every world is scored the same way, tick by tick over the history's ticks, each tick counting for the
time since the one before: the live one (what actually happened: the recorded parallelism and backlog)
and each replayed configuration (recorded until it diverged, re-simulated after). "Below the needed
capacity" is judged by one model for all (``Workload.keeps_up``: the parallelism cannot carry the
tick's arrivals), and a job that is not running (restarting) is below it too. The backlog is above
target when the sources are further behind than ``lag_target``: backlog over arrival rate, in seconds.
A slot-hour is one slot held for an hour; a job holds one slot per subtask of the widest vertex of
each slot-sharing group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.backtest.workload import Workload
from autoscaler.model import JobTopology, VertexId

__all__ = ["Score", "Scorer", "Trace", "slots_of", "thin_trace"]

Trace = tuple[tuple[int, int, float], ...]
"""A world over time: (tick ms, slots held, backlog in records) per tick."""


@dataclass(frozen=True, slots=True)
class Score:
    """One world's totals over the history (per job, or summed over jobs)."""

    restarts: int = 0
    below_capacity_s: float = 0.0
    backlog_above_target_s: float = 0.0
    slot_hours: float = 0.0


def slots_of(topology: JobTopology, parallelism: Mapping[VertexId, int]) -> int:
    """Slots the job holds: per slot-sharing group, its widest vertex's parallelism."""
    widest: dict[str | None, int] = {}
    for v in topology:
        group = v.slot_sharing_group
        widest[group] = max(widest.get(group, 0), parallelism.get(v.id, v.parallelism))
    return sum(widest.values())


class Scorer:
    """Adds up one world's ticks."""

    def __init__(self, workload: Workload, lag_target_s: float, *, trace: bool = False) -> None:
        self.workload = workload
        # (tick, slots, backlog) of every tick, for the backtest's page; only when asked (a fleet's
        # replays would otherwise carry every tick of every world to the driver).
        self.trace: list[tuple[int, int, float]] | None = [] if trace else None
        self.lag_target_s = lag_target_s
        self.last_ms: int | None = None
        self.slots = 0
        self.backlog = 0.0
        self.restarts = 0
        self.below_s = self.behind_s = self.slot_s = 0.0

    def restart(self) -> None:
        self.restarts += 1

    def tick(
        self,
        tick_ms: int,
        parallelism: Mapping[VertexId, int] | None,
        backlog: float | None = None,
        slots: int | None = None,
    ) -> None:
        """The job at ``tick_ms``: running at ``parallelism`` (None: not running), its sources' backlog
        (records) and the slots it holds (None: as at the tick before: not read)."""
        span_s = 0.0 if self.last_ms is None else (tick_ms - self.last_ms) / 1000
        self.last_ms = tick_ms
        if slots is not None:
            self.slots = slots
        if backlog is not None:
            self.backlog = backlog
        backlog = self.backlog
        if self.trace is not None:
            self.trace.append((tick_ms, self.slots, backlog))
        self.slot_s += self.slots * span_s
        if parallelism is None or not self.workload.keeps_up(parallelism, tick_ms):
            self.below_s += span_s
        arriving = sum(self.workload.arrival(tick_ms).values())
        if backlog > 0 and (arriving <= 0 or backlog / arriving > self.lag_target_s):
            self.behind_s += span_s

    def traced(self) -> Trace:
        """The ticks seen so far (empty unless made with ``trace=True``)."""
        return tuple(self.trace or ())

    def score(self) -> Score:
        return Score(self.restarts, self.below_s, self.behind_s, self.slot_s / 3600)


def thin_trace(trace: Trace, limit: int) -> Trace:
    """At most ``limit`` points of ``trace``: consecutive ticks in equal runs, each run one point at its
    first tick with the most slots and the highest backlog it saw. A chart has no more pixels than
    that, and a short spike (a wide restart, a burst of backlog) stays visible rather than falling
    between two kept ticks."""
    if limit <= 0 or len(trace) <= limit:
        return trace
    size = -(-len(trace) // limit)  # ceiling: never more than ``limit`` runs
    out = []
    for i in range(0, len(trace), size):
        run = trace[i : i + size]
        out.append((run[0][0], max(p[1] for p in run), max(p[2] for p in run)))
    return tuple(out)
