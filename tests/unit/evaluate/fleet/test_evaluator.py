"""The vectorised fleet evaluation (:mod:`autoscaler.evaluate.fleet.evaluator`) equals the oracle's walk.

``FleetEvaluator.evaluate`` takes the aggregation query's table; ``formulas.evaluate_graph`` takes the
same aggregates as ``VertexAggregates``, job by job. On random fleets (random graphs with several
inputs per vertex, every option that changes the formulas, histories, source partitions, vertices
without a row, rows of other jobs, NaN, infinities, zeros, negative and huge values) every vertex
evaluation must be identical: floats to the bit (NaN equal to NaN), everything else by ``==``. No
Spark here: the table is built in Arrow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import astuple, fields, replace
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autoscaler.evaluate.aggregates import VertexAggregates
from autoscaler.evaluate.custom import CustomEvaluator, EvaluatorContext
from autoscaler.evaluate.fleet.columns import AGGREGATE_FIELDS, aggregates_by_job
from autoscaler.evaluate.fleet.evaluator import FleetEvaluator, FleetJob
from autoscaler.evaluate.oracle.formulas import GraphEvaluation, evaluate_graph
from autoscaler.model import Edge, JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AlignmentMode, AutoscalerOptions, BusyTimeAggregator
from autoscaler.state import ScalingRecord

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-300, 1e300, -1e300]
rates = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(-1e4, 1e7),
    st.floats(0.0, 1e5),
    st.floats(0.0, 1e5),  # plausible rates most of the time, so recommendations are exercised
)


# ---------------------------------------------------------------------------------------------- builders
@st.composite
def graphs(draw: st.DrawFn) -> JobTopology:
    """A random DAG of 1-6 vertices (edges from lower to higher index), random ship strategies."""
    n = draw(st.integers(1, 6))
    max_p = draw(st.sampled_from([1, 4, 12, 128, 720]))
    vertices = [VertexInfo(f"v{i}", f"v{i}", draw(st.integers(1, max_p)), max_p) for i in range(n)]
    edges = [
        Edge(f"v{a}", f"v{b}", draw(st.sampled_from(["HASH", "REBALANCE", "FORWARD", "hash", "BROADCAST"])))
        for b in range(1, n)
        for a in range(b)
        if draw(st.integers(0, 2)) == 0
    ]
    return JobTopology.build(vertices, edges)


@st.composite
def options(draw: st.DrawFn) -> AutoscalerOptions:
    legacy = draw(st.sampled_from([None, None, "EVENLY_SPREAD", "MAXIMIZE_UTILISATION"]))
    return AutoscalerOptions(
        vertex_min_parallelism=draw(st.sampled_from([1, 2, 50])),
        vertex_max_parallelism=draw(st.sampled_from([1, 8, 200, 1000])),
        scale_down_max_factor=draw(st.sampled_from([0.0, 0.6, 1.0, 5.0])),
        scale_up_max_factor=draw(st.sampled_from([0.0, 0.5, 100000.0])),
        parallelism_alignment_mode=None if legacy else draw(st.sampled_from([None, *AlignmentMode])),
        key_group_partitions_adjust_mode=legacy,
        busy_time_only_enabled=draw(st.booleans()),
        prefer_counter_rates=draw(st.booleans()),
        busy_time_aggregator=draw(st.sampled_from(list(BusyTimeAggregator))),
        utilization_target=draw(st.sampled_from([0.0, 0.7, 1.0])),
        target_utilization_boundary=draw(st.sampled_from([0.0, 0.3, 2.0])),
        catch_up_duration=timedelta(seconds=draw(st.sampled_from([0, 1, 1800]))),
        backlog_processing_lag_threshold=timedelta(seconds=draw(st.sampled_from([0, 300]))),
        observed_tpr_min_observations=draw(st.integers(1, 3)),
        observed_tpr_switch_threshold=draw(st.sampled_from([0.0, 0.15])),
        observed_scalability_enabled=draw(st.booleans()),
        observed_scalability_min_observations=draw(st.integers(1, 3)),
        scaling_effectiveness_detection_enabled=draw(st.booleans()),
    )


aggregates = st.builds(
    VertexAggregates,
    samples=st.integers(1, 12),
    busy_sum=rates,
    busy_count=st.integers(0, 5),
    busy_infinite=st.integers(0, 1),
    accumulated_busy_rate=rates,
    accumulated_busy_agg_rate=rates,
    records_in_rate=rates,
    records_out_rate=rates,
    lag_rate=rates,
    lag_latest=rates,
    records_in_per_s_avg=rates,
    observed_tpr_sum=rates,
    observed_tpr_count=st.integers(0, 3),
    observed_tpr_infinite=st.integers(0, 1),
    backpressure_avg=rates,
)


@st.composite
def histories(draw: st.DrawFn, topology: JobTopology) -> tuple[ScalingRecord, ...]:
    """Past scalings of random vertices; often a scale-up to the current parallelism (judged for
    effectiveness), with rates that are sometimes unknown or infinite."""
    records = []
    for ts in range(draw(st.integers(0, 4))):
        changes, metrics = {}, {}
        for vid, info in topology.vertices.items():
            if draw(st.booleans()):
                before = draw(st.integers(1, max(1, info.parallelism)))
                changes[vid] = (before, info.parallelism if draw(st.booleans()) else before + 1)
                metrics[vid] = (draw(rates), draw(rates))
        if changes:
            records.append(ScalingRecord(ts, changes, metrics=metrics))
    return tuple(records)


class Doubling(CustomEvaluator):
    """A custom evaluator: such jobs take the oracle's own walk inside the fleet evaluation."""

    name = "doubling"

    def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
        return {"true_processing_rate": (math.nan, 2 * context.metrics.true_processing_rate)}


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[FleetJob], dict[str, dict[str, VertexAggregates]]]:
    """Jobs and the aggregates of the vertices that have a window row (some have none)."""
    shared = draw(options())  # jobs sharing one options object, as in tests and the benchmark
    jobs, rows = [], {}
    for j in range(draw(st.integers(1, 6))):
        topology = draw(graphs())
        opts = shared if draw(st.booleans()) else draw(options())
        sources = [vid for vid in topology.vertices if topology.is_source(vid)]
        partitions = {vid: draw(st.sampled_from([0, 5, 12, 128])) for vid in sources if draw(st.booleans())}
        target = JobTarget(JobRef("c", f"id{j}", f"job{j}"), opts)
        sample = JobSample(
            target,
            0,
            0,
            topology,
            {vid: VertexSample() for vid in topology.vertices},
            num_source_partitions=partitions,
        )
        evaluators = [(Doubling(), {})] if draw(st.integers(0, 5)) == 0 else []
        restart_s = draw(st.sampled_from([0.0, 42.0, 300.0]))
        jobs.append(FleetJob(sample, restart_s, draw(histories(topology)), evaluators))
        rows[sample.job.key] = {vid: draw(aggregates) for vid in topology.vertices if draw(st.integers(0, 6))}
    return jobs, rows


def table_of(rows: Mapping[str, Mapping[str, VertexAggregates]]) -> pa.Table:
    flat = [(key, vid, agg) for key, per in rows.items() for vid, agg in per.items()]
    return pa.table(
        {
            "job_key": pa.array([k for k, _, _ in flat], type=pa.string()),
            "vertex_id": pa.array([v for _, v, _ in flat], type=pa.string()),
            **{name: [getattr(a, name) for _, _, a in flat] for name in AGGREGATE_FIELDS},
        },
        schema=pa.schema(
            [
                ("job_key", pa.string()),
                ("vertex_id", pa.string()),
                *((n, pa.int64() if f.type == "int" else pa.float64()) for n, f in _FIELDS.items()),
            ]
        ),
    )


_FIELDS = {f.name: f for f in fields(VertexAggregates)}


def identical(a: Any, b: Any) -> bool:
    """Equal values; floats to the bit, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def assert_identical(got: GraphEvaluation, want: GraphEvaluation, key: str) -> None:
    assert got.processing_backlog == want.processing_backlog, key
    assert got.evaluator_failures == want.evaluator_failures, key
    assert list(got.vertices) == list(want.vertices), key
    for vid, ev in got.vertices.items():
        theirs = want.vertices[vid]
        pairs = zip(astuple(ev), astuple(theirs), strict=True)
        names = [f.name for f in fields(ev)]
        wrong = [(n, x, y) for n, (x, y) in zip(names, pairs, strict=True) if not identical(x, y)]
        assert not wrong, (key, vid, wrong)


def oracle(job: FleetJob, rows: Mapping[str, VertexAggregates]) -> GraphEvaluation:
    return evaluate_graph(
        job.sample,
        rows,
        job.sample.target.options,
        job.restart_s,
        job.history,
        evaluators=job.evaluators,
        custom_metrics=job.custom_metrics,
    )


# ---------------------------------------------------------------------------------------------- tests
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_the_fleet_evaluation_equals_the_oracle_job_by_job(
    fleet: tuple[list[FleetJob], dict[str, dict[str, VertexAggregates]]],
) -> None:
    jobs, rows = fleet
    stray = {"c/gone": {"v0": VertexAggregates(samples=3)}}  # a job that left the tick: ignored
    extra = {key: {**per, "not-a-vertex": VertexAggregates(samples=1)} for key, per in rows.items()}
    got = FleetEvaluator().evaluate(jobs, table_of({**extra, **stray}))
    assert len(got) == len(jobs)
    for job, graph in zip(jobs, got, strict=True):
        assert_identical(graph, oracle(job, rows[job.sample.job.key]), job.sample.job.key)
        _tell(job, graph)


def _tell(job: FleetJob, graph: GraphEvaluation) -> None:
    """What the example exercised (``--hypothesis-show-statistics``): each must come up."""
    for ev in graph.vertices.values():
        if ev.target_parallelism != ev.parallelism:
            event("a vertex changes parallelism")
        if ev.outside_band:
            event("a vertex is outside its band")
        if ev.ineffective_scale_up:
            event("an ineffective scale-up")
        if ev.limited_from is not None:
            event("the legacy alignment limited a vertex")
        if ev.scalability_coefficient != 1.0:
            event("observed scalability below 1")
    if graph.processing_backlog:
        event("a job processing backlog")
    if job.evaluators:
        event("a job with a custom evaluator")
    if len(job.sample.topology.edges) > len(job.sample.topology.vertices) - 1:
        event("a vertex with several inputs")


def test_a_graph_planned_once_serves_later_ticks_and_other_jobs() -> None:
    """The plan cache: equal graphs in new objects, a rescaled graph, jobs sharing a graph."""
    evaluator = FleetEvaluator()
    opts = AutoscalerOptions()

    def job(name: str, p: int) -> FleetJob:
        topology = JobTopology.build(
            [VertexInfo("src", "src", 1, 128), VertexInfo("w", "w", p, 128)], [Edge("src", "w", "HASH")]
        )
        sample = JobSample(
            JobTarget(JobRef("c", name, name), opts),
            0,
            0,
            topology,
            {"src": VertexSample(), "w": VertexSample()},
        )
        return FleetJob(sample, 300.0)

    busy = VertexAggregates(
        samples=4,
        busy_sum=3600.0,
        busy_count=4,
        accumulated_busy_agg_rate=900.0,
        records_in_rate=1000.0,
        records_out_rate=1000.0,
        lag_rate=0.0,
        lag_latest=0.0,
    )
    for tick in range(3):
        jobs = [job("a", 2 + tick), job("b", 2), job("c", 2 + tick)]
        rows = {j.sample.job.key: {"src": busy, "w": busy} for j in jobs}
        got = evaluator.evaluate(jobs, table_of(rows))
        for j, graph in zip(jobs, got, strict=True):
            assert_identical(graph, oracle(j, rows[j.sample.job.key]), j.sample.job.key)


def test_a_back_pressured_vertex_is_sized_for_the_load_offered_upstream() -> None:
    """Issue 36 item 5, fleet and oracle alike: the source reads and emits the 2,600 rec/s offered (no
    lag), Work at p = 2 (1,250 rec/s a subtask) reads 2,497 and is 100 % busy, the rest waits in the
    network buffers. Its target data rate is 2,600, not its own 2,497, and so it goes to 4, not 3:
    round(2600 * 60/1800 + 2600/0.7) = 3801 > 2 * 1250 * 1.5; from 2,497: 3650 -> 3."""
    topology = JobTopology.build(
        [VertexInfo("src", "src", 1, 128), VertexInfo("work", "work", 2, 128)], [Edge("src", "work")]
    )
    opts = AutoscalerOptions(restart_time=timedelta(minutes=1), prefer_counter_rates=True)
    sample = JobSample(
        JobTarget(JobRef("c", "x", "x"), opts), 0, 0, topology, {v: VertexSample() for v in topology.vertices}
    )
    rows = {
        "c/x": {
            "src": VertexAggregates(
                samples=7,
                records_in_rate=2600.0,
                records_out_rate=2600.0,
                lag_rate=0.0,
                lag_latest=0.0,
                accumulated_busy_agg_rate=26.0,
            ),
            "work": VertexAggregates(
                samples=7,
                records_in_rate=2497.0,
                records_out_rate=2497.0,
                accumulated_busy_agg_rate=998.8,
            ),
        }
    }
    job = FleetJob(sample, 60.0)
    [graph] = FleetEvaluator().evaluate([job], table_of(rows))
    assert_identical(graph, oracle(job, rows["c/x"]), "x")
    work = graph.vertices["work"]
    assert work.target_data_rate == 2600.0
    assert work.target_parallelism == 4


def test_no_jobs_and_no_rows() -> None:
    assert FleetEvaluator().evaluate([], table_of({})) == []
    topology = JobTopology.build([VertexInfo("v", "v", 1, 1)], [])
    sample = JobSample(
        JobTarget(JobRef("c", "x", "x"), AutoscalerOptions()), 0, 0, topology, {"v": VertexSample()}
    )
    [graph] = FleetEvaluator().evaluate([FleetJob(sample, 300.0)], table_of({}))
    assert_identical(graph, evaluate_graph(sample, {}, sample.target.options, 300.0), "x")


def test_the_table_reads_back_as_the_aggregates_it_was_built_from() -> None:
    rows = {
        "c/a": {"v0": VertexAggregates(samples=2, lag_latest=math.inf), "v1": VertexAggregates()},
        "c/b": {"v0": replace(VertexAggregates(), busy_sum=-0.0, observed_tpr_count=3)},
    }
    back = aggregates_by_job(table_of(rows))
    assert back.keys() == rows.keys()
    for key, per in rows.items():
        for vid, agg in per.items():
            assert all(identical(x, y) for x, y in zip(astuple(back[key][vid]), astuple(agg), strict=True))


@pytest.mark.parametrize("order", [("v1", "v0"), ("v0", "v1")])
def test_a_graph_out_of_topological_order_takes_the_oracle_walk(order: Sequence[str]) -> None:
    """A topology built by hand, not by ``JobTopology.build``, may list a vertex before its input: the
    oracle then fails on it, and so does the fleet evaluation, rather than compute something else."""
    vertices = {vid: VertexInfo(vid, vid, 2, 128) for vid in order}
    topology = JobTopology(vertices, (Edge("v0", "v1"),))
    sample = JobSample(
        JobTarget(JobRef("c", "x", "x"), AutoscalerOptions()),
        0,
        0,
        topology,
        {v: VertexSample() for v in order},
    )
    rows = {"c/x": {v: VertexAggregates(samples=2, records_in_rate=10.0) for v in order}}
    job = FleetJob(sample, 300.0)
    if order[0] == "v1":
        with pytest.raises(KeyError):
            oracle(job, rows["c/x"])
        with pytest.raises(KeyError):
            FleetEvaluator().evaluate([job], table_of(rows))
    else:
        [graph] = FleetEvaluator().evaluate([job], table_of(rows))
        assert_identical(graph, oracle(job, rows["c/x"]), "x")


def test_a_vertex_evaluation_built_slot_by_slot_is_the_dataclass() -> None:
    """The fleet builds ``VertexEvaluation`` without its ``__init__`` (the speed of 100,000 a tick):
    the object must be the one ``__init__`` gives, frozen, hashable and ``replace``-able alike."""
    from autoscaler.evaluate.fleet.vertex_rows import vertex_evaluation as _evaluation
    from autoscaler.model import AlignmentBounds, ScaleUpGain, VertexEvaluation

    values = (
        "v",
        2,
        128,
        0.5,
        10.0,
        9.0,
        0.0,
        math.nan,
        1.0,
        2.0,
        3,
        15.0,
        True,
        True,
        False,
        0.5,
        4,
        None,
        None,
    )
    values_b = (*values[:16], 4, AlignmentBounds(128, 128, 1), ScaleUpGain(90.0, 5.0))
    for row in (values, values_b):
        built, wanted = _evaluation(*row), VertexEvaluation(*row)
        assert type(built) is VertexEvaluation and repr(built) == repr(wanted)
        assert astuple(built)[:7] == astuple(wanted)[:7] and hash(built) == hash(wanted)
        assert replace(built, target_parallelism=7).target_parallelism == 7
        with pytest.raises(AttributeError):
            built.load = 1.0  # type: ignore[misc]
