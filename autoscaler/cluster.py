"""Per-cluster concerns of a tick: the REST client, the leases, Flink's cooldown and metric fetch interval,
the metric-name cache and fetch book, and the discover and collect stages run once per cluster.

A :class:`~autoscaler.cluster_session.ClusterSession` is what the daemon knows of one Flink cluster
between ticks; :class:`Clusters` runs the first two stages over all of them at once and hands the tick
one :class:`Collected` value. A cluster that cannot be read is reported and stays with that cluster: the
others go on. Only the jobs of the shards this daemon holds are read (all of them with ``shards: 1``;
``autoscaler/leases.py``). What reads a cluster is a value, its metrics source
(``autoscaler/metrics_source.py``): Flink's REST API, or a backtest's recorded samples, and nothing else
changes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
import structlog

from autoscaler.clock import Clock, SystemClock
from autoscaler.cluster_session import ClusterSession
from autoscaler.durations import to_ms
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError, FlinkUnreachable
from autoscaler.job_memory import JobMemory
from autoscaler.job_scope import WHOLE, JobScope
from autoscaler.leases import LeaseKeeper
from autoscaler.metrics import MetricsReporter
from autoscaler.metrics_source import FetchReport, FlinkRest, MetricsSource
from autoscaler.model import InvalidOptions, JobSample, JobTarget, Unavailable
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.reasons import Reason
from autoscaler.resources import taskmanager_resources
from autoscaler.settings import Settings
from autoscaler.state import StateStore

__all__ = [
    "ClusterSession",
    "Clusters",
    "Collected",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Collected:
    """What the discover and collect stages found on every cluster this tick."""

    samples: tuple[JobSample, ...] = ()
    unavailable: tuple[Unavailable, ...] = ()  # jobs found but not sampled this tick, and why
    cluster_errors: Mapping[str, str] = field(default_factory=dict)  # cluster -> why it was not read
    invalid: tuple[InvalidOptions, ...] = ()  # jobs whose options could not be read, and why
    # Of the samples, the ones read from Flink now: their staleness and impossible values are this
    # tick's news (a backtest's recorded ones were told by the daemon that recorded them).
    read_now: tuple[JobSample, ...] = ()
    fetches: Mapping[str, FetchReport] = field(default_factory=dict)  # cluster -> its metric fetcher
    # cluster -> why it could not be listed, counted once for the cluster when it had no job to count
    failed: Mapping[str, Reason] = field(default_factory=dict)
    scope: JobScope = WHOLE  # the jobs read: all (a whole tick) or one


class Clusters:
    """Every watched cluster: leases, discovery and collection, once per cluster and tick.

    ``memory`` is told the keys of jobs this process stops acting on (a cluster it no longer holds the
    lease of, a job gone from its cluster), so that every cache of them goes; their stored state stays.
    Each cluster's metric-name cache and fetch book register in it here.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        state: StateStore,
        metrics: MetricsReporter,
        plugins: PluginInstances,
        evaluators: EvaluatorInstances,
        memory: JobMemory,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
        clock: Clock | None = None,
        source: MetricsSource | None = None,
    ) -> None:
        self.settings = settings
        self.state = state
        self.metrics = metrics
        self.plugins = plugins
        self.evaluators = evaluators
        self.memory = memory
        # Where the jobs and their samples come from: Flink's REST API, waiting for Flink's metric fetch
        # on ``clock`` (a fake one's wait takes fake time, so simulated ticks read their fetches as late
        # after their start as real ones: clock.py), unless a backtest gives its recorded history.
        self.source: MetricsSource = source or FlinkRest(
            settings, plugins=plugins, evaluators=evaluators, clock=clock or SystemClock()
        )
        self.leases = LeaseKeeper(
            state, metrics, instance_id=settings.instance_id, ttl_ms=to_ms(settings.effective_lease_ttl)
        )
        transports = transports or {}
        self.sessions: list[ClusterSession] = []
        for cs in settings.clusters:
            options = settings.options_for(cs)
            client = FlinkClient.from_settings(
                cs,
                options.rest_client_timeout,
                transport=transports.get(cs.name),
                on_request=metrics.report_request,
                max_answer_bytes=options.rest_client_max_answer_size,
            )
            self.sessions.append(ClusterSession(cs, client, options))
        for c in self.sessions:
            memory.register(c.names, c.fetches)

    def __getitem__(self, name: str) -> ClusterSession:
        return next(c for c in self.sessions if c.name == name)

    def __iter__(self) -> Iterator[ClusterSession]:
        return iter(self.sessions)

    # ------------------------------------------------------------------ discover + collect
    async def collect(self, now_ms: int, scope: JobScope = WHOLE) -> Collected:
        """Discover and sample every job of every cluster this daemon holds a lease of (of the shards it
        holds), concurrently; a one-job ``scope`` reads that job alone: the re-evaluation a cooldown
        scheduled."""
        sessions = [c for c in self.sessions if scope.reaches(c.name)]
        parts = await asyncio.gather(*(self._collect_cluster(c, now_ms, scope) for c in sessions))
        return Collected(
            samples=tuple(s for p in parts for s in p.samples),
            unavailable=tuple(u for p in parts for u in p.unavailable),
            cluster_errors={name: err for p in parts for name, err in p.cluster_errors.items()},
            invalid=tuple(i for p in parts for i in p.invalid),
            read_now=tuple(s for p in parts for s in p.read_now),
            fetches={name: f for p in parts for name, f in p.fetches.items()},
            failed={name: why for p in parts for name, why in p.failed.items()},
            scope=scope,
        )

    async def _collect_cluster(self, cluster: ClusterSession, now_ms: int, scope: JobScope) -> Collected:
        """What one cluster gave this tick: its samples, the jobs not sampled (and why), the jobs whose
        options are invalid (and the validation's message); or, for a cluster that could not be
        listed, why."""
        if not await self._hold_lease(cluster, now_ms):
            return Collected(scope=scope)
        try:
            reading = await self.source.read(cluster, now_ms, scope)
        except FlinkError as exc:
            unreadable = tuple(self._unreadable(cluster, exc, scope))
            reason = Reason.CLUSTER_UNREACHABLE if isinstance(exc, FlinkUnreachable) else Reason.CLUSTER_ERROR
            errors, failed = {cluster.name: str(exc)}, {cluster.name: reason} if not unreadable else {}
            return Collected(unavailable=unreadable, cluster_errors=errors, failed=failed, scope=scope)
        invalid: tuple[InvalidOptions, ...] = ()
        if scope.whole:  # a one-job view must not forget or recount the others
            cluster.jobs.discovered(reading.running, reading.refs)
            invalid = tuple(
                InvalidOptions(JobTarget(job, cluster.options), why) for job, why in reading.invalid
            )
        return Collected(
            samples=tuple(s for s in reading.found if isinstance(s, JobSample)),
            unavailable=tuple(u for u in reading.found if isinstance(u, Unavailable)),
            invalid=invalid,
            read_now=reading.read_now,
            fetches={cluster.name: reading.fetch} if reading.fetch is not None else {},
            scope=scope,
        )

    def _unreadable(
        self, cluster: ClusterSession, exc: FlinkError, scope: JobScope
    ) -> list[JobSample | Unavailable]:
        """The cluster could not be listed: each job it ran at the last discovery is unavailable this
        tick, with the reason, so its outcome, ``status`` and ``explain`` say so instead of showing its
        last decision as if nothing happened. Counted per job; once for the cluster if it had none."""
        reason = Reason.CLUSTER_UNREACHABLE if isinstance(exc, FlinkUnreachable) else Reason.CLUSTER_ERROR
        log.warning("cluster_unavailable", cluster=cluster.name, error=str(exc))
        refs = [r for key, r in cluster.jobs.refs.items() if scope.admits(key)]
        detail = f"the cluster could not be read this tick: {exc}"
        return [Unavailable(JobTarget(ref, cluster.options), reason, detail) for ref in refs]

    # ------------------------------------------------------------------ leases
    async def _hold_lease(self, cluster: ClusterSession, now_ms: int) -> bool:
        """Take or renew the cluster's leases in the state database (``autoscaler/leases.py``): only a
        lease's holder acts on its jobs, so daemons sharing a database never both rescale a job. Without
        any (or when the database cannot say) the daemon stands by for the tick: no discovery, no
        decisions."""
        dropped = await self.leases.renew(cluster.lease, now_ms)
        if dropped:
            self._stand_down(cluster, dropped)
        return bool(cluster.lease.held())

    def _stand_down(self, cluster: ClusterSession, shards: frozenset[int]) -> None:
        """Drop what this process knew of the jobs of these shards; the next holder keeps their stored
        state and window, which this process replays if it takes them back."""
        keys = cluster.jobs.drop(lambda key: cluster.lease.shard(key) in shards)  # not "gone": no trim
        self.memory.forget(keys)
        if not cluster.lease.held():
            self.metrics.jobs.labels(cluster.name).set(0)

    async def free_slots_now(self, names: Iterable[str]) -> dict[str, tuple[int, int]]:
        """These clusters' ``(total, free)`` slots, read again from ``GET /taskmanagers`` right before the
        slot stage claims them (:mod:`autoscaler.tick.slots`), for the clusters with a rescale that needs
        more slots than its job holds.

        The tick's own reading is seconds old by then (a fleet's collection and evaluation), and Flink
        gives a raised request its slots within a second of the PUT (``docs/e2e.md``, "Slots"): slots that
        another daemon's shard, a user or Flink itself took meanwhile are seen here instead of asked for
        twice. A cluster whose listing fails keeps the tick's reading (it is left out).
        """

        async def one(cluster: ClusterSession) -> tuple[str, tuple[int, int]] | None:
            try:
                r = taskmanager_resources(await cluster.client.taskmanagers())
            except FlinkError as err:
                log.warning("taskmanagers_reread_failed", cluster=cluster.name, error=str(err))
                return None
            return cluster.name, (r.slots_total, r.slots_free)

        wanted = set(names)
        read = await asyncio.gather(*(one(c) for c in self.sessions if c.name in wanted))
        return dict(r for r in read if r is not None)

    def slot_idle_timeouts_ms(self) -> dict[str, int]:
        """Each cluster's ``slot.idle.timeout`` (``/jobmanager/config``), for the slot stage."""
        return {c.name: c.slot_idle_timeout_ms for c in self.sessions}

    def lapsed(self, now_ms: int) -> Callable[[str], bool]:
        """Whether a job's lease (its shard's) is not this daemon's at ``now_ms`` (any more): its state is
        not this daemon's to write, another may own it by now."""

        def lapsed(job_key: str) -> bool:
            cluster = self._session_of(job_key)
            return cluster is not None and not cluster.holds_job(job_key, now_ms)

        return lapsed

    def lease_tokens(self, now_ms: int) -> Callable[[str], int | None]:
        """A job's lease token at ``now_ms`` (``ClusterLease.token``): None when this daemon does not
        hold the job's lease; equal tokens mean no other daemon held it in between."""

        def token(job_key: str) -> int | None:
            cluster = self._session_of(job_key)
            return None if cluster is None else cluster.lease.token(job_key, now_ms)

        return token

    def _session_of(self, job_key: str) -> ClusterSession | None:
        """The cluster of a job key (``cluster/name``; a job name may hold a slash)."""
        matching = [c for c in self.sessions if job_key.startswith(f"{c.name}/")]
        return max(matching, key=lambda c: len(c.name), default=None)

    async def release_leases(self, reason: str = "stopping", *, stand_down: bool = False) -> None:
        """Hand the held leases back (the others take them at their next tick); ``stand_down`` also
        forgets their jobs here, for a process that goes on running (a stopping one keeps its last
        series)."""
        for c in self.sessions:
            held = await self.leases.release(c.lease, reason)
            if stand_down and held:
                self._stand_down(c, held)

    # ------------------------------------------------------------------ jobs that leave
    def vanished(self) -> list[str]:
        """Forget the jobs no longer on their (reachable) cluster and return their keys (their stored
        window rows go with this tick's write); their state is kept. Each cluster's registry of its live
        jobs says which left (an unreachable cluster keeps its last job set: ``autoscaler.live_jobs``)."""
        gone = sorted(key for c in self.sessions for key in c.jobs.take_left())
        if gone:
            self.memory.forget(gone)
        return gone

    def report_jobs(self, samples: Sequence[JobSample]) -> None:
        for c in self.sessions:
            self.metrics.jobs.labels(c.name).set(sum(1 for s in samples if s.job.cluster == c.name))

    async def aclose(self) -> None:
        await self.release_leases()
        for c in self.sessions:
            with contextlib.suppress(Exception):
                await c.client.aclose()
