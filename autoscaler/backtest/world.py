"""The job as it would have run once a replay asked Flink for something the live daemon did not.

From that tick on the recorded samples describe another job (the live one, at its own parallelism), so
the replay reads this model instead: it starts from the last recorded reading (parallelism, counters,
backlog), carries the recorded arrivals (``Workload.arrival``), and at the parallelism the replay asked
for re-computes every vertex's throughput, busy and back-pressured time and the sources' backlog, tick
by tick (``Workload.flow``). A rescale restarts the job: for the restart cost it processes nothing (no
sample: the daemon finds it not running) while data keeps arriving, then it runs from a new
``running_since`` with Flink's counters back at zero.

What it does not model, and the replayed decisions do not see: skew between subtasks, TaskManager memory
and CPU (the recorded values are carried over), custom metrics, and a source's observed true processing
rate (NaN: the busy-time rate stands in, as it does by default). Flink runs the parallelism asked for
(capped by the vertex's max parallelism), free slots permitting or not.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import replace

from autoscaler.backtest.workload import Workload
from autoscaler.model import JobSample, JobTopology, VertexId, VertexSample

__all__ = ["World"]

_METER_MS = 60_000  # Flink's numRecordsInPerSecond is a 60 s meter


class World:
    """One job re-simulated from ``start`` (the last recorded reading) at ``start_ms`` on."""

    def __init__(self, workload: Workload, start: JobSample, start_ms: int) -> None:
        self.workload = workload
        self.template = start
        self.topology: JobTopology = start.topology
        self.parallelism: dict[VertexId, int] = dict(start.topology.parallelisms)
        self.running_since_ms = start.running_since_ms
        self.now_ms = start_ms
        self.backlog = {vid: _finite(start.vertices[vid].pending_records) for vid in workload.sources}
        self.counters = {vid: _Counters.of(start.vertices[vid]) for vid in self.topology.vertices}
        self.meter: dict[VertexId, deque[tuple[int, float]]] = {
            vid: deque() for vid in self.topology.vertices
        }
        self.restart_until_ms: int | None = None  # while restarting: when it runs again
        self.requested: dict[VertexId, int] | None = None

    @property
    def running(self) -> bool:
        return self.restart_until_ms is None

    def put(self, tick_ms: int, upper: Mapping[VertexId, int]) -> None:
        """The replay asked Flink for ``upper`` at ``tick_ms``: the job restarts at that parallelism."""
        self.requested = {
            vid: max(1, min(upper.get(vid, p), self.topology.vertices[vid].max_parallelism))
            for vid, p in self.parallelism.items()
        }
        self.restart_until_ms = tick_ms + self.workload.restart_ms

    def advance(self, tick_ms: int, template: JobSample | None) -> JobSample | None:
        """Run the job up to ``tick_ms`` and read it: the sample the daemon would have had, None while it
        restarts. ``template`` is the recorded reading of the tick, for what the model carries over."""
        start, self.now_ms = self.now_ms, tick_ms
        if self.restart_until_ms is not None:
            restart_end = self.restart_until_ms
            if tick_ms < restart_end:
                self._idle(tick_ms - start)
                return None
            self._idle(restart_end - start)
            self._restarted(restart_end)
            start = restart_end
        self._run(start, tick_ms)
        return self._sample(tick_ms, template or self.template)

    def total_backlog(self) -> float:
        return sum(self.backlog.values())

    # ------------------------------------------------------------------ dynamics
    def _idle(self, span_ms: int) -> None:
        arrival = self.workload.arrival(self.now_ms)
        for vid in self.backlog:
            self.backlog[vid] += arrival.get(vid, 0.0) * span_ms / 1000

    def _restarted(self, at_ms: int) -> None:
        assert self.requested is not None
        self.parallelism, self.requested, self.restart_until_ms = self.requested, None, None
        self.running_since_ms = at_ms
        self.counters = {vid: _Counters() for vid in self.topology.vertices}
        self.meter = {vid: deque() for vid in self.topology.vertices}
        vertices = {
            vid: replace(v, parallelism=self.parallelism[vid]) for vid, v in self.topology.vertices.items()
        }
        self.topology = replace(self.topology, vertices=vertices)

    def _run(self, start_ms: int, end_ms: int) -> None:
        span_s = (end_ms - start_ms) / 1000
        if span_s <= 0:
            return
        arrival = self.workload.arrival(end_ms)
        # Offered: what arrives plus the backlog, all of it if the job can take it within the interval.
        offered = {vid: arrival.get(vid, 0.0) + self.backlog[vid] / span_s for vid in self.backlog}
        flow = self.workload.flow(self.parallelism, offered)
        for vid in self.backlog:
            taken = offered[vid] * flow.throttle * span_s
            self.backlog[vid] = max(0.0, self.backlog[vid] + arrival.get(vid, 0.0) * span_s - taken)
        pressured = _upstream_of(self.topology, flow.bottleneck) if flow.throttle < 1 else set()
        for vid, c in self.counters.items():
            rate, busy = flow.inputs[vid], flow.busy[vid]
            c.records_in += rate * span_s
            c.records_out += rate * self.workload.ratio[vid] * span_s
            c.busy_ms += busy * 1000 * span_s * self.parallelism[vid]
            c.busy_agg_ms += busy * 1000 * span_s
            c.busy = busy
            c.pressured = (1 - busy) if vid in pressured else 0.0
            self.meter[vid].append((end_ms, rate))
            while self.meter[vid] and self.meter[vid][0][0] <= end_ms - _METER_MS:
                self.meter[vid].popleft()

    def _sample(self, tick_ms: int, template: JobSample) -> JobSample:
        vertices = {}
        for vid, c in self.counters.items():
            meter = self.meter[vid]
            recorded_lag = template.vertices[vid].pending_records if vid in template.vertices else math.nan
            lag = self.backlog[vid] if vid in self.backlog and not math.isnan(recorded_lag) else math.nan
            vertices[vid] = VertexSample(
                busy_time_ms_per_s=c.busy * 1000,
                backpressured_ms_per_s=c.pressured * 1000,
                num_records_in=c.records_in,
                num_records_out=c.records_out,
                accumulated_busy_time_ms=c.busy_ms,
                num_records_in_per_s=sum(r for _, r in meter) / len(meter) if meter else 0.0,
                pending_records=lag,
                observed_tpr=math.nan,
                accumulated_busy_time_agg_ms=c.busy_agg_ms,
            )
        return JobSample(
            target=template.target,
            ts_ms=tick_ms,
            running_since_ms=self.running_since_ms,
            topology=self.topology,
            vertices=vertices,
            taskmanagers=template.taskmanagers,
            num_source_partitions=template.num_source_partitions,
        )


class _Counters:
    """A vertex's cumulative counters and last gauges, summed over its subtasks."""

    __slots__ = ("busy", "busy_agg_ms", "busy_ms", "pressured", "records_in", "records_out")

    def __init__(self) -> None:
        self.records_in = self.records_out = self.busy_ms = self.busy_agg_ms = 0.0
        self.busy = self.pressured = 0.0

    @classmethod
    def of(cls, v: VertexSample) -> _Counters:
        c = cls()
        c.records_in, c.records_out = _finite(v.num_records_in), _finite(v.num_records_out)
        c.busy_ms, c.busy_agg_ms = (
            _finite(v.accumulated_busy_time_ms),
            _finite(v.accumulated_busy_time_agg_ms),
        )
        return c


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def _upstream_of(topology: JobTopology, vid: VertexId | None) -> set[VertexId]:
    """Every vertex with a path to ``vid``: back pressure reaches them all."""
    found: set[VertexId] = set()
    todo = [vid] if vid is not None else []
    while todo:
        for e in topology.inputs(todo.pop()):
            if e.source not in found:
                found.add(e.source)
                todo.append(e.source)
    return found
