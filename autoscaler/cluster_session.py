"""What the daemon knows of one watched Flink cluster between ticks (:class:`ClusterSession`): its REST
client and options, the leases it holds of it, the jobs it runs (:class:`~autoscaler.live_jobs.LiveJobs`),
Flink's cooldown and metric fetch interval, and the per-cluster caches of the collect stage.
:mod:`autoscaler.cluster` runs the discover and collect stages over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from autoscaler.collect import FLINK_DEFAULT_FETCH_INTERVAL_MS, FetchBook, MemoryUsage, MetricNameCache
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError
from autoscaler.flink.jobmanager_config import (
    FLINK_DEFAULT_COOLDOWN_MS,
    FLINK_DEFAULT_SLOT_IDLE_TIMEOUT_MS,
    flink_cooldown_ms,
    flink_fetch_interval_ms,
    slot_idle_timeout_ms,
)
from autoscaler.leases import ClusterLease
from autoscaler.live_jobs import LiveJobs
from autoscaler.settings import AutoscalerOptions, ClusterSettings

__all__ = ["ClusterSession"]

log = structlog.get_logger(__name__)

_CONFIG_REFRESH_MS = 5 * 60_000


@dataclass
class ClusterSession:
    """One watched cluster: its client and what the daemon remembers of it from tick to tick."""

    settings: ClusterSettings
    client: FlinkClient
    options: AutoscalerOptions
    names: MetricNameCache = field(default_factory=MetricNameCache)
    fetches: FetchBook = field(default_factory=FetchBook)  # each job's last reading: new fetch or stale?
    jobs: LiveJobs = field(default_factory=LiveJobs)  # as the last successful discovery saw them; which left
    job_configs: dict[str, Mapping[str, str]] = field(default_factory=dict)  # by JobID, while it runs
    flink_cooldown_ms: int = FLINK_DEFAULT_COOLDOWN_MS  # the adaptive scheduler's, from /jobmanager/config
    slot_idle_timeout_ms: int = FLINK_DEFAULT_SLOT_IDLE_TIMEOUT_MS  # slot.idle.timeout, from the same
    # metrics.fetcher.update-interval from /jobmanager/config; None: not read or not set (Flink's default)
    metric_fetch_interval_ms: int | None = None
    fetch_warning: str | None = None  # the warning last logged about it, to log it once (and on change)
    config_read_ms: int | None = None  # when /jobmanager/config was last read
    memory_usage: MemoryUsage = field(default_factory=MemoryUsage)  # TaskManager memory over the window
    lease: ClusterLease = field(init=False)  # the cluster's leases (one per shard) this daemon holds

    def __post_init__(self) -> None:
        self.lease = ClusterLease(self.settings.name, self.settings.shards)

    @property
    def name(self) -> str:
        return self.settings.name

    def holds_lease(self, now_ms: int) -> bool:
        """Whether this daemon holds any of the cluster's leases at ``now_ms``."""
        return self.lease.holds(now_ms)

    def holds_job(self, job_key: str, now_ms: int) -> bool:
        """Whether the job's (shard's) lease is still this daemon's at ``now_ms``: checked right before
        a rescale is sent and before the tick's state is written."""
        return self.lease.holds_job(job_key, now_ms)

    @property
    def fetch_interval_ms(self) -> int:
        """How often Flink's lazy metric fetcher refreshes at most: as read, else Flink's default."""
        known = self.metric_fetch_interval_ms
        return FLINK_DEFAULT_FETCH_INTERVAL_MS if known is None else known

    async def read_flink_config(self, now_ms: int) -> None:
        """Flink's adaptive-scheduler cooldown and metric fetch interval, re-read every few minutes (they
        change only with a restart of the JobManager).

        Flink holds back every rescale inside the cooldown (after job start and after each rescale), so
        the daemon defers its decisions until it ends instead of issuing one Flink will sit on. If the
        cluster does not say, Flink's default (30 s) is assumed. The fetch interval bounds how long a
        tick may find the last metric fetch served again (``autoscaler.collect.freshness``).
        """
        if self.config_read_ms is not None and now_ms - self.config_read_ms < _CONFIG_REFRESH_MS:
            return
        try:
            config = await self.client.jobmanager_config()
        except FlinkError as exc:
            log.info("jobmanager_config_unavailable", cluster=self.name, error=str(exc))
            return
        self.config_read_ms = now_ms
        self.flink_cooldown_ms = flink_cooldown_ms(config)
        self.metric_fetch_interval_ms = flink_fetch_interval_ms(config)
        self.slot_idle_timeout_ms = slot_idle_timeout_ms(config)
