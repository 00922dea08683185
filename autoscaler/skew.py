"""Slow subtasks and skew: which subtasks of a vertex work far harder than their peers, and why.

Flink's speculative execution calls a task slow when it runs longer than a baseline,
``max(median of its peers x multiplier, floor)`` (FLIP-168's slow-task detector). A streaming subtask
never finishes, so here the measure is its busy time (``busyTimeMsPerSecond``, Flink's 60 s gauge):
a subtask is slow when it is busy at least ``multiplier`` x the median of its vertex's subtasks and at
least ``floor`` ms/s (below that nothing waits on it).

The work is split so that a fleet of even vertices pays nothing:

1. **The skew figure**, for every vertex every tick, from the aggregates it is read with anyway:
   max / avg of busy time. 1 is even; p means all the busy time is on one of p subtasks.
2. **Whether a vertex can have a slow subtask at all**: only if its busiest subtask is at least the floor
   and at least ``multiplier`` x the least busy one (the median is never below the minimum). Only such
   a vertex has its subtasks read one by one (:mod:`autoscaler.collect.skew`).
3. **The slow list** from those values, and the cause: when the slow subtasks also receive at least
   ``multiplier`` x the median *records in*, the load itself sits on them — a hot key, which more
   parallelism cannot spread (the built-in ``hot-key-guard`` executor plugin acts on that). Otherwise
   they take longer for the same input: a slow TaskManager, or costlier records.

This module is plain values and arithmetic (no I/O, no model types), so the collector, the decision
record and the plugin share it and tests need nothing but numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SlowSubtask",
    "SlowSubtaskRule",
    "VertexSkew",
    "busy_skew",
    "judge",
    "worth_reading",
]


@dataclass(frozen=True, slots=True)
class SlowSubtaskRule:
    """``slow-subtasks.multiplier`` and ``slow-subtasks.busy-floor`` (ms of busy time per second)."""

    multiplier: float = 1.5
    floor_ms_per_s: float = 500.0

    def baseline(self, median_busy: float) -> float:
        """The busy time at and above which a subtask is slow."""
        return max(median_busy * self.multiplier, self.floor_ms_per_s)


@dataclass(frozen=True, slots=True)
class SlowSubtask:
    index: int  # the subtask index
    busy_ms_per_s: float
    records_in_per_s: float  # NaN: not reported


@dataclass(frozen=True, slots=True)
class VertexSkew:
    """One vertex's skew in one tick: the figure always, the slow subtasks when its subtasks were read."""

    skew: float  # max / avg busy time over subtasks; NaN: unknown (no busy time, or an idle vertex)
    parallelism: int = 1
    median_busy: float = math.nan  # NaN: the subtasks were not read one by one
    median_records_in: float = math.nan
    slow: tuple[SlowSubtask, ...] = ()
    hot_key: bool = False  # the slow subtasks also receive far more records: the load sits on them

    @property
    def read(self) -> bool:
        """Whether the subtasks were read one by one this tick."""
        return not math.isnan(self.median_busy)

    @property
    def slow_indices(self) -> tuple[int, ...]:
        return tuple(s.index for s in self.slow)

    def text(self, vertex_name: str) -> str:
        """One line for events, logs and ``explain``; empty without slow subtasks."""
        if not self.slow:
            return ""
        one = len(self.slow) == 1
        shown = self.slow[:8]
        more = f" and {len(self.slow) - 8} more" if len(self.slow) > 8 else ""
        indices = ", ".join(str(s.index) for s in shown) + more
        busy = ", ".join(f"{s.busy_ms_per_s:,.0f}" for s in shown)
        line = (
            f"{vertex_name}: subtask{'' if one else 's'} {indices} of {self.parallelism} "
            f"{'is' if one else 'are'} slow, busy {busy} ms/s against a median of {self.median_busy:,.0f}"
        )
        if not self.hot_key:
            whose = "its" if one else "their"
            return f"{line}; {whose} input is like the others': a slow TaskManager or costlier records"
        rates = ", ".join(f"{s.records_in_per_s:,.0f}" for s in shown)
        return (
            f"{line}; {'it receives' if one else 'they receive'} {rates} rec/s against a median of "
            f"{self.median_records_in:,.0f} ({self.load_share:.0%} of the vertex's records): a hot key, "
            "which more parallelism cannot spread"
        )

    @property
    def load_share(self) -> float:
        """The slow subtasks' share of the vertex's records in (NaN when unknown)."""
        rates = [s.records_in_per_s for s in self.slow]
        if not rates or any(math.isnan(r) for r in rates):
            return math.nan
        others = max(self.parallelism - len(self.slow), 0) * self.median_records_in
        total = math.fsum(rates) + others
        return math.fsum(rates) / total if total > 0 else math.nan


def busy_skew(max_busy: float, avg_busy: float) -> float:
    """max / avg busy time over a vertex's subtasks: 1 even, p all on one of p; NaN when unknown or idle."""
    if math.isnan(max_busy) or math.isnan(avg_busy) or avg_busy <= 0:
        return math.nan
    return max_busy / avg_busy


def worth_reading(parallelism: int, min_busy: float, max_busy: float, rule: SlowSubtaskRule) -> bool:
    """Whether a vertex can have a slow subtask: never misses one (the median is at least the min)."""
    if parallelism < 2 or math.isnan(min_busy) or math.isnan(max_busy):
        return False
    return max_busy >= rule.floor_ms_per_s and max_busy >= rule.multiplier * min_busy


def judge(
    skew: float,
    busy: Sequence[float],
    records_in: Sequence[float],
    rule: SlowSubtaskRule,
) -> VertexSkew:
    """The slow subtasks among ``busy`` (ms/s per subtask, by index; NaN: not reported) and their cause.

    ``records_in`` is each subtask's records-in rate (same indices; may be shorter or NaN where not
    reported): the slow subtasks are a hot key when each receives at least ``multiplier`` x the median.
    """
    parallelism = len(busy)
    known = [b for b in busy if not math.isnan(b)]
    if len(known) < 2:
        return VertexSkew(skew, parallelism)
    median_busy = statistics.median(known)
    baseline = rule.baseline(median_busy)
    inputs = [records_in[i] if i < len(records_in) else math.nan for i in range(parallelism)]
    known_in = [r for r in inputs if not math.isnan(r)]
    median_in = statistics.median(known_in) if known_in else math.nan
    slow = tuple(
        SlowSubtask(i, b, inputs[i]) for i, b in enumerate(busy) if not math.isnan(b) and b >= baseline
    )
    hot = bool(slow) and all(
        not math.isnan(s.records_in_per_s)
        and not math.isnan(median_in)
        and s.records_in_per_s > 0
        and s.records_in_per_s >= rule.multiplier * median_in
        for s in slow
    )
    return VertexSkew(skew, parallelism, median_busy, median_in, slow, hot)
