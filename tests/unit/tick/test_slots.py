"""The slot stage's second reading of the free slots: only the clusters asked for, one request each, and a
cluster whose TaskManagers cannot be listed again keeps the tick's reading."""

from __future__ import annotations

import httpx
from daemon_world import World

from autoscaler.model import JobRef, VertexChange
from autoscaler.reasons import Reason
from autoscaler.state import JobState
from autoscaler.testing import StubEvaluator, make_sample, make_topology
from autoscaler.tick.slots import slot_hungry
from autoscaler.tick.steps import Decision, JobStep


async def test_free_slots_are_read_again_for_the_clusters_asked_and_a_failure_leaves_a_cluster_out() -> None:
    world = World(StubEvaluator({}), faults={"b": {("GET", "/taskmanagers"): httpx.Response(500)}})
    clusters = world.daemon.clusters
    assert await clusters.free_slots_now({"a"}) == {"a": (8, 7)}  # job-a holds one of the 8
    assert [p for m, p in world.transports["a"].requests if p == "/taskmanagers"] == ["/taskmanagers"]
    assert await clusters.free_slots_now({"a", "b"}) == {"a": (8, 7)}
    assert await clusters.free_slots_now(set()) == {}


def test_only_clusters_with_a_rescale_that_needs_more_slots_are_read_again() -> None:
    def step(cluster: str, current: int, target: int, outcome: Reason = Reason.SCALING) -> JobStep:
        job = JobRef(cluster, "0" * 32, "job")
        change = {"w": VertexChange("w", current, target)}
        sample = make_sample(make_topology({"w": current}), job=job)
        return JobStep(sample, Decision(job, outcome, "", change, JobState()))

    steps = [step("up", 1, 3), step("down", 3, 1), step("advised", 1, 3, Reason.ADVISOR_MODE)]
    assert slot_hungry(steps) == {"up"}
