"""Which shard a job is in, which daemon should hold which shard, and one daemon's plan for a tick:
pure functions of the lease rows (``autoscaler/shards.py``)."""

from __future__ import annotations

import zlib

import pytest

from autoscaler.shards import (
    assign,
    conflicts,
    describe_lease,
    is_member,
    layout_of,
    lease_name,
    live_members,
    member_name,
    plan,
    shard_of,
)
from autoscaler.state.store import Lease

NOW = 1_000_000
LIVE = NOW + 30_000
DAEMONS = [f"host-{i}:{4000 + i}" for i in range(7)]


def test_a_jobs_shard_is_a_crc32_of_its_key_the_same_in_every_process() -> None:
    assert shard_of("prod/orders", 8) == zlib.crc32(b"prod/orders") % 8 == 6
    assert shard_of("prod/orders", 1) == 0
    keys = [f"prod/job-{i}" for i in range(800)]
    per_shard = [sum(1 for k in keys if shard_of(k, 8) == s) for s in range(8)]
    assert min(per_shard) > 70 and max(per_shard) < 130  # ~100 each


def test_lease_names_and_how_status_shows_them() -> None:
    assert lease_name("prod", 0, 1) == "prod"  # unsharded: the lease older versions took
    assert lease_name("prod", 3, 8) == "prod#3/8" and member_name("prod", "a:1") == "prod@member/a:1"
    assert [layout_of(n, "prod") for n in ("prod", "prod#3/8", "prod@member/a", "prods#1/2", "other")] == [
        1,
        8,
        None,
        None,
        None,
    ]
    assert describe_lease("prod#3/8") == "prod shard 3 of 8" and describe_lease("prod") == "prod"
    assert describe_lease("prod@member/a:1") == "prod member" and is_member("prod@member/a:1")


@pytest.mark.parametrize("shards", [1, 2, 7, 8, 16, 33])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_the_assignment_covers_every_shard_once_balanced_whatever_the_order(shards: int, n: int) -> None:
    members = DAEMONS[:n]
    owners = assign(shards, members)
    assert sorted(owners) == list(range(shards)) and set(owners.values()) <= set(members)
    counts = [sum(1 for o in owners.values() if o == m) for m in members]
    assert max(counts) - min(counts) <= 1 and sum(counts) == shards
    assert assign(shards, list(reversed(members))) == owners


@pytest.mark.parametrize("shards", [8, 16, 32])
def test_a_member_that_comes_or_goes_moves_few_shards(shards: int) -> None:
    """Rendezvous with a cap: about the newcomer's share moves, where ``i % N`` moved most shards."""
    for n in range(1, 5):
        before, after = assign(shards, DAEMONS[:n]), assign(shards, DAEMONS[: n + 1])
        moved = sum(1 for s in range(shards) if before[s] != after[s])
        assert moved <= 2 * -(-shards // (n + 1)), (n, moved)
        taken = {s for s in range(shards) if after[s] == DAEMONS[n]}
        assert {s for s in range(shards) if before[s] != after[s]} >= taken


def rows(*leases: tuple[str, str] | tuple[str, str, int]) -> list[Lease]:
    return [Lease(lease[0], lease[1], lease[2] if len(lease) > 2 else LIVE, 0) for lease in leases]


def test_live_members_are_the_unexpired_membership_rows_of_the_cluster() -> None:
    found = rows(
        ("prod@member/b", "b"), ("prod@member/a", "a"), ("prod@member/c", "c", NOW), ("test@member/d", "d")
    )
    assert live_members(found, "prod", NOW) == ("a", "b")


def test_a_plan_takes_my_shards_and_hands_over_the_others() -> None:
    owners = assign(4, ["a", "b"])
    mine, theirs = [s for s in range(4) if owners[s] == "a"], [s for s in range(4) if owners[s] == "b"]
    alone = plan(rows(), cluster="prod", shards=4, me="a", now_ms=NOW, held=())
    assert alone.members == ("a",) and alone.take == (0, 1, 2, 3) and alone.hand_off == ()

    joined = rows(("prod@member/b", "b"), *((lease_name("prod", s, 4), "a") for s in range(4)))
    todo = plan(joined, cluster="prod", shards=4, me="a", now_ms=NOW, held={0, 1, 2, 3})
    assert todo.members == ("a", "b") and list(todo.take) == mine and list(todo.hand_off) == theirs
    assert todo.stale == () and todo.conflicts == ()

    # restarted under the same name: the rows say it holds b's shards, so it hands them over at once
    restarted = plan(joined, cluster="prod", shards=4, me="a", now_ms=NOW, held=())
    assert list(restarted.hand_off) == theirs


def test_leases_of_another_shard_count_are_mine_to_drop_or_others_to_respect() -> None:
    found = rows(("prod", "a"), ("prod#1/2", "b"), ("prod#0/2", "c", NOW), ("prod#0/4", "a"), ("test", "b"))
    todo = plan(found, cluster="prod", shards=4, me="a", now_ms=NOW, held=())
    assert todo.stale == ("prod",)  # a's own, from before it was restarted with shards: 4
    assert [r.name for r in todo.conflicts] == ["prod#1/2"]  # live, another daemon's (prod#0/2 expired)
    assert [r.name for r in conflicts(found, cluster="prod", shards=1, me="b", now_ms=NOW)] == ["prod#0/4"]
