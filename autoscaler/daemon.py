"""The control loop: one tick reads top-down as discover -> collect -> evaluate -> foresee -> decide ->
plugins -> slots -> realize -> record (see ``docs/architecture.md``).

Every job of every cluster is collected concurrently, evaluated together in ONE Spark computation,
then decided, passed through its executor plugins and realized concurrently. A failing cluster or
job is logged, counted and reported as an event, and stays with that cluster or job; nothing it
touched is scaled and its state is kept. The stages live in their own modules; this one only wires
them together and runs them on the schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import httpx
import structlog

from autoscaler.archive import TickArchive
from autoscaler.archive.offered import ArchivedLoad
from autoscaler.clock import Clock, SystemClock
from autoscaler.cluster import Clusters, Collected
from autoscaler.durations import to_ms
from autoscaler.evaluate.stage import Evaluated, Evaluator, evaluate
from autoscaler.idle_slots import IdleSlotBook
from autoscaler.job_memory import JobMemory
from autoscaler.job_scope import WHOLE, JobScope
from autoscaler.metrics import MetricsReporter
from autoscaler.metrics_source import MetricsSource
from autoscaler.model import JobSample
from autoscaler.offload import offload
from autoscaler.plugins.api import ScalingExecutorPlugin
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.reasons import Reason
from autoscaler.schedule import Schedule, cleanup
from autoscaler.settings import Settings
from autoscaler.state import MemoryStateStore, StateStore
from autoscaler.state.events import EventLog, EventSink
from autoscaler.state.tick import Loaded, TickStore
from autoscaler.tick import record
from autoscaler.tick.decide import decide_jobs
from autoscaler.tick.delivery import OutcomeDelivery
from autoscaler.tick.foresee import Foresight, forecasts, foresee
from autoscaler.tick.plugins import ChainLog, run_plugins
from autoscaler.tick.realize import realize_jobs
from autoscaler.tick.record import TickTimer
from autoscaler.tick.slots import claim_slots, slot_hungry
from autoscaler.tick.steps import JobOutcome, JobStep, TickReport

__all__ = ["Daemon"]

log = structlog.get_logger(__name__)


class Daemon:
    def __init__(
        self,
        settings: Settings,
        *,
        evaluator: Evaluator,
        clock: Clock | None = None,
        state: StateStore | None = None,
        events: EventSink | None = None,
        metrics: MetricsReporter | None = None,
        plugins: Sequence[ScalingExecutorPlugin] | PluginInstances = (),
        evaluators: EvaluatorInstances | None = None,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
        on_outcome: Callable[[JobOutcome], None] | None = None,
        archive: TickArchive | None = None,
        source: MetricsSource | None = None,
    ) -> None:
        self.settings = settings
        self.evaluator = evaluator
        self.clock = clock or SystemClock()
        self.state = state or MemoryStateStore()
        self.events = events or EventLog()
        self.metrics = metrics or MetricsReporter()
        self.plugins = plugins if isinstance(plugins, PluginInstances) else PluginInstances(fixed=plugins)
        self.evaluators = evaluators or EvaluatorInstances()
        self.delivery = OutcomeDelivery(on_outcome)
        self.archive = archive  # each tick's samples and outcomes, to Parquet behind the tick
        # where archive_dir is set, a forecasting job's load history the store holds less of is completed
        # from the offered rates the archive recorded (autoscaler.foresight.backfill), once per job
        recorded = (
            ArchivedLoad(settings.archive_dir, self.metrics) if settings.archive_dir is not None else None
        )
        self.store = TickStore(
            self.state, self.metrics, persist_window=settings.persist_window, recorded=recorded
        )
        self.schedule = Schedule(self.clock, self.metrics)
        self._chain_log = ChainLog()
        # What this process remembers of each job, dropped at once when it stops acting on a job (the job
        # left its cluster, or the lease went): the Spark windows, restored-window marks, pending retries,
        # logged chains and Prometheus series here; each cluster's metric names and fetch book join in
        # Clusters. Their stored state and window stay, for whoever acts on them next.
        self.memory = JobMemory(self.evaluator, self.store, self.schedule, self._chain_log, self.metrics)
        self.clusters = Clusters(
            settings,
            state=self.state,
            metrics=self.metrics,
            plugins=self.plugins,
            evaluators=self.evaluators,
            memory=self.memory,
            transports=transports,
            clock=self.clock,  # the tick waits for Flink's metric fetch on it, fake or real
            source=source,  # Flink's REST API unless given, e.g. a backtest's recorded history
        )
        self._idle_slots = IdleSlotBook()  # the slots this daemon's scale-downs left idle, for a minute
        # (not job memory: the slots come back to the cluster on their own timer, whether or not the job
        # that left them is still there or still this daemon's, so a job's leaving does not drop them)
        self._tick_lock = asyncio.Lock()
        self._evaluation_failed = False  # the last evaluation failed: check the evaluator before acting

    @property
    def retries(self) -> dict[str, int]:
        """Job key -> the instant a cooldown-deferred decision is retried (the daemon's clock, ms)."""
        return self.schedule.retries

    # ------------------------------------------------------------------ the tick
    @property
    def on_outcome(self) -> Callable[[JobOutcome], None] | None:
        """Called with every job's outcome, behind the tick (``autoscaler.tick.delivery``)."""
        return self.delivery.on_outcome

    @on_outcome.setter
    def on_outcome(self, callback: Callable[[JobOutcome], None] | None) -> None:
        self.delivery.on_outcome = callback

    async def run_tick(self, scope: JobScope = WHOLE, *, drain: bool = True) -> TickReport:
        """One pass over every cluster and job; never raises for a cluster's or a job's failure.

        A one-job ``scope`` runs the same pipeline for that job alone: the re-evaluation a cooldown
        scheduled for the instant it ends. ``drain``: return once the tick's outcomes reached
        ``on_outcome`` too; the scheduled ticks don't wait (``autoscaler.tick.delivery``).
        """
        async with self._tick_lock:
            now_ms, timer = self.clock.now_ms(), TickTimer()
            if self._evaluation_failed and not await self._evaluator_recovered():
                return await self._stand_by(now_ms, "this daemon cannot evaluate", "evaluator_unavailable")
            if not await self._storage_usable():
                return await self._stand_by(
                    now_ms, "the state database is unusable", "state_database_unusable"
                )
            collected = await self.clusters.collect(now_ms, scope)  # discover + collect
            timer.lap("collect")
            loaded = await self.store.load(collected.samples, self.clusters.lease_tokens(self.clock.now_ms()))
            timer.lap("load")
            evaluated = await self._evaluate(collected.samples, loaded, now_ms)
            timer.lap("evaluate")
            self._evaluation_failed = evaluated.error is not None
            foreseen = foresee(evaluated, loaded, now_ms)  # the forecasting jobs' (none: nothing to do)
            decided = await decide_jobs(
                collected.samples,
                loaded,
                evaluated,
                now_ms,
                flink_cooldown_ms={c.name: c.flink_cooldown_ms for c in self.clusters},
                confirm_timeout=self.settings.confirm_timeout,
                interval=self.settings.control_loop_interval,
                forecasts=forecasts(foreseen),
            )
            timer.lap("decide")
            approved = await run_plugins(
                decided, now_ms, plugins=self.plugins, clusters=self.clusters, chain_log=self._chain_log
            )
            timer.lap("plugins")
            fresh = await self.clusters.free_slots_now(slot_hungry(approved))
            idle_timeouts = self.clusters.slot_idle_timeouts_ms()
            idle = self._idle_slots.for_claims(approved, now_ms, idle_timeouts)
            claimed = claim_slots(approved, now_ms, idle, fresh)
            timer.lap("slots")
            realized = await realize_jobs(
                claimed.steps,
                now_ms,
                clusters=self.clusters,
                clock_ms=self.clock.now_ms,
                interval=self.settings.control_loop_interval,
            )
            self._idle_slots.note([s.outcome for s in realized if s.outcome is not None], idle_timeouts)
            timer.lap("realize")
            report = await self._record(now_ms, timer, collected, loaded, realized, claimed.slots, foreseen)
        if drain:
            await self.delivery.drain()
        return report

    async def _evaluate(self, samples: Sequence[JobSample], loaded: Loaded, now_ms: int) -> Evaluated:
        """The evaluate stage, and what it says of itself reported: its time, or why it failed (then
        every sampled job's cluster counts an autoscaler error)."""
        reload = self.store.load_windows if self.settings.persist_window else None
        evaluated = await evaluate(
            self.evaluator, samples, loaded, now_ms, evaluators=self.evaluators, reload=reload
        )
        if evaluated.error is not None:
            self.metrics.report_spark(False, evaluated.error)
            for s in samples:
                self.metrics.report_error(s.job.cluster, Reason.AUTOSCALER_ERROR)
        elif evaluated.duration_s is not None:
            self.metrics.report_spark(True, duration_s=evaluated.duration_s, phases=evaluated.phases)
        return evaluated

    async def _evaluator_recovered(self) -> bool:
        """After a failed evaluation: can the evaluator evaluate again (a new Spark session for a dead
        one, say)? Asked before the next tick takes leases or reads a cluster."""
        try:
            await offload(self.evaluator.check)
        except Exception as exc:
            detail = f"evaluator unavailable: {type(exc).__name__}: {exc}"
            self.metrics.report_spark(False, detail)
            log.error("evaluator_unavailable", error=str(exc))
            return False
        self._evaluation_failed = False
        self.metrics.report_spark(True)
        log.info("evaluator_recovered")
        return True

    async def _storage_usable(self) -> bool:
        """The state database is where this daemon thinks it is (a deleted SQLite file is put back,
        a replaced one set aside: ``autoscaler.state.sqlite_file``); asked before the leases, which
        live there. Every event is counted: each cluster's state went through it."""
        try:
            repaired = await offload(self.state.check_storage) is not None
            usable = True
        except Exception as exc:  # e.g. no room for the copy: acting on a file nobody sees is not safe
            log.error("state_database_check_failed", error=str(exc))
            repaired, usable = False, False
        if repaired or not usable:
            for c in self.clusters:
                self.metrics.report_error(c.name, Reason.STATE_STORE_ERROR)
        return usable

    async def _stand_by(self, now_ms: int, why: str, reason: str) -> TickReport:
        """A daemon that cannot act safely hands its leases back and reads no cluster, so a standby that
        can takes over at its next tick; it takes them back (if free) once it can act again."""
        await self.clusters.release_leases(reason=reason, stand_down=True)
        why = f"{why}: standing by, leases released"
        return TickReport(now_ms, (), {c.name: why for c in self.clusters})

    async def _record(
        self,
        now_ms: int,
        timer: TickTimer,
        collected: Collected,
        loaded: Loaded,
        steps: Sequence[JobStep],
        slots: Mapping[str, tuple[int, int]],
        foreseen: Mapping[str, Foresight],
    ) -> TickReport:
        """The record stage (``autoscaler.tick.record``): the tick's states (and the forecasting jobs'
        load histories) in one transaction, then its metrics, events and outcomes, all from the values
        the stages returned.

        A crash before the write commits loses this tick only; a rescale it issued is found again next
        tick (the realizer sees the requirements already match and sends nothing).
        """
        done = record.outcomes(steps, collected.unavailable, now_ms)
        self.schedule.retry_deferred(done, now_ms)
        gone = self.clusters.vanished() if collected.scope.whole else []  # a one-job view forgets nothing
        clock_ms = self.clock.now_ms()
        lapsed, tokens = self.clusters.lapsed(clock_ms), self.clusters.lease_tokens(clock_ms)
        states = record.next_states(steps)
        histories = {key: f.history for key, f in foreseen.items()}
        await self.store.flush(
            collected.samples,
            loaded,
            states,
            now_ms,
            gone=gone,
            lapsed=lapsed,
            tokens=tokens,
            histories=histories,
        )
        record.report(self.metrics, collected, steps, slots, now_ms)
        await record.publish(record.tick_events(collected, steps, now_ms), self.events, self.delivery, done)
        if self.archive is not None:  # a hand-over: never waits for the disk, never raises
            self.archive.hand_over(now_ms, collected.samples, done)
        if collected.scope.whole:  # a whole tick: it also tells /readyz that the loop is alive
            timer.lap("record")
            self.metrics.report_tick(timer.total_s, timer.stages)
            self.clusters.report_jobs(collected.samples)
        return TickReport(now_ms, tuple(done), collected.cluster_errors)

    # ------------------------------------------------------------------ lifecycle
    async def serve(self, stop: asyncio.Event) -> None:
        """Run ticks on the schedule until ``stop`` is set; a tick then under way is cancelled.

        A cancelled tick saves nothing: its state is written in one transaction at its end, so the next
        daemon resumes from the tick before it, as after a crash (a rescale it sent is found running,
        never sent twice). A plain plugin call it waited for is left running on its own thread
        (``autoscaler.plugins.calls``); the process does not wait for it (``autoscaler.stopping``).
        """
        interval = self.settings.control_loop_interval
        log.info(
            "daemon_started",
            clusters=[c.name for c in self.clusters],
            interval_s=interval.total_seconds(),
        )
        try:
            await self.schedule.serve(
                stop,
                interval=interval,
                tick=lambda: self.run_tick(drain=False),
                job_tick=lambda job_key: self.run_tick(JobScope(job_key), drain=False),
                housekeeping=self._cleanup,
            )
        finally:
            async with self._tick_lock:  # the cancelled tick has unwound
                pass
            await self.delivery.drain()  # and its decisions written
            if self.archive is not None:  # and its archive rows
                await self.archive.close(self.clock.now_ms())
            log.info("daemon_stopped")

    async def _cleanup(self) -> None:
        retention_ms = to_ms(self.settings.event_retention)
        await cleanup(self.events, self.state, self.clock.now_ms(), retention_ms)

    async def aclose(self) -> None:
        """Hand the held leases back (a standby takes over at its next tick), close the clients, write
        what the archive still buffers."""
        await self.clusters.aclose()
        if self.archive is not None:
            await self.archive.close(self.clock.now_ms())
