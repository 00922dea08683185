"""The per-job stages of a tick: decide, then the executor plugins, then realize (the slot check between
the last two is :mod:`autoscaler.claim_slots`).

Each job travels as a :class:`JobStep`. A stage works on the steps still under way and passes on the
ones that already ended (``outcome`` set), so one job's veto, error or deferral never holds back
another's rescale. A job's failure in any stage stays with that job: it ends with an
``AutoscalerError`` outcome, and nothing it touched is scaled. What a stage decides is reported
through the tick's :class:`~autoscaler.record.TickRecord`, which also takes each job's new state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

import structlog

from autoscaler.cluster import Clusters
from autoscaler.durations import to_ms
from autoscaler.evaluate.history import needed_capacity, record_metrics, trim_history, verify_last_scaling
from autoscaler.evaluate.stage import Evaluated
from autoscaler.events import EventType
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.memory_advice import advice_for
from autoscaler.model import JobRef, JobSample
from autoscaler.plugins.api import PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.chain import ChainResult, PluginOutcome, order_plugins, run_chain
from autoscaler.plugins.configured import ConfiguredChain, PluginInstances
from autoscaler.reasons import Reason
from autoscaler.slot_fit import below_request, below_text, slots_short_of_request
from autoscaler.state import JobState, PendingRescale, ScalingRecord
from autoscaler.state.tick import Loaded
from autoscaler.tick.decide import decide
from autoscaler.tick.realize import confirm, realize
from autoscaler.tick.record import TickRecord
from autoscaler.tick.steps import Decision, JobOutcome, JobStep

__all__ = ["ChainLog", "decide_jobs", "realize_jobs", "run_plugins"]

log = structlog.get_logger(__name__)


# ---------------------------------------------------------------------------------------------- decide
async def decide_jobs(
    samples: Sequence[JobSample],
    loaded: Loaded,
    evaluated: Evaluated,
    rec: TickRecord,
    *,
    flink_cooldown_ms: Mapping[str, int],
    confirm_timeout: timedelta,
    interval: timedelta = timedelta(seconds=10),
) -> list[JobStep]:
    """Settle each job's pending rescale, then run the gates on its evaluation.

    ``flink_cooldown_ms`` is each cluster's adaptive-scheduler cooldown (cluster name -> ms);
    ``interval`` the control loop's, the first step of a refused PUT's backoff.
    """

    async def one(step: JobStep) -> JobStep:
        job, options = step.job, step.sample.target.options
        state = _follow_job_id(step.sample, loaded.states[job.key], rec)
        state = _confirm_pending(step.sample, state, rec, confirm_timeout)
        below = below_request(step.sample.topology, _standing(state))
        short = slots_short_of_request(step.sample.topology, below)
        rec.metrics.job_slots_short.labels(job.cluster, job.name).set(short)
        evaluation = evaluated.evaluations.get(job.key)
        if evaluation is None:
            rec.save(job.key, state)
            detail = evaluated.error or "no evaluation for this job"
            return replace(step, outcome=rec.not_evaluated(job, options, detail))
        rec.evaluated(evaluation)
        cooldown_ms = flink_cooldown_ms[job.cluster]
        decision = decide(
            evaluation,
            state,
            options,
            rec.now_ms,
            flink_cooldown_ms=cooldown_ms,
            stuck_retry_ms=_stuck_retry_ms(state, confirm_timeout),
        )
        decision = _verify_last_scaling(decision, rec)
        decision = _standing_request(decision, below, step.sample)
        decision = _refused_backoff(decision, _refused_retry_ms(state, interval), rec.now_ms)
        rec.decided(decision, options)
        if not decision.applies:
            rec.save(job.key, decision.state)
            ended = JobOutcome(job, rec.now_ms, decision.outcome, decision.detail, decision)
            return replace(step, decision=decision, outcome=rec.outcome(ended))
        return replace(step, decision=decision)

    return await _each([JobStep(s) for s in samples], rec, one)


def _follow_job_id(sample: JobSample, state: JobState, rec: TickRecord) -> JobState:
    """The job's state for the JobID running now. The state is keyed by job name, so a resubmitted job
    (a new JobID: a JobManager restarted without HA, a user's resubmission) finds its predecessor's:
    told once (the saved state then holds the new JobID), it keeps the name's history and drops what
    belonged to the old JobID (``JobState.for_resubmission``)."""
    job, known = sample.job, state.known_job_id
    if known is not None and known != job.job_id:
        rec.resubmitted(job, known, state, sample.target.options)
        return state.for_resubmission(job.job_id)
    # The same JobID, or nothing to compare with (a new job, state stored before the JobID was kept).
    return state if state.job_id == job.job_id else replace(state, job_id=job.job_id)


def _confirm_pending(sample: JobSample, state: JobState, rec: TickRecord, timeout: timedelta) -> JobState:
    """Close a pending rescale once /jobs/:id shows it, or report it stuck after ``timeout``."""
    pending = state.pending
    if pending is None:
        return state
    job = sample.job
    result = confirm(pending, sample)
    if result.done:
        rec.confirmed(job, result, {v.id: v.name for v in sample.topology})
        history = state.history
        if history and history[-1].ts_ms == pending.issued_ms:
            last = replace(
                history[-1], confirmed_ms=rec.now_ms, restart_duration_ms=result.restart_duration_ms
            )
            history = (*history[:-1], last)
        return replace(state, pending=None, history=history, stuck_rescales=0, stuck_ms=None)
    if rec.now_ms - pending.issued_ms > to_ms(timeout):
        stuck = replace(state, pending=None, stuck_rescales=state.stuck_rescales + 1, stuck_ms=rec.now_ms)
        rec.stuck(job, pending, timeout, stuck.stuck_rescales, _stuck_retry_ms(stuck, timeout))
        return stuck
    return state


STUCK_BACKOFF_CAP = timedelta(hours=1)


def _doubling_backoff_ms(in_a_row: int, last_ms: int | None, first: timedelta) -> int | None:
    """``last_ms`` plus ``first``, doubled for each failure in a row after the first (at most
    :data:`STUCK_BACKOFF_CAP`); None without a failure."""
    if not in_a_row or last_ms is None:
        return None
    return last_ms + to_ms(min(first * 2 ** (in_a_row - 1), STUCK_BACKOFF_CAP))


def _stuck_retry_ms(state: JobState, timeout: timedelta) -> int | None:
    """When a job whose last rescales never ran may be rescaled again: ``confirm_timeout`` after the
    first one was given up, doubling with each one more (at most an hour); None when none is stuck.

    Flink accepted those PUTs (its requirements are set) but did not run them: most often too few
    free slots, which a new PUT does not create. A PUT every ``confirm_timeout`` would only add
    restarts' worth of records to the history and a target drifting with the backlog.
    """
    return _doubling_backoff_ms(state.stuck_rescales, state.stuck_ms, timeout)


def _standing(state: JobState) -> dict[str, int]:
    """The targets of the job's last rescale once Flink restarted the job for it (confirmed): Flink
    holds them as its requirements. Nothing while a rescale is pending, when the last one never ran
    (stuck: it is asked again after a backoff, since nothing shows that Flink kept it), or when it was
    asked of another JobID (a resubmitted job runs what it was submitted with, and Flink holds no
    request of the old JobID for it)."""
    last = state.last_scaling_of_job_id
    if state.pending is not None or last is None or last.confirmed_ms is None:
        return {}
    return {vid: new for vid, (_, new) in last.changes.items()}


def _refused_retry_ms(state: JobState, interval: timedelta) -> int | None:
    """When a job whose last PUTs Flink refused (4xx) may ask again: one control interval after the
    first, doubling with each one more (at most an hour), half an interval early so that a tick a few
    milliseconds early still counts; None when none was refused."""
    retry = _doubling_backoff_ms(state.refused_rescales, state.refused_ms, interval)
    return None if retry is None else retry - to_ms(interval) // 2


def _refused_backoff(decision: Decision, retry_ms: int | None, now_ms: int) -> Decision:
    """A rescale is not asked for while a refused one's backoff runs (``RescaleRejected``)."""
    if not decision.applies or retry_ms is None or now_ms >= retry_ms:
        return decision
    n = decision.state.refused_rescales
    text = (
        f"Flink refused the last {n} rescale(s) in a row: no new one before "
        f"{(retry_ms - now_ms) / 1000:.0f} s from now"
    )
    return decision.with_changes(decision.changes, Reason.RESCALE_REJECTED, text)


def _standing_request(
    decision: Decision, below: Mapping[str, tuple[int, int]], sample: JobSample
) -> Decision:
    """A vertex Flink runs below what was asked for it (too few free slots) keeps that request: a change
    to the same parallelism is not asked for again, recorded as a rescale, or left to get stuck. A
    decision with nothing else to change waits for slots (``WaitingForSlots``), saying so."""
    if not decision.applies or not below:
        return decision
    kept = {vid: c for vid, c in decision.changes.items() if vid not in below or c.target != below[vid][1]}
    if len(kept) == len(decision.changes):
        return decision
    names = {v.id: v.name for v in sample.topology}
    text = f"Flink runs {below_text(below, names)} (too few free slots): the request stands"
    if kept:
        return decision.with_changes(kept, Reason.SCALING, f"{decision.detail}; {text}")
    return decision.with_changes(decision.changes, Reason.WAITING_FOR_SLOTS, text)


# Outcomes that end before the metrics were judged: their evaluation cannot verify a rescale.
_NOT_JUDGED = frozenset({Reason.RESCALE_IN_FLIGHT, Reason.METRICS_UNKNOWN})


def _verify_last_scaling(decision: Decision, rec: TickRecord) -> Decision:
    """The first tick after a confirmed rescale whose window is full (and its metrics known) measures
    what the rescale delivered, once; the verdict joins the rescale's record in the next state. Only
    the JobID the rescale was asked of measures it: a resubmitted job's metrics say nothing of it."""
    evaluation, state = decision.evaluation, decision.state
    if evaluation is None or evaluation.not_ready is not None or decision.outcome in _NOT_JUDGED:
        return decision
    if state.last_scaling_of_job_id is None:
        return decision
    verified = verify_last_scaling(state.history, evaluation, rec.now_ms)
    if verified is None:
        return decision
    rec.verified(evaluation, verified)
    return replace(decision, state=replace(state, history=(*state.history[:-1], verified)))


# ---------------------------------------------------------------------------------------------- plugins
class ChainLog:
    """Logs each job's executor chain, in the order it runs, whenever it changes."""

    def __init__(self) -> None:
        self._logged: dict[str, tuple[str, ...]] = {}

    def __call__(self, job: JobRef, configured: ConfiguredChain) -> None:
        order = tuple(f"{p.name}(priority {p.priority()})" for p in order_plugins(configured.plugins))
        if self._logged.get(job.key) != order:
            self._logged[job.key] = order
            log.info("executor_chain", job=job.key, chain=list(order), problems=list(configured.problems))


async def run_plugins(
    steps: Sequence[JobStep],
    rec: TickRecord,
    *,
    plugins: PluginInstances,
    clusters: Clusters,
    chain_log: ChainLog,
) -> list[JobStep]:
    """Each job's configured executor chain approves, modifies or vetoes its decided changes."""

    async def one(step: JobStep) -> JobStep:
        decision, options = step.decision, step.sample.target.options
        assert decision is not None
        configured = plugins.chain_for(options)
        chain_log(step.job, configured)
        if not configured.plugins and not configured.problems:
            return step
        chain = await _run_chain(decision, configured, clusters)
        rec.plugins(step.job, chain, options)
        if chain.vetoed_by is not None or chain.changes is None:
            rec.save(step.job.key, decision.state)
            text = rec.vetoed(step.job, chain, options)
            # A plugin that broke (raised, overran, answered garbage) is not a deliberate veto: the job's
            # outcome says PluginFailed, so an alert on it fires (the scaling is vetoed all the same).
            failed = chain.vetoed_by is not None and chain.vetoed_by.outcome is Reason.PLUGIN_FAILED
            reason = Reason.PLUGIN_FAILED if failed else Reason.SCALING_VETOED
            ended = JobOutcome(step.job, rec.now_ms, reason, text, decision, chain)
            return replace(step, chain=chain, outcome=rec.outcome(ended))
        decision = decision.with_changes(chain.changes, Reason.SCALING, decision.detail)
        return replace(step, decision=decision, chain=chain)

    return await _each(steps, rec, one)


async def _run_chain(decision: Decision, configured: ConfiguredChain, clusters: Clusters) -> ChainResult:
    """The job's configured chain; a plugin that could not be loaded vetoes before any runs."""
    if configured.problems:
        return ChainResult(
            None, tuple(PluginOutcome("config", Reason.PLUGIN_FAILED, p) for p in configured.problems)
        )
    job, evaluation = decision.job, decision.evaluation
    assert evaluation is not None
    client = clusters[job.cluster].client
    options = evaluation.sample.target.options

    def context(plugin: ScalingExecutorPlugin) -> PluginContext:
        return PluginContext(job, options, evaluation, configured.config_for(plugin), client)

    return await run_chain(configured.plugins, context, decision.changes)


# ---------------------------------------------------------------------------------------------- realize
async def realize_jobs(
    steps: Sequence[JobStep],
    rec: TickRecord,
    *,
    clusters: Clusters,
    now_ms: Callable[[], int],
    interval: timedelta = timedelta(seconds=10),
) -> list[JobOutcome]:
    """Ask Flink for each approved parallelism (idempotently) and remember the rescale as pending.

    ``now_ms`` reads the clock: the lease is checked at the moment of the request, not the tick's
    start, since another daemon may act once it has lapsed. A PUT Flink refuses (4xx: a read-only
    proxy, a request Flink finds invalid) is ``RescaleRejected``: the next is asked a control
    ``interval`` later, then after a backoff doubling with each refusal in a row (``decide_jobs``),
    instead of a refused PUT every tick.
    """

    async def one(step: JobStep) -> JobStep:
        decision, options, job = step.decision, step.sample.target.options, step.job
        assert decision is not None
        cluster = clusters[job.cluster]
        if not cluster.holds_job(job.key, now_ms()):
            text = rec.lease_expired(decision)
            ended = JobOutcome(job, rec.now_ms, Reason.LEASE_EXPIRED, text, decision, step.chain)
            return replace(step, outcome=rec.outcome(ended))
        rec.rescaling(decision)
        desired = {vid: c.target for vid, c in decision.changes.items()}
        try:
            realized = await realize(cluster.client, job, desired)
        except FlinkHTTPError as err:
            if not 400 <= err.status < 500:
                raise
            refused = replace(
                decision.state, refused_rescales=decision.state.refused_rescales + 1, refused_ms=rec.now_ms
            )
            rec.save(job.key, refused)
            retry = _refused_retry_ms(refused, interval)
            text = rec.rejected(job, desired, err, refused.refused_rescales, retry, options)
            ended = JobOutcome(job, rec.now_ms, Reason.RESCALE_REJECTED, text, decision, step.chain)
            return replace(step, outcome=rec.outcome(ended))
        previous = {vid: c.current for vid, c in decision.changes.items()}
        pending = PendingRescale(job.job_id, rec.now_ms, desired, previous)
        change_map = {vid: (c.current, c.target) for vid, c in decision.changes.items()}
        metrics = record_metrics(decision.evaluation, change_map) if decision.evaluation else {}
        needed = needed_capacity(decision.evaluation, change_map) if decision.evaluation else {}
        record = ScalingRecord(
            rec.now_ms, change_map, metrics=metrics, needed_capacity=needed, job_id=job.job_id
        )
        scaled = replace(decision.state.with_scaling(record, pending), refused_rescales=0, refused_ms=None)
        rec.save(job.key, replace(scaled, history=trim_history(scaled.history, rec.now_ms, options)))
        advice = advice_for(step.sample, desired)  # TaskManager memory: advised, never applied over REST
        if advice is not None:
            kind, text = Reason.CONFIGURATION_RECOMMENDATION, advice.text()
            rec.job_event(job.key, options, kind, EventType.NORMAL, text, key="MemoryTuning")
        rec.realized(job, realized, desired)
        ended = JobOutcome(job, rec.now_ms, Reason.SCALING, decision.detail, decision, step.chain, realized)
        return replace(step, outcome=rec.outcome(ended))

    done = await _each(steps, rec, one)
    return [s.outcome for s in done if s.outcome is not None]


# ---------------------------------------------------------------------------------------------- helpers
async def _each(
    steps: Sequence[JobStep], rec: TickRecord, stage: Callable[[JobStep], Awaitable[JobStep]]
) -> list[JobStep]:
    """Run ``stage`` on every step still under way, concurrently; a job's exception ends that job."""

    async def one(step: JobStep) -> JobStep:
        if step.outcome is not None:
            return step
        job = step.job
        with structlog.contextvars.bound_contextvars(cluster=job.cluster, job=job.name):
            try:
                return await stage(step)
            except Exception as exc:  # one job's failure stays with that job
                return replace(step, outcome=rec.failed(job, step.sample.target.options, exc))

    return list(await asyncio.gather(*(one(s) for s in steps)))
