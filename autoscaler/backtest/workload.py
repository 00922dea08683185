"""What a job's history says about the job itself, whatever its parallelism: each vertex's capacity per
subtask and records out per record in, the rate data arrived at its sources, and what a restart cost.

A counterfactual rescale needs these to re-simulate the job at a parallelism it never ran at
(``autoscaler.backtest.world``), and the score needs them to tell whether a parallelism kept up
(``autoscaler.backtest.score``). They come from the recorded samples, between two fresh readings of one
job run (a restart resets Flink's counters):

- **capacity per subtask** of a vertex: records in per second over its busy fraction and parallelism,
  the median over the intervals where it was busy at least 5 % of the time (below that the busy time is
  mostly noise). A vertex never seen busy has no known limit (infinite capacity).
- **ratio**: records out per record in, the median (1 when never measured).
- **arrivals** at a source: records read plus the growth of its backlog per second. The data arrives
  at the external system whatever the job does, so this is the load every replayed world must carry.
- **restart cost**: from each rescale the live daemon sent to the job running again, the median; without
  one, the configuration's ``restart.time``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.backtest.history import JobHistory
from autoscaler.model import JobSample, JobTopology, VertexId

__all__ = ["Flow", "Workload", "estimate_workload"]

_MIN_BUSY = 0.05  # busy fraction below which an interval tells nothing of the capacity


@dataclass(frozen=True, slots=True)
class Flow:
    """How a job runs for one interval: each vertex's input rate, the share of the offered load it
    processes (``throttle`` < 1: back-pressured by ``bottleneck``), and each vertex's busy fraction."""

    inputs: Mapping[VertexId, float]  # records in per second
    busy: Mapping[VertexId, float]  # 0..1
    throttle: float  # processed over offered, 0..1
    bottleneck: VertexId | None


@dataclass(frozen=True, slots=True)
class Workload:
    """One job's vertices as the history measured them, and the load it had to carry."""

    topology: JobTopology
    capacity: Mapping[VertexId, float]  # records/s per subtask at 100 % busy (inf: unknown, no limit)
    ratio: Mapping[VertexId, float]  # records out per record in
    arrivals: Mapping[int, Mapping[VertexId, float]]  # by tick: records/s arriving at each source
    restart_ms: int

    @property
    def sources(self) -> list[VertexId]:
        return [vid for vid in self.topology.vertices if self.topology.is_source(vid)]

    _ticks: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ticks", tuple(sorted(self.arrivals)))

    def arrival(self, tick_ms: int) -> dict[VertexId, float]:
        """The sources' arrival rates at a tick of the history; between ticks, the last one's (the first
        one's before it)."""
        at = self.arrivals.get(tick_ms)
        if at is None and self._ticks:
            at = self.arrivals[self._ticks[max(0, bisect.bisect_right(self._ticks, tick_ms) - 1)]]
        return dict(at or {})

    def flow(self, parallelism: Mapping[VertexId, int], offered: Mapping[VertexId, float]) -> Flow:
        """The job at ``parallelism`` offered ``offered`` records/s at its sources: every vertex's input
        is what its upstream vertices put out; the vertex whose capacity is shortest throttles the whole
        job (back pressure reaches the sources), by the same share at every source."""
        rates = self.inputs(offered)
        throttle, bottleneck = 1.0, None
        for vid, rate in rates.items():
            limit = self.capacity[vid] * parallelism[vid]
            if rate > 0 and limit / rate < throttle:
                throttle, bottleneck = limit / rate, vid
        inputs = {vid: rate * throttle for vid, rate in rates.items()}
        busy = {vid: _busy(inputs[vid], self.capacity[vid] * parallelism[vid]) for vid in inputs}
        return Flow(inputs, busy, throttle, bottleneck)

    def keeps_up(self, parallelism: Mapping[VertexId, int], tick_ms: int) -> bool:
        """Whether the job at ``parallelism`` has the capacity for the tick's arrivals."""
        return self.flow(parallelism, self.arrival(tick_ms)).throttle >= 1.0

    def inputs(self, offered: Mapping[VertexId, float]) -> dict[VertexId, float]:
        """Each vertex's records in per second when its sources are offered ``offered`` and nothing
        throttles them (what its upstream vertices put out, by their ratios)."""
        out: dict[VertexId, float] = {}
        inputs: dict[VertexId, float] = {}
        for vid in self.topology.vertices:  # topological order
            ups = [e.source for e in self.topology.inputs(vid)]
            inputs[vid] = offered.get(vid, 0.0) if not ups else sum(out[u] for u in ups)
            out[vid] = inputs[vid] * self.ratio[vid]
        return inputs


def _busy(rate: float, limit: float) -> float:
    if math.isinf(limit):
        return 0.0
    return 1.0 if limit <= 0 else min(1.0, rate / limit)


def estimate_workload(history: JobHistory, default_restart_ms: int) -> Workload:
    """The workload the history shows (see the module's docstring)."""
    topology = history.samples[max(history.samples)].topology  # the graph as it last ran
    pairs = _fresh_pairs([history.samples[t] for t in sorted(history.samples)])
    capacity, ratio = {}, {}
    for vid in topology.vertices:
        per_subtask, per_record = [], []
        for a, b in pairs:
            va, vb = a.vertices.get(vid), b.vertices.get(vid)
            if va is None or vb is None:
                continue
            span_s = (b.ts_ms - a.ts_ms) / 1000
            d_in, d_out = vb.num_records_in - va.num_records_in, vb.num_records_out - va.num_records_out
            busy = vb.busy_time_ms_per_s / 1000
            p = b.topology.vertices[vid].parallelism if vid in b.topology.vertices else 0
            if d_in > 0 and busy >= _MIN_BUSY and p > 0:
                per_subtask.append(d_in / span_s / busy / p)
            if d_in > 0 and d_out >= 0:
                per_record.append(d_out / d_in)
        capacity[vid] = statistics.median(per_subtask) if per_subtask else math.inf
        ratio[vid] = statistics.median(per_record) if per_record else 1.0
    sources = [vid for vid in topology.vertices if topology.is_source(vid)]
    return Workload(
        topology,
        capacity,
        ratio,
        _arrivals(history, pairs, sources),
        _restart_ms(history) or default_restart_ms,
    )


def _fresh_pairs(samples: Sequence[JobSample]) -> list[tuple[JobSample, JobSample]]:
    """Consecutive fresh readings of one job run: the intervals counters can be differenced over."""
    fresh = [s for s in samples if not s.stale_ticks]
    return [
        (a, b)
        for a, b in itertools.pairwise(fresh)
        if b.ts_ms > a.ts_ms and a.running_since_ms == b.running_since_ms and a.job.job_id == b.job.job_id
    ]


def _arrivals(
    history: JobHistory, pairs: list[tuple[JobSample, JobSample]], sources: list[VertexId]
) -> dict[int, dict[VertexId, float]]:
    """Each source's arrival rate at every tick of the history: measured over the interval ending at
    the tick's reading, else the last one measured (the first measured before any)."""
    by_ts: dict[int, dict[VertexId, float]] = {}
    for a, b in pairs:
        span_s = (b.ts_ms - a.ts_ms) / 1000
        rates = {}
        for vid in sources:
            va, vb = a.vertices.get(vid), b.vertices.get(vid)
            if va is None or vb is None:
                continue
            d_in = vb.num_records_in - va.num_records_in
            d_lag = vb.pending_records - va.pending_records
            rate = (d_in + (d_lag if math.isfinite(d_lag) else 0.0)) / span_s
            if math.isfinite(rate):
                rates[vid] = max(0.0, rate)
        by_ts[b.ts_ms] = rates
    out: dict[int, dict[VertexId, float]] = {}
    last: dict[VertexId, float] = {}
    measured = [r for r in by_ts.values() if r]
    first = measured[0] if measured else {}
    for tick in history.ticks:
        sample = history.samples.get(tick)
        now = by_ts.get(sample.ts_ms, {}) if sample is not None else {}
        last = {**last, **now}
        out[tick] = {vid: last.get(vid, first.get(vid, 0.0)) for vid in sources}
    return out


def _restart_ms(history: JobHistory) -> int | None:
    """The median time from each of the live daemon's rescales to the job running again."""
    costs = []
    ordered = sorted(history.samples)
    for put_ms in history.puts:
        after = next(
            (
                history.samples[t]
                for t in ordered
                if t > put_ms and history.samples[t].running_since_ms >= put_ms
            ),
            None,
        )
        if after is not None:
            costs.append(after.running_since_ms - put_ms)
    return round(statistics.median(costs)) if costs else None
