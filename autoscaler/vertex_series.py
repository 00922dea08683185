"""Per-vertex Prometheus series, and the budget that bounds them.

The vertex gauges are the reference's reported vertex metrics (``ScalingMetric.REPORTED_VERTEX_METRICS``),
named ``flink_autoscaler_vertex_<metric>``. They are most of a large daemon's page (12 per vertex:
120,000 for 1,000 jobs of 10 vertices), so they are bounded: ``vertex_metrics`` picks which are exported
(``all``, ``scaling``: what the dashboard and the alert rules read, or ``off``) and
``vertex_metrics_max_series`` caps how many. A job's capped series are exported whole or not at all, so
a panel never shows half a job, and the jobs already exported keep their place, so the page does not
flap between jobs from one tick to the next. The sources' lag is outside the cap: the StuckBacklog alert
reads it, and it costs one series per source.

Kept apart from :mod:`autoscaler.metrics` (every other series) because the budget is bookkeeping of its
own: which series exist, per job, and who waits for room.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from autoscaler.metric_labels import JobGauge
from autoscaler.model import JobEvaluation, JobRef, VertexEvaluation, VertexId
from autoscaler.settings.daemon_settings import VertexMetrics

if TYPE_CHECKING:
    from autoscaler.state.model import ScalingVerification

__all__ = ["SCALING_SOURCE_GAUGES", "SCALING_VERTEX_GAUGES", "VERTEX_LABELS", "VertexSeries"]

log = structlog.get_logger(__name__)

VERTEX_LABELS = ("cluster", "job", "vertex", "vertex_name")


def _attr(name: str) -> Callable[[JobEvaluation, VertexEvaluation], float | None]:
    return lambda _evaluation, v: getattr(v, name)


def _source_partitions(evaluation: JobEvaluation, v: VertexEvaluation) -> float | None:
    """Known for sources only (NaN elsewhere), as in the reference's NUM_SOURCE_PARTITIONS."""
    return evaluation.sample.num_source_partitions.get(v.vertex)


def _busy_skew(evaluation: JobEvaluation, v: VertexEvaluation) -> float | None:
    skew = evaluation.sample.skew.get(v.vertex)
    return skew.skew if skew is not None else None


def _slow_subtasks(evaluation: JobEvaluation, v: VertexEvaluation) -> float | None:
    skew = evaluation.sample.skew.get(v.vertex)
    return len(skew.slow) if skew is not None else None


# (metric suffix, help, how to read it from the evaluation)
_VERTEX_GAUGES: tuple[tuple[str, str, Callable[[JobEvaluation, VertexEvaluation], float | None]], ...] = (
    ("parallelism", "Current parallelism of the vertex", _attr("parallelism")),
    ("recommended_parallelism", "Parallelism the autoscaler recommends", _attr("target_parallelism")),
    ("max_parallelism", "Maximum parallelism (key groups) of the vertex", _attr("max_parallelism")),
    (
        "num_source_partitions",
        "Partitions (splits) a source reads; NaN for other vertices",
        _source_partitions,
    ),
    ("load", "Busy time ratio of the vertex (0..1)", _attr("load")),
    (
        "true_processing_rate",
        "Records/s the vertex could process at full load",
        _attr("true_processing_rate"),
    ),
    (
        "target_data_rate",
        "Records/s the vertex must process (input rate + lag growth)",
        _attr("target_data_rate"),
    ),
    (
        "catch_up_data_rate",
        "Extra records/s needed to drain the backlog in catch-up.duration",
        _attr("catch_up_data_rate"),
    ),
    ("lag", "Pending records at the source", _attr("lag")),
    (
        "scale_up_rate_threshold",
        "Processing rate below which the vertex scales up",
        _attr("scale_up_threshold"),
    ),
    (
        "scale_down_rate_threshold",
        "Processing rate above which the vertex scales down",
        _attr("scale_down_threshold"),
    ),
    (
        "expected_processing_rate",
        "Processing rate expected at the recommended parallelism",
        _attr("expected_processing_rate"),
    ),
    ("busy_skew", "Busiest subtask's busy time over the vertex's average (1: even)", _busy_skew),
    (
        "slow_subtasks",
        "Subtasks busy at least slow-subtasks.multiplier x the vertex's median and the busy floor",
        _slow_subtasks,
    ),
)

# What ``vertex_metrics: scaling`` exports: the lines of the dashboard's job row that decide a rescale
# (load, capacity against need, parallelism against recommendation), for every vertex ...
SCALING_VERTEX_GAUGES = frozenset(
    {"parallelism", "recommended_parallelism", "load", "true_processing_rate", "target_data_rate"}
)
# ... and the backlog, for sources only: the StuckBacklog alert and the "Source lag" panel read it there,
# and elsewhere it would be a series per vertex that is NaN (lag) or seldom looked at (catch-up rate).
SCALING_SOURCE_GAUGES = frozenset({"lag", "catch_up_data_rate"})


class _VertexGauge(NamedTuple):
    gauge: Gauge
    read: Callable[[JobEvaluation, VertexEvaluation], float | None]
    sources_only: bool


_Series = tuple[Gauge, tuple[str, ...]]  # one exported per-vertex series: its gauge and label values


class _SeriesBook:
    """Per-vertex series exported, by job, and how many in all: what a vanished job's removal and the cap
    need, without reading back the registry (which holds 100,000 samples on a large daemon)."""

    def __init__(self) -> None:
        self.by_job: dict[str, set[_Series]] = {}
        self.count = 0

    def of(self, key: str) -> set[_Series]:
        return self.by_job.get(key, set())

    def replace(self, key: str, wanted: set[_Series]) -> None:
        """The job's series become ``wanted``: the others leave the registry."""
        old = self.by_job.get(key, set())
        for gauge, labels in old - wanted:
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        self.by_job[key] = wanted
        self.count += len(wanted) - len(old)

    def add(self, key: str, one: _Series) -> None:
        series = self.by_job.setdefault(key, set())
        if one not in series:
            series.add(one)
            self.count += 1

    def drop(self, key: str) -> None:
        """Every series of the job leaves the registry, and the job the book."""
        if key in self.by_job:
            self.replace(key, set())
            del self.by_job[key]


def _selection(mode: VertexMetrics) -> dict[str, bool]:
    """The vertex gauges ``mode`` exports, each with whether it is exported for source vertices only."""
    if mode == "all":
        return {name: False for name, _, _ in _VERTEX_GAUGES}
    if mode == "scaling":
        return {**dict.fromkeys(SCALING_VERTEX_GAUGES, False), **dict.fromkeys(SCALING_SOURCE_GAUGES, True)}
    return {}


class VertexSeries:
    """The per-vertex gauges of one registry, within ``mode`` and ``max_series`` (0: no limit)."""

    def __init__(self, registry: CollectorRegistry, mode: VertexMetrics, max_series: int) -> None:
        self.mode: VertexMetrics = mode
        self.max_series = max_series
        selection = _selection(mode)
        self._vertex = {
            name: _VertexGauge(
                JobGauge(f"flink_autoscaler_vertex_{name}", text, VERTEX_LABELS, registry=registry),
                read,
                selection[name],
            )
            for name, text, read in _VERTEX_GAUGES
            if name in selection
        }
        self.vertex_series = Gauge(
            "flink_autoscaler_vertex_series_exported",
            "Per-vertex series exported now (vertex gauges and verification ratios); all but the sources' "
            "lag count against vertex_metrics_max_series",
            registry=registry,
        )
        self.vertex_series_withheld_jobs = Gauge(
            "flink_autoscaler_vertex_series_withheld_jobs",
            "Jobs whose per-vertex series are not exported because vertex_metrics_max_series was reached "
            "(their sources' lag and per-job series are)",
            registry=registry,
        )
        self.vertex_series_dropped = Counter(
            "flink_autoscaler_vertex_series_dropped",
            "Per-vertex series not exported because vertex_metrics_max_series was reached: a job's, counted "
            "once when it is turned away, and verification ratios that did not fit",
            registry=registry,
        )
        # Per vertex but set only for rescaled vertices, and read by no panel: exported with "all" only.
        self.verification_ratio: Gauge | None = None
        if mode == "all":
            self.verification_ratio = JobGauge(
                "flink_autoscaler_scaling_verification_ratio",
                "Processing capacity measured over the first full metric window after the vertex's last "
                "rescale, over the capacity that rescale expected (1 = as expected)",
                VERTEX_LABELS,
                registry=registry,
            )
        self._capped = _SeriesBook()  # per-vertex series the cap counts
        self._lag = _SeriesBook()  # the sources' lag, outside the cap
        self._withheld: dict[str, int] = {}  # job key -> capped series it would export, over the cap

    def report(self, evaluation: JobEvaluation) -> None:
        """The job's per-vertex gauges: the sources' lag always, the others if they all fit under the cap,
        else none of them (the job is withheld).

        A vertex that left the job, and a verification ratio of one, loses its series here.
        """
        key = evaluation.job.key
        labels = _vertex_labels(evaluation)
        capped, lag = self._vertex_values(evaluation, labels)
        _set_all(lag)
        self._lag.replace(key, set(lag))
        current = set(labels.values())
        ratios = {s for s in self._capped.of(key) if s[0] is self.verification_ratio and s[1] in current}
        wanted = set(capped) | ratios
        if self._fits(key, len(wanted)):
            _set_all(capped)
            self._capped.replace(key, wanted)
            if self._withheld.pop(key, None) is not None:
                self.vertex_series_withheld_jobs.set(len(self._withheld))
        else:
            self._withhold(key, len(wanted))
        self.vertex_series.set(self._capped.count + self._lag.count)

    def report_ratios(
        self, job: JobRef, names: dict[VertexId, str], verification: ScalingVerification
    ) -> None:
        """Each measured vertex's verification ratio (``vertex_metrics: all`` only, within the cap)."""
        if self.verification_ratio is not None and job.key not in self._withheld:
            self._set_ratios(job, names, verification)

    def forget(self, gone: set[str]) -> None:
        """Every per-vertex series of the jobs gone; their share of the cap goes to the next job waiting."""
        for key in gone:
            self._capped.drop(key)
            self._lag.drop(key)
            self._withheld.pop(key, None)
        self.vertex_series.set(self._capped.count + self._lag.count)
        self.vertex_series_withheld_jobs.set(len(self._withheld))

    def known_jobs(self) -> set[str]:
        """Keys of every job with a per-vertex series, or waiting for room for them."""
        return set(self._capped.by_job) | set(self._lag.by_job) | set(self._withheld)

    def _vertex_values(
        self, evaluation: JobEvaluation, labels: dict[VertexId, tuple[str, ...]]
    ) -> tuple[dict[_Series, float], dict[_Series, float]]:
        """The per-vertex series the mode exports for this evaluation, with their values (NaN: unknown):
        those the cap counts, and the sources' lag."""
        topology = evaluation.sample.topology
        capped: dict[_Series, float] = {}
        lag: dict[_Series, float] = {}
        for v in evaluation.vertices.values():
            source = topology.is_source(v.vertex)
            for name, (gauge, read, sources_only) in self._vertex.items():
                if sources_only and not source:
                    continue
                value = read(evaluation, v)
                into = lag if name == "lag" and source else capped
                into[(gauge, labels[v.vertex])] = math.nan if value is None else float(value)
        return capped, lag

    def _fits(self, key: str, series: int) -> bool:
        """Whether the job may export ``series`` capped series, its current ones given back first."""
        return self._room_for(series - len(self._capped.of(key)))

    def _room_for(self, more: int) -> bool:
        cap = self.max_series
        return cap == 0 or self._capped.count + more <= cap

    def _withhold(self, key: str, series: int) -> None:
        """The job's capped series do not fit: none are exported (a half-shown job would mislead).

        Counted when the job is first turned away, not on every tick it stays so, and logged when the
        cap starts to bind (the first job withheld while none was), so a 1,000-job log stays readable.
        """
        self._capped.drop(key)  # it may have grown past what is left: its old values would go stale
        if key in self._withheld:
            self._withheld[key] = series
            return
        if not self._withheld:
            log.warning(
                "vertex_series_limit_reached",
                job=key,
                limit=self.max_series,
                exported=self._capped.count,
                vertex_metrics=self.mode,
                detail="the per-vertex series of this job and of further ones that do not fit are not "
                "exported (their sources' lag and per-job series are); raise vertex_metrics_max_series, or "
                "set vertex_metrics to scaling or off",
            )
        self._withheld[key] = series
        self.vertex_series_dropped.inc(series)
        self.vertex_series_withheld_jobs.set(len(self._withheld))

    def _set_ratios(self, job: JobRef, names: dict[VertexId, str], verification: ScalingVerification) -> None:
        """Each measured vertex's verification ratio, a new series only while the cap allows it."""
        ratio = self.verification_ratio
        assert ratio is not None
        for vid, v in verification.vertices.items():
            if math.isnan(v.ratio):
                continue
            one = (ratio, (job.cluster, job.name, vid, names.get(vid, vid)))
            if one not in self._capped.of(job.key) and not self._room_for(1):
                self.vertex_series_dropped.inc()
                continue
            self._capped.add(job.key, one)
            ratio.labels(*one[1]).set(v.ratio)
        self.vertex_series.set(self._capped.count + self._lag.count)


def _set_all(values: dict[_Series, float]) -> None:
    for (gauge, labels), value in values.items():
        gauge.labels(*labels).set(value)


def _vertex_labels(evaluation: JobEvaluation) -> dict[VertexId, tuple[str, ...]]:
    """Each evaluated vertex's label values: cluster, job, vertex id and vertex name."""
    job = evaluation.job
    names = {v.id: v.name for v in evaluation.sample.topology}
    return {
        v.vertex: (job.cluster, job.name, v.vertex, names.get(v.vertex, v.vertex))
        for v in evaluation.vertices.values()
    }
