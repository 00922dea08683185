"""Pydantic models of Flink 2.x REST answers, turned into domain values exactly once.

The models are tolerant (unknown keys ignored, Flink's hyphenated keys via aliases) because Flink adds
fields between releases; what the autoscaler relies on is required, so a changed contract fails loudly
at the edge (as :class:`~autoscaler.flink.errors.FlinkBadPayload`) instead of deep in the math.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    model_validator,
)

from autoscaler.model import Edge, JobTopology, VertexInfo

__all__ = [
    "AggregatedMetric",
    "CheckpointStats",
    "ClusterOverview",
    "DashboardConfig",
    "ExecutionConfig",
    "JobDetails",
    "JobOverview",
    "JobPlan",
    "JobVertex",
    "MetricValue",
    "ParallelismBounds",
    "PlanInput",
    "PlanNode",
    "SubtaskInfo",
    "TaskManagerInfo",
    "VertexDetails",
    "VertexIO",
    "flink_float",
]

RUNNING = "RUNNING"
FINISHED = "FINISHED"
_LIVE_TASK_STATES = frozenset({RUNNING, FINISHED})


def flink_float(value: object) -> float:
    """Flink sends numbers, numeric strings, or the string "NaN"; anything absent or unreadable is NaN."""
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return math.nan
    raise ValueError(f"expected a number, got {type(value).__name__}")


FlinkFloat = Annotated[float, BeforeValidator(flink_float)]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, validate_by_name=True, validate_by_alias=True)


# --------------------------------------------------------------------------------------------- cluster
class ClusterOverview(_Payload):
    """``GET /overview``."""

    taskmanagers: int
    slots_total: int = Field(alias="slots-total")
    slots_available: int = Field(alias="slots-available")
    flink_version: str = Field("", alias="flink-version")


class DashboardConfig(_Payload):
    """``GET /config``: ``refresh_interval_ms`` is how long ``/jobs/:id`` may lag behind the job."""

    refresh_interval_ms: int = Field(alias="refresh-interval")
    flink_version: str = Field("", alias="flink-version")


# memoryConfiguration key -> TaskManagerInfo field
_MEMORY_POOLS = {
    "frameworkHeap": "framework_heap",
    "taskHeap": "task_heap",
    "frameworkOffHeap": "framework_off_heap",
    "taskOffHeap": "task_off_heap",
    "networkMemory": "network_memory",
    "managedMemory": "managed_memory",
    "jvmMetaspace": "jvm_metaspace",
    "jvmOverhead": "jvm_overhead",
}


class TaskManagerInfo(_Payload):
    """One entry of ``GET /taskmanagers`` (or ``GET /taskmanagers/:id``), flattened."""

    id: str
    slots_number: int
    free_slots: int
    cpu_cores: float = math.nan  # totalResource.cpuCores: what Flink may hand out, not the host's cores
    physical_memory: int | None = None  # hardware.physicalMemory (bytes)
    total_process_memory: int | None = None  # memoryConfiguration.totalProcessMemory (bytes)
    # memoryConfiguration's pools, bytes (None when not reported): the memory advice's spec
    framework_heap: int | None = None
    task_heap: int | None = None
    framework_off_heap: int | None = None
    task_off_heap: int | None = None
    network_memory: int | None = None
    managed_memory: int | None = None
    jvm_metaspace: int | None = None
    jvm_overhead: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "slotsNumber" not in data:
            return data
        resource = data.get("totalResource") or {}
        hardware = data.get("hardware") or {}
        memory = data.get("memoryConfiguration") or {}
        return {
            "id": data.get("id"),
            "slots_number": data.get("slotsNumber"),
            "free_slots": data.get("freeSlots"),
            "cpu_cores": flink_float(resource.get("cpuCores")),
            "physical_memory": hardware.get("physicalMemory"),
            "total_process_memory": memory.get("totalProcessMemory"),
            **{field: memory.get(key) for key, field in _MEMORY_POOLS.items()},
        }


# --------------------------------------------------------------------------------------------- jobs
class JobOverview(_Payload):
    """One entry of ``GET /jobs/overview``."""

    jid: str
    name: str
    state: str
    job_type: str | None = Field(None, validation_alias=AliasChoices("jobType", "job-type"))
    scheduler_type: str | None = Field(None, alias="schedulerType")
    start_time: int = Field(-1, alias="start-time")
    tasks: dict[str, int] = Field(default_factory=dict)

    @property
    def effective_running(self) -> bool:
        """RUNNING with every task running or finished (FLINK-34906): a half-deployed job is not running."""
        total = self.tasks.get("total", 0)
        return self.state == RUNNING and self.tasks.get("running", 0) + self.tasks.get("finished", 0) == total


class PlanInput(_Payload):
    id: str
    ship_strategy: str = "UNKNOWN"


class PlanNode(_Payload):
    id: str
    parallelism: int | None = None
    description: str = ""
    inputs: list[PlanInput] = Field(default_factory=list)


class JobPlan(_Payload):
    """The job graph as in ``plan`` of ``GET /jobs/:id`` (``GET /jobs/:id/plan`` wraps it in ``plan``)."""

    jid: str = ""
    name: str = ""
    type: str | None = None
    nodes: list[PlanNode] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and "nodes" not in data and isinstance(data.get("plan"), dict):
            return data["plan"]
        return data

    def edges(self) -> list[Edge]:
        return [
            Edge(source=inp.id, target=node.id, ship_strategy=inp.ship_strategy)
            for node in self.nodes
            for inp in node.inputs
        ]


@dataclass(frozen=True, slots=True)
class VertexIO:
    """Cumulative IO counters of a vertex, summed over subtasks by Flink; NaN when not reported."""

    read_records: float
    write_records: float
    accumulated_busy_time_ms: float


class JobVertex(_Payload):
    id: str
    name: str
    parallelism: int
    max_parallelism: int = Field(alias="maxParallelism")
    status: str
    slot_sharing_group_id: str | None = Field(None, alias="slotSharingGroupId")
    metrics: dict[str, Any] = Field(default_factory=dict)

    def io(self) -> VertexIO:
        return VertexIO(
            read_records=flink_float(self.metrics.get("read-records")),
            write_records=flink_float(self.metrics.get("write-records")),
            accumulated_busy_time_ms=flink_float(self.metrics.get("accumulated-busy-time")),
        )

    def accumulated_time_ms(self) -> float:
        """Busy + idle + back-pressured ms, summed over subtasks (0 if none is reported).

        Every running subtask is always in one of the three states, so the sum grows with the wall clock
        whatever the load: an idle job's counters still move from one metric fetch to the next. A legacy
        source reports no busy time (NaN): the parts it has still count.
        """
        parts = (
            flink_float(self.metrics.get(key))
            for key in ("accumulated-busy-time", "accumulated-idle-time", "accumulated-backpressured-time")
        )
        return math.fsum(p for p in parts if math.isfinite(p))


class JobDetails(_Payload):
    """``GET /jobs/:id``; the topology is built (and validated) while parsing."""

    jid: str
    name: str
    state: str
    now: int = 0
    timestamps: dict[str, int] = Field(default_factory=dict)
    vertices: list[JobVertex]
    plan: JobPlan = Field(default_factory=JobPlan)
    _topology: JobTopology = PrivateAttr()

    @model_validator(mode="after")
    def _build_topology(self) -> JobDetails:
        infos = [
            VertexInfo(
                id=v.id,
                name=v.name,
                parallelism=v.parallelism,
                max_parallelism=v.max_parallelism,
                status=v.status,
                slot_sharing_group=v.slot_sharing_group_id,
            )
            for v in self.vertices
        ]
        self._topology = JobTopology.build(infos, self.plan.edges())
        return self

    def topology(self) -> JobTopology:
        return self._topology

    @property
    def running_since_ms(self) -> int:
        """When the job last reached RUNNING; a later value means a restart or a rescale (0 if never)."""
        return self.timestamps.get(RUNNING, 0)

    @property
    def all_tasks_running(self) -> bool:
        return all(v.status in _LIVE_TASK_STATES for v in self.vertices)

    def vertex_io(self, vid: str) -> VertexIO:
        for v in self.vertices:
            if v.id == vid:
                return v.io()
        return VertexIO(math.nan, math.nan, math.nan)


class SubtaskInfo(_Payload):
    subtask: int
    status: str
    attempt: int = 0
    taskmanager_id: str | None = Field(None, alias="taskmanager-id")


class VertexDetails(_Payload):
    """``GET /jobs/:id/vertices/:vid``: per-subtask status, to tell which subtask holds a job back."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int = Field(alias="maxParallelism")
    now: int = 0
    subtasks: list[SubtaskInfo] = Field(default_factory=list)


class ExecutionConfig(_Payload):
    """``execution-config`` of ``GET /jobs/:id/config``."""

    job_parallelism: int | None = Field(None, alias="job-parallelism")
    restart_strategy: str = Field("", alias="restart-strategy")
    object_reuse_mode: bool = Field(False, alias="object-reuse-mode")
    user_config: dict[str, Any] = Field(default_factory=dict, alias="user-config")

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("execution-config"), dict):
            return data["execution-config"]
        return data


class CheckpointStats(_Payload):
    """The parts of ``GET /jobs/:id/checkpoints`` that bear on rescale latency."""

    completed: int
    in_progress: int
    failed: int
    latest_completed_id: int | None = None
    latest_completed_trigger_ms: int | None = None
    latest_completed_duration_ms: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "counts" not in data:
            return data
        counts = data["counts"] or {}
        latest = ((data.get("latest") or {}).get("completed")) or {}
        return {
            "completed": counts.get("completed"),
            "in_progress": counts.get("in_progress"),
            "failed": counts.get("failed"),
            "latest_completed_id": latest.get("id"),
            "latest_completed_trigger_ms": latest.get("trigger_timestamp"),
            "latest_completed_duration_ms": latest.get("end_to_end_duration"),
        }


# --------------------------------------------------------------------------------------------- metrics
class MetricId(_Payload):
    """One entry of a "list metric names" answer."""

    id: str


class MetricValue(_Payload):
    """One entry of a non-aggregated metrics answer; Flink sends the value as a string."""

    id: str
    value: FlinkFloat = math.nan


class AggregatedMetric(_Payload):
    """One entry of a ``.../metrics?get=...&agg=...`` answer; unrequested or absent aggregates are NaN."""

    id: str
    min: FlinkFloat = math.nan
    max: FlinkFloat = math.nan
    avg: FlinkFloat = math.nan
    sum: FlinkFloat = math.nan
    skew: FlinkFloat = math.nan


# --------------------------------------------------------------------------------------------- rescaling
@dataclass(frozen=True, slots=True)
class ParallelismBounds:
    """A vertex's parallelism range for the adaptive scheduler (``lowerBound``/``upperBound``)."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        if not 1 <= self.lower <= self.upper:
            raise ValueError(
                f"parallelism bounds need 1 <= lower <= upper, got lower={self.lower} upper={self.upper}"
            )

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"parallelism": {"lowerBound": self.lower, "upperBound": self.upper}}


class _Bounds(_Payload):
    lower_bound: int = Field(alias="lowerBound")
    upper_bound: int = Field(alias="upperBound")


class VertexRequirement(_Payload):
    """One value of ``GET /jobs/:id/resource-requirements``."""

    parallelism: _Bounds

    def bounds(self) -> ParallelismBounds:
        return ParallelismBounds(self.parallelism.lower_bound, self.parallelism.upper_bound)
