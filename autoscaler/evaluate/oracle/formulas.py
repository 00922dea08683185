"""The reference autoscaler's evaluation math on plain floats: the oracle the Spark backend must equal.

NaN means "unknown", never zero. Every function names the reference rule it implements
(``/work/shared/reference/flink-autoscaler.md`` §1.3-§1.6, Java ``ScalingMetricEvaluator`` and
``AutoScalerUtils``). Division follows Java doubles (x/0 = inf) so edge cases match the reference.

Split of work: a backend (Spark, or :func:`aggregate_window`) reduces each vertex's window to one
:class:`VertexAggregates` (:mod:`autoscaler.evaluate.aggregates`); this module walks the job graph in
topological order, propagating rates along the edges, computing each vertex's rates
(:mod:`autoscaler.evaluate.oracle.rates`), running the custom evaluators (:mod:`autoscaler.evaluate.custom`)
and asking :mod:`autoscaler.evaluate.scaler` for the parallelism. It re-exports the aggregate and
rate formulas so the oracle stays importable from one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.evaluate.aggregates import (
    EMPTY_AGGREGATES,
    AverageParts,
    CustomAggregate,
    RatePoints,
    VertexAggregates,
    aggregate_custom_window,
    aggregate_window,
    aggregates_of,
    get_average,
    get_rate,
    load_sample,
)
from autoscaler.evaluate.custom import (
    ConfiguredEvaluator,
    EvaluatorContext,
    VertexMetrics,
    run_evaluators,
)
from autoscaler.evaluate.history import (
    VertexScaling,
    ineffective_scale_up,
    scalability_coefficient,
    vertex_history,
)
from autoscaler.evaluate.javamath import java_round, whole_seconds
from autoscaler.evaluate.oracle.propagation import (
    edge_data_rate,
    edge_output_ratio,
    incoming_rates,
    propagate_rates,
)
from autoscaler.evaluate.oracle.rates import (
    ProcessingRates,
    busy_time_avg,
    busy_time_bounds,
    busy_time_thresholds,
    capacity,
    catch_up_rate,
    is_processing_backlog,
    processing_rates,
    target_data_rate,
    thresholds,
    tpr_input_rate,
    true_processing_rate,
)
from autoscaler.evaluate.scaler import compute_busy_time_parallelism, compute_target_parallelism
from autoscaler.model import JobSample, VertexEvaluation, VertexId
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import ScalingRecord

__all__ = [
    "EMPTY_AGGREGATES",
    "AverageParts",
    "CustomAggregate",
    "GraphEvaluation",
    "ProcessingRates",
    "RatePoints",
    "VertexAggregates",
    "aggregate_custom_window",
    "aggregate_window",
    "busy_time_avg",
    "busy_time_bounds",
    "busy_time_thresholds",
    "capacity",
    "catch_up_rate",
    "edge_data_rate",
    "edge_output_ratio",
    "evaluate_graph",
    "evaluate_vertices",
    "get_average",
    "get_rate",
    "incoming_rates",
    "is_processing_backlog",
    "java_round",
    "load_sample",
    "processing_rates",
    "propagate_rates",
    "target_data_rate",
    "thresholds",
    "tpr_input_rate",
    "true_processing_rate",
    "whole_seconds",
]


# ---------------------------------------------------------------------------------------------- the graph
@dataclass(frozen=True, slots=True)
class GraphEvaluation:
    """One job's vertices evaluated, the processing-backlog flag, and the custom evaluators that failed."""

    vertices: dict[VertexId, VertexEvaluation]
    processing_backlog: bool
    evaluator_failures: tuple[str, ...] = ()


def evaluate_vertices(
    sample: JobSample,
    aggregates: Mapping[VertexId, VertexAggregates],
    options: AutoscalerOptions,
    restart_time_s: float | None = None,
    history: Sequence[ScalingRecord] = (),
    *,
    evaluators: Sequence[ConfiguredEvaluator] = (),
    custom_metrics: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
) -> tuple[dict[VertexId, VertexEvaluation], bool]:
    """:func:`evaluate_graph` as ``(evaluations, processing backlog)``."""
    result = evaluate_graph(
        sample,
        aggregates,
        options,
        restart_time_s,
        history,
        evaluators=evaluators,
        custom_metrics=custom_metrics,
    )
    return result.vertices, result.processing_backlog


def evaluate_graph(
    sample: JobSample,
    aggregates: Mapping[VertexId, VertexAggregates],
    options: AutoscalerOptions,
    restart_time_s: float | None = None,
    history: Sequence[ScalingRecord] = (),
    *,
    evaluators: Sequence[ConfiguredEvaluator] = (),
    custom_metrics: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
) -> GraphEvaluation:
    """Reference §1.5-§1.10 for one job, vertex by vertex in topological order.

    For each vertex: its built-in metrics (target data and catch-up rates propagated from the final
    metrics of its inputs, TPR, load, lag), then the custom evaluators in order (FLIP-514, see
    :mod:`autoscaler.evaluate.custom`), then thresholds and the recommendation from the merged metrics.
    Merging before the next vertex is what lets an override flow downstream.

    A vertex without aggregates, or whose TPR or TDR is unknown, keeps its parallelism; unknown rates
    flow downstream as NaN (FLINK-39925 fixed). ``history`` (the job's scaling records, oldest first)
    feeds ineffective scale-up detection and the observed scalability coefficient; ``restart_time_s``
    defaults to ``restart.time``. ``custom_metrics`` (scope -> name -> (current, average)) are handed
    to the evaluators.
    """
    topology = sample.topology
    restart_s = whole_seconds(options.restart_time) if restart_time_s is None else restart_time_s
    backlog_s = whole_seconds(options.backlog_processing_lag_threshold)
    catch_up_s = whole_seconds(options.catch_up_duration)
    sources = [vid for vid in topology.vertices if topology.is_source(vid)]
    backlog = any(
        is_processing_backlog(
            aggregates_of(aggregates, v).lag_latest, aggregates_of(aggregates, v).records_in_rate, backlog_s
        )
        for v in sources
    )
    final: dict[VertexId, VertexMetrics] = {}
    rates_in = _Propagated({}, {})  # the final (merged) TDR and catch-up rate of each vertex so far
    out: dict[VertexId, VertexEvaluation] = {}
    failures: list[str] = []
    for vid in topology.vertices:
        agg = aggregates_of(aggregates, vid)
        rates = processing_rates(agg, options, topology.vertices[vid].parallelism)
        builtin = _builtin_metrics(sample, vid, agg, rates, rates_in, aggregates, options, catch_up_s)
        metrics = builtin
        if evaluators:
            context = EvaluatorContext(
                job=sample.job,
                vertex=vid,
                options=options,
                config={},
                topology=topology,
                builtin=builtin,
                evaluated=dict(final),
                aggregates=aggregates,
                custom_metrics=custom_metrics or {},
                processing_backlog=backlog,
            )
            run = run_evaluators(evaluators, builtin, context)
            metrics = run.metrics
            failures.extend(run.failures)
        final[vid] = metrics
        rates_in.target_data_rate[vid] = metrics.target_data_rate
        rates_in.catch_up_data_rate[vid] = metrics.catch_up_data_rate
        out[vid] = _recommend(
            sample,
            metrics,
            rates.from_counters,
            _JobTerms(backlog, restart_s),
            options,
            vertex_history(history, vid),
        )
    return GraphEvaluation(out, backlog, tuple(failures))


@dataclass(frozen=True, slots=True)
class _Propagated:
    """Per vertex evaluated so far, the rates its outputs inherit (after the custom evaluators)."""

    target_data_rate: dict[VertexId, float]
    catch_up_data_rate: dict[VertexId, float]


@dataclass(frozen=True, slots=True)
class _JobTerms:
    """The job-wide terms of every vertex's thresholds."""

    processing_backlog: bool
    restart_s: float


def _builtin_metrics(
    sample: JobSample,
    vid: VertexId,
    agg: VertexAggregates,
    rates: ProcessingRates,
    propagated: _Propagated,
    aggregates: Mapping[VertexId, VertexAggregates],
    options: AutoscalerOptions,
    catch_up_s: float,
) -> VertexMetrics:
    """The built-in metrics of one vertex; its inputs' final (merged) rates feed the propagation.

    Busy-time-only mode reports the vertex's own input rate as its TDR and no catch-up (§9).
    """
    topology = sample.topology
    info = topology.vertices[vid]
    # Ours: a busy-time TPR from two counters over the window is exact, while the observed TPR divides
    # Flink's 60 s meter by its 60 s back-pressure gauge, which disagree for a minute after every load
    # change (a back-pressured source then reads a small fraction of its capacity). So with counter
    # rates the observed TPR only stands in for an unknown or infinite busy-time TPR.
    switch = math.inf if rates.from_counters else options.observed_tpr_switch_threshold
    tpr = true_processing_rate(
        rates.busy_ms_per_s,
        rates.input_rate,
        agg.observed_tpr_avg(options.observed_tpr_min_observations),
        switch,
    )
    if options.busy_time_only_enabled:
        tdr, catch_up = rates.input_rate, 0.0
    else:
        tdr, catch_up = incoming_rates(
            topology,
            aggregates,
            vid,
            propagated.target_data_rate,
            propagated.catch_up_data_rate,
            catch_up_s,
        )
    return VertexMetrics(
        vertex=vid,
        parallelism=info.parallelism,
        max_parallelism=info.max_parallelism,
        is_source=topology.is_source(vid),
        load=rates.load,
        true_processing_rate=tpr,
        target_data_rate=tdr,
        catch_up_data_rate=catch_up,
        lag=agg.lag_latest,
    )


def _recommend(
    sample: JobSample,
    metrics: VertexMetrics,
    from_counters: bool,
    terms: _JobTerms,
    options: AutoscalerOptions,
    past: Sequence[VertexScaling],
) -> VertexEvaluation:
    """One vertex's thresholds and recommendation from its (merged) metrics, then the history rules."""
    vid = metrics.vertex
    tpr, tdr, catch_up = metrics.true_processing_rate, metrics.target_data_rate, metrics.catch_up_data_rate
    alpha = scalability_coefficient(past, options) if options.observed_scalability_enabled else 1.0
    placement: dict[str, Any] = {
        "parallelism": metrics.parallelism,
        "max_parallelism": metrics.max_parallelism,
        "options": options,
        "num_source_partitions": sample.num_source_partitions.get(vid, 0),
        "input_ship_strategies": [e.ship_strategy for e in sample.topology.inputs(vid)],
        "scalability_coefficient": alpha,
    }
    if options.busy_time_only_enabled:
        scale_up, scale_down = busy_time_thresholds(tdr, terms.processing_backlog, options)
        rec = compute_busy_time_parallelism(
            load=metrics.load,
            true_processing_rate=tpr,
            band=busy_time_bounds(terms.processing_backlog, options),
            **placement,
        )
    else:
        scale_up, scale_down = thresholds(
            target_data_rate=tdr,
            catch_up_data_rate=catch_up,
            processing_backlog=terms.processing_backlog,
            options=options,
            restart_s=terms.restart_s,
        )
        target_capacity = capacity(
            options.utilization_target,
            target_data_rate=tdr,
            catch_up_data_rate=catch_up,
            with_restart=True,
            restart_s=terms.restart_s,
            catch_up_s=whole_seconds(options.catch_up_duration),
        )
        rec = compute_target_parallelism(
            true_processing_rate=tpr,
            target_capacity=target_capacity,
            scale_up_threshold=scale_up,
            scale_down_threshold=scale_down,
            **placement,
        )
    current = metrics.parallelism
    unknown = math.isnan(tpr) or math.isnan(tdr)
    gain = (
        ineffective_scale_up(
            past[-1] if past else None,
            parallelism=current,
            true_processing_rate=tpr,
            threshold=options.scaling_effectiveness_threshold,
        )
        if not unknown and rec.parallelism > current
        else None
    )
    ineffective = gain is not None
    blocked = ineffective and options.scaling_effectiveness_detection_enabled
    return VertexEvaluation(
        vertex=vid,
        parallelism=current,
        max_parallelism=metrics.max_parallelism,
        load=metrics.load,
        true_processing_rate=tpr,
        target_data_rate=tdr,
        catch_up_data_rate=catch_up,
        lag=metrics.lag,
        scale_up_threshold=scale_up,
        scale_down_threshold=scale_down,
        target_parallelism=current if unknown or blocked else rec.parallelism,
        expected_processing_rate=tpr if blocked else rec.expected_processing_rate,
        outside_band=False if unknown else rec.outside_band,
        ineffective_scale_up=ineffective,
        rates_from_counters=from_counters,
        scalability_coefficient=alpha,
        limited_from=None if unknown else rec.limited_from,
        limited_by=None if unknown else rec.limited_by,
        scale_up_gain=gain,
    )
