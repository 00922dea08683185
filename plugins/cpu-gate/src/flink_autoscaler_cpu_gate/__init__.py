"""CPU gate: scale only when TaskManagers are busy and a source scales up; align all to the source.

It is also a metric provider: it declares ``Status.JVM.CPU.Load``, so the daemon collects the
TaskManagers' average CPU load every tick with the standard metrics and keeps it in the metric window.
The gate then judges the load averaged over the window, not one instant, and does no I/O. Where the
window has no value (a daemon that does not collect custom metrics, or none measured yet) it falls back
to asking Flink itself, as it always did.
"""

from __future__ import annotations

import math

from autoscaler.flink.errors import FlinkError
from autoscaler.model import VertexChange
from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.metrics import CustomMetricProvider

__all__ = ["CPU_LOAD", "DEFAULT_THRESHOLD", "CpuGatePlugin"]

CPU_LOAD = "Status.JVM.CPU.Load"  # averaged over TaskManagers (a declared name's default aggregate)
DEFAULT_THRESHOLD = 0.8


class CpuGatePlugin(ScalingExecutorPlugin, CustomMetricProvider):
    """Vetoes unless the average TaskManager CPU load >= ``threshold`` and a source scales up."""

    name = "cpu-gate"

    def taskmanager_metric_names(self) -> list[str]:
        return [CPU_LOAD]

    async def apply(self, context: PluginContext, changes: Changes) -> Changes | None:
        threshold = float(context.config.get("threshold", DEFAULT_THRESHOLD))
        topology = context.evaluation.sample.topology
        sources = [v.id for v in topology if topology.is_source(v.id)]
        source_targets = [c.target for vid, c in changes.items() if vid in sources and c.is_scale_up]
        if not source_targets:
            return None  # only lag-driven (source) scale-ups pass
        cpu = await self._average_cpu(context)
        if math.isnan(cpu) or cpu < threshold:
            return None
        target = max(source_targets)
        aligned: dict[str, VertexChange] = {}
        for vertex in topology:
            parallelism = min(target, vertex.max_parallelism)
            if parallelism != vertex.parallelism:
                aligned[vertex.id] = VertexChange(vertex.id, vertex.parallelism, parallelism)
        return aligned

    @staticmethod
    async def _average_cpu(context: PluginContext) -> float:
        """The window average of the TaskManagers' CPU load, else a REST query; NaN (a veto) if neither."""
        _, windowed = context.evaluation.custom_metric(CPU_LOAD)
        if not math.isnan(windowed):
            return windowed
        if context.client is None:
            return math.nan
        try:
            metrics = await context.client.taskmanager_metrics([CPU_LOAD], aggs=("avg",))
        except FlinkError:
            return math.nan
        metric = metrics.get(CPU_LOAD)
        return metric.avg if metric is not None else math.nan
