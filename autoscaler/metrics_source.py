"""Where a cluster's jobs and their samples come from (:class:`MetricsSource`): Flink's REST API
(:class:`FlinkRest`), or a backtest's recorded history (:class:`RecordedHistory`).

:class:`~autoscaler.cluster.Clusters` holds one source and asks it once per cluster and tick, after the
lease: the source says which jobs the cluster runs and reads the ones of the tick's scope. Nothing else
changes with the source: the leases, the registry of live jobs, the decisions and the realizing stay the
same, so a backtest replays exactly what the live daemon does with the samples it was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from autoscaler.clock import Clock
from autoscaler.cluster_session import ClusterSession
from autoscaler.collect import (
    FetchCheck,
    FetchTiming,
    FetchWait,
    JobSlots,
    NotRunning,
    await_fetch,
    collect,
    collect_taskmanagers,
    fetch_interval_warning,
)
from autoscaler.discover import discover
from autoscaler.durations import to_ms
from autoscaler.flink.errors import FlinkError
from autoscaler.job_scope import JobScope
from autoscaler.model import JobRef, JobSample, JobTarget, Unavailable
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.plugins.metrics import metric_providers
from autoscaler.resources import fetch_taskmanager_resources
from autoscaler.settings import Settings

__all__ = ["FlinkRest", "MetricsSource", "Reading", "Recorded", "RecordedHistory"]

log = structlog.get_logger(__name__)

_FETCH_PROBES = 3  # jobs tried in turn to watch for the tick's metric fetch (one that restarts fails)
_JOBS_PER_REQUEST_SLOT = 4  # jobs collected at once per concurrent request (collect.JobSlots)


@dataclass(frozen=True, slots=True)
class FetchReport:
    """What a tick learned of a cluster's lazy metric fetcher, for its gauges (the record stage sets
    them): how often it refreshes, whether the loop is faster than that, and how long this tick waited
    for its fetch to land (None: it did not wait)."""

    interval_s: float
    too_slow: bool
    waited_s: float | None = None
    landed: bool = False


@dataclass(frozen=True, slots=True)
class Reading:
    """What a source read of one cluster this tick."""

    running: frozenset[str]  # every job the cluster runs (of the shards held), for its live-job registry
    refs: tuple[JobRef, ...]  # of them, the jobs found to autoscale
    found: tuple[JobSample | Unavailable, ...]  # the jobs of the scope: sampled, or why not
    invalid: tuple[tuple[JobRef, str], ...] = ()  # (job, why): jobs whose options are invalid
    # The samples read from Flink now: their staleness and invalid values are this tick's news (a
    # recorded sample's were told by the daemon that recorded it).
    read_now: tuple[JobSample, ...] = ()
    fetch: FetchReport | None = None  # Flink's fetcher as this tick saw it (a recorded history: None)


class MetricsSource(Protocol):
    """Which jobs a cluster runs and their samples of this tick; raises a
    :class:`~autoscaler.flink.errors.FlinkError` when the cluster cannot be listed."""

    async def read(self, cluster: ClusterSession, now_ms: int, scope: JobScope) -> Reading: ...


class FlinkRest:
    """The live source: discovery (``/jobs/overview`` and each new job's configuration), Flink's
    cooldown and fetch interval, the wait for the tick's metric fetch, then each job's metrics."""

    def __init__(
        self,
        settings: Settings,
        *,
        plugins: PluginInstances,
        evaluators: EvaluatorInstances,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.plugins = plugins
        self.evaluators = evaluators
        # The tick waits for Flink's metric fetch on this clock: a fake one's wait takes fake time, so
        # simulated ticks read their fetches as late after their start as real ones (clock.py).
        self._clock = clock

    async def read(self, cluster: ClusterSession, now_ms: int, scope: JobScope) -> Reading:
        mine = cluster.lease.owns if cluster.lease.sharded else None
        discovery = await discover(
            cluster.client, cluster.settings, cluster.options, cluster.job_configs, keep=mine
        )
        await cluster.read_flink_config(now_ms)
        too_slow = self._check_fetch_interval(cluster)
        targets = [t for t in discovery.targets if scope.admits(t.job.key)]
        unreadable = [u for u in discovery.unreadable if scope.admits(u.job.key)]
        refs = (*(t.job for t in discovery.targets), *(u.job for u in discovery.unreadable))
        running = (*refs, *discovery.not_running, *(job for job, _ in discovery.invalid))
        sampled, waited = await self._collect_targets(cluster, targets, now_ms) if targets else ([], None)
        waited_s, landed = waited or (None, False)
        return Reading(
            running=frozenset(j.key for j in running),
            refs=refs,
            found=(*unreadable, *sampled),
            invalid=discovery.invalid,
            read_now=tuple(s for s in sampled if isinstance(s, JobSample)),
            fetch=FetchReport(cluster.fetch_interval_ms / 1000, too_slow, waited_s, landed),
        )

    def _loop_ms(self) -> int:
        """How far the clock moves from one tick to the next: ``control_loop_interval`` is scheduled in
        wall time, Flink's fetch interval and the tick's times are the clock's. They are the same but on
        the demo's ScaledClock, where a 1 s loop at 10x spans 10 simulated seconds of the simulated
        cluster's 5 s fetcher: read as 1 s, the loop looked too fast for it, and the check warned on a
        loop that finds a fetch due on every tick (a stale reading's limit shrank as much)."""
        return round(to_ms(self.settings.control_loop_interval) * self._clock.speed)

    def _check_fetch_interval(self, cluster: ClusterSession) -> bool:
        """Warn once per cluster (and again when it changes) if the loop is too fast for Flink's fetcher;
        the gauges say it to dashboards and alerts on every tick. True when it is."""
        loop_ms = self._loop_ms()
        assumed = cluster.metric_fetch_interval_ms is None
        warning = fetch_interval_warning(loop_ms, cluster.fetch_interval_ms, assumed=assumed)
        if warning != cluster.fetch_warning:
            if warning is not None:
                log.warning("metric_fetch_interval_too_long", cluster=cluster.name, detail=warning)
            else:
                interval_ms = cluster.fetch_interval_ms
                log.info("metric_fetch_interval_ok", cluster=cluster.name, fetch_interval_ms=interval_ms)
            cluster.fetch_warning = warning
        return warning is not None

    async def _collect_targets(
        self, cluster: ClusterSession, targets: list[JobTarget], now_ms: int
    ) -> tuple[list[JobSample | Unavailable], tuple[float, bool] | None]:
        """The cluster's work first, once (the wait for the tick's metric fetch, the TaskManagers), then
        each job's own reads: ``/jobs/:id`` and one query per vertex (``autoscaler.collect.fetch``).
        Also how long the wait took and whether the fetch landed (None: no wait)."""
        fetch_wait_s = cluster.settings.metric_fetch_wait.total_seconds()
        waited = await self._await_fetch(cluster, targets, fetch_wait_s)
        tms = await collect_taskmanagers(cluster.client, cluster.names)
        tms = await fetch_taskmanager_resources(cluster.client, tms)  # quota, slots, memory advice
        taskmanagers = cluster.memory_usage.observe(tms, now_ms, to_ms(cluster.options.metrics_window))
        timing = FetchTiming(
            fetch_interval_ms=cluster.fetch_interval_ms,
            loop_interval_ms=self._loop_ms(),
            wait_ms=round(fetch_wait_s * 1000),
        )
        slots = JobSlots(cluster.settings.max_concurrency * _JOBS_PER_REQUEST_SLOT)

        async def one(target: JobTarget) -> JobSample | Unavailable:
            async with slots:
                return await collect(
                    cluster.client,
                    target,
                    now_ms,
                    cluster.names,
                    taskmanagers,
                    fetches=FetchCheck(cluster.fetches, timing, self._clock.now_ms),
                    providers=metric_providers(
                        target.options, plugins=self.plugins, evaluators=self.evaluators
                    ),
                    sleep=slots.sleep,
                )

        return list(await asyncio.gather(*(one(t) for t in targets))), waited

    async def _await_fetch(
        self, cluster: ClusterSession, targets: list[JobTarget], wait_s: float
    ) -> tuple[float, bool] | None:
        """Wait (up to ``wait_s``) for the metric fetch this tick starts to land, watching one job.

        Flink's fetch is cluster-wide, so one job shows it for all. The probe is a job read last tick
        (its reading tells a fetch that landed already), the first that answers of a few; if all fail,
        the jobs are read without waiting and their reads tell what they got. Returns the seconds
        waited and whether the fetch landed (a metric), None when nothing was waited for.
        """
        known = [t for t in targets if t.job.key in cluster.fetches]
        probes = (known or targets)[:_FETCH_PROBES]
        wait = FetchWait(wait_s, self._clock.sleep)
        started_ms = self._clock.now_ms()
        for target in probes:
            last = cluster.fetches.last_reading(target.job.key)
            try:
                landed = await await_fetch(cluster.client, target.job.job_id, last, wait) is not None
            except (NotRunning, FlinkError) as exc:
                log.debug("fetch_probe_failed", cluster=cluster.name, job=target.job.key, error=str(exc))
                continue
            log.debug("metric_fetch_awaited", cluster=cluster.name, probe=target.job.key, landed=landed)
            if wait_s > 0:
                return (self._clock.now_ms() - started_ms) / 1000, landed
            return None
        return None


# A backtest's recorded history: cluster name and tick -> the jobs the cluster runs (keys) and the
# samples read of them (``autoscaler/backtest``).
Recorded = Callable[[str, int], tuple[frozenset[str], Sequence[JobSample]]]


class RecordedHistory:
    """A backtest's source: what was recorded (or re-simulated) for the tick, in place of reading Flink.
    The leases, decisions and realizing stay real."""

    def __init__(self, recorded: Recorded) -> None:
        self._recorded = recorded

    async def read(self, cluster: ClusterSession, now_ms: int, scope: JobScope) -> Reading:
        running, samples = self._recorded(cluster.name, now_ms)
        return Reading(
            running=frozenset(running),
            refs=tuple(s.job for s in samples),
            found=tuple(s for s in samples if scope.admits(s.job.key)),
        )
