"""Rates along the job graph's edges: how a vertex's target rate follows from its inputs'.

Reference §1.5 computeEdgeDataRate / computeEdgeOutputRatio and the TARGET_DATA_RATE and
CATCH_UP_DATA_RATE propagation, sources first. The walk in :mod:`autoscaler.evaluate.oracle.formulas`
propagates the rates as the custom evaluators left them; :func:`propagate_rates` here gives the
built-in ones alone. An unknown ratio (a missing metric) makes the vertex, and so everything
downstream, NaN (FLINK-39925 fixed).

Ours: an edge that carries everything its upstream emits (:func:`sole_output`) is measured by the
upstream's records-out rate, not by the downstream's records-in rate the reference reads first. The two
agree except while records pile up in Flink's network buffers between them: a vertex that cannot keep
up back-pressures its input only once those buffers are full, and until then its upstream reads (and
emits) the whole offered load while the vertex reads only its own capacity. The reference's ratio then
comes out as the vertex's throughput over the load, so the vertex's target rate is its own throughput:
sized for what it manages, not for what it is offered (issue 36: Work "must process 2,497" of 2,600).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from autoscaler.evaluate.aggregates import VertexAggregates, aggregates_of
from autoscaler.evaluate.oracle.rates import catch_up_rate, target_data_rate
from autoscaler.model import NAN, JobTopology, VertexId

__all__ = ["edge_data_rate", "edge_output_ratio", "incoming_rates", "propagate_rates", "sole_output"]


def edge_data_rate(
    topology: JobTopology, aggregates: Mapping[VertexId, VertexAggregates], source: VertexId, target: VertexId
) -> float:
    """Reference §1.5 computeEdgeDataRate, first case that applies, after one of ours.

    0. (ours) the edge carries all of ``source``'s output (:func:`sole_output`) and its out-rate is
    measured: that out-rate, which records waiting in the network buffers do not lower.
    1. ``target`` has one input: its records-in rate. 2. every other input of ``target`` has exactly one
    output: target in-rate minus their out-rates. 3. otherwise the out-rate of ``source``.
    """
    source_out = aggregates_of(aggregates, source).records_out_rate
    if sole_output(topology, source, target) and not math.isnan(source_out):
        return source_out
    inputs = _distinct(e.source for e in topology.inputs(target))
    target_in = aggregates_of(aggregates, target).records_in_rate
    if len(inputs) == 1:
        return target_in
    others = [i for i in inputs if i != source]
    if all(len(_distinct(e.target for e in topology.outputs(i))) == 1 for i in others):
        return target_in - sum(aggregates_of(aggregates, i).records_out_rate for i in others)
    return aggregates_of(aggregates, source).records_out_rate


def sole_output(topology: JobTopology, source: VertexId, target: VertexId) -> bool:
    """Whether every record ``source`` emits travels to ``target`` once: its one output edge, not BROADCAST.

    Then the edge's rate is ``source``'s ``numRecordsOut`` rate (a broadcast record is counted once out
    and once per downstream subtask in; several outputs share the count).
    """
    edges = topology.outputs(source)
    return len(edges) == 1 and edges[0].target == target and edges[0].ship_strategy.upper() != "BROADCAST"


def edge_output_ratio(source_records_in_rate: float, edge_rate: float) -> float:
    """Reference §1.5 computeEdgeOutputRatio, with FLINK-39925 fixed: NaN if unmeasured, 0 if <= 0."""
    if math.isnan(source_records_in_rate) or math.isnan(edge_rate):
        return NAN
    if source_records_in_rate <= 0 or edge_rate <= 0:
        return 0.0
    return edge_rate / source_records_in_rate


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
    agg = aggregates_of(aggregates, vid)
    in_edges = topology.inputs(vid)
    if not in_edges:
        return target_data_rate(agg.records_in_rate, agg.lag_rate), catch_up_rate(agg.lag_latest, catch_up_s)
    rate, catching_up = 0.0, 0.0
    for upstream in _distinct(e.source for e in in_edges):
        ratio = edge_output_ratio(
            aggregates_of(aggregates, upstream).records_in_rate,
            edge_data_rate(topology, aggregates, upstream, vid),
        )
        rate += tdr[upstream] * ratio
        catching_up += catch_up[upstream] * ratio
    return rate, catching_up


def _distinct(ids: Iterable[VertexId]) -> list[VertexId]:
    """Distinct vertex ids in first-seen order (the reference keys inputs/outputs by vertex)."""
    return list(dict.fromkeys(ids))
