"""Edge rates and output ratios along the job graph (flink-autoscaler.md §1.5 computeEdgeDataRate)."""

from __future__ import annotations

import pytest
from formula_builders import agg, topology

from autoscaler.evaluate.propagation import (
    edge_data_rate,
    edge_output_ratio,
)
from autoscaler.model import (
    NAN,
)


def test_edge_rate_case_1_single_input_uses_downstream_records_in() -> None:
    topo = topology({"a": 1, "b": 1}, [("a", "b")])
    aggs = {"a": agg(in_rate=100, out_rate=90), "b": agg(in_rate=80)}
    assert edge_data_rate(topo, aggs, "a", "b") == 80


def test_edge_rate_case_2_other_inputs_single_output_subtract() -> None:
    topo = topology({"a": 1, "b": 1, "c": 1}, [("a", "c"), ("b", "c")])
    aggs = {"a": agg(out_rate=999), "b": agg(out_rate=30), "c": agg(in_rate=100)}
    assert edge_data_rate(topo, aggs, "a", "c") == 70  # in(c) - out(b)


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
