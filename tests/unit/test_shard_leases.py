"""Daemons sharing a state database split a sharded cluster's jobs and never act on a job together.

Two or three daemons watch one simulated cluster of 12 jobs through their own in-process transports,
on one store and one fake clock; a stub evaluator always recommends Work -> 3. Every step ticks the
daemons one after the other at the same instant and checks that no job was handled by two of them
(``Fleet.tick``): that is the guarantee, asserted at every step, not only at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lease_fleet
import structlog

from autoscaler.daemon import Daemon
from autoscaler.explain import status_table
from autoscaler.reasons import Reason
from autoscaler.shards import assign, shard_of
from autoscaler.simulator.spec import SimClusterSpec
from autoscaler.state import MemoryStateStore, StateStore
from autoscaler.testing import SlowEvaluator, StubEvaluator

pytest_plugins = ("lease_fleet",)  # its ``store`` fixture: each test on every state backend

TTL_S = 30
TICK_S = 10
SHARDS = 8
JOBS = 12


class Fleet(lease_fleet.Fleet):
    """The lease tests' daemons on a cluster of ``JOBS`` jobs in ``SHARDS`` shards, checking at every
    step that no job was handled by two of them."""

    def __init__(self, store: StateStore, names: Sequence[str] = ("a", "b"), *, shards: int = SHARDS) -> None:
        self.handled: dict[str, list[set[str]]] = {}  # per daemon, per step: the job keys it handled
        spec = SimClusterSpec(cooldown_after_rescaling_s=0, taskmanagers=JOBS, slots=8)
        jobs = [f"job-{i}" for i in range(JOBS)]
        super().__init__(store, names, jobs=jobs, shards=shards, ttl_s=TTL_S, tick_s=TICK_S, spec=spec)

    def start(
        self, name: str, *, shards: int | None = None, evaluator: StubEvaluator | None = None
    ) -> Daemon:
        self.handled.setdefault(name, [])
        return super().start(name, shards=shards, evaluator=evaluator)

    async def tick(self, *names: str, seconds: float | None = None) -> dict[str, set[str]]:  # type: ignore[override]
        """One step: the clock moves, then each daemon ticks at that instant; the jobs each handled
        (an outcome: decided or found unavailable), checked to be disjoint."""
        reports = await super().tick(*names, seconds=seconds)
        handled = {name: {o.job.key for o in report.outcomes} for name, report in reports.items()}
        for name in names:
            self.handled[name].append(handled[name])
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                assert not handled[a] & handled[b], (
                    f"{a} and {b} both handled {sorted(handled[a] & handled[b])}"
                )
        return handled

    def rescales(self) -> dict[str, int]:
        return {key: self.sim.rescale_count(job_id) for key, job_id in self.job_ids.items()}

    def shard_jobs(self, shards: Sequence[int]) -> set[str]:
        return {key for key in self.job_ids if shard_of(key, SHARDS) in shards}

    def owners(self) -> dict[str, str]:
        """Shard lease name -> its live holder, as the database has it."""
        now = self.clock.now_ms()
        return {r.name: r.owner for r in self.state.leases() if r.expires_ms > now and "#" in r.name}


def mine(owner: str, members: Sequence[str]) -> set[int]:
    return {s for s, o in assign(SHARDS, members).items() if o == owner}


async def test_two_daemons_split_the_jobs_and_each_job_is_decided_by_one_of_them_once(
    store: StateStore,
) -> None:
    fleet = Fleet(store)
    await fleet.tick("a", "b")  # a takes all shards, b (the same instant) finds them a's
    for _ in range(3):  # a hands b's share over, b takes it at its next tick
        await fleet.tick("a", "b")
    steady = [await fleet.tick("a", "b") for _ in range(6)]
    for handled in steady:
        assert handled["a"] == fleet.shard_jobs(mine("a", ["a", "b"]))
        assert handled["b"] == fleet.shard_jobs(mine("b", ["a", "b"]))
        assert handled["a"] | handled["b"] == set(fleet.job_ids)
    assert fleet.gauge("a", "flink_autoscaler_shards_held") == len(mine("a", ["a", "b"]))
    assert fleet.gauge("b", "flink_autoscaler_shards_held") == SHARDS - len(mine("a", ["a", "b"]))
    assert (
        fleet.gauge("a", "flink_autoscaler_lease_held")
        == fleet.gauge("b", "flink_autoscaler_lease_held")
        == 1
    )
    assert set(fleet.rescales().values()) == {1}  # every job rescaled, none twice
    assert fleet.puts("a") + fleet.puts("b") == JOBS
    assert fleet.gauge("a", "flink_autoscaler_jobs") + fleet.gauge("b", "flink_autoscaler_jobs") == JOBS
    for key in fleet.job_ids:  # neither daemon took the other's jobs for vanished: no window trimmed away
        assert store.load_window(key), key
    assert set(fleet.metrics["a"].known_jobs()) <= fleet.shard_jobs(mine("a", ["a", "b"]))


async def test_a_daemon_that_joins_gets_its_shards_within_two_ticks_never_double_held() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store, ("a",))
    for _ in range(3):
        assert await fleet.tick("a") == {"a": set(fleet.job_ids)}
    fleet.start("b")
    with structlog.testing.capture_logs() as logs:
        steps = [await fleet.tick("a", "b") for _ in range(3)]
    expect_b = fleet.shard_jobs(mine("b", ["a", "b"]))
    assert steps[0] == {"a": set(fleet.job_ids), "b": set()}  # a ticked before b was a member
    assert steps[1] == {"a": set(fleet.job_ids) - expect_b, "b": expect_b}  # a hands over, b takes
    assert steps[2] == steps[1]
    released = [e for e in logs if e["event"] == "shard_released"]
    assert {e["shard"] for e in released} == mine("b", ["a", "b"])
    assert {e["reason"] for e in released} == {"hand-off"} and {e["to"] for e in released} == {"b"}
    acquired = [e for e in logs if e["event"] == "shard_acquired"]
    assert {(e["shard"], e["instance"]) for e in acquired} == {(s, "b") for s in mine("b", ["a", "b"])}
    assert [e["instance"] for e in logs if e["event"] == "standing_by"] == ["b"]  # once, before it holds any
    assert set(fleet.rescales().values()) == {1} and fleet.puts("b") == 0  # b resumed a's state


async def test_a_dead_daemons_shards_go_to_the_others_after_the_lease_ttl(store: StateStore) -> None:
    fleet = Fleet(store, ("a", "b", "c"))
    for _ in range(4):
        await fleet.tick("a", "b", "c")
    died_ms = fleet.clock.now_ms()  # c's last renewal
    c_jobs = fleet.shard_jobs(mine("c", ["a", "b", "c"]))
    assert fleet.handled["c"][-1] == c_jobs
    waited = 0
    while True:
        handled = await fleet.tick("a", "b")
        if handled["a"] | handled["b"] == set(fleet.job_ids):
            break
        assert not (handled["a"] | handled["b"]) & c_jobs  # nobody touches c's jobs before its leases end
        waited += TICK_S
        assert waited <= TTL_S
    took_ms = fleet.clock.now_ms() - died_ms
    assert TTL_S * 1000 <= took_ms <= TTL_S * 1000 + TICK_S * 1000  # not a tick early, at most one late
    assert set(fleet.owners().values()) == {"a", "b"}
    assert handled["a"] == fleet.shard_jobs(mine("a", ["a", "b"]))  # as if c had never been
    for _ in range(3):
        await fleet.tick("a", "b")
    assert set(fleet.rescales().values()) == {1}  # c's rescales are not repeated


async def test_a_clean_stop_hands_every_shard_over_at_the_next_tick() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store)
    for _ in range(4):
        await fleet.tick("a", "b")
    await fleet.daemons["b"].aclose()
    assert not [r for r in store.leases() if r.owner == "b" and r.expires_ms > fleet.clock.now_ms()]
    handled = await fleet.tick("a")
    assert handled["a"] == set(fleet.job_ids)
    assert fleet.gauge("b", "flink_autoscaler_shards_held") == 0


async def test_a_daemon_that_lost_its_shard_while_stalled_stands_down_those_jobs() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store)
    for _ in range(4):
        await fleet.tick("a", "b")
    fleet.clock.advance(TTL_S)  # b hangs for a whole ttl: a takes everything
    with structlog.testing.capture_logs() as logs:
        handled = await fleet.tick("a", seconds=0)
        assert handled["a"] == set(fleet.job_ids)
        handled = await fleet.tick("b", seconds=0)  # b wakes up: its membership is back, a hands over
    assert handled["b"] == set()
    lost = [e for e in logs if e["event"] == "shard_released" and e["instance"] == "b"]
    assert {e["reason"] for e in lost} == {"lost"}
    assert set(fleet.evaluators["b"].forgotten) == fleet.shard_jobs(mine("b", ["a", "b"]))
    for _ in range(3):
        await fleet.tick("a", "b")
    assert fleet.handled["b"][-1] == fleet.shard_jobs(mine("b", ["a", "b"]))  # back, after a handed over
    assert set(fleet.rescales().values()) == {1}


async def test_a_shard_lease_that_runs_out_during_the_tick_stops_the_rescale_and_the_write() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store, ())
    fleet.start("a", evaluator=SlowEvaluator(fleet.clock, TTL_S, {"Work": 3}))
    report = await fleet.daemons["a"].run_tick()
    assert {o.outcome for o in report.outcomes} == {Reason.LEASE_EXPIRED} and fleet.puts("a") == 0
    assert all(store.load_window(key) == [] for key in fleet.job_ids)  # nothing written


async def test_daemons_with_different_shard_counts_never_act_together(store: StateStore) -> None:
    """A config change rolled out to one daemon at a time: the second count stands by until the first
    count's leases are gone, in either order of start."""
    fleet = Fleet(store, ("old",), shards=1)
    await fleet.tick("old")
    fleet.start("new", shards=SHARDS)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            handled = await fleet.tick("old", "new")
            assert handled == {"old": set(fleet.job_ids), "new": set()}
    assert any(e["event"] == "shard_layout_conflict" and e["instance"] == "new" for e in logs)
    await fleet.daemons["old"].aclose()
    assert (await fleet.tick("new"))["new"] == set(fleet.job_ids)

    fleet.start("late", shards=1)  # the other way round: an unsharded one joins sharded daemons
    for _ in range(3):
        handled = await fleet.tick("new", "late")
        assert handled == {"new": set(fleet.job_ids), "late": set()}
    assert fleet.gauge("late", "flink_autoscaler_lease_held") == 0
    assert "prod" not in {r.name for r in store.leases() if r.expires_ms > fleet.clock.now_ms()}
    assert set(fleet.rescales().values()) == {1}


async def test_status_names_each_shards_holder_and_the_members() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store)
    for _ in range(3):
        await fleet.tick("a", "b")
    text = status_table({}, {}, fleet.clock.now_ms(), leases=store.leases())
    assert "prod shard 0 of 8" in text and "prod member" in text
    line = next(line for line in text.splitlines() if line.startswith("prod shard 0 of 8"))
    assert line.split()[5] == assign(SHARDS, ["a", "b"])[0]


async def test_one_shard_is_the_clusters_one_lease_as_before() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store, (), shards=1)
    fleet.start("a", shards=1)
    fleet.start("b", shards=1)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert await fleet.tick("a", "b") == {"a": set(fleet.job_ids), "b": set()}
    assert [(r.name, r.owner) for r in store.leases()] == [("prod", "a")]  # no shard or membership rows
    events = [
        e["event"]
        for e in logs
        if "lease" in e["event"] or "shard" in e["event"] or e["event"] == "standing_by"
    ]
    assert events == ["lease_acquired", "standing_by"]
    assert (
        fleet.gauge("a", "flink_autoscaler_shards_held") == 1
        and fleet.gauge("b", "flink_autoscaler_shards_held") == 0
    )


async def test_a_daemon_that_cannot_evaluate_leaves_and_comes_back_for_its_share() -> None:
    store = MemoryStateStore()
    fleet = Fleet(store)
    for _ in range(3):
        await fleet.tick("a", "b")
    fleet.evaluators["a"].fail = True
    await fleet.tick("a", "b")  # a's evaluation fails: nothing scaled, its shards still held
    with structlog.testing.capture_logs() as logs:
        handled = await fleet.tick("a", "b")  # a stands by: shards and membership released, b takes all
    assert handled == {"a": set(), "b": set(fleet.job_ids)}
    assert {e["reason"] for e in logs if e["event"] == "shard_released"} == {"evaluator_unavailable"}
    assert not [r for r in store.leases() if r.owner == "a" and r.expires_ms > fleet.clock.now_ms()]
    fleet.evaluators["a"].fail = False
    for _ in range(3):
        handled = await fleet.tick("a", "b")
    assert handled["a"] == fleet.shard_jobs(mine("a", ["a", "b"]))  # back with its share
    assert set(fleet.rescales().values()) == {1}


class NoLeaseRows(MemoryStateStore):
    def leases(self) -> Any:
        raise OSError("database is unreachable")


async def test_a_daemon_that_cannot_read_the_lease_rows_stands_by() -> None:
    fleet = Fleet(NoLeaseRows(), ("a",))
    with structlog.testing.capture_logs() as logs:
        assert await fleet.tick("a") == {"a": set()}
    assert [e["event"] for e in logs if e["log_level"] in ("error", "warning")][:2] == [
        "lease_unavailable",
        "standing_by",
    ]
    assert fleet.gauge("a", "flink_autoscaler_lease_held") == 0 and fleet.puts("a") == 0
    errors = {"cluster": "prod", "reason": str(Reason.STATE_STORE_ERROR)}
    assert fleet.metrics["a"].registry.get_sample_value("flink_autoscaler_errors_total", errors) == 1
