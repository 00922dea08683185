"""TaskManager memory advice: the reference's memory tuning, computed for a rescale and shown, not applied.

The reference autoscaler sizes each TaskManager memory pool from what the job used over the metric
window and emits the result as a "Configuration recommendation" event whenever a rescale is decided
(flink-autoscaler.md §1.8 step 5), applying it only where it can redeploy TaskManagers
(``memory.tuning.enabled`` on Kubernetes). A standalone daemon cannot redeploy them, so it always advises.

The computation follows the reference's: a budget starting at the TaskManager's process size hands out,
in order, the pools kept as they are (framework and task off-heap, JVM overhead), then network memory
(buffers for every input and output channel of every vertex at its new parallelism, per slot), then
metaspace and heap (the window's average usage, max over TaskManagers, plus ``memory.tuning.overhead``),
then managed memory (none if unused; all that is left with ``memory.tuning.maximize-managed-memory``;
else as it is). ``memory.tuning.scale-down-compensation.enabled`` grows the heap by how many times fewer
TaskManagers the rescale needs. What was handed out is the new process size, never more than the
current one. One difference: the spec comes from what Flink reports it runs with (``GET /taskmanagers``,
``memoryConfiguration``), not from re-deriving it from the configuration, so it is exact by
construction; the slots a job needs count slot-sharing groups (:func:`autoscaler.resources.required_slots`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.model import JobSample, JobTopology, TaskManagerMemory, VertexId
from autoscaler.resources import required_slots

__all__ = [
    "MemoryAdvice",
    "NetworkConfig",
    "advice_for",
    "advise_memory",
    "memory_size_text",
    "network_bytes",
]

_ADVICE_REMOVALS = (
    "taskmanager.memory.flink.size",
    "taskmanager.memory.task.heap.size",
    "taskmanager.memory.managed.size",
    "taskmanager.memory.size",
)


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """The network stack's buffer settings (Flink's defaults unless the cluster sets them)."""

    buffers_per_channel: int = 2  # taskmanager.network.memory.buffers-per-channel
    floating_buffers_per_gate: int = 8  # taskmanager.network.memory.floating-buffers-per-gate
    segment_size: int = 32 * 1024  # taskmanager.memory.segment-size


@dataclass(frozen=True, slots=True)
class MemoryAdvice:
    """The recommended pools (bytes) and the configuration that sets them."""

    process: int
    heap: int
    managed: int
    network: int
    metaspace: int
    managed_fraction: float
    overhead_fraction: float

    def config(self) -> dict[str, str]:
        """The ``taskmanager.memory.*`` keys to set, as the reference's recommendation names them."""
        return {
            "taskmanager.memory.process.size": memory_size_text(self.process),
            "taskmanager.memory.framework.heap.size": "0 bytes",
            "taskmanager.memory.managed.fraction": str(self.managed_fraction),
            "taskmanager.memory.network.min": memory_size_text(self.network),
            "taskmanager.memory.network.max": memory_size_text(self.network),
            "taskmanager.memory.jvm-overhead.fraction": str(self.overhead_fraction),
            "taskmanager.memory.jvm-metaspace.size": memory_size_text(self.metaspace),
        }

    def text(self) -> str:
        """The event's text: what to set and what to remove; applied by whoever deploys TaskManagers."""
        lines = "\n".join(f"{key}: {value}" for key, value in self.config().items())
        return (
            "Memory tuning recommends the following configuration (advice: a standalone daemon cannot "
            f"redeploy TaskManagers):\n{lines}\n"
            f"Remove the following config entries if present: [{', '.join(_ADVICE_REMOVALS)}]"
        )


class _Budget:
    """What is left of the process size as the pools are handed out, in order."""

    def __init__(self, total: int) -> None:
        self.left = total

    def take(self, wanted: float) -> int:
        granted = int(min(max(0.0, wanted), self.left))
        self.left -= granted
        return granted


def network_bytes(
    topology: JobTopology, parallelism: Mapping[VertexId, int], slots_per_tm: int, net: NetworkConfig
) -> int:
    """Network memory one TaskManager needs: buffers for every input and output channel of every
    vertex at ``parallelism`` (else its current one), as if each slot ran one subtask of every vertex.

    A FORWARD edge between equal parallelisms is one channel; FORWARD and RESCALE otherwise connect to
    ceil(other / own) subtasks; every other edge (HASH, REBALANCE, BROADCAST) to all of the other side's.
    """

    def p(vid: VertexId) -> int:
        return parallelism.get(vid, topology.vertices[vid].parallelism)

    def segments(own: int, other: int, strategy: str) -> int:
        kind = strategy.upper()
        if own == other and kind == "FORWARD":
            channels = 1
        elif kind in ("FORWARD", "RESCALE"):
            channels = math.ceil(other / own)
        else:
            channels = other
        return channels * net.buffers_per_channel + net.floating_buffers_per_gate

    total = 0
    for e in topology.edges:
        total += segments(p(e.target), p(e.source), e.ship_strategy)  # the target's input gate
        total += segments(p(e.source), p(e.target), e.ship_strategy)  # the source's output
    return total * net.segment_size * slots_per_tm


def advise_memory(
    spec: TaskManagerMemory,
    *,
    heap_used: float,
    managed_used: float,
    metaspace_used: float,
    topology: JobTopology,
    parallelism: Mapping[VertexId, int],
    slots_per_tm: int,
    overhead: float = 0.2,
    maximize_managed: bool = False,
    scale_down_compensation: bool = True,
    net: NetworkConfig = NetworkConfig(),
) -> MemoryAdvice | None:
    """The reference's memory tuning for a rescale to ``parallelism`` (the vertices that change); usage
    is the window's average of the max over TaskManagers, in bytes (unknown counts as 0, as there).
    None when the spec is unknown (no process size) or nothing could be handed out."""
    if spec.process <= 0 or slots_per_tm <= 0:
        return None
    budget = _Budget(spec.process)
    budget.take(spec.framework_off_heap)
    budget.take(spec.task_off_heap)
    budget.take(spec.overhead)
    network = budget.take(network_bytes(topology, parallelism, slots_per_tm, net))
    metaspace = budget.take(math.trunc(_known(metaspace_used) * (1 + overhead)))
    heap = budget.take(math.trunc(_known(heap_used) * (1 + overhead)))
    wanted_managed = math.inf if maximize_managed else spec.managed
    managed = budget.take(wanted_managed) if _known(managed_used) > 0 else 0  # unused: advised away
    if scale_down_compensation:
        before = math.ceil(required_slots(topology) / slots_per_tm)
        after = math.ceil(required_slots(topology, parallelism) / slots_per_tm)
        factor = max(1.0, before / after) if after > 0 else 1.0
        heap += budget.take(math.trunc(factor * heap) - heap)
    process = spec.process - budget.left
    if process <= 0:
        return None
    flink = heap + managed + network + spec.framework_off_heap + spec.task_off_heap
    return MemoryAdvice(
        process=process,
        heap=heap,
        managed=managed,
        network=network,
        metaspace=metaspace,
        managed_fraction=_fraction(managed, flink),
        overhead_fraction=_fraction(spec.overhead, process),
    )


def _known(value: float) -> float:
    return value if math.isfinite(value) and value > 0 else 0.0


def _fraction(part: int, whole: int) -> float:
    """part / whole rounded up to 3 decimals (the reference's fractions); 0 when whole is 0."""
    return 0.0 if whole <= 0 else math.ceil(part / whole * 1000) / 1000


def memory_size_text(n: int) -> str:
    """Flink's MemorySize text: the largest unit that divides ``n`` exactly ("13760 kb", "30 gb")."""
    for unit, size in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def advice_for(sample: JobSample, targets: Mapping[VertexId, int]) -> MemoryAdvice | None:
    """The advice for rescaling ``sample``'s job to ``targets``, from what its tick read of the
    TaskManagers (spec, usage over the window, slots per TaskManager) and its ``memory.tuning.*``
    options; None when the TaskManagers' memory or slots are unknown."""
    tm, options = sample.taskmanagers, sample.target.options
    if tm.memory is None or not tm.slots_per_tm >= 1:
        return None
    return advise_memory(
        tm.memory,
        heap_used=tm.heap_used_avg,
        managed_used=tm.managed_used_avg,
        metaspace_used=tm.metaspace_used_avg,
        topology=sample.topology,
        parallelism=targets,
        slots_per_tm=round(tm.slots_per_tm),
        overhead=min(1.0, max(0.0, options.memory_tuning_overhead)),  # validated only with tuning on
        maximize_managed=options.memory_tuning_maximize_managed_memory,
        scale_down_compensation=options.memory_tuning_scale_down_compensation_enabled,
    )
