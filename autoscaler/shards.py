"""One cluster's jobs split between daemons that share a state database: which shard a job is in,
which daemon should hold which shard, and what one daemon does about its shards this tick.

With ``shards: S`` a cluster has S leases instead of one, named ``<cluster>#<i>/<S>``, and each daemon
that acts on it renews a membership row, ``<cluster>@member/<instance_id>``, every tick (both in the
state database's lease table, with the same ``lease_ttl``). The live members, read once a tick from
the lease rows, divide the shards between them (:func:`assign`); each daemon takes its own and hands
over any other it still holds. The lease API's conditional update is what keeps a shard with one
daemon at a time; this module only decides which ones a daemon asks for, so two daemons that read
the rows a moment apart and disagree cost a tick of hand-over, never a job handled twice.

Everything here is a pure function of the lease rows and the clock's now, so tests drive it directly
(``tests/unit/test_shards.py``); ``autoscaler/leases.py`` does the database calls and the logging.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from autoscaler.state.store import Lease

__all__ = [
    "ShardPlan",
    "assign",
    "conflicts",
    "describe_lease",
    "is_member",
    "layout_of",
    "lease_name",
    "live_members",
    "member_name",
    "plan",
    "shard_of",
]

_MEMBER = "@member/"
_SHARD = re.compile(r"#(\d+)/(\d+)")


def shard_of(job_key: str, shards: int) -> int:
    """The job's shard: a hash of its key (``cluster/name``) that every daemon and every Python process
    computes alike (``hash()`` is salted per process), so the name keeps its shard across a
    resubmission under a new JobID and across restarts."""
    return 0 if shards == 1 else zlib.crc32(job_key.encode("utf-8")) % shards


def lease_name(cluster: str, shard: int, shards: int) -> str:
    """The lease of one shard. With one shard it is the cluster's own name, the lease older versions
    took, so an unsharded daemon is unchanged."""
    return cluster if shards == 1 else f"{cluster}#{shard}/{shards}"


def member_name(cluster: str, instance: str) -> str:
    """The row a daemon renews every tick while it acts on a sharded cluster."""
    return f"{cluster}{_MEMBER}{instance}"


def is_member(name: str) -> bool:
    """A membership row (``<cluster>@member/<daemon>``), not a lease on jobs."""
    return _MEMBER in name


def layout_of(name: str, cluster: str) -> int | None:
    """The shard count a lease of ``cluster`` was taken under: 1 for the cluster's own lease, S for
    ``<cluster>#i/S``; None for a membership row or another cluster's lease."""
    if name == cluster:
        return 1
    if not name.startswith(cluster):
        return None
    shard = _SHARD.fullmatch(name, len(cluster))
    return int(shard.group(2)) if shard is not None else None


def describe_lease(name: str) -> str:
    """How ``status`` names a lease row: ``prod``, ``prod shard 3 of 8`` or ``prod member``."""
    cluster, sep, _ = name.partition(_MEMBER)
    if sep:
        return f"{cluster} member"
    shard = _SHARD.search(name)
    if shard is None or shard.end() != len(name):
        return name
    return f"{name[: shard.start()]} shard {shard.group(1)} of {shard.group(2)}"


def live_members(leases: Iterable[Lease], cluster: str, now_ms: int) -> tuple[str, ...]:
    """Instance ids of the daemons whose membership of ``cluster`` has not expired, sorted."""
    prefix = f"{cluster}{_MEMBER}"
    return tuple(sorted({r.owner for r in leases if r.name.startswith(prefix) and r.expires_ms > now_ms}))


def _score(member: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{member}\0{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(shards: int, members: Collection[str]) -> dict[int, str]:
    """Shard -> the member that should hold it: balanced, and stable when a member comes or goes.

    Balanced: every member gets S // N shards or one more. Stable: each shard goes to the member that
    ranks it highest (a hash of member and shard, rendezvous hashing) among those not yet full, so a
    member that joins takes shards from each of the others and one that leaves gives its own to the
    rest, while most shards stay where they are (``i % N`` over the sorted members would move most of
    them at every change, each move costing its jobs a tick and their caches).
    """
    ranked_members = sorted(set(members))
    if not ranked_members:
        return {}
    base, extra = divmod(shards, len(ranked_members))
    counts = dict.fromkeys(ranked_members, 0)
    full = 0  # members holding base + 1: at most `extra` of them
    owners: dict[int, str] = {}
    for shard in range(shards):
        ranked = sorted(ranked_members, key=lambda m: (-_score(m, shard), m))
        owner = next(m for m in ranked if counts[m] < base or (counts[m] == base and full < extra))
        counts[owner] += 1
        full += counts[owner] == base + 1
        owners[shard] = owner
    return owners


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """What one daemon does about one cluster's shards this tick."""

    members: tuple[str, ...]  # the live members, this daemon included
    owners: Mapping[int, str]  # shard -> the member that should hold it
    take: tuple[int, ...]  # this daemon's shards: acquire or renew
    hand_off: tuple[int, ...]  # shards it holds that another live member should: release them
    stale: tuple[str, ...]  # leases of another shard count it still holds (restarted with a new count)
    conflicts: tuple[Lease, ...]  # live leases of another shard count, held by other daemons


def plan(
    leases: Iterable[Lease], *, cluster: str, shards: int, me: str, now_ms: int, held: Collection[int]
) -> ShardPlan:
    """This tick's plan from the lease rows as read once: who is live, who should hold what, and so
    what this daemon takes, hands over or releases.

    ``held`` is what the daemon held after its last tick; a shard the rows say it holds counts too (a
    restart under the same instance id), so it is handed over instead of left to expire.
    """
    rows = list(leases)
    members = tuple(sorted({*live_members(rows, cluster, now_ms), me}))
    owners = assign(shards, members)
    mine = {r.name for r in rows if r.owner == me and r.expires_ms > now_ms}
    in_rows = {i for i in range(shards) if lease_name(cluster, i, shards) in mine}
    return ShardPlan(
        members=members,
        owners=owners,
        take=tuple(i for i in range(shards) if owners[i] == me),
        hand_off=tuple(sorted(i for i in {*held, *in_rows} if owners[i] != me)),
        stale=tuple(sorted(n for n in mine if layout_of(n, cluster) not in (None, shards))),
        conflicts=conflicts(rows, cluster=cluster, shards=shards, me=me, now_ms=now_ms),
    )


def conflicts(
    leases: Iterable[Lease], *, cluster: str, shards: int, me: str, now_ms: int
) -> tuple[Lease, ...]:
    """Live leases of ``cluster`` taken under another shard count by other daemons: while one exists,
    the two layouts would split the jobs differently, so a daemon that just took a lease gives it back
    (docs/operations.md, "Sharding a large cluster")."""
    return tuple(
        r
        for r in leases
        if r.expires_ms > now_ms and r.owner != me and layout_of(r.name, cluster) not in (None, shards)
    )
