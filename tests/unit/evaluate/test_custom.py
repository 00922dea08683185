"""Custom evaluators (FLIP-514), several in a configured order: the merge, its place in the graph
(after a vertex's built-in metrics, before its thresholds, so overrides reach downstream vertices),
failures, resolution from options, and the not-ready rule for a missing evaluator."""

from __future__ import annotations

import importlib.metadata as metadata
import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from evaluator_parity import assert_same
from evaluator_samples import T0
from evaluator_samples import job_sample as spark_job_sample
from formula_builders import DEFAULTS, agg, job_sample, source, topology

from autoscaler.evaluate import SparkEvaluator
from autoscaler.evaluate.custom import (
    CustomEvaluator,
    EvaluatorContext,
    UnavailableEvaluator,
    VertexMetrics,
    merge_overrides,
)
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.evaluate.oracle.formulas import evaluate_graph, evaluate_vertices
from autoscaler.model import JobSample, VertexSample
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.plugins.loader import EVALUATOR_ENTRY_POINT_GROUP, DiscoveredPlugin, PluginRegistry
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState
from autoscaler.tick.decide import decide

NAN = math.nan
S = 1000

# The integration case: the source reads 1250/s while its lag grows 750/s (TDR 2000, catch-up 25);
# Work handles 1250/s at p=1 fully busy. Built-in: Work -> 3.
TOPO = topology({"src": 1, "work": 1}, [("src", "work")])
AGGS = {
    "src": source(1250.0, lag_rate=750.0, lag=45_000.0, tpr=5000.0),
    "work": agg(in_rate=1250.0, out_rate=1250.0, busy_ms=1000.0, in_per_s=1250.0),
}


class Fn(CustomEvaluator):
    """An evaluator from a function of (vertex, context); records every context it was given."""

    def __init__(self, name: str, fn: Callable[[str, EvaluatorContext], Any]) -> None:
        self.name, self.fn = name, fn
        self.contexts: list[EvaluatorContext] = []

    def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
        self.contexts.append(context)
        return self.fn(vertex, context)


def on(vid: str, **overrides: tuple[float, float]) -> Callable[[str, EvaluatorContext], Any]:
    return lambda vertex, _: overrides if vertex == vid else {}


def run(*evaluators: CustomEvaluator, options: AutoscalerOptions = DEFAULTS, **kwargs: Any) -> Any:
    return evaluate_graph(
        job_sample(TOPO, options),
        AGGS,
        options,
        evaluators=[(e, {"n": e.name}) for e in evaluators],
        **kwargs,
    )


def test_the_builtin_case_without_evaluators() -> None:
    graph = run()
    work = graph.vertices["work"]
    assert (work.target_data_rate, work.true_processing_rate, work.target_parallelism) == (2000, 1250, 3)
    assert graph.vertices == evaluate_vertices(job_sample(TOPO), AGGS, DEFAULTS)[0]


def test_evaluators_run_in_order_each_sees_the_merge_so_far_and_the_last_wins() -> None:
    first = Fn("first", on("work", true_processing_rate=(NAN, 2500.0)))
    second = Fn("second", on("work", true_processing_rate=(NAN, 1000.0)))
    work = run(first, second).vertices["work"]
    # TPR 1000: target capacity round(25 + 2000*300/1800 + 2000/0.7) = 3215 -> ceil(3.215) = 4
    assert (work.true_processing_rate, work.target_parallelism) == (1000.0, 4)
    seen = second.contexts[-1]
    assert seen.vertex == "work" and seen.metrics.true_processing_rate == 2500.0  # first's override
    assert seen.builtin.true_processing_rate == 1250.0 and dict(seen.config) == {"n": "second"}
    assert [c.vertex for c in first.contexts] == ["src", "work"]  # topological order, every vertex


def test_nan_keeps_the_builtin_value_and_only_the_read_component_counts() -> None:
    keep = Fn("keep", on("work", true_processing_rate=(NAN, NAN), target_data_rate=(9999.0, NAN)))
    work = run(keep).vertices["work"]
    assert (work.true_processing_rate, work.target_data_rate, work.target_parallelism) == (1250, 2000, 3)


def test_an_override_changes_the_thresholds_and_target_and_flows_downstream() -> None:
    """The source's TDR (average) and catch-up rate (current) overridden: Work, downstream, follows."""
    src = Fn("src", on("src", target_data_rate=(NAN, 4000.0), catch_up_data_rate=(50.0, NAN)))
    graph = run(src)
    work = graph.vertices["work"]
    assert (work.target_data_rate, work.catch_up_data_rate) == (4000.0, 50.0)  # ratio 1250/1250
    assert work.scale_up_threshold == 4050.0  # round(50 + 4000 / 1.0)
    # target capacity round(50 + 4000*300/1800 + 4000/0.7) = 6431 -> 6431/1250 = 5.14 -> 6
    assert (work.target_parallelism, work.outside_band) == (6, True)
    assert graph.vertices["src"].target_data_rate == 4000.0


def test_overrides_of_load_and_lag_and_reference_spellings() -> None:
    names = Fn("ref", on("work", LOAD=(0.1, 0.42), LAG=(7.0, 99.0), TRUE_PROCESSING_RATE=(NAN, 1300.0)))
    work = run(names).vertices["work"]
    assert (work.load, work.lag, work.true_processing_rate) == (0.42, 7.0, 1300.0)  # avg, current, avg


def test_unknown_keys_are_ignored_and_the_rest_applies() -> None:
    work = run(Fn("x", on("work", heap_usage=(1.0, 1.0), load=(NAN, 0.5)))).vertices["work"]
    assert work.load == 0.5


@pytest.mark.parametrize(
    "answer",
    [
        lambda vertex, ctx: 1 / 0,  # raises
        lambda vertex, ctx: {"load": (NAN, 0.5), "true_processing_rate": 5000.0},  # not a pair
        lambda vertex, ctx: {"true_processing_rate": ("fast", "faster")},  # not numbers
        lambda vertex, ctx: [("load", (1.0, 1.0))],  # not a mapping
    ],
)
def test_a_failing_evaluator_keeps_the_builtin_values_and_is_reported(answer: Any) -> None:
    later = Fn("later", on("src", lag=(1.0, NAN)))
    graph = run(Fn("bad", answer), later)
    work = graph.vertices["work"]
    assert (work.true_processing_rate, work.load, work.target_parallelism) == (1250, 1.0, 3)
    assert graph.vertices["src"].lag == 1.0  # the next evaluator still runs
    assert len(graph.evaluator_failures) == 2  # one per vertex
    assert all(f.startswith("custom evaluator bad failed on vertex ") for f in graph.evaluator_failures)


def test_the_context_holds_upstream_results_aggregates_custom_metrics_and_options() -> None:
    spy = Fn("spy", lambda vertex, ctx: {"target_data_rate": (NAN, 3000.0)} if vertex == "src" else {})
    custom = {"": {"cpu": (0.5, 0.4)}, "work": {"idle": (1.0, 2.0)}}
    run(spy, custom_metrics=custom)
    src_ctx, work_ctx = spy.contexts
    assert set(src_ctx.evaluated) == {"src"} and src_ctx.upstream() == {}
    assert work_ctx.upstream()["src"].target_data_rate == 3000.0  # final, overridden
    assert work_ctx.aggregates["work"] is AGGS["work"] and not work_ctx.processing_backlog
    assert work_ctx.custom_metric("cpu") == (0.5, 0.4)
    assert work_ctx.custom_metric("idle", "work") == (1.0, 2.0)
    nan_pair = work_ctx.custom_metric("missing")
    assert math.isnan(nan_pair[0]) and math.isnan(nan_pair[1])
    assert work_ctx.options is DEFAULTS and work_ctx.job.name == "job" and work_ctx.topology is TOPO


def test_busy_time_only_mode_scales_on_an_overridden_load() -> None:
    options = AutoscalerOptions(busy_time_only_enabled=True)
    assert run(options=options).vertices["src"].target_parallelism == 1  # load 0.25: in band, no change
    hot = Fn("hot", on("src", load=(NAN, 1.0)))
    # factor = 1.0 / 0.7 -> ceil(1.43) = 2
    assert run(hot, options=options).vertices["src"].target_parallelism == 2


def test_merge_overrides_directly() -> None:
    m = VertexMetrics("v", 2, 8, False, 0.5, 100.0, 200.0, 10.0, 50.0)
    merged, ignored = merge_overrides(
        m, {"target_data_rate": (1.0, 300.0), "catch_up_data_rate": (5.0, 6.0), "x": (1, 1)}
    )
    assert (merged.target_data_rate, merged.catch_up_data_rate, ignored) == (300.0, 5.0, ["x"])
    assert merge_overrides(m, {})[0] is m
    with pytest.raises(ValueError, match="expected"):
        merge_overrides(m, {"load": "0.5"})  # type: ignore[dict-item]


# ---------------------------------------------------------------------------------------------- resolution
class DoubleTpr(CustomEvaluator):
    """Reports the TPR times ``factor`` (config, default 2)."""

    def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
        factor = float(context.config.get("factor", "2"))
        return {"true_processing_rate": (NAN, context.metrics.true_processing_rate * factor)}


class Broken:
    pass


def registry() -> PluginRegistry:
    def plugin(name: str, target: str) -> DiscoveredPlugin:
        ep = metadata.EntryPoint(name, target, EVALUATOR_ENTRY_POINT_GROUP)
        return DiscoveredPlugin(name, target, "test", ep, CustomEvaluator)

    plugins = [plugin("double", f"{__name__}:DoubleTpr"), plugin("broken", f"{__name__}:Broken")]
    return PluginRegistry(plugins, kind="custom evaluator")


def configured(*names: str, **params: str) -> AutoscalerOptions:
    conf = {"job.autoscaler.metrics.custom-evaluators": ";".join(names), **params}
    return AutoscalerOptions.from_flink_conf(
        {**conf, "job.autoscaler.metrics.window": "30 s", "job.autoscaler.stabilization.interval": "0 s"}
    )


def test_instances_are_resolved_in_order_with_their_config_and_reused() -> None:
    options = configured(
        "twice",
        "thrice",
        **{
            "job.autoscaler.metrics.custom-evaluator.twice.class": "double",
            "job.autoscaler.metrics.custom-evaluator.thrice.class": f"{__name__}.DoubleTpr",
            "job.autoscaler.metrics.custom-evaluator.thrice.factor": "3",
        },
    )
    instances = EvaluatorInstances(registry())
    found = instances.for_options(options)
    assert [(e.name, type(e).__name__, dict(c)) for e, c in found] == [
        ("twice", "DoubleTpr", {}),
        ("thrice", "DoubleTpr", {"factor": "3"}),
    ]
    assert instances.for_options(options)[0][0] is found[0][0]  # one instance per name for the daemon's life
    graph = evaluate_graph(job_sample(TOPO, options), AGGS, options, evaluators=found)
    assert graph.vertices["work"].true_processing_rate == 1250.0 * 2 * 3


@pytest.mark.parametrize(
    ("class_ref", "problem"),
    [
        ("nope", "no custom evaluator 'nope' is installed; discovered: double"),
        ("broken", "is not a CustomEvaluator subclass"),
    ],
)
def test_a_missing_evaluator_is_an_unavailable_placeholder(class_ref: str, problem: str) -> None:
    options = configured("x", **{"job.autoscaler.metrics.custom-evaluator.x.class": class_ref})
    ((evaluator, _),) = EvaluatorInstances(registry()).for_options(options)
    assert isinstance(evaluator, UnavailableEvaluator) and evaluator.name == "x"
    assert problem in evaluator.problem and "custom evaluator instance 'x'" in evaluator.problem


def test_for_samples_maps_job_keys_to_their_evaluators() -> None:
    options = configured("twice", **{"job.autoscaler.metrics.custom-evaluator.twice.class": "double"})
    with_one = job_sample(TOPO, options)
    assert list(EvaluatorInstances(registry()).for_samples([with_one, job_sample(TOPO)])) == ["c1/job"]


# ---------------------------------------------------------------------------------------------- Spark
def _tick(name: str, tick: int, options: AutoscalerOptions, rate: float = 1250.0) -> JobSample:
    t = tick * 10.0
    vertices = {
        "src": VertexSample(
            busy_time_ms_per_s=250.0,
            num_records_in=rate * t,
            num_records_out=rate * t,
            num_records_in_per_s=rate,
            pending_records=1000.0 + 750.0 * t,
        ),
        "work": VertexSample(busy_time_ms_per_s=1000.0, num_records_in=rate * t, num_records_in_per_s=rate),
    }
    sample = spark_job_sample(name, T0 + tick * 10 * S, vertices, options=options, topo=TOPO)
    # An external system reports the real arrival rate of the source's topic, 3000/s.
    return replace(sample, custom_job_metrics={"topic.rate": 3000.0 + 100.0 * (tick % 2)})


class TopicRate(CustomEvaluator):
    """The source's TDR is the topic's windowed arrival rate, a custom metric: no I/O here."""

    def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
        if not context.metrics.is_source:
            return {}
        return {"target_data_rate": context.custom_metric("topic.rate")}


@pytest.mark.spark
def test_spark_evaluator_applies_evaluators_like_the_oracle_and_reports_failures(spark: Any) -> None:
    options = AutoscalerOptions(
        enabled=True, metrics_window=timedelta(seconds=30), stabilization_interval=timedelta(0)
    )
    bad = Fn("bad", lambda vertex, ctx: 1 / 0 if vertex == "work" else {})
    evaluators = {"c1/ev": [(TopicRate(), {}), (bad, {})], "c1/plain": []}
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    for tick in range(4):
        samples = [_tick("ev", tick, options), _tick("plain", tick, options)]
        now = T0 + tick * 10 * S
        got = ours.evaluate(samples, now, evaluators=evaluators)
        assert_same(got, oracle.evaluate(samples, now, evaluators=evaluators))
    ev, plain = got["c1/ev"], got["c1/plain"]
    assert ev.not_ready is None and plain.not_ready is None
    # Topic rate averaged over the window (ticks 0..3: 3000, 3100, 3000, 3100) replaces TDR 2000.
    assert ev.vertices["src"].target_data_rate == pytest.approx(3050.0)
    assert ev.vertices["work"].target_data_rate == pytest.approx(3050.0)  # propagated downstream
    assert ev.vertices["work"].target_parallelism > plain.vertices["work"].target_parallelism == 3
    assert ev.evaluator_failures == (
        "custom evaluator bad failed on vertex work: ZeroDivisionError: division by zero",
    )
    assert plain.evaluator_failures == ()


@pytest.mark.spark
def test_a_missing_evaluator_makes_the_job_not_ready_and_it_is_never_scaled(spark: Any) -> None:
    options = configured("gone", **{"job.autoscaler.metrics.custom-evaluator.gone.class": "gone"})
    options = options.model_copy(update={"enabled": True})
    evaluators = EvaluatorInstances(registry())
    ev = SparkEvaluator(spark)
    for tick in range(4):
        samples = [_tick("ev", tick, options)]
        now = T0 + tick * 10 * S
        job = ev.evaluate(samples, now, evaluators=evaluators.for_samples(samples))["c1/ev"]
        assert job.not_ready is Reason.PLUGIN_FAILED and job.vertices == {}
        assert "custom evaluator instance 'gone'" in job.not_ready_detail
        assert job.window_samples == tick + 1  # the window keeps filling: it is ready once installed
        assert job.custom_metric("topic.rate")[1] > 0  # its custom metrics are still windowed
    decision = decide(job, JobState(), options, now)
    assert decision.outcome is Reason.PLUGIN_FAILED and not decision.applies
