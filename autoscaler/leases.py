"""The leases one daemon holds on each cluster, taken, renewed, handed over and given back once a tick.

Daemons that share a state database act on a cluster's jobs only under a lease (``StateStore``'s
``acquire_lease``: one conditional update the database serializes, so a lease is never held twice).
With ``shards: 1`` (the default) a cluster has one lease, named after it: its holder acts on every job,
the others stand by. With ``shards: S`` the jobs are split by a hash of their key into S shards, each
with its own lease, divided between the live daemons (``autoscaler/shards.py``): every daemon acts on
the jobs of the shards it holds, and takes over a dead one's once their leases run out.

:class:`LeaseKeeper` makes the database calls (off the event loop) and says what changed, in the log
and in ``flink_autoscaler_lease_held`` / ``_shards_held``; :class:`ClusterLease` is what it remembers of
one cluster between ticks. The cluster's jobs are not its business: a round returns the shards this
daemon stopped holding, and the caller forgets their jobs (``autoscaler/cluster.py``).

Two shard counts on one cluster would split its jobs differently, so a job could be in a shard of
each. A daemon that has just taken a lease therefore reads the lease rows once more, and gives it back
if a live lease of another shard count exists (``shard_layout_conflict``): of two daemons that took
such leases, the later one always sees the earlier one's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import structlog

from autoscaler.metrics import MetricsReporter
from autoscaler.offload import offload
from autoscaler.reasons import Reason
from autoscaler.shards import ShardPlan, conflicts, lease_name, member_name, plan, shard_of
from autoscaler.state import StateStore
from autoscaler.state.store import Lease

__all__ = ["ClusterLease", "LeaseKeeper"]

log = structlog.get_logger(__name__)


@dataclass
class ClusterLease:
    """What this daemon holds of one cluster's leases, between ticks."""

    cluster: str
    shards: int = 1
    expires: dict[int, int] = field(default_factory=dict)  # shard -> until when this daemon holds it
    # shard -> the lease's acquired_ms when this daemon last held it: unchanged by renewals, and by a
    # lapse no other daemon filled, so an equal value later means nobody else acted on its jobs since.
    acquired: dict[int, int] = field(default_factory=dict)
    holders: dict[int, str | None] = field(default_factory=dict)  # at the last attempt: to log changes
    member: bool = False  # this daemon's membership row is renewed (sharded clusters only)
    assignment: tuple[tuple[str, ...], tuple[int, ...]] | None = None  # (members, mine) last logged
    conflict: tuple[str, ...] = ()  # the other shard count's leases last logged
    idle_logged: bool = False  # standing_by was logged for this run of ticks holding nothing

    @property
    def sharded(self) -> bool:
        return self.shards > 1

    def held(self) -> frozenset[int]:
        """The shards this daemon took or renewed at its last round."""
        return frozenset(self.expires)

    def holds(self, now_ms: int) -> bool:
        """Whether it holds any of the cluster's shards at ``now_ms``."""
        return any(until > now_ms for until in self.expires.values())

    def shard(self, job_key: str) -> int:
        return shard_of(job_key, self.shards)

    def owns(self, job_key: str) -> bool:
        """The job is in a shard this daemon holds (as of its last round): its to read and decide."""
        return self.shard(job_key) in self.expires

    def holds_job(self, job_key: str, now_ms: int) -> bool:
        """The job's shard lease is still this daemon's at ``now_ms``: it may still act on the job."""
        return self.expires.get(self.shard(job_key), 0) > now_ms

    def token(self, job_key: str, now_ms: int) -> int | None:
        """The job's shard lease as this daemon holds it at ``now_ms`` (its ``acquired_ms``), None when
        it does not: a state computed under one token may be written under the same one only
        (``autoscaler/state/tick.py`` keeps a tick's state the database refused)."""
        shard = self.shard(job_key)
        return self.acquired.get(shard) if self.expires.get(shard, 0) > now_ms else None


class LeaseKeeper:
    """Takes, renews and gives back this daemon's leases in the state database."""

    def __init__(self, state: StateStore, metrics: MetricsReporter, *, instance_id: str, ttl_ms: int) -> None:
        self.state = state
        self.metrics = metrics
        self.me = instance_id
        self.ttl_ms = ttl_ms

    async def renew(self, lease: ClusterLease, now_ms: int) -> frozenset[int]:
        """This tick's lease round for one cluster; returns the shards this daemon held and no longer
        does (their jobs are no longer its to act on). Never raises: a database that cannot answer
        means no lease, and the cluster is left alone this tick."""
        before = lease.held()
        try:
            if lease.sharded:
                await self._renew_sharded(lease, now_ms)
            else:
                await self._renew_single(lease, now_ms)
        except Exception as exc:
            log.error("lease_unavailable", cluster=lease.cluster, error=str(exc))
            self.metrics.report_error(lease.cluster, Reason.STATE_STORE_ERROR)
            lease.expires.clear()
            if lease.sharded:
                self._log_idle(lease, before, ())
        self._report(lease)
        return before - lease.held()

    async def release(self, lease: ClusterLease, reason: str) -> frozenset[int]:
        """Give every lease of the cluster back (a clean stop, a daemon that cannot act): the others
        take them at their next tick instead of ``lease_ttl`` later. Returns the shards it held."""
        held = lease.held()
        if not held and not lease.member:
            return held
        name = lease.cluster
        for shard in sorted(held):
            where = {"shard": shard} if lease.sharded else {}
            try:
                await offload(self.state.release_lease, lease_name(name, shard, lease.shards), self.me)
                event = "shard_released" if lease.sharded else "lease_released"
                log.info(event, cluster=name, **where, instance=self.me, reason=reason)
            except Exception as exc:  # it expires on its own after lease_ttl
                log.warning("lease_release_failed", cluster=name, **where, error=str(exc), reason=reason)
        await self._leave(lease)
        lease.expires.clear()
        lease.holders.clear()
        lease.idle_logged = False
        self._report(lease)
        return held

    # ------------------------------------------------------------------ one lease per cluster
    async def _renew_single(self, lease: ClusterLease, now_ms: int) -> None:
        """The cluster's one lease, as before shards existed (the same log lines and gauges)."""
        name, me = lease.cluster, self.me
        had = bool(lease.expires)
        row: Lease | None
        try:
            row = await offload(self.state.acquire_lease, name, me, now_ms, self.ttl_ms)
        except Exception as exc:
            log.error("lease_unavailable", cluster=name, error=str(exc))
            self.metrics.report_error(name, Reason.STATE_STORE_ERROR)
            row = None
        held = row is not None and row.held_by(me, now_ms)
        holder = row.owner if row is not None else None
        if held and not had and not await self._layout_free(lease, now_ms, [0]):
            row, held, holder = None, False, None
        previous = lease.holders.get(0)
        if held and previous != me:
            log.info("lease_acquired", cluster=name, instance=me, previous=previous)
        elif not held and (holder != previous or had):
            until = row.expires_ms if row is not None else None
            log.warning("standing_by", cluster=name, instance=me, holder=holder, holder_until_ms=until)
        lease.expires = {0: row.expires_ms} if held and row is not None else {}
        if held and row is not None:
            lease.acquired[0] = row.acquired_ms
        lease.holders[0] = holder

    # ------------------------------------------------------------------ one lease per shard
    async def _renew_sharded(self, lease: ClusterLease, now_ms: int) -> None:
        """Read the lease rows once, renew this daemon's membership, hand over the shards another live
        member should hold, take or renew its own; then check what it newly took."""
        name, me, shards = lease.cluster, self.me, lease.shards
        before = lease.held()
        rows = await offload(self.state.leases)
        todo = plan(rows, cluster=name, shards=shards, me=me, now_ms=now_ms, held=before)
        for stale in todo.stale:  # its own, from before a restart with another shard count
            await offload(self.state.release_lease, stale, me)
            log.info("lease_released", cluster=name, lease=stale, instance=me, reason="shard_count_changed")
        self._log_conflict(lease, todo.conflicts, keeping=bool(before))
        if todo.conflicts and not before:  # the other count's daemons were first: leave it to them
            await self._leave(lease)
            lease.expires.clear()
            self._log_idle(lease, before, todo.members)
            return
        await offload(self.state.acquire_lease, member_name(name, me), me, now_ms, self.ttl_ms)
        lease.member = True
        self._log_assignment(lease, todo)
        for shard in todo.hand_off:
            await offload(self.state.release_lease, lease_name(name, shard, shards), me)
            lease.expires.pop(shard, None)
            lease.holders[shard] = None
            owner = todo.owners[shard]
            log.info("shard_released", cluster=name, shard=shard, instance=me, reason="hand-off", to=owner)
        fresh = await self._take(lease, todo.take, now_ms, before)
        if fresh and not await self._layout_free(lease, now_ms, fresh):
            if not lease.expires:
                await self._leave(lease)
            fresh = []
        previous = {r.name: r.owner for r in rows}  # its last holder, expired or released
        for shard in fresh:
            was = previous.get(lease_name(name, shard, shards))
            log.info("shard_acquired", cluster=name, shard=shard, shards=shards, instance=me, previous=was)
        self._log_idle(lease, before, todo.members)

    async def _take(
        self, lease: ClusterLease, shards: Sequence[int], now_ms: int, before: frozenset[int]
    ) -> list[int]:
        """Acquire or renew each of these shards; returns the ones newly taken. A shard this daemon
        held and finds taken by another (it stalled past ``lease_ttl``) is lost."""
        name, me = lease.cluster, self.me
        fresh: list[int] = []
        for shard in shards:
            row = await offload(
                self.state.acquire_lease, lease_name(name, shard, lease.shards), me, now_ms, self.ttl_ms
            )
            lease.holders[shard] = row.owner
            if row.held_by(me, now_ms):
                lease.expires[shard] = row.expires_ms
                lease.acquired[shard] = row.acquired_ms
                if shard not in before:
                    fresh.append(shard)
                continue
            if lease.expires.pop(shard, None) is not None:
                log.warning(
                    "shard_released", cluster=name, shard=shard, instance=me, reason="lost", holder=row.owner
                )
        return fresh

    async def _layout_free(self, lease: ClusterLease, now_ms: int, fresh: Iterable[int]) -> bool:
        """After taking leases: no live lease of another shard count exists. Else the ones just taken
        go back (the other count's daemons were there first, or see these and do the same)."""
        rows = await offload(self.state.leases)
        found = conflicts(rows, cluster=lease.cluster, shards=lease.shards, me=self.me, now_ms=now_ms)
        if not found:
            return True
        self._log_conflict(lease, found, keeping=False)
        for shard in fresh:
            await offload(self.state.release_lease, lease_name(lease.cluster, shard, lease.shards), self.me)
            lease.expires.pop(shard, None)
        return False

    async def _leave(self, lease: ClusterLease) -> None:
        """Drop this daemon's membership row, so the others divide the shards without it at once."""
        if not lease.member:
            return
        lease.member = False
        try:
            await offload(self.state.release_lease, member_name(lease.cluster, self.me), self.me)
        except Exception as exc:  # it expires on its own after lease_ttl
            log.warning("lease_release_failed", cluster=lease.cluster, lease="membership", error=str(exc))

    # ------------------------------------------------------------------ what it says
    def _log_assignment(self, lease: ClusterLease, todo: ShardPlan) -> None:
        assignment = (todo.members, todo.take)
        if assignment != lease.assignment:
            lease.assignment = assignment
            log.info(
                "shard_assignment",
                cluster=lease.cluster,
                instance=self.me,
                members=list(todo.members),
                mine=list(todo.take),
                shards=lease.shards,
            )

    def _log_conflict(self, lease: ClusterLease, found: Sequence[Lease], *, keeping: bool) -> None:
        names = tuple(sorted(r.name for r in found))
        if names and names != lease.conflict:
            log.error(
                "shard_layout_conflict",
                cluster=lease.cluster,
                instance=self.me,
                shards=lease.shards,
                other_leases={r.name: r.owner for r in found},
                action="keeping the leases it held first" if keeping else "standing by",
                detail="daemons sharing the state database must set the same shards for the cluster",
            )
        lease.conflict = names

    def _log_idle(self, lease: ClusterLease, before: frozenset[int], members: Sequence[str]) -> None:
        """``standing_by`` once per run of ticks in which the daemon holds none of the cluster's shards."""
        if lease.expires:
            lease.idle_logged = False
            return
        if before or not lease.idle_logged:
            holders = sorted({h for h in lease.holders.values() if h is not None and h != self.me})
            log.warning(
                "standing_by", cluster=lease.cluster, instance=self.me, members=list(members), holders=holders
            )
            lease.idle_logged = True

    def _report(self, lease: ClusterLease) -> None:
        self.metrics.lease_held.labels(lease.cluster).set(1 if lease.expires else 0)
        self.metrics.shards_held.labels(lease.cluster).set(len(lease.expires))
        self.metrics.shards.labels(lease.cluster).set(lease.shards)
