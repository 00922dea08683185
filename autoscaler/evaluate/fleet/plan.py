"""Every job graph of a tick laid end to end as arrays, and the rates propagated along all their edges.

Graph propagation is the one part of the evaluation that is per job by nature: a vertex's target data
rate is the sum of its inputs' rates times the edges' output ratios, so it needs its inputs' rates
first (``propagation.incoming_rates``, in topological order). It needs no Python call per vertex for
all that: a vertex's inputs all lie at a smaller *depth* (the longest path from a source), so one numpy
step per (depth, input slot) adds the contributions of that slot for every vertex of that depth of
every job at once. A chain of 10 vertices costs 9 steps whatever the number of jobs.

:class:`TopologyPlan` is the arrays of one job graph, built once per distinct graph and reused across
ticks (a fleet runs few distinct graphs, and a job's graph changes only when it is rescaled);
:class:`FleetLayout` concatenates the tick's plans, job after job, into one vertex index.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from autoscaler.evaluate.fleet.vector_formulas import Bools, Floats, Ints, edge_output_ratio
from autoscaler.evaluate.oracle.propagation import sole_output
from autoscaler.model import JobTopology, VertexId

__all__ = ["FleetLayout", "PlanCache", "TopologyPlan", "propagate"]

# How computeEdgeDataRate finds an edge's rate (propagation.edge_data_rate, its three cases in order),
# once ours (the upstream's out-rate, on an edge that carries all of it: ``input_sole``) does not apply.
ONE_INPUT = 1  # the target's records-in rate
SINGLE_OUTPUT_OTHERS = 2  # the target's in-rate minus the out-rates of its other inputs
UPSTREAM_OUT = 3  # the upstream vertex's records-out rate


def _ints(values: Sequence[int]) -> Ints:
    return np.asarray(values, dtype=np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class TopologyPlan:
    """One job graph as arrays, vertices in the topology's order (local indices 0..n-1).

    An *input row* is one distinct (vertex, upstream) pair, in the order
    ``propagation.incoming_rates`` adds them (``slot`` counts a vertex's inputs from 0); an *other
    row* is one input whose out-rate a ``SINGLE_OUTPUT_OTHERS`` row subtracts, in the order
    ``propagation.edge_data_rate`` sums them (``position``).
    """

    vertex_ids: tuple[VertexId, ...]
    position: dict[VertexId, int]
    parallelism: Ints
    max_parallelism: Ints
    is_source: Bools
    hash_input: Bools  # some input edge is HASH-partitioned: alignment applies (scaler.alignment_applies)
    depth: Ints
    input_vertex: Ints
    input_upstream: Ints
    input_slot: Ints
    input_case: Ints
    input_sole: Bools  # the edge carries all the upstream emits (propagation.sole_output)
    other_row: Ints
    other_vertex: Ints
    other_position: Ints
    # Every input comes before its vertex in the topology's order. The oracle needs it too (it reads an
    # input's rate before computing the vertex's); a graph without it is left to the oracle's walk.
    ordered: bool

    @classmethod
    def of(cls, topology: JobTopology) -> TopologyPlan:
        """The plan of ``topology``: one pass over its vertices and edges, as ``propagation`` reads them."""
        ids = tuple(topology.vertices)
        index = {vid: i for i, vid in enumerate(ids)}
        inputs: dict[VertexId, list[VertexId]] = {vid: [] for vid in ids}
        outputs: dict[VertexId, list[VertexId]] = {vid: [] for vid in ids}
        hashed: set[VertexId] = set()
        for edge in topology.edges:
            if edge.source not in inputs[edge.target]:
                inputs[edge.target].append(edge.source)
            if edge.target not in outputs[edge.source]:
                outputs[edge.source].append(edge.target)
            if edge.ship_strategy.upper() == "HASH":
                hashed.add(edge.target)
        depth: dict[VertexId, int] = {}
        ordered = True
        rows: list[tuple[int, int, int, int]] = []  # (vertex, upstream, slot, case)
        sole: list[bool] = []
        others: list[tuple[int, int, int]] = []  # (input row, other input, position)
        for vid in ids:
            ups = inputs[vid]
            ordered = ordered and all(u in depth for u in ups)
            depth[vid] = 1 + max((depth.get(u, 0) for u in ups), default=-1)
            for slot, up in enumerate(ups):
                rest = [u for u in ups if u != up]
                if len(ups) == 1:
                    case = ONE_INPUT
                elif all(len(outputs[u]) == 1 for u in rest):
                    case = SINGLE_OUTPUT_OTHERS
                    others.extend((len(rows), index[u], k) for k, u in enumerate(rest))
                else:
                    case = UPSTREAM_OUT
                rows.append((index[vid], index[up], slot, case))
                sole.append(sole_output(topology, up, vid))
        infos = list(topology.vertices.values())
        columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
        other_columns = list(zip(*others, strict=True)) if others else [(), (), ()]
        return cls(
            vertex_ids=ids,
            position=index,
            parallelism=_ints([v.parallelism for v in infos]),
            max_parallelism=_ints([v.max_parallelism for v in infos]),
            is_source=np.array([not inputs[vid] for vid in ids], dtype=np.bool_),
            hash_input=np.array([vid in hashed for vid in ids], dtype=np.bool_),
            depth=_ints([depth[vid] for vid in ids]),
            input_vertex=_ints(columns[0]),
            input_upstream=_ints(columns[1]),
            input_slot=_ints(columns[2]),
            input_case=_ints(columns[3]),
            input_sole=np.array(sole, dtype=np.bool_),
            other_row=_ints(other_columns[0]),
            other_vertex=_ints(other_columns[1]),
            other_position=_ints(other_columns[2]),
            ordered=ordered,
        )


class PlanCache:
    """The plans of the job graphs seen in the last two ticks, so a graph is planned once, not per tick.

    Keyed by the graph's value (its vertices and edges), not by the object: every tick's samples carry
    new topology objects. Plans not used for a tick are dropped, so the cache holds at most the graphs
    of two ticks.
    """

    def __init__(self) -> None:
        self._current: dict[Hashable, TopologyPlan] = {}
        self._previous: dict[Hashable, TopologyPlan] = {}
        self._by_object: dict[int, tuple[JobTopology, TopologyPlan]] = {}

    def next_tick(self) -> None:
        """Start a tick: what the last one used stays available for this one."""
        self._previous, self._current = self._current, {}
        self._by_object = {}

    def plan(self, topology: JobTopology) -> TopologyPlan:
        # Jobs of one tick often share their topology object (one per cluster and graph in tests and the
        # benchmark): an identity lookup first saves hashing the graph once per job.
        seen = self._by_object.get(id(topology))
        if seen is not None and seen[0] is topology:
            return seen[1]
        key = (tuple(topology.vertices.values()), topology.edges)
        plan = self._current.get(key) or self._previous.get(key) or TopologyPlan.of(topology)
        self._current[key] = plan
        self._by_object[id(topology)] = (topology, plan)
        return plan


def _concat(parts: list[Ints] | list[Bools], dtype: type) -> Ints:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


class FleetLayout:
    """The tick's jobs' graphs end to end: job ``j``'s vertices are ``offsets[j] .. offsets[j] + sizes[j]``.

    Per-vertex arrays are the plans' concatenated; input and other rows are shifted to the fleet's
    vertex index. ``steps`` groups the input rows by (depth of their vertex, slot), in that order: the
    order in which :func:`propagate` may add them.
    """

    def __init__(self, plans: Sequence[TopologyPlan]) -> None:
        self.plans = plans
        jobs = len(plans)
        self.sizes = _ints([len(p.vertex_ids) for p in plans])
        self.offsets = np.cumsum(self.sizes) - self.sizes
        self.size = int(self.sizes.sum())
        self.job_of_vertex = np.repeat(np.arange(jobs, dtype=np.int64), self.sizes)
        self.parallelism = _concat([p.parallelism for p in plans], np.int64)
        self.max_parallelism = _concat([p.max_parallelism for p in plans], np.int64)
        self.is_source = _concat([p.is_source for p in plans], np.bool_)
        self.hash_input = _concat([p.hash_input for p in plans], np.bool_)
        depth = _concat([p.depth for p in plans], np.int64)

        inputs = _ints([len(p.input_vertex) for p in plans])
        vertex_shift = np.repeat(self.offsets, inputs)
        self.input_vertex = _concat([p.input_vertex for p in plans], np.int64) + vertex_shift
        self.input_upstream = _concat([p.input_upstream for p in plans], np.int64) + vertex_shift
        self.input_case = _concat([p.input_case for p in plans], np.int64)
        self.input_sole = _concat([p.input_sole for p in plans], np.bool_)
        slot = _concat([p.input_slot for p in plans], np.int64)

        row_offsets = np.cumsum(inputs) - inputs
        others = _ints([len(p.other_row) for p in plans])
        self.other_row = _concat([p.other_row for p in plans], np.int64) + np.repeat(row_offsets, others)
        self.other_vertex = _concat([p.other_vertex for p in plans], np.int64) + np.repeat(
            self.offsets, others
        )
        self.other_position = _concat([p.other_position for p in plans], np.int64)

        order = np.lexsort((slot, depth[self.input_vertex]))
        key = depth[self.input_vertex][order] * (int(slot.max(initial=0)) + 1) + slot[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        self.steps: list[Ints] = [s for s in np.split(order, bounds) if len(s)]


def propagate(
    layout: FleetLayout,
    *,
    records_in_rate: Floats,
    records_out_rate: Floats,
    source_target_rate: Floats,
    source_catch_up_rate: Floats,
) -> tuple[Floats, Floats]:
    """``propagation.propagate_rates`` for every job of the layout: (TARGET_DATA_RATE, CATCH_UP_DATA_RATE).

    A source keeps its own rates; any other vertex starts at 0.0 and adds, input by input in the
    oracle's order, its input's rate times the edge's output ratio, so the sums round as the oracle's
    do. An edge that carries all its upstream emits takes the upstream's out-rate when it is measured.
    The edge rates (computeEdgeDataRate) and ratios depend on the window's aggregates only, so they
    are computed for all edges at once before the walk.
    """
    with np.errstate(all="ignore"):  # IEEE arithmetic is the semantics wanted: inf - inf is NaN
        target_in = records_in_rate[layout.input_vertex]
        subtracted = np.zeros(len(layout.input_vertex))
        for position in range(int(layout.other_position.max(initial=-1)) + 1):
            mask = layout.other_position == position  # one row at most once per position
            rows = layout.other_row[mask]
            subtracted[rows] = subtracted[rows] + records_out_rate[layout.other_vertex[mask]]
        case = layout.input_case
        upstream_out = records_out_rate[layout.input_upstream]
        edge_rate = np.where(
            layout.input_sole & ~np.isnan(upstream_out),
            upstream_out,
            np.where(
                case == ONE_INPUT,
                target_in,
                np.where(case == SINGLE_OUTPUT_OTHERS, target_in - subtracted, upstream_out),
            ),
        )
        ratio = edge_output_ratio(records_in_rate[layout.input_upstream], edge_rate)
        tdr = np.where(layout.is_source, source_target_rate, 0.0)
        catch_up = np.where(layout.is_source, source_catch_up_rate, 0.0)
        for rows in layout.steps:
            vertex, upstream, r = layout.input_vertex[rows], layout.input_upstream[rows], ratio[rows]
            tdr[vertex] = tdr[vertex] + tdr[upstream] * r
            catch_up[vertex] = catch_up[vertex] + catch_up[upstream] * r
        return tdr, catch_up
