"""The slot stage of a tick: each rescale the executor plugins approved, against its cluster's free slots.

Between the plugins and realize (``autoscaler.tick.realize``), because a plugin may change the parallelism and
only what is asked of Flink takes slots. The jobs of a cluster claim its free slots one after another,
so the order is the arbitration between them: ``scaling.slot-priority``, then backlog pressure, then job
key. What fits and what is trimmed is :mod:`autoscaler.slot_fit`; this module applies
``scaling.insufficient-slots``; the record stage tells of it (event, counter, the slot gauges). A rescale that
would fit with the slots this daemon's scale-downs left idle waits for them instead of being capped:
Flink gives them back about a minute after the restart (:mod:`autoscaler.idle_slots`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import structlog

from autoscaler.model import VertexChange
from autoscaler.reasons import Reason
from autoscaler.resources import required_slots
from autoscaler.settings import InsufficientSlots
from autoscaler.slot_fit import IdleSlots, SlotBudget, backlog_seconds, fit_slots
from autoscaler.tick.decide import describe_changes
from autoscaler.tick.steps import JobOutcome, JobStep, SlotsLimited, WaitsForIdleSlots
from autoscaler.tick.texts import idle_wait_text, slots_text

__all__ = ["Claimed", "claim_slots", "slot_hungry"]

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


@dataclass(frozen=True, slots=True)
class Claimed:
    """The slot stage's result: every step (the rescales trimmed or held to what fits) and each
    cluster's ``(total, free)`` slots it claimed from (total 0: unknown), for the record stage's
    gauges."""

    steps: tuple[JobStep, ...]
    slots: Mapping[str, tuple[int, int]]


def claim_slots(
    steps: Sequence[JobStep],
    now_ms: int,
    idle: Mapping[str, Sequence[IdleSlots]] | None = None,
    fresh: Mapping[str, tuple[int, int]] | None = None,
) -> Claimed:
    """Each approved rescale against its cluster's free slots, which the rescales of a cluster claim
    one after another (``autoscaler.slot_fit``); ``scaling.insufficient-slots`` says what one that does
    not fit does.

    Jobs claim by ``scaling.slot-priority`` (higher first), then backlog pressure (more first), then
    key; one held back because those before it took the free slots says so. Unknown slots (the
    cluster's TaskManagers were not listed) hold nothing back. ``idle`` holds, by cluster, the slots
    scale-downs left idle that a rescale may wait for (``IdleSlotBook.for_claims``); without it none
    are. ``fresh`` holds the ``(total, free)`` slots of the clusters read again just now
    (``Clusters.free_slots_now``), which replace the tick's.
    """
    budgets: dict[str, SlotBudget] = {}
    readings: dict[str, tuple[int, int]] = {}  # before any claim
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
            readings[job.cluster] = (total, free)
    rescales = [s for s in steps if s.outcome is None and s.decision is not None and s.decision.applies]
    ranked = sorted((_rank(step), step) for step in rescales)
    claimed = {id(step): _claim(step, rank, budgets[step.job.cluster], now_ms) for rank, step in ranked}
    return Claimed(tuple(claimed.get(id(step), step) for step in steps), readings)


def _rank(step: JobStep) -> tuple[int, float, str]:
    """The order in which rescales claim free slots: priority, then backlog pressure, then job key."""
    assert step.decision is not None
    backlog = backlog_seconds(step.decision.evaluation)
    return -step.sample.target.options.slot_priority, -backlog, step.job.key


def _claim(step: JobStep, rank: tuple[int, float, str], budget: SlotBudget, now_ms: int) -> JobStep:
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
            return _wait_for_idle(step, WaitsForIdleSlots(fit, tuple(budget.promise(whole))), now_ms)
    names = {v.id: v.name for v in sample.topology}
    changes = {
        vid: VertexChange(vid, c.current, fit.targets[vid])
        for vid, c in decision.changes.items()
        if fit.targets[vid] != c.current
    }
    grows = any(c.target > c.current for c in changes.values())
    asked: tuple[tuple[str, int, int], ...] = ()
    if mode is InsufficientSlots.IGNORE:
        action = "ignored"
    elif mode is InsufficientSlots.CAP and changes and grows:
        action = "capped"
        asked = tuple(
            (names.get(vid, vid), c.target, targets[vid])
            for vid, c in changes.items()
            if c.target != targets[vid]
        )
    else:
        action = "waited"
    # Held back by the jobs before it, or short even alone?
    why = "claimed" if fit.needed <= fit.own + fit.free + budget.claimed else "short"
    limited = SlotsLimited(action, why, fit, asked, tuple(budget.claims))
    text = slots_text(limited)
    log.warning("rescale_slots_short", cluster=job.cluster, job=job.name, action=action, detail=text)
    step = step.noting(limited)
    if action == "waited":
        ended = JobOutcome(job, now_ms, Reason.WAITING_FOR_SLOTS, text, decision, step.chain)
        return step.ended(ended, state=decision.state)
    budget.claim(fit, who)
    if action == "ignored":
        return step
    detail = f"{describe_changes(changes, names)}; {text}"
    return replace(step, decision=decision.with_changes(changes, Reason.SCALING, detail))


def _wait_for_idle(step: JobStep, waits: WaitsForIdleSlots, now_ms: int) -> JobStep:
    """Hold the whole rescale until the idle slots it needs are back, instead of capping it now."""
    decision, job = step.decision, step.job
    assert decision is not None
    text = idle_wait_text(waits)
    log.info("rescale_waits_for_idle_slots", cluster=job.cluster, job=job.name, detail=text)
    ended = JobOutcome(job, now_ms, Reason.WAITING_FOR_SLOTS, text, decision, step.chain)
    return step.ended(ended, waits, state=decision.state)
