"""TaskManager resources and the ``quota.cpu`` / ``quota.memory`` gate (reference §1.8 step 6).

The reference computes the slots a job needs as, per slot-sharing group, the highest parallelism among
its vertices, summed over groups; the TaskManagers it needs as slots / slots per TaskManager; and blocks
a scaling with ``ResourceQuotaReached`` when that TaskManager count grows and the TaskManagers' CPU or
memory would exceed the quota. Its standalone daemon never knows the TaskManager CPU, so its CPU quota
never triggers. Ours reads both from ``GET /taskmanagers``: ``totalResource.cpuCores`` (Flink's
``taskmanager.cpu.cores``, which defaults to the slot count) and ``memoryConfiguration.totalProcessMemory``.

Three deliberate differences from the reference, each erring towards a correct count:
- every vertex counts, at its new parallelism if it changes and its current one otherwise (the
  reference only looks at the changed vertices, so an unchanged wide vertex in the same group is missed);
- TaskManagers are ``ceil(slots / slots per TaskManager)`` (the reference divides integers, so 9 slots on
  8-slot TaskManagers count as one TaskManager);
- a vertex without a known slot-sharing group shares Flink's single default group.

Unknown resources (no TaskManager registered, the endpoint failing, NaN values) never block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

import structlog

from autoscaler.flink.errors import FlinkError
from autoscaler.flink.models import TaskManagerInfo
from autoscaler.model import JobTopology, TaskManagerMemory, TaskManagerSample, VertexId

if TYPE_CHECKING:
    from autoscaler.flink.client import FlinkClient

__all__ = [
    "TaskManagerResources",
    "fetch_taskmanager_resources",
    "group_slots",
    "quota_exceeded",
    "required_slots",
    "required_taskmanagers",
    "slot_groups",
    "taskmanager_memory",
    "taskmanager_resources",
    "with_taskmanager_resources",
]

log = structlog.get_logger(__name__)

_DEFAULT_GROUP = "default"


class TaskManagerResources(NamedTuple):
    """What one TaskManager offers, and the cluster's slots in all; 0 / NaN mean unknown."""

    count: int
    cpu_per_tm: float
    memory_per_tm: float
    slots_per_tm: float
    slots_total: int = 0
    slots_free: int = 0


def taskmanager_resources(taskmanagers: Sequence[TaskManagerInfo]) -> TaskManagerResources:
    """Per-TaskManager CPU cores, process memory (bytes) and slots from ``GET /taskmanagers``.

    TaskManagers of one cluster normally share one spec; if they differ, the means keep the cluster's
    totals, which is the best estimate of what one more TaskManager costs. A value any TaskManager
    does not report is unknown (NaN) rather than a guess from the others.
    """
    if not taskmanagers:
        return TaskManagerResources(0, math.nan, math.nan, math.nan)
    n = len(taskmanagers)
    cpu = [tm.cpu_cores for tm in taskmanagers]
    memory = [tm.total_process_memory for tm in taskmanagers]
    slots = [tm.slots_number for tm in taskmanagers]
    cpu_per_tm = sum(cpu) / n if all(not math.isnan(c) and c > 0 for c in cpu) else math.nan
    memory_per_tm = (
        sum(m for m in memory if m is not None) / n
        if all(m is not None and m > 0 for m in memory)
        else math.nan
    )
    slots_per_tm = sum(slots) / n if all(s > 0 for s in slots) else math.nan
    free = sum(max(0, tm.free_slots) for tm in taskmanagers)
    return TaskManagerResources(n, cpu_per_tm, memory_per_tm, slots_per_tm, sum(slots), min(free, sum(slots)))


def taskmanager_memory(taskmanagers: Sequence[TaskManagerInfo]) -> TaskManagerMemory | None:
    """One TaskManager's memory pools (the first that reports them all: a cluster's TaskManagers
    normally share one spec), for the memory advice; None when none does."""
    for tm in taskmanagers:
        pools = (
            tm.total_process_memory,
            tm.framework_heap,
            tm.task_heap,
            tm.framework_off_heap,
            tm.task_off_heap,
            tm.network_memory,
            tm.managed_memory,
            tm.jvm_metaspace,
            tm.jvm_overhead,
        )
        known = [p for p in pools if p is not None and p >= 0]
        if len(known) == len(pools) and known[0] > 0:
            return TaskManagerMemory(*known)
    return None


def with_taskmanager_resources(
    sample: TaskManagerSample, taskmanagers: Sequence[TaskManagerInfo]
) -> TaskManagerSample:
    """``sample`` with its resource fields filled from ``GET /taskmanagers``."""
    r = taskmanager_resources(taskmanagers)
    return replace(
        sample,
        memory=taskmanager_memory(taskmanagers),
        count=r.count,
        cpu_cores_per_tm=r.cpu_per_tm,
        memory_per_tm=r.memory_per_tm,
        slots_per_tm=r.slots_per_tm,
        slots_total=r.slots_total,
        slots_free=r.slots_free,
    )


async def fetch_taskmanager_resources(client: FlinkClient, sample: TaskManagerSample) -> TaskManagerSample:
    """``GET /taskmanagers`` into ``sample``; on a Flink error the sample is returned unchanged.

    The resources feed the quota gate and the slot check (``autoscaler.slot_fit``), where unknown never
    blocks, so a failing endpoint must not cost the tick.
    """
    try:
        taskmanagers = await client.taskmanagers()
    except FlinkError as err:
        log.warning("taskmanagers_failed", cluster=client.cluster, error=str(err))
        return sample
    return with_taskmanager_resources(sample, taskmanagers)


def slot_groups(topology: JobTopology) -> dict[VertexId, str]:
    """Each vertex's slot-sharing group; a vertex without a known one shares Flink's default group."""
    return {v.id: v.slot_sharing_group or _DEFAULT_GROUP for v in topology}


def group_slots(topology: JobTopology, parallelism: Mapping[VertexId, int] | None = None) -> dict[str, int]:
    """Slots each slot-sharing group needs: the highest parallelism among its vertices.

    ``parallelism`` overrides the topology's current values for the vertices it names.
    """
    overrides = parallelism or {}
    per_group: dict[str, int] = {}
    for vid, group in slot_groups(topology).items():
        p = overrides.get(vid, topology.vertices[vid].parallelism)
        per_group[group] = max(per_group.get(group, 0), p)
    return per_group


def required_slots(topology: JobTopology, parallelism: Mapping[VertexId, int] | None = None) -> int:
    """Slots the job needs: per slot-sharing group the highest parallelism, summed over groups
    (:func:`group_slots`)."""
    return sum(group_slots(topology, parallelism).values())


def required_taskmanagers(slots: int, slots_per_tm: float) -> int:
    """TaskManagers needed for ``slots``: ``ceil(slots / slots_per_tm)``."""
    return math.ceil(slots / slots_per_tm)


def quota_exceeded(
    topology: JobTopology,
    new_parallelism: Mapping[VertexId, int],
    tm: TaskManagerSample,
    cpu_quota: float | None,
    memory_quota: int | None,
) -> str | None:
    """Why the new parallelism breaks ``quota.cpu`` or ``quota.memory``, or None when it does not.

    Only a growing TaskManager count can exceed a quota: a job already above its quota may still
    shrink or rebalance. No quota, or unknown slots, CPU or memory, never blocks.
    """
    if (cpu_quota is None and memory_quota is None) or not tm.slots_per_tm > 0:
        return None
    current_slots = required_slots(topology)
    new_slots = required_slots(topology, new_parallelism)
    current_tms = required_taskmanagers(current_slots, tm.slots_per_tm)
    new_tms = required_taskmanagers(new_slots, tm.slots_per_tm)
    if new_tms <= current_tms:
        return None
    sizing = f"{new_slots} slots need {new_tms} TaskManagers of {tm.slots_per_tm:g} slots (now {current_tms})"
    if cpu_quota is not None and not math.isnan(tm.cpu_cores_per_tm):
        cpu = tm.cpu_cores_per_tm * new_tms
        if cpu > cpu_quota:
            return f"CPU quota reached: {sizing} = {cpu:g} cores > quota.cpu {cpu_quota:g}"
    if memory_quota is not None and not math.isnan(tm.memory_per_tm):
        memory = tm.memory_per_tm * new_tms
        if memory > memory_quota:
            return f"memory quota reached: {sizing} = {_bytes(memory)} > quota.memory {_bytes(memory_quota)}"
    return None


def _bytes(n: float) -> str:
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"
