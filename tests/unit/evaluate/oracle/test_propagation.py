"""Edge rates and output ratios along the job graph (flink-autoscaler.md §1.5 computeEdgeDataRate).

Ours first: an edge that carries all its upstream emits is measured by the upstream's records-out rate,
which records waiting in Flink's network buffers do not lower (issue 36 item 5)."""

from __future__ import annotations

import pytest
from formula_builders import agg, topology

from autoscaler.evaluate.oracle.propagation import (
    edge_data_rate,
    edge_output_ratio,
    propagate_rates,
    sole_output,
)
from autoscaler.model import (
    NAN,
)


def test_edge_rate_case_1_single_input_uses_downstream_records_in() -> None:
    """The reference's case 1, where the upstream's out-rate is not measured."""
    topo = topology({"a": 1, "b": 1}, [("a", "b")])
    aggs = {"a": agg(in_rate=100, out_rate=NAN), "b": agg(in_rate=80)}
    assert edge_data_rate(topo, aggs, "a", "b") == 80


def test_edge_rate_of_an_upstream_with_one_output_is_its_records_out() -> None:
    """a emits 100/s, b reads 80/s: 20/s wait in the network buffers; the edge carries 100/s."""
    topo = topology({"a": 1, "b": 1}, [("a", "b")])
    aggs = {"a": agg(in_rate=100, out_rate=100), "b": agg(in_rate=80)}
    assert edge_data_rate(topo, aggs, "a", "b") == 100


@pytest.mark.parametrize(
    ("edges", "ship", "expected"),
    [
        ([("a", "b")], {}, True),
        ([("a", "b")], {"a_b": "FORWARD"}, True),
        ([("a", "b")], {"a_b": "HASH"}, True),
        ([("a", "b")], {"a_b": "BROADCAST"}, False),  # one record out, one in per downstream subtask
        ([("a", "b"), ("a", "c")], {}, False),  # a's records out are shared by b and c
    ],
)
def test_sole_output(edges: list[tuple[str, str]], ship: dict[str, str], expected: bool) -> None:
    topo = topology({"a": 1, "b": 1, "c": 1}, edges, **ship)
    assert sole_output(topo, "a", "b") is expected


def test_back_pressured_vertex_target_is_the_load_offered_upstream() -> None:
    """Issue 36 item 5 in plain numbers: the source reads the 2,600 rec/s offered (no lag), Work at
    p = 2 reads its capacity, 2,497 rec/s; the other records wait in the buffers. Work must process
    2,600, and so must the sink behind it (Work emits one record per record in)."""
    topo = topology({"src": 1, "work": 2, "sink": 1}, [("src", "work"), ("work", "sink")])
    aggs = {
        "src": agg(in_rate=2600, out_rate=2600, lag_rate=0.0, lag=0.0),
        "work": agg(in_rate=2497, out_rate=2497),
        "sink": agg(in_rate=2497, out_rate=0),
    }
    tdr, _ = propagate_rates(topo, aggs, 1800)
    assert tdr == {"src": 2600, "work": 2600, "sink": 2600}


def test_output_ratio_survives_back_pressure() -> None:
    """A filter that passes half its input, back-pressured by its downstream: 1,000 offered, 500 out."""
    topo = topology({"src": 1, "filter": 1, "sink": 1}, [("src", "filter"), ("filter", "sink")])
    aggs = {
        "src": agg(in_rate=1000, out_rate=1000, lag_rate=0.0, lag=0.0),
        "filter": agg(in_rate=800, out_rate=400),  # back-pressured: 200/s wait before it
        "sink": agg(in_rate=300, out_rate=0),  # and 100/s before the sink
    }
    tdr, _ = propagate_rates(topo, aggs, 1800)
    assert tdr == {"src": 1000, "filter": 1000, "sink": 500}


def test_edge_rate_case_2_other_inputs_single_output_subtract() -> None:
    topo = topology({"a": 1, "b": 1, "c": 1}, [("a", "c"), ("b", "c")])
    aggs = {"a": agg(out_rate=NAN), "b": agg(out_rate=30), "c": agg(in_rate=100)}
    assert edge_data_rate(topo, aggs, "a", "c") == 70  # in(c) - out(b), a's own out unmeasured


def test_edge_rate_case_3_other_input_fans_out_falls_back_to_records_out() -> None:
    topo = topology({"a": 1, "b": 1, "c": 1, "d": 1}, [("a", "c"), ("b", "c"), ("b", "d")])
    aggs = {"a": agg(out_rate=55), "b": agg(out_rate=30), "c": agg(in_rate=100)}
    assert edge_data_rate(topo, aggs, "a", "c") == 55  # out(a)


@pytest.mark.parametrize(
    ("in_rate", "edge_rate", "expected"),
    [
        (100.0, 50.0, 0.5),
        (0.0, 50.0, 0.0),  # nothing read: flatten the ratio
        (100.0, -5.0, 0.0),  # case 2 can go negative
        (NAN, 50.0, NAN),  # FLINK-39925 fixed: missing metric means unknown, not 0
        (100.0, NAN, NAN),
        (0.0, NAN, NAN),
    ],
)
def test_edge_output_ratio(in_rate: float, edge_rate: float, expected: float) -> None:
    assert edge_output_ratio(in_rate, edge_rate) == pytest.approx(expected, nan_ok=True)
