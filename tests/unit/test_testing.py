"""The stub evaluator's worlds agree with what it recommends: a scale-up is for a vertex that falls
behind, sized as the reference sizes it, so pricing a rescale (``cost.enabled``) sees why it is asked."""

from __future__ import annotations

import math

import pytest

from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import StubEvaluator, make_sample, make_topology, offered_share
from autoscaler.tick.decide import queue_of

U = 0.7  # utilization.target


@pytest.mark.parametrize(("p", "t"), [(1, 2), (1, 3), (1, 5), (2, 3), (3, 8), (4, 40)])
def test_a_scale_up_is_offered_what_the_reference_sizes_to_its_target(p: int, t: int) -> None:
    share = offered_share(p, t, U)
    assert share > 1, "falls behind now"
    assert math.ceil(p * share / U - 1e-9) == t, "the reference's sizing gives the target"


@pytest.mark.parametrize(("p", "t"), [(4, 5), (10, 11)])
def test_a_scale_up_smaller_than_the_band_still_falls_behind_now_and_keeps_up_after(p: int, t: int) -> None:
    assert 1 < offered_share(p, t, U) < t / p


@pytest.mark.parametrize(("p", "t"), [(4, 2), (4, 1), (8, 5)])
def test_a_scale_down_is_offered_less_than_its_target_share_and_sized_to_its_target(p: int, t: int) -> None:
    share = offered_share(p, t, U)
    assert share < U
    assert math.ceil(p * share / U - 1e-9) == t


def test_no_change_is_in_band_at_its_target() -> None:
    assert offered_share(3, 3, U) == U


def test_the_job_falls_behind_only_at_the_vertex_named_for_a_scale_up() -> None:
    topology = make_topology({"src": 1, "w": 2, "sink": 1}, [("src", "w", "HASH"), ("w", "sink", "HASH")])
    sample = make_sample(topology, options=AutoscalerOptions(enabled=True))
    (evaluation,) = StubEvaluator({"w": 5}, tpr={"w": lambda p: 1000.0 * p}).evaluate([sample], 0).values()
    src, w = evaluation.vertices["src"], evaluation.vertices["w"]
    assert src.target_data_rate == pytest.approx(U * src.true_processing_rate)  # in band, at its target
    assert w.target_data_rate == pytest.approx(2000.0 * U * 5 / 2)
    queue = queue_of(evaluation, {"w": 5})
    assert queue is not None
    assert queue.capacity_now < queue.rate < queue.capacity_then  # behind now, keeps up at the target
