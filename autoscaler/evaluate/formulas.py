"""The reference autoscaler's evaluation math on plain floats: the oracle the Spark backend must equal.

NaN means "unknown", never zero. Every function names the reference rule it implements
(``/work/shared/reference/flink-autoscaler.md`` §1.3-§1.6, Java ``ScalingMetricEvaluator`` and
``AutoScalerUtils``). Division follows Java doubles (x/0 = inf) so edge cases match the reference.

Split of work: a backend (Spark, or :func:`aggregate_window` here) reduces each vertex's window to one
:class:`VertexAggregates`; :func:`evaluate_vertices` then propagates rates through the graph and asks
:mod:`autoscaler.evaluate.scaler` for the parallelism.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from autoscaler.evaluate.custom import (
    ConfiguredEvaluator,
    EvaluatorContext,
    VertexMetrics,
    run_evaluators,
)
from autoscaler.evaluate.history import (
    VertexScaling,
    is_ineffective_scale_up,
    scalability_coefficient,
    vertex_history,
)
from autoscaler.evaluate.scaler import compute_busy_time_parallelism, compute_target_parallelism
from autoscaler.model import NAN, JobSample, JobTopology, VertexEvaluation, VertexId, VertexSample
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator
from autoscaler.state import ScalingRecord

__all__ = [
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
    "processing_rates",
    "propagate_rates",
    "target_data_rate",
    "thresholds",
    "tpr_input_rate",
    "true_processing_rate",
    "whole_seconds",
]


# ---------------------------------------------------------------------------------------------- primitives
def _div(a: float, b: float) -> float:
    """Java double division: x/0 is ±inf and 0/0 NaN instead of a ZeroDivisionError."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _jmax(a: float, b: float) -> float:
    """Java ``Math.max``: NaN wins (Python's ``max(0, nan)`` would silently return 0)."""
    if math.isnan(a) or math.isnan(b):
        return NAN
    return a if a >= b else b


def java_round(x: float) -> float:
    """Java ``Math.round`` (ties towards +inf); NaN and infinities pass through unchanged."""
    if not math.isfinite(x):
        return x
    floor = math.floor(x)
    return float(floor + 1 if x - floor >= 0.5 else floor)


def whole_seconds(d: timedelta) -> int:
    """Java ``Duration#toSeconds``: whole seconds, which is what the reference feeds its formulas."""
    return d // timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class AverageParts:
    """What getAverage needs from a window: sum and count of finite samples, count of infinite ones."""

    total: float = 0.0
    count: int = 0
    infinite: int = 0

    @classmethod
    def of(cls, values: Iterable[float]) -> AverageParts:
        total, count, infinite = 0.0, 0, 0
        for v in values:
            if math.isnan(v):
                continue
            if math.isinf(v):
                infinite += 1
            else:
                total += v
                count += 1
        return cls(total, count, infinite)


def get_average(parts: AverageParts, min_elements: int = 1) -> float:
    """Reference getAverage: mean of finite samples; +inf if only infinite ones; NaN below min elements."""
    if parts.count == 0:
        return math.inf if parts.infinite > 0 else NAN
    if parts.count < min_elements:
        return NAN
    return parts.total / parts.count


@dataclass(frozen=True, slots=True)
class RatePoints:
    """First and last non-NaN point of a cumulative counter in the window, and how many there were."""

    count: int = 0
    first_ts_ms: float = NAN
    first: float = NAN
    last_ts_ms: float = NAN
    last: float = NAN

    @classmethod
    def of(cls, points: Iterable[tuple[int, float]]) -> RatePoints:
        """Points must come in timestamp order."""
        count, first, last = 0, (NAN, NAN), (NAN, NAN)
        for ts, v in points:
            if math.isnan(v):
                continue
            if count == 0:
                first = (float(ts), v)
            last = (float(ts), v)
            count += 1
        return cls(count, first[0], first[1], last[0], last[1])


def get_rate(points: RatePoints) -> float:
    """Reference getRate: 1000*(last-first)/max(1, t_last-t_first ms) over non-NaN points; NaN below 2."""
    if points.count < 2:
        return NAN
    return 1000.0 * (points.last - points.first) / max(1.0, points.last_ts_ms - points.first_ts_ms)


# ---------------------------------------------------------------------------------------------- aggregates
@dataclass(frozen=True, slots=True)
class VertexAggregates:
    """One vertex's window reduced to what the formulas need; both backends produce exactly this.

    ``busy_*`` are the getAverage parts of the per-sample LOAD (``max(0, busyTimeMsPerSecond)``, in ms/s)
    and ``observed_tpr_*`` those of OBSERVED_TPR, so the driver applies min-observations itself.
    """

    samples: int = 0
    busy_sum: float = 0.0
    busy_count: int = 0
    busy_infinite: int = 0
    accumulated_busy_rate: float = NAN  # getRate(ACCUMULATED_BUSY_TIME), ms/s summed over subtasks
    accumulated_busy_agg_rate: float = NAN  # getRate(accumulateBusyTimeMs by the aggregator), ms/s
    records_in_rate: float = NAN  # getRate(NUM_RECORDS_IN)
    records_out_rate: float = NAN  # getRate(NUM_RECORDS_OUT)
    lag_rate: float = NAN  # getRate(LAG)
    lag_latest: float = NAN  # latest non-NaN pending_records
    records_in_per_s_avg: float = NAN  # getAverage(NUM_RECORDS_IN_PER_SECOND)
    observed_tpr_sum: float = 0.0
    observed_tpr_count: int = 0
    observed_tpr_infinite: int = 0
    backpressure_avg: float = NAN  # getAverage(backPressuredTimeMsPerSecond)

    @property
    def busy(self) -> AverageParts:
        return AverageParts(self.busy_sum, self.busy_count, self.busy_infinite)

    @property
    def observed_tpr(self) -> AverageParts:
        return AverageParts(self.observed_tpr_sum, self.observed_tpr_count, self.observed_tpr_infinite)

    def observed_tpr_avg(self, min_observations: int) -> float:
        """Reference §1.5: getAverage(OBSERVED_TPR, min-observations)."""
        return get_average(self.observed_tpr, min_observations)


EMPTY_AGGREGATES = VertexAggregates()


def load_sample(busy_time_ms_per_s: float) -> float:
    """Reference §1.3 LOAD = max(0, busy) (kept in ms/s here; /1000 happens on the average)."""
    return _jmax(0.0, busy_time_ms_per_s)


def aggregate_window(samples: Sequence[tuple[int, VertexSample]]) -> VertexAggregates:
    """The plain-Python oracle of the Spark aggregation: one vertex's ``(ts_ms, sample)`` window."""
    ordered = sorted(samples, key=lambda item: item[0])
    busy = AverageParts.of(load_sample(s.busy_time_ms_per_s) for _, s in ordered)
    tpr = AverageParts.of(s.observed_tpr for _, s in ordered)
    lag = RatePoints.of((ts, s.pending_records) for ts, s in ordered)
    return VertexAggregates(
        samples=len(ordered),
        busy_sum=busy.total,
        busy_count=busy.count,
        busy_infinite=busy.infinite,
        accumulated_busy_rate=get_rate(RatePoints.of((ts, s.accumulated_busy_time_ms) for ts, s in ordered)),
        accumulated_busy_agg_rate=get_rate(
            RatePoints.of((ts, s.accumulated_busy_time_agg_ms) for ts, s in ordered)
        ),
        records_in_rate=get_rate(RatePoints.of((ts, s.num_records_in) for ts, s in ordered)),
        records_out_rate=get_rate(RatePoints.of((ts, s.num_records_out) for ts, s in ordered)),
        lag_rate=get_rate(lag),
        lag_latest=lag.last,
        records_in_per_s_avg=get_average(AverageParts.of(s.num_records_in_per_s for _, s in ordered)),
        observed_tpr_sum=tpr.total,
        observed_tpr_count=tpr.count,
        observed_tpr_infinite=tpr.infinite,
        backpressure_avg=get_average(AverageParts.of(s.backpressured_ms_per_s for _, s in ordered)),
    )


@dataclass(frozen=True, slots=True)
class CustomAggregate:
    """One custom metric's window: its latest measured value and getAverage of its values.

    Windowed like the standard metrics (same rows, same bounds), so a plugin gets a smoothed value and
    the moment's value from one consistent window instead of a single snapshot of its own.
    """

    points: int = 0  # measured (non-NaN) points in the window
    current: float = NAN  # the latest non-NaN value
    average: float = NAN  # getAverage: mean of the finite values, +inf if only infinite ones

    @property
    def pair(self) -> tuple[float, float]:
        return self.current, self.average


def aggregate_custom_window(points: Sequence[tuple[int, float]]) -> CustomAggregate:
    """The plain-Python oracle of the Spark custom-metric aggregation: one ``(ts_ms, value)`` series."""
    ordered = [(ts, v) for ts, v in sorted(points, key=lambda item: item[0]) if not math.isnan(v)]
    return CustomAggregate(
        points=len(ordered),
        current=ordered[-1][1] if ordered else NAN,
        average=get_average(AverageParts.of(v for _, v in ordered)),
    )


# ---------------------------------------------------------------------------------------------- rates
def target_data_rate(records_in_rate: float, lag_rate: float) -> float:
    """Reference §1.5 source TDR = max(0, getRate(NUM_RECORDS_IN) + getRate(LAG)); NaN stays NaN."""
    return _jmax(0.0, records_in_rate + lag_rate)


def edge_data_rate(
    topology: JobTopology, aggregates: Mapping[VertexId, VertexAggregates], source: VertexId, target: VertexId
) -> float:
    """Reference §1.5 computeEdgeDataRate, first case that applies.

    1. ``target`` has one input: its records-in rate. 2. every other input of ``target`` has exactly one
    output: target in-rate minus their out-rates. 3. otherwise the out-rate of ``source``.
    """
    inputs = _distinct(e.source for e in topology.inputs(target))
    target_in = _agg(aggregates, target).records_in_rate
    if len(inputs) == 1:
        return target_in
    others = [i for i in inputs if i != source]
    if all(len(_distinct(e.target for e in topology.outputs(i))) == 1 for i in others):
        return target_in - sum(_agg(aggregates, i).records_out_rate for i in others)
    return _agg(aggregates, source).records_out_rate


def edge_output_ratio(source_records_in_rate: float, edge_rate: float) -> float:
    """Reference §1.5 computeEdgeOutputRatio, with FLINK-39925 fixed: NaN if unmeasured, 0 if <= 0."""
    if math.isnan(source_records_in_rate) or math.isnan(edge_rate):
        return NAN
    if source_records_in_rate <= 0 or edge_rate <= 0:
        return 0.0
    return edge_rate / source_records_in_rate


def catch_up_rate(lag_latest: float, catch_up_s: float) -> float:
    """Reference §1.5 source CATCH_UP_DATA_RATE = lag / catch-up.duration, 0 when the duration is 0."""
    return 0.0 if catch_up_s == 0 else lag_latest / catch_up_s


def busy_time_avg(agg: VertexAggregates, aggregator: BusyTimeAggregator, parallelism: int) -> float:
    """Reference §1.5 busyTimeAvg (ms/s): AVG uses getRate(ACCUMULATED_BUSY_TIME)/p, else getAverage(LOAD)."""
    if aggregator is BusyTimeAggregator.AVG:
        return agg.accumulated_busy_rate / parallelism
    return get_average(agg.busy)


def tpr_input_rate(agg: VertexAggregates, aggregator: BusyTimeAggregator) -> float:
    """Reference FLINK-39306: the TPR numerator matches the busy-time denominator's aggregation.

    With MAX/MIN the busy time is Flink's 60 s TimerGauge, so the numerator is the 60 s meter too:
    both lag a load change alike. Both also restart after a rescale (the meter ramps for a minute),
    which the stabilization interval has to cover.
    """
    if aggregator is BusyTimeAggregator.AVG:
        return agg.records_in_rate
    avg = agg.records_in_per_s_avg
    return agg.records_in_rate if math.isnan(avg) or math.isinf(avg) else avg


@dataclass(frozen=True, slots=True)
class ProcessingRates:
    """The TPR's numerator and denominator, always from the same kind of source (FLINK-39306)."""

    busy_ms_per_s: float  # busy time per second of the vertex as the aggregator sees it
    input_rate: float  # records per second in
    from_counters: bool  # both are counter deltas over the window (else Flink's gauge and meter)

    @property
    def load(self) -> float:
        return self.busy_ms_per_s / 1000.0


def processing_rates(agg: VertexAggregates, options: AutoscalerOptions, parallelism: int) -> ProcessingRates:
    """Counter deltas when ``metrics.prefer-counter-rates`` (ours) and both counters were measured.

    Flink's ``*PerSecond`` meters and the busy-time TimerGauge each cover their own trailing 60 s and
    restart (the meter ramping up) after every rescale, so a TPR built from them disagrees with itself
    whenever the load changes. The deltas of two counters over the same window cannot: busy ms/s =
    getRate(accumulateBusyTimeMs aggregated by the busy-time aggregator) and input rate =
    getRate(NUM_RECORDS_IN). When either counter is missing (NaN: not listed, legacy source, fewer
    than two points) the reference path is used: getAverage(LOAD) or the AVG accumulated rate, with
    the FLINK-39306 input rate.
    """
    if options.prefer_counter_rates:
        busy, rate = agg.accumulated_busy_agg_rate, agg.records_in_rate
        if _counter_rate(busy) and _counter_rate(rate):
            return ProcessingRates(busy, rate, True)
    aggregator = options.busy_time_aggregator
    return ProcessingRates(
        busy_time_avg(agg, aggregator, parallelism), tpr_input_rate(agg, aggregator), False
    )


def _counter_rate(rate: float) -> bool:
    """A counter's rate is usable when finite and not negative (a falling counter means a reset)."""
    return math.isfinite(rate) and rate >= 0


def true_processing_rate(
    busy_time_avg_ms: float, input_rate: float, observed_tpr_avg: float, switch_threshold: float
) -> float:
    """Reference §1.5 TRUE_PROCESSING_RATE: busy-time TPR unless the observed TPR is known and better.

    busyTpr = in / (busy/1000), +inf with no input. Observed wins when busyTpr is NaN/inf or exceeds
    observed * (1 + switch-threshold).
    """
    busy_tpr = math.inf if input_rate == 0 else _div(input_rate, busy_time_avg_ms / 1000.0)
    if math.isnan(observed_tpr_avg):
        return busy_tpr
    if math.isnan(busy_tpr) or math.isinf(busy_tpr):
        return observed_tpr_avg
    if busy_tpr > observed_tpr_avg * (1.0 + switch_threshold):
        return observed_tpr_avg
    return busy_tpr


def is_processing_backlog(lag_latest: float, records_in_rate: float, threshold_s: float) -> bool:
    """Reference §1.5 backlog flag for one source: lag / getRate(NUM_RECORDS_IN) > lag-threshold seconds."""
    if math.isnan(records_in_rate):
        return False
    return _div(lag_latest, records_in_rate) > threshold_s


def capacity(
    utilization: float,
    *,
    target_data_rate: float,
    catch_up_data_rate: float,
    with_restart: bool,
    restart_s: float,
    catch_up_s: float,
) -> float:
    """Reference §1.5 getTargetProcessingCapacity: round(catchUp + restart catch-up + TDR / clamp(u, 0, 1)).

    u == 0 gives +inf (never "too fast"); any NaN input gives NaN.
    """
    if math.isnan(catch_up_data_rate) or math.isnan(target_data_rate) or math.isnan(utilization):
        return NAN
    u = min(1.0, max(0.0, utilization))
    if u == 0:
        return math.inf
    restart_rate = target_data_rate * restart_s / catch_up_s if with_restart and catch_up_s > 0 else 0.0
    return java_round(catch_up_data_rate + restart_rate + target_data_rate / u)


def thresholds(
    *,
    target_data_rate: float,
    catch_up_data_rate: float,
    processing_backlog: bool,
    options: AutoscalerOptions,
    restart_s: float,
) -> tuple[float, float]:
    """Reference §1.5 (SCALE_UP_RATE_THRESHOLD, SCALE_DOWN_RATE_THRESHOLD); bounds [1, 0] while in backlog."""
    upper, lower = (
        (1.0, 0.0) if processing_backlog else (options.utilization_upper, options.utilization_lower)
    )
    common = {
        "target_data_rate": target_data_rate,
        "catch_up_data_rate": catch_up_data_rate,
        "restart_s": restart_s,
        "catch_up_s": whole_seconds(options.catch_up_duration),
    }
    return capacity(upper, with_restart=False, **common), capacity(lower, with_restart=True, **common)


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
        is_processing_backlog(_agg(aggregates, v).lag_latest, _agg(aggregates, v).records_in_rate, backlog_s)
        for v in sources
    )
    final: dict[VertexId, VertexMetrics] = {}
    rates_in = _Propagated({}, {})  # the final (merged) TDR and catch-up rate of each vertex so far
    out: dict[VertexId, VertexEvaluation] = {}
    failures: list[str] = []
    for vid in topology.vertices:
        agg = _agg(aggregates, vid)
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


def propagate_rates(
    topology: JobTopology, aggregates: Mapping[VertexId, VertexAggregates], catch_up_s: float
) -> tuple[dict[VertexId, float], dict[VertexId, float]]:
    """Reference §1.5 TARGET_DATA_RATE and CATCH_UP_DATA_RATE of every vertex, sources first.

    The built-in rates only (no custom evaluator); see :func:`incoming_rates`.
    """
    tdr: dict[VertexId, float] = {}
    catch_up: dict[VertexId, float] = {}
    for vid in topology.vertices:
        tdr[vid], catch_up[vid] = incoming_rates(topology, aggregates, vid, tdr, catch_up, catch_up_s)
    return tdr, catch_up


def incoming_rates(
    topology: JobTopology,
    aggregates: Mapping[VertexId, VertexAggregates],
    vid: VertexId,
    tdr: Mapping[VertexId, float],
    catch_up: Mapping[VertexId, float],
    catch_up_s: float,
) -> tuple[float, float]:
    """Reference §1.5 (TARGET_DATA_RATE, CATCH_UP_DATA_RATE) of one vertex, given those of its inputs.

    A source's own rates; any other vertex the sum over its inputs of their rates times the edge's
    output ratio. An unknown ratio (a missing metric) makes the vertex, and so everything downstream, NaN.
    """
    agg = _agg(aggregates, vid)
    in_edges = topology.inputs(vid)
    if not in_edges:
        return target_data_rate(agg.records_in_rate, agg.lag_rate), catch_up_rate(agg.lag_latest, catch_up_s)
    rate, catching_up = 0.0, 0.0
    for upstream in _distinct(e.source for e in in_edges):
        ratio = edge_output_ratio(
            _agg(aggregates, upstream).records_in_rate,
            edge_data_rate(topology, aggregates, upstream, vid),
        )
        rate += tdr[upstream] * ratio
        catching_up += catch_up[upstream] * ratio
    return rate, catching_up


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
    tpr = true_processing_rate(
        rates.busy_ms_per_s,
        rates.input_rate,
        agg.observed_tpr_avg(options.observed_tpr_min_observations),
        options.observed_tpr_switch_threshold,
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
    ineffective = (
        not unknown
        and rec.parallelism > current
        and is_ineffective_scale_up(
            past[-1] if past else None,
            parallelism=current,
            true_processing_rate=tpr,
            threshold=options.scaling_effectiveness_threshold,
        )
    )
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
    )


def busy_time_thresholds(
    input_rate: float, processing_backlog: bool, options: AutoscalerOptions
) -> tuple[float, float]:
    """Busy-time-only mode: the TPRs at which the load crosses the band, in / upper and in / lower.

    Bounds are clamped to [0, 1] like the reference's capacity() and become [0, 1] while the job
    processes backlog, as in §1.5. They are reported for dashboards; the band test itself is on the load.
    """
    upper, lower = busy_time_bounds(processing_backlog, options)
    return _div(input_rate, upper), _div(input_rate, lower)


def busy_time_bounds(processing_backlog: bool, options: AutoscalerOptions) -> tuple[float, float]:
    """(upper, lower) utilization for busy-time-only mode, each within [0, 1]."""
    if processing_backlog:
        return 1.0, 0.0

    def unit(u: float) -> float:
        return min(1.0, max(0.0, u))

    return unit(options.utilization_upper), unit(options.utilization_lower)


def _agg(aggregates: Mapping[VertexId, VertexAggregates], vid: VertexId) -> VertexAggregates:
    return aggregates.get(vid, EMPTY_AGGREGATES)


def _distinct(ids: Iterable[VertexId]) -> list[VertexId]:
    """Distinct vertex ids in first-seen order (the reference keys inputs/outputs by vertex)."""
    return list(dict.fromkeys(ids))
