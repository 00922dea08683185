"""The control loop: one tick reads top-down as discover -> collect -> evaluate -> decide -> plugins
-> realize -> record.

Every job of every cluster is collected concurrently, evaluated together in ONE Spark computation,
then decided and realized concurrently. A failing cluster or job is logged, counted and reported as
an event, and stays with that cluster or job; nothing it touched is scaled and its state is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

import httpx
import structlog
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from autoscaler.clock import Clock, SystemClock
from autoscaler.collect import MetricNameCache, collect, collect_taskmanagers
from autoscaler.decide import Decision, decide
from autoscaler.discover import discover
from autoscaler.durations import parse_duration
from autoscaler.evaluate.custom import ConfiguredEvaluator
from autoscaler.evaluate.history import record_metrics, trim_history
from autoscaler.events import Event, EventLog, EventSink, EventStore, EventType
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError, FlinkUnreachable
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobEvaluation, JobRef, JobSample, JobTarget, Unavailable
from autoscaler.plugins.api import PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.chain import ChainResult, PluginOutcome, order_plugins, run_chain
from autoscaler.plugins.configured import ConfiguredChain, PluginInstances
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.plugins.metrics import metric_providers
from autoscaler.realize import RealizeResult, confirm, realize
from autoscaler.reasons import Reason
from autoscaler.resources import fetch_taskmanager_resources
from autoscaler.settings import AutoscalerOptions, ClusterSettings, Settings
from autoscaler.state import (
    JobState,
    MemoryStateStore,
    PendingRescale,
    ScalingRecord,
    StateStore,
    custom_window_rows,
    group_window,
    window_rows,
)

__all__ = ["Daemon", "Evaluator", "JobOutcome", "TickReport"]

log = structlog.get_logger(__name__)

FLINK_DEFAULT_COOLDOWN_MS = 30_000
_CONFIG_REFRESH_MS = 5 * 60_000
_COOLDOWN_KEYS = (
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling",
    "jobmanager.adaptive-scheduler.scaling-interval.min",  # Flink < 2.0 spelling, the deprecated fallback
)


class Evaluator(Protocol):
    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        history: Mapping[str, Sequence[ScalingRecord]] | None = None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        """Every job of the tick at once.

        ``restored``: stored samples to replay first; ``reload``: how to fetch them all again if Spark
        lost its windows (see ``SparkEvaluator.evaluate``); ``history`` (job key -> records, oldest
        first) feeds the history-dependent rules (restart time, ineffective scale-ups, scalability);
        ``evaluators`` (job key -> configured custom evaluators, in order) refine each vertex's metrics.
        """
        ...

    def forget(self, job_keys: Sequence[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What happened to one job in one tick (the demo prints these; tests assert on them)."""

    job: JobRef
    now_ms: int
    outcome: Reason
    detail: str
    decision: Decision | None = None
    chain: ChainResult | None = None
    realized: RealizeResult | None = None


@dataclass(frozen=True, slots=True)
class TickReport:
    now_ms: int
    outcomes: tuple[JobOutcome, ...]
    cluster_errors: Mapping[str, str] = field(default_factory=dict)

    def for_job(self, name: str) -> JobOutcome | None:
        return next((o for o in self.outcomes if o.job.name == name), None)


@dataclass
class _Cluster:
    settings: ClusterSettings
    client: FlinkClient
    options: AutoscalerOptions
    names: MetricNameCache = field(default_factory=MetricNameCache)
    jobs: set[str] = field(default_factory=set)  # job keys seen at the last successful discovery
    flink_cooldown_ms: int = FLINK_DEFAULT_COOLDOWN_MS  # the adaptive scheduler's, from /jobmanager/config
    config_read_ms: int | None = None  # when /jobmanager/config was last read
    lease_expires_ms: int = 0  # while later than now, this daemon holds the cluster's lease
    lease_holder: str | None = None  # who held it at the last attempt (to log changes only)


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
    ) -> None:
        self.settings = settings
        self.evaluator = evaluator
        self.clock = clock or SystemClock()
        self.state = state or MemoryStateStore()
        self.events = events or EventLog()
        self.metrics = metrics or MetricsReporter()
        self.plugins = plugins if isinstance(plugins, PluginInstances) else PluginInstances(fixed=plugins)
        self.evaluators = evaluators or EvaluatorInstances()
        self.on_outcome = on_outcome
        transports = transports or {}
        self._clusters = []
        for cs in settings.clusters:
            options = settings.options_for(cs)
            client = FlinkClient.from_settings(
                cs,
                options.rest_client_timeout,
                transport=transports.get(cs.name),
                on_request=self.metrics.report_request,
            )
            self._clusters.append(_Cluster(cs, client, options))
        self._tick_lock = asyncio.Lock()
        self._scheduler: AsyncIOScheduler | None = None
        self._logged_chains: dict[str, tuple[str, ...]] = {}
        self._dirty: dict[str, JobState] = {}  # states changed this tick, written by _flush
        self._events_out: list[tuple[Event, int]] = []  # this tick's events, recorded by _flush
        self._outcomes_out: list[JobOutcome] = []  # this tick's outcomes, for on_outcome in _flush
        self._windows_restored: set[str] = set()  # jobs whose stored window this process replayed
        self.retries: dict[str, int] = {}  # job key -> when a cooldown-deferred decision is retried

    # ------------------------------------------------------------------ the tick
    async def run_tick(self, only_job: str | None = None) -> TickReport:
        """One pass over every cluster and job; never raises for a cluster's or a job's failure.

        ``only_job`` (a job key) runs the same pipeline for that job alone: the re-evaluation a
        cooldown scheduled for the instant it ends.
        """
        async with self._tick_lock:
            started = time.perf_counter()
            now_ms = self.clock.now_ms()
            clusters = [
                c for c in self._clusters if only_job is None or only_job.startswith(f"{c.settings.name}/")
            ]
            collected = await asyncio.gather(*(self._collect_cluster(c, now_ms, only_job) for c in clusters))
            samples = [s for batch, _ in collected for s in batch if isinstance(s, JobSample)]
            unavailable = [u for batch, _ in collected for u in batch if isinstance(u, Unavailable)]
            cluster_errors = {
                c.settings.name: err for c, (_, err) in zip(clusters, collected, strict=True) if err
            }

            states = await self._load_states(samples)
            restored = await self._stored_windows(samples)
            evaluations, eval_error = await self._evaluate(samples, now_ms, states, restored)
            outcomes = list(
                await asyncio.gather(
                    *(
                        self._handle_job(s, states[s.job.key], evaluations.get(s.job.key), eval_error, now_ms)
                        for s in samples
                    )
                )
            )
            outcomes += [self._handle_unavailable(u, now_ms) for u in unavailable]
            if only_job is not None:  # a one-job view must not forget or recount the others
                await self._flush(samples, states, now_ms, gone=())
                return TickReport(now_ms, tuple(outcomes), cluster_errors)
            gone = self._forget_vanished()
            await self._flush(samples, states, now_ms, gone)
            self.metrics.report_tick(time.perf_counter() - started)  # also tells /readyz the loop is alive
            for c in self._clusters:
                self.metrics.jobs.labels(c.settings.name).set(
                    sum(1 for s in samples if s.job.cluster == c.settings.name)
                )
            return TickReport(now_ms, tuple(outcomes), cluster_errors)

    async def _collect_cluster(
        self, cluster: _Cluster, now_ms: int, only_job: str | None = None
    ) -> tuple[list[JobSample | Unavailable], str | None]:
        name = cluster.settings.name
        if not await self._hold_lease(cluster, now_ms):
            return [], None
        try:
            discovery = await discover(cluster.client, cluster.settings, cluster.options)
        except FlinkError as exc:
            reason = (
                Reason.CLUSTER_UNREACHABLE if isinstance(exc, FlinkUnreachable) else Reason.AUTOSCALER_ERROR
            )
            log.warning("cluster_unavailable", cluster=name, error=str(exc))
            self.metrics.report_error(name, reason)
            return [], str(exc)
        await self._read_flink_cooldown(cluster, now_ms)
        targets = [t for t in discovery.targets if only_job is None or t.job.key == only_job]
        if only_job is not None:
            if not targets:
                return [], None
            return await self._collect_targets(cluster, targets, now_ms), None
        cluster.jobs = {t.job.key for t in discovery.targets} | {j.key for j in discovery.not_running}
        for job, message in discovery.invalid:
            cluster.jobs.add(job.key)
            self._event(
                job.key,
                Reason.OPTIONS_VALIDATION,
                EventType.WARNING,
                message,
                now_ms,
                interval_ms=_ms(cluster.options.scaling_event_interval),
            )
            self.metrics.report_error(name, Reason.OPTIONS_VALIDATION)
        if not targets:
            return [], None
        return await self._collect_targets(cluster, targets, now_ms), None

    async def _collect_targets(
        self, cluster: _Cluster, targets: list[JobTarget], now_ms: int
    ) -> list[JobSample | Unavailable]:
        taskmanagers = await collect_taskmanagers(cluster.client, cluster.names)
        taskmanagers = await fetch_taskmanager_resources(cluster.client, taskmanagers)  # for quota checks
        # Waiting for Flink's metric fetch takes wall time; the simulator (fake or scaled clocks) has none.
        fetch_wait_s = (
            cluster.settings.metric_fetch_wait.total_seconds() if isinstance(self.clock, SystemClock) else 0.0
        )
        return list(
            await asyncio.gather(
                *(
                    collect(
                        cluster.client,
                        t,
                        now_ms,
                        cluster.names,
                        taskmanagers,
                        fetch_wait_s=fetch_wait_s,
                        providers=metric_providers(
                            t.options, plugins=self.plugins, evaluators=self.evaluators
                        ),
                    )
                    for t in targets
                )
            )
        )

    async def _hold_lease(self, cluster: _Cluster, now_ms: int) -> bool:
        """Take or renew the cluster's lease in the state database: only its holder acts on the
        cluster, so daemons sharing a database never both rescale a job. Without it (or when the
        database cannot say) the daemon stands by for the tick: no discovery, no decisions."""
        name, me = cluster.settings.name, self.settings.instance_id
        ttl_ms = _ms(self.settings.effective_lease_ttl)
        try:
            lease = await asyncio.to_thread(self.state.acquire_lease, name, me, now_ms, ttl_ms)
        except Exception as exc:
            log.error("lease_unavailable", cluster=name, error=str(exc))
            self.metrics.report_error(name, Reason.STATE_STORE_ERROR)
            lease = None
        held = lease is not None and lease.held_by(me, now_ms)
        holder = lease.owner if lease is not None else None
        if held and cluster.lease_holder != me:
            log.info("lease_acquired", cluster=name, instance=me, previous=cluster.lease_holder)
        elif not held and (holder != cluster.lease_holder or cluster.lease_expires_ms):
            until = lease.expires_ms if lease is not None else None
            log.warning("standing_by", cluster=name, instance=me, holder=holder, holder_until_ms=until)
        if not held and cluster.lease_expires_ms:
            self._stand_down(cluster)
        cluster.lease_expires_ms = lease.expires_ms if held and lease is not None else 0
        cluster.lease_holder = holder
        self.metrics.lease_held.labels(name).set(1 if held else 0)
        return held

    def _stand_down(self, cluster: _Cluster) -> None:
        """Drop what this process knew of the cluster's jobs; the holder keeps their stored state and
        window, which this process replays if it takes the cluster back."""
        keys = sorted(cluster.jobs)
        self._forget_jobs(keys)  # before clearing jobs: a forgotten job is not "gone" (no trim)
        self._windows_restored.difference_update(keys)
        for key in keys:
            self.retries.pop(key, None)
        cluster.jobs = set()
        self.metrics.jobs.labels(cluster.settings.name).set(0)

    def _holds_lease(self, cluster_name: str) -> bool:
        return self._cluster(cluster_name).lease_expires_ms > self.clock.now_ms()

    async def _read_flink_cooldown(self, cluster: _Cluster, now_ms: int) -> None:
        """Flink's adaptive-scheduler cooldown, re-read every few minutes (it changes only with a restart).

        Flink holds back every rescale inside it (after job start and after each rescale), so the
        daemon defers its decisions until it ends instead of issuing one Flink will sit on. If the
        cluster does not say, Flink's default (30 s) is assumed.
        """
        if cluster.config_read_ms is not None and now_ms - cluster.config_read_ms < _CONFIG_REFRESH_MS:
            return
        try:
            config = await cluster.client.jobmanager_config()
        except FlinkError as exc:
            log.info("jobmanager_config_unavailable", cluster=cluster.settings.name, error=str(exc))
            return
        cluster.config_read_ms = now_ms
        cluster.flink_cooldown_ms = flink_cooldown_ms(config)

    async def _load_states(self, samples: list[JobSample]) -> dict[str, JobState]:
        """Every job's remembered state in one read, off the event loop (the store may be a database)."""
        keys = [s.job.key for s in samples]
        return await asyncio.to_thread(self.state.load_many, keys) if keys else {}

    async def _flush(
        self, samples: list[JobSample], loaded: Mapping[str, JobState], now_ms: int, gone: Sequence[str]
    ) -> None:
        """Write the tick in one transaction: changed states, the tick's samples, the window trim;
        then the tick's events and decision records. All of it off the event loop.

        A crash before this commits loses this tick only; a rescale it issued is found again next tick
        (the realizer sees the requirements already match and sends nothing).
        """
        dirty, self._dirty = self._dirty, {}
        events, self._events_out = self._events_out, []
        outcomes, self._outcomes_out = self._outcomes_out, []
        lapsed = {c.settings.name for c in self._clusters if not self._holds_lease(c.settings.name)}
        if lapsed:  # another daemon may own these jobs by now: their state is its to write
            prefixes = tuple(f"{name}/" for name in lapsed)
            samples = [s for s in samples if s.job.cluster not in lapsed]
            dirty = {key: state for key, state in dirty.items() if not key.startswith(prefixes)}
            gone = [key for key in gone if not key.startswith(prefixes)]
        changed = {key: state for key, state in dirty.items() if loaded.get(key) != state}
        rows = {s.job.key: window_rows(s) for s in samples} if self.settings.persist_window else {}
        custom = {s.job.key: custom_window_rows(s) for s in samples if s.job.key in rows}
        custom = {key: measured for key, measured in custom.items() if measured}
        cut = {s.job.key: now_ms - _ms(s.target.options.metrics_window) for s in samples if s.job.key in rows}
        cut.update({key: now_ms + 1 for key in gone})  # a job that left drops its window rows

        def write() -> None:
            with self.state.transaction():
                if changed:
                    self.state.save_many(changed)
                if rows:
                    self.state.append_windows(rows)
                if custom:
                    self.state.append_custom_windows(custom)
                if cut:
                    self.state.trim_windows(cut)

        try:
            if changed or rows or cut:
                await asyncio.to_thread(write)
        except Exception as exc:
            # Like a crash: this tick is lost and the next one recomputes from what the store holds
            # (idempotent realizing keeps a rescale this tick issued from being sent twice).
            log.error("state_save_failed", error=str(exc), jobs=sorted(changed), exc_info=True)
            for cluster in sorted({s.job.cluster for s in samples}):
                self.metrics.report_error(cluster, Reason.STATE_STORE_ERROR)
        # Only now: whoever sees an event (a Scaling, say) can count on the state behind it (the pending
        # rescale, the history) being stored. A crash in between loses the tick's events, not its state.
        if events:
            await asyncio.to_thread(self._record_events, events)
        if outcomes:
            await asyncio.to_thread(self._deliver_outcomes, outcomes)

    async def _stored_windows(self, samples: list[JobSample]) -> dict[str, list[JobSample]]:
        """The stored window of each job this process has not evaluated yet (e.g. after a restart).

        Only ticks older than the job's current sample and with its vertex set come back; whether
        the job restarted since is the evaluator's window bookkeeping to decide, as for live ticks.
        """
        new = [s for s in samples if s.job.key not in self._windows_restored]
        self._windows_restored.update(s.job.key for s in new)
        if not new or not self.settings.persist_window:
            return {}
        try:
            restored = await asyncio.to_thread(self._load_windows, new)
        except Exception as exc:  # without it the window just fills again from now on
            log.warning("window_restore_failed", error=str(exc))
            return {}
        if restored:
            log.info("windows_restored", jobs={k: len(v) for k, v in restored.items()})
        return restored

    def _load_windows(self, samples: Sequence[JobSample]) -> dict[str, list[JobSample]]:
        """Each job's stored ticks older than its sample and with its vertex set (blocking I/O)."""
        out: dict[str, list[JobSample]] = {}
        for sample in samples:
            vertices = set(sample.topology.vertices)
            past = [
                JobSample(
                    sample.target,
                    t.ts_ms,
                    t.running_since_ms,
                    sample.topology,
                    t.vertices,
                    custom_vertex_metrics=t.custom_vertex_metrics,
                    custom_job_metrics=t.custom_job_metrics,
                )
                for t in group_window(
                    self.state.load_window(sample.job.key), self.state.load_custom_window(sample.job.key)
                )
                if t.ts_ms < sample.ts_ms and set(t.vertices) == vertices
            ]
            if past:
                out[sample.job.key] = past
        return out

    async def _evaluate(
        self,
        samples: list[JobSample],
        now_ms: int,
        states: Mapping[str, JobState],
        restored: Mapping[str, Sequence[JobSample]] | None = None,
    ) -> tuple[dict[str, JobEvaluation], str | None]:
        if not samples:
            return {}, None
        started = time.perf_counter()
        try:
            # Each job's scaling history feeds restart-time tracking, effectiveness and scalability.
            history = {
                s.job.key: trim_history(states[s.job.key].history, now_ms, s.target.options) for s in samples
            }
            evaluate = functools.partial(
                self.evaluator.evaluate,
                samples,
                now_ms,
                history=history,
                evaluators=self.evaluators.for_samples(samples),
                **({"restored": restored} if restored else {}),
                **({"reload": self._load_windows} if self.settings.persist_window else {}),
            )
            evaluations = await asyncio.to_thread(evaluate)
        except Exception as exc:  # Spark failing must not stop the loop; nothing scales this tick
            self.metrics.report_spark(False, f"evaluation failed: {type(exc).__name__}: {exc}")
            log.error("evaluation_failed", error=str(exc), exc_info=True)
            for s in samples:
                self.metrics.report_error(s.job.cluster, Reason.AUTOSCALER_ERROR)
            return {}, f"evaluation failed: {type(exc).__name__}: {exc}"
        self.metrics.report_spark(True, duration_s=time.perf_counter() - started)
        return evaluations, None

    async def _handle_job(
        self,
        sample: JobSample,
        loaded: JobState,
        evaluation: JobEvaluation | None,
        eval_error: str | None,
        now_ms: int,
    ) -> JobOutcome:
        job, options = sample.job, sample.target.options
        with structlog.contextvars.bound_contextvars(cluster=job.cluster, job=job.name):
            try:
                state = self._confirm_pending(sample, loaded, now_ms)
                if evaluation is None:
                    self._save(job.key, state)
                    detail = eval_error or "no evaluation for this job"
                    self._event(
                        job.key,
                        Reason.AUTOSCALER_ERROR,
                        EventType.WARNING,
                        detail,
                        now_ms,
                        interval_ms=_ms(options.scaling_event_interval),
                    )
                    return self._done(JobOutcome(job, now_ms, Reason.AUTOSCALER_ERROR, detail))
                self.metrics.report_evaluation(evaluation)
                self._report_ineffective(evaluation, now_ms)
                self._report_limited(evaluation, now_ms)
                self._report_evaluator_failures(evaluation, now_ms)
                cooldown_ms = self._cluster(job.cluster).flink_cooldown_ms
                decision = decide(evaluation, state, options, now_ms, flink_cooldown_ms=cooldown_ms)
                outcome = await self._execute(decision, sample.target, now_ms)
                self.metrics.report_outcome(
                    job, outcome.outcome, outcome.realized is not None and outcome.realized.issued
                )
                return self._done(outcome)
            except Exception as exc:  # one job's failure stays with that job
                log.error("job_tick_failed", error=str(exc), exc_info=not isinstance(exc, FlinkError))
                self.metrics.report_error(job.cluster, Reason.AUTOSCALER_ERROR)
                self._event(
                    job.key,
                    Reason.AUTOSCALER_ERROR,
                    EventType.WARNING,
                    _truncate(str(exc)),
                    now_ms,
                    interval_ms=_ms(options.scaling_event_interval),
                )
                return self._done(JobOutcome(job, now_ms, Reason.AUTOSCALER_ERROR, str(exc)))

    async def _execute(self, decision: Decision, target: JobTarget, now_ms: int) -> JobOutcome:
        job, options = decision.job, target.options
        interval = _ms(options.scaling_event_interval)
        if decision.outcome is Reason.COOLDOWN_DEFERRED and decision.retry_at_ms is not None:
            self.metrics.deferred.labels(job.cluster, job.name).inc()
            self._event(
                job.key,
                Reason.COOLDOWN_DEFERRED,
                EventType.NORMAL,
                decision.detail,
                now_ms,
                key=f"retry:{decision.retry_at_ms}",
                interval_ms=interval,
            )
            self._schedule_retry(job.key, decision.retry_at_ms, now_ms)
        if decision.forced:
            self.metrics.forced.labels(job.cluster, job.name).inc()
            self._event(job.key, Reason.SCALING_FORCED, EventType.NORMAL, decision.detail, now_ms)
        if decision.outcome in (Reason.MEMORY_PRESSURE, Reason.RESOURCE_QUOTA_REACHED):
            kind = EventType.NORMAL if decision.outcome is Reason.MEMORY_PRESSURE else EventType.WARNING
            self._event(job.key, decision.outcome, kind, decision.detail, now_ms, interval_ms=interval)
        if decision.outcome in (Reason.ADVISOR_MODE, Reason.EXCLUDED_PERIOD):
            report = _report_text(decision, enabled=False)
            self._event(
                job.key,
                Reason.SCALING_REPORT,
                EventType.NORMAL,
                report,
                now_ms,
                key=_changes_key(decision),
                interval_ms=interval,
            )
        if not decision.applies:
            self._save(job.key, decision.state)
            return JobOutcome(job, now_ms, decision.outcome, decision.detail, decision)

        changes = decision.changes
        chain: ChainResult | None = None
        configured = self.plugins.chain_for(options)
        self._log_chain(job, configured)
        if configured.plugins or configured.problems:
            chain = await self._run_plugins(decision, options, configured)
            for o in chain.outcomes:
                self.metrics.plugin_outcomes.labels(job.cluster, job.name, o.plugin, str(o.outcome)).inc()
                kind = EventType.NORMAL if o.outcome in _PLUGIN_OK else EventType.WARNING
                text = f"executor plugin {o.plugin}: {o.outcome}" + (f" ({o.detail})" if o.detail else "")
                self._event(
                    job.key,
                    o.outcome,
                    kind,
                    text,
                    now_ms,
                    key=f"{o.outcome}:{o.plugin}",
                    interval_ms=interval,
                )
            vetoed = chain.vetoed_by
            if vetoed is not None or chain.changes is None:
                plugin, why = (vetoed.plugin, vetoed.detail) if vetoed else ("?", "")
                text = f"scaling vetoed by plugin {plugin}" + (f": {why}" if why else "")
                if vetoed is None or vetoed.outcome is not Reason.SCALING_VETOED:
                    self._event(
                        job.key,
                        Reason.SCALING_VETOED,
                        EventType.WARNING,
                        text,
                        now_ms,
                        key=f"ScalingVetoed:{plugin}",
                        interval_ms=interval,
                    )
                self._save(job.key, decision.state)
                return JobOutcome(job, now_ms, Reason.SCALING_VETOED, text, decision, chain)
            changes = chain.changes
            decision = decision.with_changes(changes, Reason.SCALING, decision.detail)

        if not self._holds_lease(job.cluster):
            text = "the cluster's lease expired during this tick (another daemon may act): not rescaling"
            log.warning("lease_expired_before_rescale", changes=_changes_key(decision))
            self.metrics.report_error(job.cluster, Reason.LEASE_EXPIRED)
            return JobOutcome(job, now_ms, Reason.LEASE_EXPIRED, text, decision, chain)
        self._event(
            job.key, Reason.SCALING_REPORT, EventType.NORMAL, _report_text(decision, enabled=True), now_ms
        )
        cluster = self._cluster(job.cluster)
        desired = {vid: c.target for vid, c in changes.items()}
        realized = await realize(cluster.client, job, desired)
        previous = {vid: c.current for vid, c in changes.items()}
        pending = PendingRescale(job.job_id, now_ms, desired, previous)
        change_map = {vid: (c.current, c.target) for vid, c in changes.items()}
        metrics = record_metrics(decision.evaluation, change_map) if decision.evaluation else {}
        scaled = decision.state.with_scaling(ScalingRecord(now_ms, change_map, metrics=metrics), pending)
        self._save(job.key, replace(scaled, history=trim_history(scaled.history, now_ms, options)))
        if realized.issued:
            body = ", ".join(f"{vid}: {b.lower}..{b.upper}" for vid, b in realized.requirements.items())
            self._event(
                job.key,
                Reason.SCALING,
                EventType.NORMAL,
                f"In-place scaling triggered, the new requirements is {{{body}}}",
                now_ms,
            )
        else:
            log.info("requirements_already_match", desired=desired)
        return JobOutcome(job, now_ms, Reason.SCALING, decision.detail, decision, chain, realized)

    def _report_evaluator_failures(self, evaluation: JobEvaluation, now_ms: int) -> None:
        """A custom evaluator that raised (built-in values kept) or is missing (job not scaled)."""
        options = evaluation.sample.target.options
        problems = [str(f) for f in evaluation.evaluator_failures]
        if evaluation.not_ready is Reason.PLUGIN_FAILED:
            problems.append(evaluation.not_ready_detail or "a configured custom evaluator is unavailable")
        for problem in problems:
            self.metrics.report_error(evaluation.job.cluster, Reason.PLUGIN_FAILED)
            self._event(
                evaluation.job.key,
                Reason.PLUGIN_FAILED,
                EventType.WARNING,
                f"custom evaluator: {problem}",
                now_ms,
                key=f"evaluator:{problem}",
                interval_ms=_ms(options.scaling_event_interval),
            )

    def _report_limited(self, evaluation: JobEvaluation, now_ms: int) -> None:
        """The deprecated legacy alignment moved or blocked a vertex's target: warn, as the reference."""
        options = evaluation.sample.target.options
        names = {v.id: v.name for v in evaluation.sample.topology}
        for vid, v in evaluation.vertices.items():
            if v.limited_from is None:
                continue
            text = (
                f"Scaling limited detected for {names.get(vid, vid)} ({vid}) (expected parallelism: "
                f"{v.limited_from}, actual parallelism {v.target_parallelism}): "
                f"scaling.key-group.partitions.adjust.mode={options.key_group_partitions_adjust_mode} "
                "found no aligned parallelism in the scaling direction"
            )
            self._event(
                evaluation.job.key,
                Reason.SCALING_LIMITED,
                EventType.WARNING,
                text,
                now_ms,
                key=f"ScalingLimited{vid}",
                interval_ms=_ms(options.scaling_event_interval),
            )

    def _report_ineffective(self, evaluation: JobEvaluation, now_ms: int) -> None:
        """The reference always reports an ineffective scale-up; blocking it is a separate option."""
        options = evaluation.sample.target.options
        names = {v.id: v.name for v in evaluation.sample.topology}
        for vid in evaluation.ineffective_scale_ups:
            v = evaluation.vertices[vid]
            blocked = (
                " (further scale-ups blocked)" if options.scaling_effectiveness_detection_enabled else ""
            )
            text = (
                f"Ineffective scaling detected for {names.get(vid, vid)} ({vid}): processing rate "
                f"{v.true_processing_rate:.2f} after the last scale-up did not reach "
                f"scaling.effectiveness.threshold {options.scaling_effectiveness_threshold}{blocked}"
            )
            self._event(
                evaluation.job.key,
                Reason.INEFFECTIVE_SCALING,
                EventType.NORMAL,
                text,
                now_ms,
                key=f"IneffectiveScaling:{vid}",
                interval_ms=_ms(options.scaling_event_interval),
            )

    def _log_chain(self, job: JobRef, configured: ConfiguredChain) -> None:
        """Log a job's executor chain, in the order it runs, whenever it changes."""
        order = tuple(f"{p.name}(priority {p.priority()})" for p in order_plugins(configured.plugins))
        if self._logged_chains.get(job.key) != order:
            self._logged_chains[job.key] = order
            log.info("executor_chain", job=job.key, chain=list(order), problems=list(configured.problems))

    async def _run_plugins(
        self, decision: Decision, options: AutoscalerOptions, configured: ConfiguredChain
    ) -> ChainResult:
        """The job's configured chain; a plugin that could not be loaded vetoes before any runs."""
        if configured.problems:
            return ChainResult(
                None, tuple(PluginOutcome("config", Reason.PLUGIN_FAILED, p) for p in configured.problems)
            )
        job = decision.job
        client = self._cluster(job.cluster).client

        def context(plugin: ScalingExecutorPlugin) -> PluginContext:
            assert decision.evaluation is not None
            return PluginContext(job, options, decision.evaluation, configured.config_for(plugin), client)

        return await run_chain(configured.plugins, context, decision.changes)

    def _confirm_pending(self, sample: JobSample, state: JobState, now_ms: int) -> JobState:
        """Close a pending rescale once /jobs/:id shows it, or report it stuck after confirm_timeout."""
        pending = state.pending
        if pending is None:
            return state
        job = sample.job
        if pending.job_id != job.job_id:
            log.info("pending_rescale_dropped", reason="job resubmitted", old_job_id=pending.job_id)
            return replace(state, pending=None)
        result = confirm(pending, sample)
        if result.done:
            names = {v.id: v.name for v in sample.topology}
            got = ", ".join(f"{names.get(v, v)} {p}" for v, p in result.actual.items())
            if result.capped:
                text = (
                    f"rescale applied with less than requested (Flink capped it, e.g. by free slots): {got}"
                )
                self._event(job.key, Reason.SCALING_LIMITED, EventType.WARNING, text, now_ms)
            else:
                self._event(
                    job.key, Reason.SCALING_CONFIRMED, EventType.NORMAL, f"rescale running: {got}", now_ms
                )
            history = state.history
            if history and history[-1].ts_ms == pending.issued_ms:
                last = replace(
                    history[-1], confirmed_ms=now_ms, restart_duration_ms=result.restart_duration_ms
                )
                history = (*history[:-1], last)
            return replace(state, pending=None, history=history)
        if now_ms - pending.issued_ms > _ms(self.settings.confirm_timeout):
            self._event(
                job.key,
                Reason.RESCALE_STUCK,
                EventType.WARNING,
                f"rescale to {dict(pending.target)} not running after {self.settings.confirm_timeout}",
                now_ms,
            )
            return replace(state, pending=None)
        return state

    def _handle_unavailable(self, unavailable: Unavailable, now_ms: int) -> JobOutcome:
        job = unavailable.job
        if unavailable.reason is not Reason.NOT_RUNNING:
            self.metrics.report_error(job.cluster, unavailable.reason)
        log.info(
            "job_unavailable",
            cluster=job.cluster,
            job=job.name,
            reason=str(unavailable.reason),
            detail=unavailable.detail,
        )
        return self._done(JobOutcome(job, now_ms, unavailable.reason, unavailable.detail))

    # ------------------------------------------------------------------ records
    def _forget_vanished(self) -> list[str]:
        """Drop caches and series of jobs no longer on their (reachable) cluster; keep their state.

        Returns the keys of those jobs (their stored window rows go with this tick's write).
        """
        live = {key for c in self._clusters for key in c.jobs}
        gone = sorted(self.metrics.known_jobs() - live)  # an unreachable cluster keeps its last job set
        if gone:
            self._forget_jobs(gone)
        return gone

    def _forget_jobs(self, keys: Sequence[str]) -> None:
        """Drop the jobs' Spark windows, metric series and cached metric names (not their state)."""
        self.evaluator.forget(keys)
        self.metrics.forget_jobs(keys)
        for c in self._clusters:
            for key in keys:
                c.names.forget(key)

    def _event(
        self,
        job_key: str,
        reason: Reason,
        type_: EventType,
        message: str,
        now_ms: int,
        *,
        key: str = "",
        interval_ms: int = 0,
    ) -> None:
        self._events_out.append((Event(job_key, reason, type_, message, now_ms, key=key), interval_ms))

    def _record_events(self, events: Sequence[tuple[Event, int]]) -> None:
        """Runs off the event loop: a slow or hanging database must not stall the ticks."""
        for event, interval_ms in events:
            try:
                self.events.emit(event, interval_ms)
            except Exception as exc:  # recording must never fail a tick
                log.error("event_failed", reason=str(event.reason), job=event.job_key, error=str(exc))

    def _save(self, job_key: str, state: JobState) -> None:
        """Remember the job's new state; ``_flush`` writes the whole tick in one transaction."""
        self._dirty[job_key] = state

    def _done(self, outcome: JobOutcome) -> JobOutcome:
        log.info(
            "decision",
            cluster=outcome.job.cluster,
            job=outcome.job.name,
            outcome=str(outcome.outcome),
            detail=outcome.detail,
        )
        if self.on_outcome is not None:
            self._outcomes_out.append(outcome)
        return outcome

    def _deliver_outcomes(self, outcomes: Sequence[JobOutcome]) -> None:
        """Runs off the event loop: the callback writes decision files."""
        assert self.on_outcome is not None
        for outcome in outcomes:
            try:
                self.on_outcome(outcome)
            except Exception as exc:
                log.error("outcome_callback_failed", job=outcome.job.key, error=str(exc))

    def _cluster(self, name: str) -> _Cluster:
        return next(c for c in self._clusters if c.settings.name == name)

    # ------------------------------------------------------------------ lifecycle
    async def serve(self, stop: asyncio.Event) -> None:
        """Run ticks on APScheduler until ``stop`` is set: never two at once, missed ticks coalesced."""
        interval_s = self.settings.control_loop_interval.total_seconds()
        scheduler = self._scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
        scheduler.add_job(
            self._scheduled_tick,
            "interval",
            seconds=interval_s,
            id="tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(interval_s)),
            next_run_time=datetime.now(UTC),
        )
        scheduler.add_job(
            self._cleanup,
            "interval",
            days=1,
            id="cleanup",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC) + timedelta(minutes=5),
        )
        scheduler.add_listener(self._on_skipped_tick, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        scheduler.start()
        log.info("daemon_started", clusters=[c.settings.name for c in self._clusters], interval_s=interval_s)
        try:
            await stop.wait()
        finally:
            scheduler.shutdown(wait=False)
            self._scheduler = None
            async with self._tick_lock:  # let a running tick finish so its state is saved
                pass
            log.info("daemon_stopped")

    async def _cleanup(self) -> None:
        """Once a day: events past ``event_retention``, and window rows no job has added to for a day
        (jobs that disappeared while the daemon was down never get a trim otherwise)."""
        now_ms = self.clock.now_ms()
        try:
            if isinstance(self.events, EventStore):
                retention_ms = _ms(self.settings.event_retention)
                deleted = await asyncio.to_thread(self.events.cleanup, now_ms, retention_ms)
                log.info("events_cleaned_up", deleted=deleted)
            await asyncio.to_thread(self.state.trim_window, None, now_ms - 86_400_000)
        except Exception as exc:  # housekeeping must never take the loop down
            log.error("cleanup_failed", error=str(exc), exc_info=True)

    def _schedule_retry(self, job_key: str, retry_at_ms: int, now_ms: int) -> None:
        """Re-evaluate ``job_key`` alone at exactly ``retry_at_ms`` (an APScheduler date trigger).

        ``retries`` keeps the instant on the daemon's clock; the trigger's wall time accounts for a
        clock that runs faster than wall time (the demo's). One pending retry per job: a later
        deferral to the same instant replaces it.
        """
        self.retries[job_key] = retry_at_ms
        if self._scheduler is None:
            return
        speed = float(getattr(self.clock, "speed", 1.0)) or 1.0
        run_at = datetime.now(UTC) + timedelta(seconds=max(0.0, (retry_at_ms - now_ms) / 1000 / speed))
        self._scheduler.add_job(
            self._scheduled_job_tick,
            "date",
            run_date=run_at,
            args=[job_key],
            id=f"retry:{job_key}",
            replace_existing=True,
            misfire_grace_time=None,
        )

    async def _scheduled_job_tick(self, job_key: str) -> None:
        self.retries.pop(job_key, None)
        try:
            await self.run_tick(only_job=job_key)
        except Exception as exc:  # the loop must survive anything
            log.error("job_tick_failed", job=job_key, error=str(exc), exc_info=True)

    def _on_skipped_tick(self, event: JobEvent) -> None:
        """A tick that overran its interval makes the next one wait; count it so it shows on dashboards."""
        self.metrics.ticks_skipped.inc()
        log.info(
            "tick_skipped",
            reason="previous tick still running",
            interval_s=self.settings.control_loop_interval.total_seconds(),
        )

    async def _scheduled_tick(self) -> None:
        try:
            await self.run_tick()
        except Exception as exc:  # the loop must survive anything
            log.error("tick_failed", error=str(exc), exc_info=True)

    async def aclose(self) -> None:
        """Hand the held leases back (a standby takes over at its next tick), close the clients."""
        for c in self._clusters:
            if c.lease_expires_ms:
                name, me = c.settings.name, self.settings.instance_id
                try:
                    await asyncio.to_thread(self.state.release_lease, name, me)
                    log.info("lease_released", cluster=name, instance=me)
                except Exception as exc:  # it expires on its own after lease_ttl
                    log.warning("lease_release_failed", cluster=c.settings.name, error=str(exc))
                c.lease_expires_ms = 0
            with contextlib.suppress(Exception):
                await c.client.aclose()


_PLUGIN_OK = (Reason.SCALING_APPROVED, Reason.SCALING_MODIFIED)


def flink_cooldown_ms(jobmanager_config: Mapping[str, str]) -> int:
    """The adaptive scheduler's cooldown from ``/jobmanager/config``; Flink's default if unset or bad."""
    for key in _COOLDOWN_KEYS:
        if key in jobmanager_config:
            try:
                return round(parse_duration(jobmanager_config[key]).total_seconds() * 1000)
            except ValueError:
                log.warning("unparsable_flink_cooldown", key=key, value=jobmanager_config[key])
    return FLINK_DEFAULT_COOLDOWN_MS


def _ms(delta: timedelta) -> int:
    return round(delta.total_seconds() * 1000)


def _truncate(text: str, limit: int = 2048) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _report_text(decision: Decision, *, enabled: bool) -> str:
    header = (
        "Scaling execution enabled, begin scaling vertices:"
        if enabled
        else "Scaling execution disabled by config, recommended parallelism changes:"
    )
    ev = decision.evaluation
    lines = []
    for vid, c in decision.changes.items():
        v = ev.vertices.get(vid) if ev else None
        tpr = v.true_processing_rate if v else float("nan")
        exp = v.expected_processing_rate if v else float("nan")
        tdr = v.target_data_rate if v else float("nan")
        lines.append(
            f"{{ Vertex ID {vid} | Parallelism {c.current} -> {c.target} | "
            f"Processing capacity {tpr:.2f} -> {exp:.2f} | Target data rate {tdr:.2f}}}"
        )
    return header + "".join(lines)


def _changes_key(decision: Decision) -> str:
    text = ";".join(f"{vid}:{c.current}->{c.target}" for vid, c in sorted(decision.changes.items()))
    return hashlib.sha1(text.encode()).hexdigest()[:16]
