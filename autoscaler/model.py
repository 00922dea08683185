"""Frozen values handed from one pipeline stage to the next.

discover -> JobTarget; collect -> JobSample | Unavailable; evaluate -> JobEvaluation;
decide -> Decision; plugins -> Decision; realize -> RealizeResult. NaN means "not measured" for
every float in a sample or an evaluation, never zero.

Over 400 lines because every hand-off value lives in this one module, so that no stage imports
another stage's module for its types; each value is small, and splitting them by stage would bring
back the imports between stages this module exists to avoid.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.skew import VertexSkew

__all__ = [
    "HEAP_USAGE_RATIO",
    "JOB_SCOPE",
    "NAN",
    "AlignmentBounds",
    "Edge",
    "InvalidValue",
    "JobEvaluation",
    "JobRef",
    "JobSample",
    "JobTarget",
    "JobTopology",
    "ScaleUpGain",
    "TaskManagerMemory",
    "TaskManagerSample",
    "Unavailable",
    "VertexEvaluation",
    "VertexId",
    "VertexInfo",
    "VertexSample",
    "frozen_map",
]

VertexId = str
NAN = math.nan
# The scope of job-level custom metrics (TaskManager and external), beside vertex ids, in a sample's and
# an evaluation's custom metrics: the model's layout of those maps, which collect, the evaluators and the
# plugins all read.
JOB_SCOPE = ""
# Job-level windowed metric (beside the custom ones) holding max heap used / max heap max over the
# TaskManagers: the memory-pressure gate compares its window average, as the reference does.
HEAP_USAGE_RATIO = "autoscaler.heapUsageRatio"
_K = TypeVar("_K")
_V = TypeVar("_V")


def frozen_map(items: Mapping[_K, _V] | None = None) -> Mapping[_K, _V]:
    """A read-only mapping that keeps insertion order."""
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job on a cluster. ``key`` (cluster/name) survives resubmission under a new JobID."""

    cluster: str
    job_id: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.name}"


@dataclass(frozen=True, slots=True)
class JobTarget:
    """A running job to autoscale this tick, with its effective options."""

    job: JobRef
    options: AutoscalerOptions
    state: str = "RUNNING"


@dataclass(frozen=True, slots=True)
class Edge:
    source: VertexId
    target: VertexId
    ship_strategy: str = "REBALANCE"  # Flink's plan names: FORWARD, HASH, REBALANCE, RESCALE, ...


@dataclass(frozen=True, slots=True)
class VertexInfo:
    id: VertexId
    name: str
    parallelism: int
    max_parallelism: int
    status: str = "RUNNING"
    slot_sharing_group: str | None = None

    def __post_init__(self) -> None:
        if self.parallelism < 1 or self.max_parallelism < 1:
            raise ValueError(f"parallelism and max parallelism must be >= 1: {self!r}")


@dataclass(frozen=True, slots=True)
class JobTopology:
    """Vertices in topological order (sources first) and the edges between them."""

    vertices: Mapping[VertexId, VertexInfo]
    edges: tuple[Edge, ...] = ()
    # the vertices some edge feeds: is_source is asked per vertex and tick, a scan of the edges each time
    _fed: frozenset[VertexId] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", frozen_map(self.vertices))
        for e in self.edges:
            if e.source not in self.vertices or e.target not in self.vertices:
                raise ValueError(f"edge {e.source}->{e.target} names an unknown vertex")
        object.__setattr__(self, "_fed", frozenset(e.target for e in self.edges))

    @classmethod
    def build(cls, vertices: list[VertexInfo], edges: list[Edge]) -> JobTopology:
        """Order vertices topologically (Kahn; ties keep the given order) and validate the graph."""
        by_id = {v.id: v for v in vertices}
        indegree = {v.id: 0 for v in vertices}
        for e in edges:
            if e.source not in by_id or e.target not in by_id:
                raise ValueError(f"edge {e.source}->{e.target} names an unknown vertex")
            indegree[e.target] += 1
        ready = [v.id for v in vertices if indegree[v.id] == 0]
        order: list[VertexId] = []
        while ready:
            vid = ready.pop(0)
            order.append(vid)
            for e in edges:
                if e.source == vid:
                    indegree[e.target] -= 1
                    if indegree[e.target] == 0:
                        ready.append(e.target)
        if len(order) != len(vertices):
            raise ValueError("job graph has a cycle")
        return cls({vid: by_id[vid] for vid in order}, tuple(edges))

    def inputs(self, vid: VertexId) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.target == vid)

    def outputs(self, vid: VertexId) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.source == vid)

    def is_source(self, vid: VertexId) -> bool:
        return vid not in self._fed

    def __iter__(self) -> Iterator[VertexInfo]:
        return iter(self.vertices.values())

    @property
    def parallelisms(self) -> Mapping[VertexId, int]:
        return frozen_map({v.id: v.parallelism for v in self.vertices.values()})


@dataclass(frozen=True, slots=True)
class VertexSample:
    """One tick's raw metrics for one vertex. Counters are cumulative; NaN = not available."""

    busy_time_ms_per_s: float = NAN  # busyTimeMsPerSecond, aggregated by the configured aggregator
    backpressured_ms_per_s: float = NAN  # backPressuredTimeMsPerSecond, avg over subtasks
    num_records_in: float = NAN  # cumulative records in (sources: records read from the external system)
    num_records_out: float = NAN  # cumulative records out
    accumulated_busy_time_ms: float = NAN  # cumulative busy ms, summed over subtasks
    num_records_in_per_s: float = NAN  # Flink's 60 s meter, summed over subtasks
    pending_records: float = NAN  # sources only: summed pendingRecords (the lag)
    observed_tpr: float = NAN  # sources only: observed true processing rate of this sample
    # The accumulateBusyTimeMs counter aggregated over subtasks like the busy time (MAX -> max, AVG -> avg,
    # MIN -> min): its rate is the busy ms/s that pairs with the counter-delta input rate.
    accumulated_busy_time_agg_ms: float = NAN


@dataclass(frozen=True, slots=True)
class TaskManagerMemory:
    """One TaskManager's memory pools in bytes, as Flink reports them (``memoryConfiguration``)."""

    process: int
    framework_heap: int
    task_heap: int
    framework_off_heap: int
    task_off_heap: int
    network: int
    managed: int
    metaspace: int
    overhead: int

    @property
    def heap(self) -> int:
        return self.framework_heap + self.task_heap

    @property
    def flink(self) -> int:
        """Total Flink memory: the process less metaspace and JVM overhead."""
        return self.process - self.metaspace - self.overhead


@dataclass(frozen=True, slots=True)
class InvalidValue:
    """One metric value that cannot be, read as unknown (``autoscaler/collect/sanity.py``).

    ``kind`` says what is wrong with it, in the words of the warning and of the ``kind`` label of
    ``flink_autoscaler_invalid_metric_values_total``: ``negative``, ``infinite`` or ``too_large``; ``why``
    says it for this value (a 1e308 is too large for a Java long, not negative).
    """

    vertex: str  # the vertex's name (its id when the name is unknown)
    name: str  # the VertexSample field
    value: float
    kind: str
    why: str

    def __str__(self) -> str:
        return f"{self.vertex}.{self.name} = {self.value:g} ({self.why})"


@dataclass(frozen=True, slots=True)
class TaskManagerSample:
    """Cluster-level metrics for a job's tick (max over TaskManagers), and the TaskManagers' resources.

    The resources come from ``GET /taskmanagers`` (``autoscaler.resources.taskmanager_resources``) and
    feed the ``quota.cpu`` / ``quota.memory`` gate; 0 / NaN mean unknown, and unknown never blocks.
    """

    gc_time_ms_per_s: float = NAN
    heap_used: float = NAN
    heap_max: float = NAN
    cpu_load_avg: float = NAN
    count: int = 0  # registered TaskManagers
    cpu_cores_per_tm: float = NAN  # totalResource.cpuCores (taskmanager.cpu.cores, else the slot count)
    memory_per_tm: float = NAN  # memoryConfiguration.totalProcessMemory, bytes
    slots_per_tm: float = NAN  # taskmanager.numberOfTaskSlots (the mean if TaskManagers differ)
    slots_total: int = 0  # the cluster's slots, summed over TaskManagers (0: unknown)
    slots_free: int = 0  # of which no job holds one (Flink's freeSlots, summed)
    memory: TaskManagerMemory | None = None  # one TaskManager's pools (memoryConfiguration)
    managed_used: float = NAN  # Status.Flink.Memory.Managed.Used, max over TaskManagers
    metaspace_used: float = NAN  # Status.JVM.Memory.Metaspace.Used, max over TaskManagers
    # The three usages' averages over the cluster's metrics.window (collect.taskmanagers.MemoryUsage)
    heap_used_avg: float = NAN
    managed_used_avg: float = NAN
    metaspace_used_avg: float = NAN

    @property
    def heap_usage_ratio(self) -> float:
        """How full the heap is, 0 to 1: heap used over heap max, each the max over TaskManagers.

        NaN (unknown, never blocks) when either is unknown or max is not positive: the JVM reports -1 for
        an undefined maximum, and a TaskManager not yet started reports 0. Capped at 1 (a full heap):
        Flink reads used and max at different instants, and used may briefly exceed max, but a heap is
        never more than full, so a threshold of 1.0 can never be exceeded (issue 35).
        """
        if not self.heap_max > 0 or math.isnan(self.heap_used):
            return NAN
        return min(self.heap_used / self.heap_max, 1.0)


@dataclass(frozen=True, slots=True)
class JobSample:
    """Everything collected for one job in one tick."""

    target: JobTarget
    ts_ms: int
    running_since_ms: int  # timestamps.RUNNING: a later value means restart or rescale
    topology: JobTopology
    vertices: Mapping[VertexId, VertexSample]
    taskmanagers: TaskManagerSample = field(default_factory=TaskManagerSample)
    num_source_partitions: Mapping[VertexId, int] = field(default_factory=dict)
    # Metrics that the job's CustomMetricProvider plugins declared (autoscaler.plugins.metrics), read in
    # the same tick as the standard ones. Per vertex: declared name -> value over its subtasks. Job-level:
    # TaskManager metrics (aggregated over TaskManagers) and external ones. NaN = declared, not measured.
    custom_vertex_metrics: Mapping[VertexId, Mapping[str, float]] = field(default_factory=dict)
    custom_job_metrics: Mapping[str, float] = field(default_factory=dict)
    # Ticks in a row (this one included) that found Flink serving the same metric fetch again: 0 for a
    # new reading. A stale sample keeps the ts_ms it was first read at, its fetch time as far as the
    # daemon can tell, so the window, which holds it already, adds no point and no rate span is
    # stretched by a tick without records (autoscaler/collect/freshness.py).
    stale_ticks: int = 0
    # How far the fetch stamps moved at this sample (ms): the job run's earlier samples were stamped this
    # much off against it (autoscaler/collect/freshness.py); moves that add up restart the window.
    restamped_ms: int = 0
    # Values that cannot be (negative, infinite or too large counts, rates, times or lags), read as NaN
    # instead; each with its kind, for the warning and the counter (autoscaler/collect/sanity.py).
    invalid_values: tuple[InvalidValue, ...] = ()
    # Per vertex: its busy-time skew, and its slow subtasks when they were read (autoscaler/skew.py).
    skew: Mapping[VertexId, VertexSkew] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", frozen_map(self.vertices))
        object.__setattr__(self, "skew", frozen_map(self.skew))
        object.__setattr__(self, "num_source_partitions", frozen_map(self.num_source_partitions))
        object.__setattr__(
            self,
            "custom_vertex_metrics",
            frozen_map({vid: frozen_map(m) for vid, m in self.custom_vertex_metrics.items()}),
        )
        object.__setattr__(self, "custom_job_metrics", frozen_map(self.custom_job_metrics))
        missing = set(self.topology.vertices) - set(self.vertices)
        if missing:
            raise ValueError(f"sample lacks vertices {sorted(missing)}")

    @property
    def job(self) -> JobRef:
        return self.target.job

    def custom_metric(self, name: str, vertex: VertexId | None = None) -> float:
        """This tick's value of a declared custom metric (job-level without ``vertex``); NaN if none."""
        values = self.custom_job_metrics if vertex is None else self.custom_vertex_metrics.get(vertex, {})
        return values.get(name, NAN)

    def measured_custom_metrics(self) -> Iterator[tuple[str, str, float]]:
        """``(scope, name, value)`` of every custom value measured this tick; the scope is a vertex id, or
        ``""`` for a job-level metric. NaN (declared, not measured) adds nothing to a window: left out."""
        for scope, values in [*self.custom_vertex_metrics.items(), ("", self.custom_job_metrics)]:
            for name, value in values.items():
                if not math.isnan(value):
                    yield scope, name, float(value)


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why a job produced no usable sample this tick (no scaling on partial data)."""

    target: JobTarget
    reason: Reason
    detail: str

    @property
    def job(self) -> JobRef:
        return self.target.job


@dataclass(frozen=True, slots=True)
class InvalidOptions:
    """A job whose ``job.autoscaler.*`` options cannot be read (``Discovery.invalid``): not sampled,
    and told why (``message``, the validation's words)."""

    target: JobTarget
    message: str

    @property
    def job(self) -> JobRef:
        return self.target.job


class ScaleUpGain(NamedTuple):
    """What a vertex's last scale-up promised and delivered: the processing-rate increase (records/s)
    expected at decision time and the one measured now. The IneffectiveScaling event carries both, as
    the reference's does, so an operator sees by how much the scale-up fell short."""

    expected: float
    actual: float


class AlignmentBounds(NamedTuple):
    """What the legacy alignment aligned a vertex to when it could not keep its target: the
    ScalingLimited event carries them, as the reference's does, so the operator sees why."""

    key_groups_or_partitions: int  # N: source partitions, else the key groups (max parallelism)
    upper_bound: int  # min(max parallelism, the vertex's parallelism upper limit)
    lower_limit: int  # the vertex's parallelism lower limit


@dataclass(frozen=True, slots=True)
class VertexEvaluation:
    """Evaluated metrics and the recommended parallelism for one vertex (NaN = unknown)."""

    vertex: VertexId
    parallelism: int
    max_parallelism: int
    load: float
    true_processing_rate: float
    target_data_rate: float
    catch_up_data_rate: float
    lag: float
    scale_up_threshold: float
    scale_down_threshold: float
    target_parallelism: int  # what the scaler recommends; == parallelism when unknown or unchanged
    expected_processing_rate: float
    outside_band: bool
    # The last scale-up of this vertex (to its current parallelism) realised less than
    # scaling.effectiveness.threshold of the expected gain and the scaler wants to scale up again.
    # Always reported; it blocks the scale-up (target == parallelism) only with detection enabled.
    ineffective_scale_up: bool = False
    rates_from_counters: bool = False  # TPR from counter deltas (False: Flink's gauge + meter path)
    scalability_coefficient: float = 1.0  # observed-scalability alpha the scale factor was divided by
    # The target the deprecated legacy alignment mode could not keep (it moved or blocked it): the
    # reference warns with a ScalingLimited event. None otherwise.
    limited_from: int | None = None
    limited_by: AlignmentBounds | None = None  # with limited_from: what the alignment worked with
    scale_up_gain: ScaleUpGain | None = None  # with ineffective_scale_up: expected vs actual increase

    @property
    def unknown(self) -> bool:
        return math.isnan(self.true_processing_rate) or math.isnan(self.target_data_rate)


@dataclass(frozen=True, slots=True)
class JobEvaluation:
    """The evaluator's result for one job: None vertices until the window is usable."""

    sample: JobSample
    vertices: Mapping[VertexId, VertexEvaluation]
    processing_backlog: bool
    window_samples: int  # samples inside the window (per job, max over vertices)
    window_full: bool
    not_ready: Reason | None = None  # set when the evaluation must not drive a decision
    restart_time_s: float = NAN  # the restart time the capacities were computed with (NaN: not evaluated)
    # Custom metrics over the window: scope -> name -> (current, average). The scope is a vertex id, or
    # "" (JOB_SCOPE) for TaskManager and external metrics; current is the
    # latest measured value, average the mean of the finite ones. Executor plugins and custom
    # evaluators read them here instead of doing their own I/O.
    custom_metrics: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    not_ready_detail: str = ""  # why, in words, when not_ready needs more than its reason (PluginFailed)
    evaluator_failures: tuple[str, ...] = ()  # custom evaluators that raised; their overrides were ignored
    load_change_ms: int | None = None  # the offered load changed here: the window restarted (job_window.py)
    level_since_ms: int | None = None  # first decision on a new load: its first sample (WindowStatus)
    counters_fell: bool = False  # a record counter fell since the last sample: the window restarted

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", frozen_map(self.vertices))
        object.__setattr__(
            self,
            "custom_metrics",
            frozen_map({scope: frozen_map(m) for scope, m in self.custom_metrics.items()}),
        )

    @property
    def job(self) -> JobRef:
        return self.sample.job

    def custom_metric(self, name: str, vertex: VertexId | None = None) -> tuple[float, float]:
        """``(current, average)`` of a custom metric over the window (job-level without ``vertex``).

        ``(NaN, NaN)`` when nothing was measured in the window or the name was never declared.
        """
        scope = JOB_SCOPE if vertex is None else vertex
        return self.custom_metrics.get(scope, {}).get(name, (NAN, NAN))

    @property
    def ineffective_scale_ups(self) -> tuple[VertexId, ...]:
        """Vertices whose last scale-up was ineffective (each deserves an ``IneffectiveScaling`` event)."""
        return tuple(vid for vid, v in self.vertices.items() if v.ineffective_scale_up)


@dataclass(frozen=True, slots=True)
class VertexChange:
    vertex: VertexId
    current: int
    target: int

    def __post_init__(self) -> None:
        if self.current < 1 or self.target < 1:
            raise ValueError(f"parallelism must be >= 1: {self!r}")
        if self.current == self.target:
            raise ValueError(f"a change must change the parallelism: {self!r}")

    @property
    def is_scale_up(self) -> bool:
        return self.target > self.current
