"""A rescale against the cluster's free slots (``autoscaler.slot_fit``): what fits, and what a rescale
that does not fit is trimmed to, on topologies with several slot-sharing groups."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import Edge, JobTopology, VertexInfo
from autoscaler.resources import required_slots
from autoscaler.slot_fit import SlotBudget, fit_slots


def _topology(
    vertices: dict[str, tuple[str | None, int]], edges: list[tuple[str, str, str]] = (), max_p: int = 128
) -> JobTopology:
    """``{vertex: (slot-sharing group, parallelism)}`` in order, with ``(source, target, strategy)`` edges."""
    infos = [VertexInfo(v, v, p, max_p, slot_sharing_group=g) for v, (g, p) in vertices.items()]
    return JobTopology.build(infos, [Edge(s, t, strategy) for s, t, strategy in edges])


# Two groups: the source and the work share "g1" (4 slots), the sink alone in "g2" (2 slots): 6 slots.
TWO_GROUPS = _topology({"src": ("g1", 2), "work": ("g1", 4), "sink": ("g2", 2)})


def test_a_job_holds_the_widest_vertex_of_each_group_summed():
    assert required_slots(TWO_GROUPS) == 4 + 2
    assert required_slots(TWO_GROUPS, {"src": 6}) == 6 + 2  # the source now the widest of g1
    assert required_slots(TWO_GROUPS, {"src": 3}) == 4 + 2  # still under the work vertex: no slot more
    one_group = _topology({"a": (None, 3), "b": (None, 5)})  # unknown groups share Flink's default
    assert required_slots(one_group) == 5


def test_a_rescale_that_fits_the_free_slots_plus_the_jobs_own_is_left_alone():
    fit = fit_slots(TWO_GROUPS, {"work": 8, "sink": 4}, free=6)
    assert fit.fits and (fit.own, fit.needed, fit.free) == (6, 12, 6)
    assert dict(fit.targets) == {"work": 8, "sink": 4}


def test_growth_inside_a_groups_widest_vertex_needs_no_slot():
    fit = fit_slots(TWO_GROUPS, {"src": 4}, free=0)  # src 2 -> 4 shares the work vertex's 4 slots
    assert fit.fits and fit.needed == fit.own == 6


def test_a_scale_down_in_one_group_makes_room_for_a_scale_up_in_another():
    fit = fit_slots(TWO_GROUPS, {"work": 2, "sink": 4}, free=0)  # g1 4 -> 2 frees 2 for g2 2 -> 4
    assert fit.fits and fit.needed == 6


def test_a_rescale_too_big_shares_the_room_among_the_growing_groups_by_their_growth():
    # g1 wants 4 -> 12 (+8), g2 wants 2 -> 6 (+4); 6 free: g1 gets 4, g2 gets 2.
    fit = fit_slots(TWO_GROUPS, {"work": 12, "sink": 6}, free=6)
    assert not fit.fits and (fit.needed, fit.own, fit.free) == (18, 6, 6)
    assert dict(fit.targets) == {"work": 8, "sink": 4}
    assert fit.needed_after == 12 == fit.own + fit.free
    assert fit.numbers == "needs 18 slots, the job holds 6 and 6 are free (6 short)"


def test_a_group_never_gets_more_than_it_asked_for_and_the_rest_goes_to_the_others():
    topology = _topology({"a": ("g1", 1), "b": ("g2", 1), "c": ("g3", 1)})
    # Wants +1, +8, +8 of 7 free: 0.41, 3.29, 3.29 -> 0, 3, 3, and the slot left to the largest remainder.
    fit = fit_slots(topology, {"a": 2, "b": 9, "c": 9}, free=7)
    assert not fit.fits and dict(fit.targets) == {"a": 2, "b": 4, "c": 4} and fit.needed_after == 10
    wide = fit_slots(topology, {"a": 2, "b": 9, "c": 3}, free=20)
    assert wide.fits and dict(wide.targets) == {"a": 2, "b": 9, "c": 3}


def test_scale_downs_are_never_trimmed_and_a_full_cluster_trims_every_scale_up_to_what_it_holds():
    fit = fit_slots(TWO_GROUPS, {"work": 10, "sink": 1}, free=0)  # g2 frees 1 slot, g1 may take it
    assert dict(fit.targets) == {"work": 5, "sink": 1}
    full = fit_slots(TWO_GROUPS, {"work": 10}, free=0)
    assert dict(full.targets) == {"work": 4}  # no growth at all: the caller waits


def test_a_trimmed_vertex_behind_a_hash_edge_keeps_its_key_groups_even():
    topology = _topology(
        {"src": ("g", 2), "agg": ("g", 2)}, [("src", "agg", "HASH")], max_p=120
    )  # 120 key groups: 7 would give subtasks 17 or 18, 6 gives each 20
    fit = fit_slots(topology, {"agg": 12}, free=5)
    assert fit.targets["agg"] == 6
    unaligned = _topology({"src": ("g", 2), "agg": ("g", 2)}, [("src", "agg", "REBALANCE")])
    assert fit_slots(unaligned, {"agg": 12}, free=5).targets["agg"] == 7


def test_a_trimmed_source_spreads_its_partitions_evenly():
    topology = _topology({"src": ("g", 4)})
    fit = fit_slots(topology, {"src": 12}, free=5, num_source_partitions={"src": 12})
    assert fit.targets["src"] == 6  # 9 would leave three subtasks two partitions, six one


def test_the_budget_takes_each_claim_so_the_next_job_sees_what_is_left():
    budget = SlotBudget(total=16, free=6)
    first = fit_slots(TWO_GROUPS, {"work": 8}, free=budget.free)
    assert first.fits
    budget.claim(first, "a/one")
    assert budget.free == 2 and budget.claimed == 4 and budget.claims == ["a/one took 4"]
    second = fit_slots(TWO_GROUPS, {"work": 8}, free=budget.free)
    assert not second.fits and second.targets["work"] == 6
    budget.claim(fit_slots(TWO_GROUPS, {"work": 2}, free=budget.free), "a/two")  # a shrink claims nothing
    assert budget.free == 2 and budget.claims == ["a/one took 4"]
    assert not SlotBudget(total=0, free=0).known


@given(
    groups=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 16)), min_size=1, max_size=5),
    free=st.integers(0, 20),
)
def test_what_fits_never_needs_more_than_the_job_holds_plus_the_free_slots(groups, free):
    topology = _topology({f"v{i}": (f"g{i % 3}", p) for i, (p, _) in enumerate(groups)})
    targets = {f"v{i}": t for i, (p, t) in enumerate(groups) if t != p}
    fit = fit_slots(topology, targets, free)
    assert fit.needed_after <= max(fit.needed if fit.fits else fit.own + free, fit.own)
    for vid, t in fit.targets.items():
        current = topology.vertices[vid].parallelism
        wanted = targets[vid]
        assert min(current, wanted) <= t <= max(current, wanted)  # between where it is and where it goes
        if wanted < current:
            assert t == wanted  # a scale-down is never trimmed


@pytest.mark.parametrize("free", [0, 3])
def test_the_numbers_say_how_short_the_cluster_is(free):
    fit = fit_slots(TWO_GROUPS, {"work": 20}, free=free)
    assert fit.numbers.endswith(f"({20 + 2 - 6 - free} short)")
