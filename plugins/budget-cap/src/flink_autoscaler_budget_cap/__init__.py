"""Budget cap: keep a scaling within a slot budget, trimming the largest increases first."""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.flink.errors import FlinkError
from autoscaler.model import JobTopology, VertexChange
from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin

__all__ = ["BudgetCapPlugin", "slots_needed"]


def slots_needed(topology: JobTopology, parallelism: Mapping[str, int]) -> int:
    """Slots a job occupies: per slot-sharing group the highest parallelism in it, summed."""
    groups: dict[str, int] = {}
    for vertex in topology:
        group = vertex.slot_sharing_group or "default"
        groups[group] = max(groups.get(group, 0), parallelism.get(vertex.id, vertex.parallelism))
    return sum(groups.values())


class BudgetCapPlugin(ScalingExecutorPlugin):
    """Caps slots per job (``scope: job``) or for the cluster (``scope: cluster``); see the README."""

    name = "budget-cap"

    def priority(self) -> int:
        return 100  # a modifier: run after the gates have approved

    async def apply(self, context: PluginContext, changes: Changes) -> Changes | None:
        max_slots = int(context.config["max-slots"])
        scope = context.config.get("scope", "job").strip().lower()
        topology = context.evaluation.sample.topology
        current = {v.id: v.parallelism for v in topology}
        budget = max_slots
        if scope == "cluster":
            if context.client is None:
                return None
            try:
                overview = await context.client.overview()
            except FlinkError:
                return None  # cannot see the cluster: do not risk exceeding its budget
            used_by_others = overview.slots_total - overview.slots_available - slots_needed(topology, current)
            budget = max_slots - max(0, used_by_others)
        elif scope != "job":
            raise ValueError(f"budget-cap scope must be 'job' or 'cluster', got {scope!r}")
        wanted = {**current, **{vid: c.target for vid, c in changes.items()}}
        while slots_needed(topology, wanted) > budget:
            increases = {vid: wanted[vid] - current[vid] for vid in wanted if wanted[vid] > current[vid]}
            if not increases:
                break  # only scale-downs are left; they free slots and are never trimmed
            largest = max(increases, key=lambda vid: (increases[vid], vid))
            wanted[largest] -= 1
        return {vid: VertexChange(vid, current[vid], p) for vid, p in wanted.items() if p != current[vid]}
