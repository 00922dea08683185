"""When ticks run: the control loop's interval, the re-evaluation a cooldown schedules for the instant
it ends, and the daily housekeeping — all on one APScheduler.

A tick is never run twice at once: a tick that overruns its interval makes the next one wait, and
that is counted (``ticks_skipped``) so it shows on dashboards. A job whose decision was deferred by a
cooldown gets a one-job tick at exactly the instant the cooldown ends, not up to an interval later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta

import structlog
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from autoscaler.clock import Clock
from autoscaler.metrics import MetricsReporter
from autoscaler.offload import offload
from autoscaler.reasons import Reason
from autoscaler.state import StateStore
from autoscaler.state.events import EventSink, EventStore
from autoscaler.tick.steps import JobOutcome

__all__ = ["Schedule", "cleanup"]

log = structlog.get_logger(__name__)

_DAY_MS = 86_400_000


class Schedule:
    """The daemon's APScheduler: the tick, one-job retries at a cooldown's end, daily cleanup.

    ``retries`` keeps each pending retry's instant on the daemon's clock (job key -> ms).
    """

    def __init__(self, clock: Clock, metrics: MetricsReporter) -> None:
        self.clock = clock
        self.metrics = metrics
        self.scheduler: AsyncIOScheduler | None = None  # while serving
        self.retries: dict[str, int] = {}
        self._tick: Callable[[], Awaitable[object]] | None = None
        self._job_tick: Callable[[str], Awaitable[object]] | None = None
        self._housekeeping: Callable[[], Awaitable[None]] | None = None
        self._stopping = False  # set as ``stop`` is: the scheduler's shutdown cancels a running tick

    async def serve(
        self,
        stop: asyncio.Event,
        *,
        interval: timedelta,
        tick: Callable[[], Awaitable[object]],
        job_tick: Callable[[str], Awaitable[object]],
        housekeeping: Callable[[], Awaitable[None]],
    ) -> None:
        """Run ``tick`` every ``interval`` until ``stop`` is set: never two at once, missed ticks
        coalesced. ``job_tick(job_key)`` runs the retries; ``housekeeping`` runs once a day."""
        interval_s = interval.total_seconds()
        self._tick, self._job_tick, self._housekeeping = tick, job_tick, housekeeping
        scheduler = self.scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
        scheduler.add_job(
            self._run_tick,
            "interval",
            seconds=interval_s,
            id="tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(interval_s)),
            next_run_time=datetime.now(UTC),
        )
        scheduler.add_job(
            self._run_housekeeping,
            "interval",
            days=1,
            id="cleanup",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC) + timedelta(minutes=5),
        )
        scheduler.add_listener(self._on_skipped(interval_s), EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        scheduler.start()
        try:
            await stop.wait()
        finally:
            self._stopping = True
            scheduler.shutdown(wait=False)  # cancels a tick under way
            self.scheduler = None

    def retry_deferred(self, outcomes: Iterable[JobOutcome], now_ms: int) -> None:
        """Schedule a one-job tick for every decision a cooldown deferred to a known instant."""
        for o in outcomes:
            retry_at_ms = o.decision.retry_at_ms if o.decision is not None else None
            if o.outcome is Reason.COOLDOWN_DEFERRED and retry_at_ms is not None:
                self.retry(o.job.key, retry_at_ms, now_ms)

    def retry(self, job_key: str, retry_at_ms: int, now_ms: int) -> None:
        """Re-evaluate ``job_key`` alone at exactly ``retry_at_ms`` (an APScheduler date trigger).

        The trigger's wall time accounts for a clock that runs faster than wall time (the demo's).
        One pending retry per job: a later deferral to the same instant replaces it.
        """
        self.retries[job_key] = retry_at_ms
        if self.scheduler is None:
            return
        speed = self.clock.speed or 1.0
        run_at = datetime.now(UTC) + timedelta(seconds=max(0.0, (retry_at_ms - now_ms) / 1000 / speed))
        self.scheduler.add_job(
            self._run_retry,
            "date",
            run_date=run_at,
            args=[job_key],
            id=f"retry:{job_key}",
            replace_existing=True,
            misfire_grace_time=None,
        )

    def forget(self, job_keys: Iterable[str]) -> None:
        for key in job_keys:
            self.retries.pop(key, None)

    async def _run_tick(self) -> None:
        assert self._tick is not None
        try:
            await self._tick()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            _cancelled()
        except Exception as exc:  # the loop must survive anything
            log.error("tick_failed", error=str(exc), exc_info=True)

    async def _run_retry(self, job_key: str) -> None:
        self.retries.pop(job_key, None)
        assert self._job_tick is not None
        try:
            await self._job_tick(job_key)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            _cancelled(job=job_key)
        except Exception as exc:  # the loop must survive anything
            log.error("job_tick_failed", job=job_key, error=str(exc), exc_info=True)

    async def _run_housekeeping(self) -> None:
        assert self._housekeeping is not None
        try:
            await self._housekeeping()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            log.info("cleanup_cancelled", reason="the daemon is stopping")

    def _on_skipped(self, interval_s: float) -> Callable[[JobEvent], None]:
        def skipped(event: JobEvent) -> None:
            """A tick that overran its interval makes the next one wait; count it for dashboards."""
            self.metrics.ticks_skipped.inc()
            log.info("tick_skipped", reason="previous tick still running", interval_s=interval_s)

        return skipped


def _cancelled(**job: str) -> None:
    """A tick the stop cut short is part of a clean stop, not a failure: one plain line, where
    APScheduler would log an ERROR traceback. Its state is written in one transaction at its end, so
    what it had not saved is simply not saved; a rescale it sent is found running next time."""
    log.info("tick_cancelled", reason="the daemon is stopping", **job)


async def cleanup(events: EventSink, state: StateStore, now_ms: int, event_retention_ms: int) -> None:
    """Once a day: events past their retention, and window rows no job has added to for a day (jobs
    that disappeared while the daemon was down never get a trim otherwise)."""
    try:
        if isinstance(events, EventStore):
            deleted = await offload(events.cleanup, now_ms, event_retention_ms)
            log.info("events_cleaned_up", deleted=deleted, older_than_ms=now_ms - event_retention_ms)
        await offload(state.trim_window, None, now_ms - _DAY_MS)
    except Exception as exc:  # housekeeping must never take the loop down
        log.error("cleanup_failed", error=str(exc), exc_info=True)
