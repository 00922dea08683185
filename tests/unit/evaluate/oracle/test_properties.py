"""Properties that must hold for any input: limits, unknown-means-no-change, alignment modes.

The table tests pin single numbers; these let hypothesis look for the corner nobody wrote down.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.evaluate.oracle.formulas import EMPTY_AGGREGATES, VertexAggregates, evaluate_vertices
from autoscaler.evaluate.scaler import (
    align_parallelism,
    compute_busy_time_parallelism,
    compute_target_parallelism,
)
from autoscaler.model import Edge, JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AlignmentMode, AutoscalerOptions

NAN = math.nan
FAST = settings(max_examples=150, deadline=None)
SLOW = settings(max_examples=60, deadline=None)

rates = st.one_of(
    st.sampled_from([NAN, math.inf, 0.0]),
    st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False),
)
modes = st.sampled_from(list(AlignmentMode))


@st.composite
def vertex_options(draw: st.DrawFn) -> AutoscalerOptions:
    return AutoscalerOptions(
        vertex_min_parallelism=draw(st.integers(1, 300)),
        vertex_max_parallelism=draw(st.integers(1, 300)),
        scale_down_max_factor=draw(st.sampled_from([0.0, 0.6, 1.0, 5.0])),
        scale_up_max_factor=draw(st.sampled_from([0.0, 0.5, 100000.0])),
        parallelism_alignment_mode=draw(modes),
        busy_time_only_enabled=draw(st.booleans()),
        prefer_counter_rates=draw(st.booleans()),
    )


@st.composite
def placements(draw: st.DrawFn) -> dict[str, Any]:
    max_p = draw(st.integers(1, 1024))
    return {
        "parallelism": draw(st.integers(1, max_p)),
        "max_parallelism": max_p,
        "num_source_partitions": draw(st.sampled_from([0, 0, 1, 7, 12, 128, 720])),
        "input_ship_strategies": draw(st.sampled_from([(), ("HASH",), ("REBALANCE",)])),
        "scalability_coefficient": draw(st.sampled_from([1.0, 0.5, 0.67, 0.01])),
    }


def bounds(current: int, max_p: int, options: AutoscalerOptions) -> tuple[int, int]:
    """[min(current, vertex.min), min(max parallelism, max(current, vertex.max))] (reference §1.6)."""
    lower = min(current, options.vertex_min_parallelism)
    upper = min(max_p, max(current, options.vertex_max_parallelism))
    return lower, upper


# ---------------------------------------------------------------------------------------------- limits
@FAST
@given(placements(), vertex_options(), rates, rates, st.floats(0.0, 2.0))
def test_recommendation_stays_within_the_limits(
    place: dict[str, Any], options: AutoscalerOptions, tpr: float, target_capacity: float, load: float
) -> None:
    lower, upper = bounds(place["parallelism"], place["max_parallelism"], options)
    rec = compute_target_parallelism(
        true_processing_rate=tpr,
        target_capacity=target_capacity,
        scale_up_threshold=tpr,
        scale_down_threshold=tpr,
        options=options,
        **place,
    )
    assert lower <= rec.parallelism <= upper, rec
    busy = compute_busy_time_parallelism(
        load=load, true_processing_rate=tpr, band=(1.0, 0.4), options=options, **place
    )
    assert lower <= busy.parallelism <= upper, busy


# ---------------------------------------------------------------------------------------------- graphs
@st.composite
def graphs(draw: st.DrawFn) -> JobTopology:
    """A random DAG of 1-5 vertices (edges only from lower to higher index), random ship strategies."""
    n = draw(st.integers(1, 5))
    max_p = draw(st.sampled_from([1, 4, 128, 720]))
    vertices = [VertexInfo(f"v{i}", f"v{i}", draw(st.integers(1, max_p)), max_p) for i in range(n)]
    edges = [
        Edge(f"v{a}", f"v{b}", draw(st.sampled_from(["HASH", "REBALANCE", "FORWARD"])))
        for b in range(1, n)
        for a in range(b)
        if draw(st.booleans())
    ]
    return JobTopology.build(vertices, edges)


aggregates = st.builds(
    VertexAggregates,
    samples=st.just(5),
    busy_sum=st.floats(0.0, 5000.0),
    busy_count=st.integers(0, 5),
    busy_infinite=st.integers(0, 1),
    accumulated_busy_rate=rates,
    accumulated_busy_agg_rate=rates,
    records_in_rate=rates,
    records_out_rate=rates,
    lag_rate=st.one_of(rates, st.floats(-1e5, 0.0)),
    lag_latest=rates,
    records_in_per_s_avg=rates,
    observed_tpr_sum=st.floats(0.0, 1e6),
    observed_tpr_count=st.integers(0, 3),
)


def sample_of(topology: JobTopology, options: AutoscalerOptions, partitions: int) -> JobSample:
    sources = {vid: partitions for vid in topology.vertices if topology.is_source(vid) and partitions}
    return JobSample(
        JobTarget(JobRef("c", "0" * 32, "j"), options),
        0,
        0,
        topology,
        {vid: VertexSample() for vid in topology.vertices},
        num_source_partitions=sources,
    )


@SLOW
@given(graphs(), st.data(), vertex_options(), st.sampled_from([0, 12]))
def test_every_vertex_of_a_job_stays_within_its_limits(
    topology: JobTopology, data: st.DataObject, options: AutoscalerOptions, partitions: int
) -> None:
    aggs = {vid: data.draw(aggregates) for vid in topology.vertices}
    evaluations, _ = evaluate_vertices(sample_of(topology, options, partitions), aggs, options)
    for vid, ev in evaluations.items():
        info = topology.vertices[vid]
        lower, upper = bounds(info.parallelism, info.max_parallelism, options)
        assert lower <= ev.target_parallelism <= upper, ev
        if ev.unknown:  # NaN TPR or TDR never drives a change and never opens the band gate
            assert ev.target_parallelism == info.parallelism and not ev.outside_band, ev


def descendants(topology: JobTopology, roots: set[str]) -> set[str]:
    found = set(roots)
    for vid in topology.vertices:  # topological order: inputs come first
        if any(e.source in found for e in topology.inputs(vid)):
            found.add(vid)
    return found


@SLOW
@given(graphs(), st.data(), st.sampled_from(list(AlignmentMode)))
def test_missing_metrics_never_change_the_vertex_or_anything_downstream(
    topology: JobTopology, data: st.DataObject, mode: AlignmentMode
) -> None:
    """FLINK-39925 fixed: a vertex without metrics is unknown, and so is every vertex it feeds."""
    options = AutoscalerOptions(parallelism_alignment_mode=mode)
    missing = set(data.draw(st.sets(st.sampled_from(sorted(topology.vertices)), min_size=1)))
    aggs = {vid: EMPTY_AGGREGATES if vid in missing else data.draw(aggregates) for vid in topology.vertices}
    evaluations, _ = evaluate_vertices(sample_of(topology, options, 0), aggs, options)
    for vid in descendants(topology, missing):
        ev = evaluations[vid]
        assert ev.unknown and ev.target_parallelism == topology.vertices[vid].parallelism, ev
        assert not ev.outside_band


@FAST
@given(placements(), vertex_options(), rates, rates, st.sampled_from([NAN, 0.3, 1.0]))
def test_nan_inputs_recommend_no_change(
    place: dict[str, Any], options: AutoscalerOptions, tpr: float, target_capacity: float, load: float
) -> None:
    current = place["parallelism"]
    nan_tpr = compute_target_parallelism(
        true_processing_rate=NAN,
        target_capacity=target_capacity,
        scale_up_threshold=1.0,
        scale_down_threshold=2.0,
        options=options,
        **place,
    )
    nan_capacity = compute_target_parallelism(
        true_processing_rate=tpr,
        target_capacity=NAN,
        scale_up_threshold=1.0,
        scale_down_threshold=2.0,
        options=options,
        **place,
    )
    nan_load = compute_busy_time_parallelism(
        load=NAN, true_processing_rate=tpr, band=(1.0, 0.4), options=options, **place
    )
    for rec in (nan_tpr, nan_capacity, nan_load):
        assert rec.parallelism == current and not rec.outside_band, rec


@SLOW
@given(graphs(), st.data(), st.booleans())
def test_a_vertex_without_busy_time_never_changes(
    topology: JobTopology, data: st.DataObject, busy_time_only: bool
) -> None:
    """No busy time from either source (gauge or counter) and no observed TPR: unknown TPR, no change."""
    options = AutoscalerOptions(busy_time_only_enabled=busy_time_only)
    blind = data.draw(st.sampled_from(sorted(topology.vertices)))
    aggs = {vid: data.draw(aggregates) for vid in topology.vertices}
    aggs[blind] = VertexAggregates(
        samples=5,
        # Something comes in (no input at all would be a measured idle vertex: TPR +inf, §1.5),
        # so TPR = in / NaN busy.
        records_in_rate=data.draw(st.floats(1.0, 1e6)),
        records_out_rate=data.draw(rates),
        lag_rate=0.0,
        lag_latest=0.0,
        records_in_per_s_avg=data.draw(st.one_of(st.just(NAN), st.floats(1.0, 1e6))),
    )
    ev = evaluate_vertices(sample_of(topology, options, 0), aggs, options)[0][blind]
    assert ev.target_parallelism == topology.vertices[blind].parallelism and not ev.outside_band, ev


# ---------------------------------------------------------------------------------------------- alignment
@st.composite
def alignments(draw: st.DrawFn) -> dict[str, Any]:
    max_p = draw(st.integers(1, 1024))
    current = draw(st.integers(1, max_p))
    upper_limit = max(current, draw(st.integers(1, 300)))
    target = draw(st.integers(1, min(max_p, upper_limit)).filter(lambda t: t != current))
    return {
        "current": current,
        "target": target,
        "max_parallelism": max_p,
        "upper_limit": upper_limit,
        "num_source_partitions": draw(st.sampled_from([0, 0, 1, 3, 7, 12, 64, 720])),
    }


def search_range(a: dict[str, Any]) -> range:
    """§1.7: scale-up [target, upperAlign], scale-down [target, min(current, upperAlign)]."""
    n = a["num_source_partitions"] or a["max_parallelism"]
    upper_align = min(n, a["max_parallelism"], a["upper_limit"])
    stop = upper_align if a["target"] > a["current"] else min(a["current"], upper_align)
    return range(a["target"], stop + 1)


@FAST
@given(alignments())
def test_evenly_spread_lands_on_a_divisor_whenever_one_exists(a: dict[str, Any]) -> None:
    n = a["num_source_partitions"] or a["max_parallelism"]
    got = align_parallelism(mode=AlignmentMode.EVENLY_SPREAD, **a)
    divisors = [p for p in search_range(a) if n % p == 0]
    if divisors:
        assert got == divisors[0] and n % got == 0
    else:
        assert got == a["target"]


@FAST
@given(alignments())
def test_balanced_never_puts_more_units_on_a_subtask_than_the_target(a: dict[str, Any]) -> None:
    n = a["num_source_partitions"] or a["max_parallelism"]
    got = align_parallelism(mode=AlignmentMode.BALANCED, **a)
    assert n // got <= n // a["target"]
    assert got == a["target"] or (got in search_range(a) and (n % got == 0 or n // got < n // a["target"]))


@FAST
@given(placements(), vertex_options(), rates, rates)
def test_alignment_off_equals_unaligned(
    place: dict[str, Any], options: AutoscalerOptions, tpr: float, target_capacity: float
) -> None:
    off = options.model_copy(update={"parallelism_alignment_mode": AlignmentMode.OFF})
    args = {"true_processing_rate": tpr, "target_capacity": target_capacity}
    thresholds = {"scale_up_threshold": 1.0, "scale_down_threshold": 2.0}
    aligned_off = compute_target_parallelism(options=off, **args, **thresholds, **place)
    unaligned = compute_target_parallelism(
        options=options,
        **args,
        **thresholds,
        **{**place, "num_source_partitions": 0, "input_ship_strategies": ()},
    )
    assert aligned_off.parallelism == unaligned.parallelism
    assert (
        align_parallelism(
            current=place["parallelism"],
            target=unaligned.parallelism,
            max_parallelism=place["max_parallelism"],
            upper_limit=200,
            num_source_partitions=place["num_source_partitions"],
            mode=AlignmentMode.OFF,
        )
        == unaligned.parallelism
    )
