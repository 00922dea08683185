"""A job's decisions and load over time as one value: what ``explain --html`` draws.

:func:`job_timeline` is pure: a job's decision records (and, where the archive is configured, its
archived samples) in, a :class:`JobTimeline` out. The drawing (``explain/html.py``) takes only that
value, so what the picture says is tested here with plain values and the picture with a timeline.

Two sources, one shape. The archive holds every tick's sample, so with it each point is one reading
of Flink's counters: the offered load is what arrived at the sources (records read plus the backlog's
growth, per second between two readings), the capacity is what the job could have carried at the
parallelism it ran (the records it read over the busiest vertex's busy fraction: a vertex busy half the
time could carry twice as much), the lag is the sources' pending records. Without an archive the
points are the decision records' own (the daemon keeps a job's last ``decision_history``, a run of
ticks that decided the same counting as one): the evaluation's rates at each decision, the capacity
being the offered load scaled by the tightest vertex's true processing rate over its target rate.
:attr:`JobTimeline.source` says which, and the page says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from autoscaler.explain.records import DecisionRecord, VertexRecord
from autoscaler.model import JobSample, VertexSample

__all__ = [
    "ARCHIVE",
    "MAX_POINTS",
    "MIN_BUSY",
    "RECORDS",
    "DecisionMark",
    "JobTimeline",
    "TimelinePoint",
    "job_timeline",
    "points_from_records",
    "points_from_samples",
    "thin",
]

ARCHIVE, RECORDS = "archive", "decision records"
MIN_BUSY = 0.05
"""A busiest vertex busy less than this tells no capacity (idle time says nothing of a limit)."""
MAX_POINTS = 2000
"""Points a timeline keeps at most: a week of 10 s ticks is 60,000 readings, more than a chart's pixels
and megabytes of SVG; :func:`thin` keeps every rescale and each stretch's highest backlog."""


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """The job at one instant. Rates in records/s at the sources, lag in records; None: not known."""

    ts_ms: int
    offered: float | None
    capacity: float | None
    lag: float | None
    parallelism: Mapping[str, int] = field(default_factory=dict)  # vertex name -> parallelism


@dataclass(frozen=True, slots=True)
class DecisionMark:
    """One decision record as the chart marks it and the table lists it."""

    ts_ms: int
    first_ms: int  # the first tick of the run of ticks it stands for
    ticks: int
    outcome: str  # a Reason value
    scaled: bool
    detail: str
    changes: tuple[tuple[str, int, int], ...]  # (vertex name, from, to) of what it decided
    record: DecisionRecord  # the whole record, for its forecast and gates

    @property
    def scale_up(self) -> bool:
        return any(to > before for _, before, to in self.changes)

    @property
    def held(self) -> bool:
        """Changes were wanted and not made (a gate, the slots, a plugin held them)."""
        return bool(self.changes) and not self.scaled


@dataclass(frozen=True, slots=True)
class JobTimeline:
    job_key: str
    job_id: str
    source: str  # ARCHIVE or RECORDS: where the points come from
    points: tuple[TimelinePoint, ...]
    marks: tuple[DecisionMark, ...]
    thinned_from: int | None = None  # the points there were before :func:`thin`, when it dropped some

    @property
    def vertices(self) -> tuple[str, ...]:
        """Every vertex name the points hold, in the order first seen."""
        return tuple(dict.fromkeys(name for p in self.points for name in p.parallelism))

    @property
    def span_ms(self) -> tuple[int, int] | None:
        times = [p.ts_ms for p in self.points] + [m.ts_ms for m in self.marks]
        return (min(times), max(times)) if times else None


def job_timeline(
    records: Sequence[DecisionRecord], samples: Sequence[JobSample] = (), *, max_points: int = MAX_POINTS
) -> JobTimeline:
    """A job's timeline: its decision records marked, the points from ``samples`` when there are any,
    else from the records, at most ``max_points`` of them. ``records`` must be one job's, at least one."""
    if not records:
        raise ValueError("a timeline needs at least one decision record")
    ordered = sorted(records, key=lambda r: r.ts_ms)
    newest = ordered[-1]
    points = points_from_samples(samples)
    source = ARCHIVE if points else RECORDS
    if not points:
        points = points_from_records(ordered)
    kept = thin(points, max_points)
    return JobTimeline(
        job_key=newest.job_key,
        job_id=newest.job_id,
        source=source,
        points=kept,
        marks=tuple(_mark(r) for r in ordered),
        thinned_from=len(points) if len(kept) < len(points) else None,
    )


def thin(points: Sequence[TimelinePoint], limit: int) -> tuple[TimelinePoint, ...]:
    """At most about ``limit`` points: of each run of consecutive points, the one with the highest
    backlog (a peak is what the eye looks for), and every point where the parallelism changed (a
    rescale stays exactly where it was), the first and the last."""
    if len(points) <= limit:
        return tuple(points)
    step = -(-len(points) // max(limit - 2, 1))
    keep = {0, len(points) - 1}
    keep |= {i for i in range(1, len(points)) if points[i].parallelism != points[i - 1].parallelism}
    for start in range(0, len(points), step):
        chunk = range(start, min(start + step, len(points)))
        keep.add(max(chunk, key=lambda i: -1.0 if points[i].lag is None else points[i].lag))
    return tuple(points[i] for i in sorted(keep))


def _mark(record: DecisionRecord) -> DecisionMark:
    changes = tuple(
        (v.name, v.parallelism, v.decided)
        for v in record.vertices
        if v.decided is not None and v.decided != v.parallelism
    )
    return DecisionMark(
        ts_ms=record.ts_ms,
        first_ms=record.first_ms,
        ticks=record.ticks,
        outcome=record.outcome,
        scaled=record.scaled,
        detail=record.detail,
        changes=changes,
        record=record,
    )


# ---------------------------------------------------------------------------------------- records
def points_from_records(records: Sequence[DecisionRecord]) -> tuple[TimelinePoint, ...]:
    """The points a job's records hold: each record's evaluation at its tick, also at the first tick
    of the run it stands for (a run decided the same at the same parallelism: the stretch is drawn
    flat, at its newest rates), and after a rescale the parallelism it asked for (rates unknown until
    the next record). A record without vertices (no evaluation) has no point."""
    points: list[TimelinePoint] = []
    for r in sorted(records, key=lambda r: r.ts_ms):
        if not r.vertices:
            continue
        sources = _sources(r.vertices)
        point = TimelinePoint(
            ts_ms=r.ts_ms,
            offered=_sum(v.target_data_rate for v in sources),
            capacity=_record_capacity(r.vertices),
            lag=_sum(v.lag for v in sources),
            parallelism={v.name: v.parallelism for v in r.vertices},
        )
        if r.first_ms < r.ts_ms:
            points.append(replace(point, ts_ms=r.first_ms))
        points.append(point)
        if r.scaled:
            asked = {v.name: v.parallelism if v.decided is None else v.decided for v in r.vertices}
            points.append(TimelinePoint(r.ts_ms + 1, None, None, None, asked))
    return tuple(points)


def _sources(vertices: Sequence[VertexRecord]) -> list[VertexRecord]:
    """The sources: the vertices with a lag (only a source reports one). A record where none does (its
    lag not measured) counts its first vertex, the topological order's first source."""
    with_lag = [v for v in vertices if v.lag is not None]
    return with_lag or list(vertices[:1])


def _record_capacity(vertices: Sequence[VertexRecord]) -> float | None:
    """The offered load the job could carry at its parallelism: the offered load times the tightest
    vertex's true processing rate over its target rate (rates differ per vertex; their ratios do not)."""
    offered = _sum(v.target_data_rate for v in _sources(vertices))
    ratios = [
        v.true_processing_rate / v.target_data_rate
        for v in vertices
        if v.true_processing_rate is not None
        and v.target_data_rate is not None
        and v.target_data_rate > 0
        and math.isfinite(v.true_processing_rate)
    ]
    if offered is None or not ratios:
        return None
    return offered * min(ratios)


# ---------------------------------------------------------------------------------------- samples
def points_from_samples(samples: Sequence[JobSample]) -> tuple[TimelinePoint, ...]:
    """One point per new reading (stale ones repeat the last and are skipped). The rates are per second
    between a reading and the one before it in the same job run; the first reading of a run has none."""
    fresh = sorted((s for s in samples if s.stale_ticks == 0), key=lambda s: s.ts_ms)
    points: list[TimelinePoint] = []
    previous: JobSample | None = None
    for sample in fresh:
        same_run = (
            previous is not None
            and previous.running_since_ms == sample.running_since_ms
            and previous.job.job_id == sample.job.job_id
            and sample.ts_ms > previous.ts_ms
        )
        offered = capacity = None
        if same_run and previous is not None:
            offered, capacity = _rates(previous, sample)
        sources = [v.id for v in sample.topology if sample.topology.is_source(v.id)]
        points.append(
            TimelinePoint(
                ts_ms=sample.ts_ms,
                offered=offered,
                capacity=capacity,
                lag=_sum(_known(sample.vertices[v].pending_records) for v in sources if v in sample.vertices),
                parallelism={v.name: v.parallelism for v in sample.topology},
            )
        )
        previous = sample
    return tuple(points)


def _rates(before: JobSample, after: JobSample) -> tuple[float | None, float | None]:
    """Between two readings of one job run: what arrived at the sources per second, and what the job
    could carry (what the sources read per second over the busiest vertex's busy fraction)."""
    seconds = (after.ts_ms - before.ts_ms) / 1000
    sources = [v.id for v in after.topology if after.topology.is_source(v.id)]
    read = arrived = 0.0
    for vid in sources:
        a, b = after.vertices.get(vid), before.vertices.get(vid)
        if a is None or b is None:
            return None, None
        delta_in = a.num_records_in - b.num_records_in
        if not math.isfinite(delta_in) or delta_in < 0:
            return None, None
        read += delta_in / seconds
        backlog = a.pending_records - b.pending_records
        arrived += (delta_in + (backlog if math.isfinite(backlog) else 0.0)) / seconds
    busy = [
        b
        for v in after.topology
        if v.id in before.vertices and v.id in after.vertices
        if (b := _busy(before.vertices[v.id], after.vertices[v.id], seconds)) is not None
    ]
    busiest = max(busy, default=None)
    capacity = read / busiest if busiest is not None and busiest >= MIN_BUSY else None
    return max(arrived, 0.0), capacity


def _busy(before: VertexSample, after: VertexSample, seconds: float) -> float | None:
    """A vertex's busy fraction between two readings (its busiest subtask's, as the daemon aggregates
    it): from the cumulative counter when both readings have it, else the last reading's gauge."""
    agg = after.accumulated_busy_time_agg_ms - before.accumulated_busy_time_agg_ms
    if math.isfinite(agg) and agg >= 0:
        return min(agg / 1000 / seconds, 1.0)
    gauge = after.busy_time_ms_per_s
    return min(gauge / 1000, 1.0) if math.isfinite(gauge) else None


def _known(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None
