"""Daemons sharing a state database act on a cluster one at a time, and hand it over safely.

Two (or more) daemons watch one simulated cluster through their own transports, on one store and one
fake clock; a stub evaluator always recommends Work -> 3. Only the lease holder talks to the cluster.
"""

from __future__ import annotations

from typing import Any

from lease_fleet import KEY, TTL_S, Fleet

from autoscaler.reasons import Reason
from autoscaler.state import JobState, MemoryStateStore, StateStore
from autoscaler.testing import SlowEvaluator

pytest_plugins = ("lease_fleet",)  # its ``store`` fixture: each test on every state backend


async def test_only_the_holder_talks_to_the_cluster_and_the_job_is_rescaled_once(store: StateStore) -> None:
    fleet = Fleet(store, ("a", "b", "c"))
    for _ in range(12):
        reports = await fleet.tick("a", "b", "c")
        assert reports["b"].outcomes == () and reports["c"].outcomes == ()
    assert fleet.sim.rescale_count(fleet.job_id) == 1
    assert (fleet.puts("a"), fleet.puts("b"), fleet.puts("c")) == (1, 0, 0)
    assert fleet.transports["b"].requests == [] and fleet.evaluators["b"].calls == []  # no load on Flink
    assert (fleet.held("a"), fleet.held("b"), fleet.held("c")) == (1, 0, 0)
    assert [(lease.name, lease.owner) for lease in store.leases()] == [("prod", "a")]


async def test_a_clean_shutdown_hands_the_cluster_over_at_the_next_tick(store: StateStore) -> None:
    fleet = Fleet(store)
    for _ in range(3):
        await fleet.tick("a", "b")
    history = store.load(KEY).history
    assert len(history) == 1 and fleet.puts("a") == 1
    await fleet.daemons["a"].aclose()

    reports = await fleet.tick("b")
    assert [o.job.key for o in reports["b"].outcomes] == [KEY] and fleet.held("b") == 1
    assert fleet.evaluators["b"].restored[0][KEY] > 0  # b resumes a's stored window
    for _ in range(6):
        await fleet.tick("b")
    assert store.load(KEY).history == history and fleet.puts("b") == 0  # nothing decided twice


async def test_a_dead_holder_is_taken_over_once_its_lease_runs_out(store: StateStore) -> None:
    fleet = Fleet(store)
    await fleet.tick("a", "b")  # a takes the lease at t = 10 s and rescales, then dies (no release)
    assert fleet.puts("a") == 1
    expires_ms = store.leases()[0].expires_ms
    waited: list[int] = []
    while not (await fleet.tick("b"))["b"].outcomes:
        waited.append(fleet.clock.now_ms())
    assert waited and max(waited) < expires_ms <= fleet.clock.now_ms()  # not a tick early
    assert fleet.held("b") == 1 and store.leases()[0].owner == "b"
    for _ in range(6):
        await fleet.tick("b")
    assert fleet.puts("b") == 0 and len(store.load(KEY).history) == 1  # a's rescale is not repeated


async def test_the_old_holder_stands_down_when_it_lost_the_lease(store: StateStore) -> None:
    fleet = Fleet(store)
    await fleet.tick("a")
    fleet.clock.advance(TTL_S)  # a hangs for a whole ttl
    await fleet.tick("b", seconds=0)
    reports = await fleet.tick("a")
    assert reports["a"].outcomes == () and fleet.held("a") == 0
    assert KEY in fleet.evaluators["a"].forgotten  # its window goes; b's stored one is the truth
    labels = {"cluster": "prod", "job": "job"}
    assert fleet.metrics["a"].registry.get_sample_value("flink_autoscaler_scalings_total", labels) is None


async def test_a_lease_that_runs_out_during_the_tick_stops_the_rescale_and_the_write() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store, ())
    fleet.start("a", evaluator=SlowEvaluator(fleet.clock, TTL_S, {"Work": 3}))
    reports = await fleet.tick("a")
    (outcome,) = reports["a"].outcomes
    assert outcome.outcome is Reason.LEASE_EXPIRED and fleet.puts("a") == 0
    assert store.load(KEY) == JobState() and store.load_window(KEY) == []  # nothing written
    errors = {"cluster": "prod", "reason": str(Reason.LEASE_EXPIRED)}
    assert fleet.metrics["a"].registry.get_sample_value("flink_autoscaler_errors_total", errors) == 1


class NoLeases(MemoryStateStore):
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> Any:
        raise OSError("database is unreachable")


async def test_a_daemon_that_cannot_reach_the_lease_stands_by() -> None:
    fleet = Fleet(NoLeases(), ("a",))
    reports = await fleet.tick("a")
    assert reports["a"].outcomes == () and fleet.puts("a") == 0 and fleet.held("a") == 0
    errors = {"cluster": "prod", "reason": str(Reason.STATE_STORE_ERROR)}
    assert fleet.metrics["a"].registry.get_sample_value("flink_autoscaler_errors_total", errors) == 1


async def test_a_daemon_that_cannot_evaluate_hands_its_lease_to_a_standby_and_takes_back_none(
    store: StateStore,
) -> None:
    """A dead Spark session that cannot be replaced: after the failed tick, the next one finds the
    evaluator still broken, releases the lease and reads no cluster; the standby takes over at once."""
    fleet = Fleet(store)
    await fleet.tick("a", "b")
    assert (fleet.held("a"), fleet.held("b")) == (1, 0)
    fleet.evaluators["a"].fail = True
    failed = await fleet.tick("a")  # the evaluation fails: nothing scales, the lease is still held
    assert {o.outcome for o in failed["a"].outcomes} == {Reason.AUTOSCALER_ERROR}
    requests = len(fleet.transports["a"].requests)

    reports = await fleet.tick("a", "b")
    assert fleet.evaluators["a"].checks == 1
    assert reports["a"].outcomes == () and "cannot evaluate" in reports["a"].cluster_errors["prod"]
    assert len(fleet.transports["a"].requests) == requests  # standing by: no REST call at all
    assert fleet.held("a") == 0 and [(lease.name, lease.owner) for lease in store.leases()] == [("prod", "b")]
    assert [o.job.key for o in reports["b"].outcomes] == [KEY]  # the standby acts on the job
    assert fleet.sim.rescale_count(fleet.job_id) == 1 and fleet.puts("b") == 0  # a scaled before it failed

    fleet.evaluators["a"].fail = False  # a new session works: a takes no lease b holds
    for _ in range(3):
        reports = await fleet.tick("a", "b")
        assert reports["a"].outcomes == ()
    assert (fleet.held("a"), fleet.held("b")) == (0, 1) and fleet.evaluators["a"].checks == 2
    assert fleet.sim.rescale_count(fleet.job_id) == 1


async def test_an_evaluator_that_recovers_keeps_the_lease_and_acts_again() -> None:
    fleet = Fleet(MemoryStateStore(), ("a",))
    fleet.evaluators["a"].fail = True
    await fleet.tick("a")  # fails
    fleet.evaluators["a"].fail = False
    reports = await fleet.tick("a")  # the check passes: the tick runs as usual
    assert [o.job.key for o in reports["a"].outcomes] == [KEY] and fleet.held("a") == 1
    assert fleet.puts("a") == 1 and fleet.evaluators["a"].checks == 1
