"""Which jobs a cluster runs (``autoscaler.live_jobs``): the registry, not the Prometheus series, says
which jobs left; an unreachable cluster keeps its last job set; a lease given up is not a job gone."""

from __future__ import annotations

import httpx
from daemon_world import World

from autoscaler.live_jobs import LiveJobs
from autoscaler.model import JobRef
from autoscaler.testing import StubEvaluator

A, B, C = (JobRef(cluster="c", job_id=f"{n}" * 32, name=f"job-{n}") for n in "abc")


def test_a_job_missing_from_the_next_discovery_left_once() -> None:
    jobs = LiveJobs()
    jobs.discovered([A.key, B.key, C.key], [A, B])  # C runs but is not autoscaled (not running yet)
    assert jobs.take_left() == set() and set(jobs) == {A.key, B.key, C.key}
    assert set(jobs.refs) == {A.key, B.key}
    jobs.discovered([A.key], [A])
    assert jobs.take_left() == {B.key, C.key}
    assert jobs.take_left() == set()  # told once
    assert B.key not in jobs and set(jobs.refs) == {A.key}


def test_a_job_that_left_stays_left_until_asked_unless_it_came_back() -> None:
    jobs = LiveJobs()
    jobs.discovered([A.key, B.key], [A, B])
    jobs.discovered([A.key], [A])  # B left; nobody asked (a tick that ended early)
    jobs.discovered([], [])  # A left too
    assert jobs.take_left() == {A.key, B.key}
    jobs.discovered([A.key, B.key], [A, B])
    jobs.discovered([A.key], [A])  # B left ...
    jobs.discovered([A.key, B.key], [A, B])  # ... and came back before anyone asked
    assert jobs.take_left() == set()


def test_jobs_dropped_with_a_lease_are_not_gone() -> None:
    jobs = LiveJobs()
    jobs.discovered([A.key, B.key, C.key], [A, B])
    assert jobs.drop(lambda key: key != A.key) == [B.key, C.key]
    assert set(jobs) == {A.key} and set(jobs.refs) == {A.key}
    assert jobs.take_left() == set()  # they still run: another daemon acts on them
    jobs.discovered([A.key], [A])  # the next discovery (of the shards still held) misses nothing
    assert jobs.take_left() == set()


# ------------------------------------------------------------------------------ in a daemon tick
async def test_a_job_cancelled_on_its_cluster_is_forgotten_and_its_window_goes():
    w = World(StubEvaluator())
    await w.tick()
    assert w.state.load_window("a/job-a")
    w.sims["a"].cancel(w.jobs["a"])
    await w.tick()
    assert w.evaluator.forgotten == ["a/job-a"]
    assert w.state.load_window("a/job-a") == []
    assert "a/job-a" not in w.metrics.known_jobs() and "b/job-b" in w.metrics.known_jobs()
    await w.tick()
    assert w.evaluator.forgotten == ["a/job-a"]  # gone once


async def test_an_unreachable_cluster_keeps_its_last_job_set():
    w = World(StubEvaluator())
    await w.tick()
    w.sims["a"].cancel(w.jobs["a"])
    w.transports["a"].faults[("GET", ".*")] = httpx.ConnectError("connection refused")
    await w.tick()
    await w.tick()
    assert w.evaluator.forgotten == [] and "a/job-a" in w.daemon.clusters["a"].jobs
    assert w.state.load_window("a/job-a")
    w.transports["a"].faults.clear()  # listed again: now the job is seen gone
    await w.tick()
    assert w.evaluator.forgotten == ["a/job-a"] and w.state.load_window("a/job-a") == []


async def test_a_lease_given_up_forgets_its_jobs_here_but_they_are_not_gone():
    w = World(StubEvaluator())
    await w.tick()
    stored = w.state.load_window("a/job-a")
    await w.daemon.clusters.release_leases("test", stand_down=True)
    assert sorted(w.evaluator.forgotten) == ["a/job-a", "b/job-b"]  # this process's memory of them goes
    assert len(w.daemon.clusters["a"].jobs) == 0
    assert w.daemon.clusters.vanished() == []  # they did not leave their clusters
    assert w.state.load_window("a/job-a") == stored  # their stored window stays for the next holder
