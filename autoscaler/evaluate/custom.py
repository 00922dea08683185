"""Custom evaluators (the reference's FLIP-514), several in a configured order.

A custom evaluator sees one vertex at a time, in topological order, after the built-in metrics of that
vertex are known and before its thresholds and parallelism are computed. It returns overrides keyed by
the metric they replace, each as ``(current, average)``::

    {"true_processing_rate": (nan, 4200.0), "catch_up_data_rate": (12.0, nan)}

The merge (reference ``ScalingMetricEvaluator#mergeEvaluatedScalingMetric``): a non-NaN component
overrides the built-in one, NaN keeps it. The reference keeps both components per metric; our
``VertexEvaluation`` keeps one number per metric, the component the reference's formulas read:

====================== ========= ==================================================================
metric                 component why
====================== ========= ==================================================================
``true_processing_rate`` average the scale factor and the band use TRUE_PROCESSING_RATE.average
``target_data_rate``     average thresholds and propagation use TARGET_DATA_RATE.average
``load``                 average LOAD is stored as an average (busy-time-only mode scales on it)
``catch_up_data_rate``   current thresholds use CATCH_UP_DATA_RATE.current
``lag``                  current LAG is stored as the latest value (reported only)
====================== ========= ==================================================================

so an override of the other component has no effect, as in the reference. Keys may also be spelled
like the reference's ``ScalingMetric`` names (``TRUE_PROCESSING_RATE``); other keys are ignored with a
warning. Because the merged values are what the next vertices see, an overridden target data rate
propagates downstream. Overriding ``lag`` does not recompute the catch-up rate: override that too.

Evaluators run in their configured order; each sees the metrics as merged so far, so a later one
overrides an earlier one. One that raises (or returns something malformed) has its overrides for that
vertex ignored and is reported; the built-in values stay. Evaluators run in the evaluation thread,
without a time budget: they must not do I/O (declare metrics with
:class:`autoscaler.plugins.metrics.CustomMetricProvider` instead and read them from the context).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import structlog

from autoscaler.evaluate.aggregates import VertexAggregates
from autoscaler.model import JOB_SCOPE, JobRef, JobTopology, VertexId
from autoscaler.settings import AutoscalerOptions

__all__ = [
    "OVERRIDABLE",
    "ConfiguredEvaluator",
    "CustomEvaluator",
    "EvaluatorContext",
    "UnavailableEvaluator",
    "VertexMetrics",
    "merge_overrides",
    "run_evaluators",
    "unavailable",
]

log = structlog.get_logger(__name__)

CURRENT, AVERAGE = 0, 1
# Metric -> the component of (current, average) our single-valued field takes (see the module doc).
OVERRIDABLE: Mapping[str, int] = {
    "true_processing_rate": AVERAGE,
    "target_data_rate": AVERAGE,
    "load": AVERAGE,
    "catch_up_data_rate": CURRENT,
    "lag": CURRENT,
}


@dataclass(frozen=True, slots=True)
class VertexMetrics:
    """The evaluated metrics of one vertex that an evaluator may read and override (NaN = unknown)."""

    vertex: VertexId
    parallelism: int
    max_parallelism: int
    is_source: bool
    load: float
    true_processing_rate: float
    target_data_rate: float
    catch_up_data_rate: float
    lag: float


@dataclass(frozen=True, slots=True)
class EvaluatorContext:
    """Everything an evaluator may use for one vertex; nothing here needs I/O.

    ``evaluated`` holds the final metrics of every vertex before this one in topological order (so all
    of its upstream vertices) and this vertex's metrics as merged so far (``metrics``). ``builtin`` is
    this vertex before any evaluator. ``custom_metrics`` are the job's windowed custom metrics
    (scope -> name -> (current, average), scope ``""`` for job-level ones).
    """

    job: JobRef
    vertex: VertexId
    options: AutoscalerOptions
    config: Mapping[str, str]
    topology: JobTopology
    builtin: VertexMetrics
    evaluated: Mapping[VertexId, VertexMetrics]
    aggregates: Mapping[VertexId, VertexAggregates] = field(default_factory=dict)
    custom_metrics: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    processing_backlog: bool = False

    @property
    def metrics(self) -> VertexMetrics:
        return self.evaluated[self.vertex]

    def upstream(self) -> dict[VertexId, VertexMetrics]:
        """The direct inputs of this vertex with their final metrics."""
        return {e.source: self.evaluated[e.source] for e in self.topology.inputs(self.vertex)}

    def custom_metric(self, name: str, vertex: VertexId | None = None) -> tuple[float, float]:
        """``(current, average)`` of a custom metric (job-level without ``vertex``); NaNs when unknown."""
        scope = JOB_SCOPE if vertex is None else vertex
        return self.custom_metrics.get(scope, {}).get(name, (math.nan, math.nan))


Overrides = Mapping[str, tuple[float, float]]


class CustomEvaluator(ABC):
    """Base class of custom evaluators, discovered in the entry-point group ``flink_autoscaler.evaluators``.

    One instance per configured name lives as long as the daemon (``name`` is set to the instance name).
    """

    name: str = "unnamed"

    @abstractmethod
    def evaluate(self, vertex: VertexId, context: EvaluatorContext) -> Overrides:
        """Overrides for ``vertex`` as ``{metric: (current, average)}``; NaN keeps the built-in value."""


ConfiguredEvaluator = tuple[CustomEvaluator, Mapping[str, str]]  # an instance and its own config


class UnavailableEvaluator(CustomEvaluator):
    """Stands in for a configured evaluator that could not be loaded: the job is not evaluated."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem

    def evaluate(self, vertex: VertexId, context: EvaluatorContext) -> Overrides:
        raise RuntimeError(self.problem)


def unavailable(evaluators: Sequence[ConfiguredEvaluator]) -> list[str]:
    """The problems of the configured evaluators that could not be loaded (empty when all are here)."""
    return [e.problem for e, _ in evaluators if isinstance(e, UnavailableEvaluator)]


def merge_overrides(metrics: VertexMetrics, overrides: Overrides) -> tuple[VertexMetrics, list[str]]:
    """Reference mergeEvaluatedScalingMetric on our single-valued fields; returns the ignored keys.

    Raises ``ValueError`` for a value that is not a ``(current, average)`` pair of numbers, so the
    caller can ignore the whole answer of that evaluator rather than half of it.
    """
    changes: dict[str, float] = {}
    ignored: list[str] = []
    for key, value in overrides.items():
        metric = str(key).lower()
        if metric not in OVERRIDABLE:
            ignored.append(str(key))
            continue
        pair = _pair(key, value)
        chosen = pair[OVERRIDABLE[metric]]
        if not math.isnan(chosen):
            changes[metric] = chosen
    return (replace(metrics, **changes) if changes else metrics), ignored


def _pair(key: object, value: object) -> tuple[float, float]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{key!r}: expected (current, average), got {value!r}")
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{key!r}: expected numbers, got {value!r}") from exc


@dataclass(frozen=True, slots=True)
class EvaluatorRun:
    """One vertex after the evaluators: the merged metrics and the evaluators that failed on it."""

    metrics: VertexMetrics
    failures: tuple[str, ...] = ()


def run_evaluators(
    evaluators: Sequence[ConfiguredEvaluator],
    builtin: VertexMetrics,
    base: EvaluatorContext,
) -> EvaluatorRun:
    """Apply every evaluator in order to one vertex; a failing one changes nothing.

    ``base`` is the context with ``evaluated`` holding the vertices before this one; each evaluator gets
    it with its own config and this vertex's metrics as merged so far.
    """
    vid, merged = builtin.vertex, builtin
    failures: list[str] = []
    for evaluator, config in evaluators:
        context = replace(base, config=config, evaluated={**base.evaluated, vid: merged})
        try:
            overrides = evaluator.evaluate(vid, context) or {}
            candidate, ignored = merge_overrides(merged, overrides)
        except Exception as exc:  # the built-in values stay; the failure is reported, never fatal
            error = f"{type(exc).__name__}: {exc}"
            log.warning("custom_evaluator_failed", evaluator=evaluator.name, vertex=vid, error=error)
            failures.append(f"custom evaluator {evaluator.name} failed on vertex {vid}: {error}")
            continue
        if ignored:
            log.warning("custom_evaluator_unknown_metrics", evaluator=evaluator.name, metrics=ignored)
        merged = candidate
    return EvaluatorRun(merged, tuple(failures))
