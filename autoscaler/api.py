"""The public surface for plugin authors: import from here, and only from here.

The contract: every name in ``__all__`` keeps its name and meaning here across releases, whichever
module inside the daemon holds it today. Everything else under ``autoscaler`` is internal and may
move, be renamed or change without notice (issue 37 moved many modules at once; a plugin written
against this module did not notice). A plugin that imports ``autoscaler.<anything else>`` is on its own.

What is here, by the kind of plugin (docs/plugins.md says how each is written, packaged, configured):

- **executor plugins** (entry-point group ``flink_autoscaler.executor_plugins``):
  :class:`ScalingExecutorPlugin`, the :class:`PluginContext` it is called with, the :data:`Changes` it
  receives and returns (vertex id -> :class:`VertexChange`), and :class:`Verdict` to give a reason;
- **metric providers** (a mixin for both kinds above): :class:`CustomMetricProvider`, the
  :class:`ExternalMetricsContext` of ``collect_external_metrics``, and :data:`JOB_SCOPE`;
- **custom evaluators** (entry-point group ``flink_autoscaler.evaluators``): :class:`CustomEvaluator`,
  its :class:`EvaluatorContext`, the :class:`VertexMetrics` it reads and :data:`Overrides` it returns,
  and the window's :class:`VertexAggregates`;
- **what the contexts carry**: the job (:class:`JobRef`, :class:`JobTarget`), its options
  (:class:`AutoscalerOptions`), the job graph (:class:`JobTopology`, :class:`VertexInfo`,
  :class:`Edge`, :data:`VertexId`), this tick's sample (:class:`JobSample`, :class:`VertexSample`,
  :class:`TaskManagerSample`, :class:`VertexSkew`), the evaluation (:class:`JobEvaluation`,
  :class:`VertexEvaluation`) and the :class:`Reason` a not-ready evaluation names;
- **the Flink REST client** of ``PluginContext.client``: :class:`FlinkClient`, the errors its calls
  raise (all :class:`FlinkError`), and the answers of its cluster-wide reads (:class:`ClusterOverview`,
  :class:`TaskManagerInfo`, :class:`AggregatedMetric`);
- **slot arithmetic**, the daemon's own (its slot and quota gates use the same functions), so a
  plugin's count agrees with the daemon's: :func:`required_slots`, :func:`group_slots`,
  :func:`slot_groups`, :func:`required_taskmanagers`;
- **builders for a plugin's tests**: :func:`make_topology`, :func:`make_sample`, :func:`vertex_eval`,
  :func:`make_evaluation` (plain values in, the objects above out).

Each name is imported below from the one module that defines it, so when a module moves only its
import line here changes.
"""

from __future__ import annotations

from autoscaler.evaluate.aggregates import VertexAggregates
from autoscaler.evaluate.custom import CustomEvaluator, EvaluatorContext, Overrides, VertexMetrics
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkBadPayload, FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.models import AggregatedMetric, ClusterOverview, TaskManagerInfo
from autoscaler.model import (
    JOB_SCOPE,
    Edge,
    JobEvaluation,
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    TaskManagerSample,
    VertexChange,
    VertexEvaluation,
    VertexId,
    VertexInfo,
    VertexSample,
)
from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin, Verdict
from autoscaler.plugins.metrics import CustomMetricProvider, ExternalMetricsContext
from autoscaler.reasons import Reason
from autoscaler.resources import group_slots, required_slots, required_taskmanagers, slot_groups
from autoscaler.settings import AutoscalerOptions
from autoscaler.skew import VertexSkew
from autoscaler.testing import make_evaluation, make_sample, make_topology, vertex_eval

__all__ = [
    "JOB_SCOPE",
    "AggregatedMetric",
    "AutoscalerOptions",
    "Changes",
    "ClusterOverview",
    "CustomEvaluator",
    "CustomMetricProvider",
    "Edge",
    "EvaluatorContext",
    "ExternalMetricsContext",
    "FlinkBadPayload",
    "FlinkClient",
    "FlinkError",
    "FlinkHTTPError",
    "FlinkUnreachable",
    "JobEvaluation",
    "JobRef",
    "JobSample",
    "JobTarget",
    "JobTopology",
    "Overrides",
    "PluginContext",
    "Reason",
    "ScalingExecutorPlugin",
    "TaskManagerInfo",
    "TaskManagerSample",
    "Verdict",
    "VertexAggregates",
    "VertexChange",
    "VertexEvaluation",
    "VertexId",
    "VertexInfo",
    "VertexMetrics",
    "VertexSample",
    "VertexSkew",
    "group_slots",
    "make_evaluation",
    "make_sample",
    "make_topology",
    "required_slots",
    "required_taskmanagers",
    "slot_groups",
    "vertex_eval",
]
