"""budget-cap: within budget untouched, largest increases trimmed first, scale-downs kept, veto when
nothing fits, cluster scope from /overview, and a veto when the cluster cannot be read."""

from __future__ import annotations

from itertools import pairwise

import pytest
from flink_autoscaler_budget_cap import BudgetCapPlugin, slots_needed

from autoscaler.flink.errors import FlinkUnreachable
from autoscaler.flink.models import ClusterOverview
from autoscaler.model import Edge, JobEvaluation, JobTopology, VertexChange, VertexInfo
from autoscaler.plugins import PluginContext
from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import JOB, make_sample, vertex_eval


def topology(parallelism, groups=None):
    groups = groups or {}
    vertices = [VertexInfo(v, v, p, 128, slot_sharing_group=groups.get(v)) for v, p in parallelism.items()]
    ids = list(parallelism)
    return JobTopology.build(vertices, [Edge(a, b) for a, b in pairwise(ids)])


class FakeClient:
    def __init__(self, total=None, available=None, fail=False):
        self.total, self.available, self.fail = total, available, fail

    async def overview(self):
        if self.fail:
            raise FlinkUnreachable(
                "down", cluster="c1", base_url="http://jm", method="GET", endpoint="/overview"
            )
        return ClusterOverview.model_validate(
            {
                "taskmanagers": 1,
                "slots-total": self.total,
                "slots-available": self.available,
                "flink-version": "2.3.0",
            }
        )


def ctx(topo, config, client=None):
    sample = make_sample(topo)
    ev = JobEvaluation(sample, {v.id: vertex_eval(v.id, v.parallelism) for v in topo}, False, 10, True)
    return PluginContext(JOB, AutoscalerOptions(enabled=True), ev, config=config, client=client)


def changes(**targets):
    return {v: VertexChange(v, c, t) for v, (c, t) in targets.items()}


def targets(result):
    return None if result is None else {v: c.target for v, c in result.items()}


def test_slots_follow_slot_sharing_groups():
    topo = topology({"a": 2, "b": 5, "c": 3}, groups={"a": "g1", "b": "g1", "c": "g2"})
    assert slots_needed(topo, {}) == 5 + 3
    assert slots_needed(topo, {"a": 7}) == 7 + 3


async def test_within_budget_is_approved_unchanged():
    topo = topology({"a": 2, "b": 2})
    result = await BudgetCapPlugin().apply(ctx(topo, {"max-slots": "8"}), changes(b=(2, 6)))
    assert targets(result) == {"b": 6}


async def test_largest_increase_is_trimmed_first():
    topo = topology({"a": 1, "b": 1, "c": 1}, groups={"a": "x", "b": "y", "c": "z"})
    # wants a 1->2 (+1), b 1->6 (+5), c 1->4 (+3): 12 slots; budget 8 -> trim b to 4, then b/c alternately
    result = await BudgetCapPlugin().apply(
        ctx(topo, {"max-slots": "8"}), changes(a=(1, 2), b=(1, 6), c=(1, 4))
    )
    assert targets(result) == {"a": 2, "b": 3, "c": 3}
    assert slots_needed(topo, targets(result)) == 8


async def test_scale_downs_are_kept_and_a_fully_trimmed_scaling_is_a_veto():
    topo = topology({"a": 4, "b": 4}, groups={"a": "x", "b": "y"})
    result = await BudgetCapPlugin().apply(ctx(topo, {"max-slots": "6"}), changes(a=(4, 2), b=(4, 9)))
    assert targets(result) == {"a": 2}  # b trimmed back to its current 4: only the scale-down is left
    vetoed = await BudgetCapPlugin().apply(ctx(topo, {"max-slots": "8"}), changes(b=(4, 9)))
    assert vetoed == {}  # an empty mapping vetoes the scaling


@pytest.mark.parametrize(("total", "available", "expected"), [(16, 12, {"b": 6}), (16, 4, {})])
async def test_cluster_scope_counts_other_jobs(total, available, expected):
    # This job uses 2 slots; others use total - available - 2. Budget 12 for the whole cluster.
    topo = topology({"a": 2, "b": 2})
    client = FakeClient(total, available)
    result = await BudgetCapPlugin().apply(
        ctx(topo, {"max-slots": "12", "scope": "cluster"}, client), changes(b=(2, 6))
    )
    assert targets(result) == expected  # (16, 4): others use 10 of 12, b trimmed back to 2: veto


async def test_cluster_scope_vetoes_when_the_cluster_cannot_be_read():
    topo = topology({"a": 2})
    plugin = BudgetCapPlugin()
    assert (
        await plugin.apply(
            ctx(topo, {"max-slots": "12", "scope": "cluster"}, FakeClient(fail=True)), changes(a=(2, 4))
        )
        is None
    )
