"""The slot stage of a tick: each rescale the executor plugins approved, against its cluster's free slots.

Between the plugins and realize (``autoscaler.tick.realize``), because a plugin may change the parallelism and
only what is asked of Flink takes slots. The jobs of a cluster claim its free slots one after another,
so the order is the arbitration between them: ``scaling.slot-priority``, then backlog pressure, then job
key. What fits and what is trimmed is :mod:`autoscaler.slot_fit`; this module applies
``scaling.insufficient-slots`` and reports (event, counter, log line, the slot gauges). A rescale that
would fit with the slots this daemon's scale-downs left idle waits for them instead of being capped:
Flink gives them back about a minute after the restart (:mod:`autoscaler.idle_slots`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import structlog

from autoscaler.durations import utc_text
from autoscaler.model import VertexChange
from autoscaler.reasons import Reason
from autoscaler.resources import required_slots
from autoscaler.settings import InsufficientSlots
from autoscaler.slot_fit import CAPPED_TEXT, IdleSlots, SlotBudget, SlotFit, backlog_seconds, fit_slots
from autoscaler.state.events import EventType
from autoscaler.tick.decide import describe_changes
from autoscaler.tick.record import TickRecord
from autoscaler.tick.steps import JobOutcome, JobStep

__all__ = ["claim_slots"]

log = structlog.get_logger(__name__)


def slot_hungry(steps: Sequence[JobStep]) -> set[str]:
    """The clusters with a rescale to claim that needs more slots than its job holds: the ones whose
    free slots are worth reading again right before the claims (``Clusters.free_slots_now``)."""
    return {
        step.job.cluster
        for step in steps
        if step.outcome is None
        and step.decision is not None
        and step.decision.applies
        and required_slots(step.sample.topology, {vid: c.target for vid, c in step.decision.changes.items()})
        > required_slots(step.sample.topology)
    }


def claim_slots(
    steps: Sequence[JobStep],
    rec: TickRecord,
    idle: Mapping[str, Sequence[IdleSlots]] | None = None,
    fresh: Mapping[str, tuple[int, int]] | None = None,
) -> list[JobStep]:
    """Each approved rescale against its cluster's free slots, which the rescales of a cluster claim
    one after another (``autoscaler.slot_fit``); ``scaling.insufficient-slots`` says what one that does
    not fit does. Also reports every sampled job's slots and its cluster's, as gauges.

    Jobs claim by ``scaling.slot-priority`` (higher first), then backlog pressure (more first), then
    key; one held back because those before it took the free slots says so. Unknown slots (the
    cluster's TaskManagers were not listed) hold nothing back. ``idle`` holds, by cluster, the slots
    scale-downs left idle that a rescale may wait for (``IdleSlotBook.for_claims``); without it none
    are. ``fresh`` holds the ``(total, free)`` slots of the clusters read again just now
    (``Clusters.free_slots_now``), which replace the tick's.
    """
    budgets: dict[str, SlotBudget] = {}
    for step in steps:
        tm, job = step.sample.taskmanagers, step.job
        if job.cluster not in budgets:
            total, free = (fresh or {}).get(job.cluster, (tm.slots_total, tm.slots_free))
            if (total, free) != (tm.slots_total, tm.slots_free):
                log.info(
                    "free_slots_moved",
                    cluster=job.cluster,
                    tick=f"{tm.slots_free} of {tm.slots_total}",
                    now=f"{free} of {total}",
                    detail="the free slots changed since the tick began: claiming from the new reading",
                )
            budgets[job.cluster] = SlotBudget(total, free, idle=list((idle or {}).get(job.cluster, ())))
            known = total > 0  # unknown (no TaskManager listing): NaN, not the last figure
            rec.metrics.cluster_slots.labels(job.cluster, "total").set(total if known else math.nan)
            rec.metrics.cluster_slots.labels(job.cluster, "free").set(free if known else math.nan)
        rec.metrics.job_slots.labels(job.cluster, job.name).set(required_slots(step.sample.topology))
    rescales = [s for s in steps if s.outcome is None and s.decision is not None and s.decision.applies]
    ranked = sorted((_rank(step), step) for step in rescales)
    claimed = {id(step): _claim(step, rank, budgets[step.job.cluster], rec) for rank, step in ranked}
    return [claimed.get(id(step), step) for step in steps]


def _rank(step: JobStep) -> tuple[int, float, str]:
    """The order in which rescales claim free slots: priority, then backlog pressure, then job key."""
    assert step.decision is not None
    backlog = backlog_seconds(step.decision.evaluation)
    return -step.sample.target.options.slot_priority, -backlog, step.job.key


def _claim(step: JobStep, rank: tuple[int, float, str], budget: SlotBudget, rec: TickRecord) -> JobStep:
    decision, sample, job = step.decision, step.sample, step.job
    assert decision is not None
    if not budget.known:
        return step
    targets = {vid: c.target for vid, c in decision.changes.items()}
    fit = fit_slots(sample.topology, targets, budget.free, sample.num_source_partitions)
    who = f"{job.key} (priority {-rank[0]}, backlog {-rank[1]:.0f} s)"
    if fit.fits:
        budget.claim(fit, who)
        return step
    mode = sample.target.options.insufficient_slots
    if mode is not InsufficientSlots.IGNORE and sample.target.options.wait_for_idle_slots and budget.coming:
        whole = fit_slots(sample.topology, targets, budget.free + budget.coming, sample.num_source_partitions)
        if whole.fits:
            return _wait_for_idle(step, fit, budget.promise(whole), rec)
    names = {v.id: v.name for v in sample.topology}
    changes = {
        vid: VertexChange(vid, c.current, fit.targets[vid])
        for vid, c in decision.changes.items()
        if fit.targets[vid] != c.current
    }
    grows = any(c.target > c.current for c in changes.values())
    if mode is InsufficientSlots.IGNORE:
        action, text = "ignored", f"{fit.numbers}: asking for all of it (scaling.insufficient-slots IGNORE)"
    elif mode is InsufficientSlots.CAP and changes and grows:
        asked = ", ".join(
            f"{names.get(vid, vid)} {c.target} (wanted {targets[vid]})"
            for vid, c in changes.items()
            if c.target != targets[vid]
        )
        action, text = "capped", f"{fit.numbers}: {CAPPED_TEXT}, {asked}"
    else:
        action, text = "waited", f"{fit.numbers}: not rescaling until it fits"
    # Held back by the jobs before it, or short even alone?
    why = "claimed" if fit.needed <= fit.own + fit.free + budget.claimed else "short"
    if budget.claims:
        text += f"; before it this tick (scaling.slot-priority, then backlog): {', '.join(budget.claims)}"
    options = sample.target.options
    rec.metrics.slot_limited.labels(job.cluster, job.name, action, why).inc()
    log.warning("rescale_slots_short", cluster=job.cluster, job=job.name, action=action, detail=text)
    rec.job_event(job.key, options, Reason.SCALING_LIMITED, EventType.WARNING, text, key="slots")
    if action == "waited":
        rec.save(job.key, decision.state)
        ended = JobOutcome(job, rec.now_ms, Reason.WAITING_FOR_SLOTS, text, decision, step.chain)
        return replace(step, outcome=rec.outcome(ended))
    budget.claim(fit, who)
    if action == "ignored":
        return step
    detail = f"{describe_changes(changes, names)}; {text}"
    return replace(step, decision=decision.with_changes(changes, Reason.SCALING, detail))


def _wait_for_idle(step: JobStep, fit: SlotFit, idle: Sequence[IdleSlots], rec: TickRecord) -> JobStep:
    """Hold the whole rescale until the idle slots it needs are back, instead of capping it now."""
    decision, job = step.decision, step.job
    assert decision is not None
    until = max(i.until_ms for i in idle)
    whose = ", ".join(f"{i.job} ({i.slots})" for i in idle)
    text = (
        f"{fit.numbers}: slots that smaller runs left idle come free by {utc_text(until)} ({whose}; "
        "Flink keeps them for slot.idle.timeout after the restart): waiting for them instead of "
        "restarting now onto fewer and again later"
    )
    options = step.sample.target.options
    rec.metrics.slot_limited.labels(job.cluster, job.name, "waited", "idle").inc()
    log.info("rescale_waits_for_idle_slots", cluster=job.cluster, job=job.name, detail=text)
    rec.job_event(job.key, options, Reason.SCALING_LIMITED, EventType.NORMAL, text, key="slots")
    rec.save(job.key, decision.state)
    ended = JobOutcome(job, rec.now_ms, Reason.WAITING_FOR_SLOTS, text, decision, step.chain)
    return replace(step, outcome=rec.outcome(ended))
