"""One vertex's metrics: which listed names to ask for, and how its answer becomes a :class:`VertexSample`.

A vertex is read in one request of the names it listed; an answer without the required names (the lazy
metric fetcher's ``[]`` right after a (re)start) is :class:`MissingMetrics`, never a partial sample. The
rate arithmetic lives here too: sources' records read, lag and observed true processing rate, the
busy-time aggregator, and the idle sample of a finished vertex.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.metric_names import FlinkMetric, matching
from autoscaler.flink.models import AggregatedMetric, JobDetails
from autoscaler.model import NAN, JobTarget, JobTopology, VertexSample
from autoscaler.settings import BusyTimeAggregator

__all__ = [
    "FINISHED",
    "VERTEX_AGGREGATES",
    "MissingMetrics",
    "VertexQuery",
    "VertexRead",
    "finished_sample",
    "observed_true_processing_rate",
    "read_vertices",
]

log = structlog.get_logger(__name__)

FINISHED = "FINISHED"

VERTEX_AGGREGATES: tuple[str, ...] = ("min", "max", "avg", "sum")
# The subtask counter behind busyTimeMsPerSecond, aggregatable like it (min/max/avg/sum over subtasks).
# Not in FlinkMetric (the reference reads the summed job-details counter instead); optional: without it
# the evaluator falls back to the gauge.


class MissingMetrics(Exception):
    """A required metric is not (yet) reported; the tick is skipped as PARTIAL_METRICS."""


# --------------------------------------------------------------------------------------------- formulas
def observed_true_processing_rate(
    in_per_s: float, lag: float, backpressured_ms_per_s: float, lag_threshold_s: float
) -> float:
    """What a source really processes, measured only while it catches up (reference ``OBSERVED_TPR``).

    No input means no measurable limit (+inf, which allows scaling down). While the backlog is at least
    ``lag_threshold_s`` seconds of input, the source runs flat out except while back-pressured, so the
    rate divided by the unpressured fraction of time is its capacity. Otherwise it is not measured.
    """
    if math.isnan(in_per_s):
        return NAN
    if in_per_s == 0:
        return math.inf
    if math.isnan(lag) or lag < lag_threshold_s * in_per_s:
        return NAN
    if math.isnan(backpressured_ms_per_s) or backpressured_ms_per_s >= 1000.0:
        return NAN
    return in_per_s / (1.0 - backpressured_ms_per_s / 1000.0)


VertexRead = tuple["VertexQuery", Mapping[str, AggregatedMetric]]
"""A vertex's query and its answer."""


async def read_vertices(
    client: FlinkClient,
    job_id: str,
    topology: JobTopology,
    names: Mapping[str, Sequence[str]],
    vertex_ids: Sequence[str],
) -> tuple[dict[str, VertexRead], dict[str, MissingMetrics]]:
    """Query every vertex at once: the complete answers, and why the others are incomplete.

    Any other failure (HTTP, unreachable) is raised once every query has finished.
    """
    results = await asyncio.gather(
        *(_read_vertex(client, job_id, topology, vid, names[vid]) for vid in vertex_ids),
        return_exceptions=True,
    )
    read: dict[str, VertexRead] = {}
    missing: dict[str, MissingMetrics] = {}
    for vid, result in zip(vertex_ids, results, strict=True):
        if isinstance(result, MissingMetrics):
            missing[vid] = result
        elif isinstance(result, BaseException):
            raise result
        else:
            read[vid] = result
    return read, missing


async def _read_vertex(
    client: FlinkClient, job_id: str, topology: JobTopology, vid: str, listed: Sequence[str]
) -> VertexRead:
    query = VertexQuery.plan(topology, vid, listed)
    answer = await client.vertex_metrics(job_id, vid, query.names, VERTEX_AGGREGATES)
    query.check_answer(answer)
    return query, answer


def finished_sample(details: JobDetails, vid: str) -> VertexSample:
    io = details.vertex_io(vid)
    return VertexSample(
        busy_time_ms_per_s=0.0,
        backpressured_ms_per_s=0.0,
        num_records_in=io.read_records,
        num_records_out=io.write_records,
        accumulated_busy_time_ms=io.accumulated_busy_time_ms,
        num_records_in_per_s=0.0,
        pending_records=0.0 if details.topology().is_source(vid) else NAN,
    )


@dataclass(frozen=True, slots=True)
class VertexQuery:
    """Which listed names to ask for one vertex, and how to read the answer."""

    vertex_id: str
    vertex_name: str
    is_source: bool
    busy: str
    backpressure: str | None
    accumulated_busy: str | None  # accumulateBusyTimeMs when listed
    in_per_s: tuple[str, ...]  # sources: Source__*.numRecordsInPerSecond; others: numRecordsInPerSecond
    records_in: tuple[str, ...]  # sources: Source__*.numRecordsIn
    records_out: tuple[str, ...]  # sources: Source__*.numRecordsOut
    out_per_s: tuple[str, ...]  # sources: Source__*.numRecordsOutPerSecond
    pending: tuple[str, ...]  # sources: every *.pendingRecords

    @classmethod
    def plan(cls, topology: JobTopology, vid: str, listed: Sequence[str]) -> VertexQuery:
        """The query for the names the vertex listed; the same names give the same query, so it is
        planned once and reused (matching some 90 listed names against each metric, per vertex and
        tick, took 10 % of a 1,000-job tick's CPU)."""
        return _planned(vid, topology.vertices[vid].name, topology.is_source(vid), tuple(listed))

    @classmethod
    def _plan(cls, vid: str, name: str, source: bool, listed: tuple[str, ...]) -> VertexQuery:
        busy = matching(FlinkMetric.BUSY_TIME_PER_SEC, listed)
        backpressure = matching(FlinkMetric.BACKPRESSURE_TIME_PER_SEC, listed)
        if not busy:
            raise MissingMetrics(_missing(name, vid, "busyTimeMsPerSecond"))
        if source and not backpressure:
            raise MissingMetrics(_missing(name, vid, "backPressuredTimeMsPerSecond"))
        if source:
            in_per_s = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN_PER_SEC, listed)
            records_in = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN, listed)
            records_out = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_OUT, listed)
            out_per_s = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_OUT_PER_SEC, listed)
            pending = matching(FlinkMetric.PENDING_RECORDS, listed)
        else:
            in_per_s = matching(FlinkMetric.NUM_RECORDS_IN_PER_SEC, listed)
            records_in = records_out = out_per_s = pending = []
        return cls(
            vertex_id=vid,
            vertex_name=name,
            is_source=source,
            busy=busy[0],
            backpressure=backpressure[0] if backpressure else None,
            accumulated_busy=next(iter(matching(FlinkMetric.ACCUMULATED_BUSY_TIME, listed)), None),
            in_per_s=tuple(in_per_s),
            records_in=tuple(records_in),
            records_out=tuple(records_out),
            out_per_s=tuple(out_per_s),
            pending=tuple(pending),
        )

    @property
    def names(self) -> tuple[str, ...]:
        optional = tuple(n for n in (self.backpressure, self.accumulated_busy) if n)
        every = (
            self.busy,
            *optional,
            *self.in_per_s,
            *self.records_in,
            *self.records_out,
            *self.out_per_s,
            *self.pending,
        )
        return tuple(dict.fromkeys(every))

    def check_answer(self, answer: Mapping[str, AggregatedMetric]) -> None:
        """The lazy metric fetcher can answer ``[]`` (or miss names) right after a (re)start."""
        if self.busy not in answer:
            raise MissingMetrics(_missing(self.vertex_name, self.vertex_id, self.busy))
        if self.is_source and self.backpressure not in answer:
            raise MissingMetrics(_missing(self.vertex_name, self.vertex_id, "backPressuredTimeMsPerSecond"))

    def sample(
        self, answer: Mapping[str, AggregatedMetric], details: JobDetails, target: JobTarget
    ) -> VertexSample:
        io = details.vertex_io(self.vertex_id)
        aggregator = target.options.busy_time_aggregator
        busy = _by_aggregator(answer[self.busy], aggregator)
        backpressure = answer[self.backpressure].avg if self.backpressure in answer else NAN
        acc_busy = (
            _by_aggregator(answer[self.accumulated_busy], aggregator)
            if self.accumulated_busy in answer
            else NAN
        )
        in_per_s = _sum(answer, self.in_per_s)
        if not self.is_source:
            return VertexSample(
                busy_time_ms_per_s=busy,
                backpressured_ms_per_s=backpressure,
                num_records_in=io.read_records,
                num_records_out=io.write_records,
                accumulated_busy_time_ms=io.accumulated_busy_time_ms,
                num_records_in_per_s=in_per_s,
                accumulated_busy_time_agg_ms=acc_busy,
            )
        in_per_s = _unless_uncounted(in_per_s, _sum(answer, self.out_per_s))
        lag = self._lag(answer)
        return VertexSample(
            busy_time_ms_per_s=busy,
            backpressured_ms_per_s=backpressure,
            num_records_in=self._source_records_in(io.read_records, answer),
            num_records_out=io.write_records,
            accumulated_busy_time_ms=io.accumulated_busy_time_ms,
            num_records_in_per_s=in_per_s,
            pending_records=lag,
            observed_tpr=observed_true_processing_rate(
                in_per_s, lag, backpressure, target.options.observed_tpr_lag_threshold.total_seconds()
            ),
            accumulated_busy_time_agg_ms=acc_busy,
        )

    def _source_records_in(self, read_records: float, answer: Mapping[str, AggregatedMetric]) -> float:
        """A source reads from outside Flink, so ``read-records`` is 0; its operator counter tells."""
        if read_records != 0:
            return read_records
        records_out = _sum(answer, self.records_out) if self.records_out else NAN
        if self.records_in:
            return _unless_uncounted(_sum(answer, self.records_in), records_out)
        return records_out

    def _lag(self, answer: Mapping[str, AggregatedMetric]) -> float:
        if not self.pending:
            # As the reference does: a source without the gauge is taken as having no backlog.
            log.debug("source_without_pending_records", vertex=self.vertex_name, vertex_id=self.vertex_id)
            return 0.0
        return _sum(answer, self.pending)


def _unless_uncounted(records_in: float, records_out: float) -> float:
    """A source reader that never counts ``numRecordsIn`` (any not built on ``SourceReaderBase``)
    reports 0 while it emits: then what it emitted is what it read. The reference would see an idle
    source and never scale it."""
    return records_out if records_in == 0 and records_out > 0 else records_in


def _by_aggregator(metric: AggregatedMetric, aggregator: BusyTimeAggregator) -> float:
    if aggregator is BusyTimeAggregator.AVG:
        return metric.avg
    if aggregator is BusyTimeAggregator.MIN:
        return metric.min
    return metric.max


def _sum(answer: Mapping[str, AggregatedMetric], names: Iterable[str]) -> float:
    """Sum of the ``sum`` aggregates; NaN if nothing to sum or any part is NaN or missing."""
    parts = [answer[n].sum if n in answer else NAN for n in names]
    return math.fsum(parts) if parts and not any(math.isnan(p) for p in parts) else NAN


@functools.lru_cache(maxsize=65_536)  # 5,000 jobs x 10 vertices, and room for names that changed
def _planned(vid: str, name: str, source: bool, listed: tuple[str, ...]) -> VertexQuery:
    return VertexQuery._plan(vid, name, source, listed)


def _missing(vertex_name: str, vid: str, metric: str) -> str:
    return f"vertex {vertex_name} ({vid}): no {metric} yet"
