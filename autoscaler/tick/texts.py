"""Every text the tick tells the operator, built from plain values: the reference's ScalingReport
(and the key that deduplicates it), IneffectiveScaling, ScalingLimited and Scaling, and ours (ScalingVerified,
JobResubmitted, the backoffs, vetoes, slots, confirmations).

Each text is written here only: a stage that needs one for a decision's or an outcome's detail calls
the same function the record stage calls for the event, so a text can be tested from a notice, a
decision or a scaling record alone.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import timedelta

from autoscaler.durations import utc_text
from autoscaler.evaluate.javamath import java_double_text, java_fixed
from autoscaler.evaluate.scaler import expected_processing_rate
from autoscaler.model import VertexEvaluation, VertexId
from autoscaler.plugins.chain import ChainResult, PluginOutcome
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.slot_fit import CAPPED_TEXT, below_text
from autoscaler.state import JobState, ScalingRecord
from autoscaler.tick.steps import (
    Confirmed,
    Decision,
    RealizeResult,
    Rejected,
    SlotsLimited,
    WaitsForIdleSlots,
)

__all__ = [
    "LEASE_EXPIRED_TEXT",
    "changes_key",
    "confirmed_text",
    "idle_wait_text",
    "ineffective_text",
    "limited_text",
    "plugin_text",
    "refused_hold_text",
    "rejected_text",
    "report_text",
    "requirements_text",
    "resubmission_text",
    "slots_text",
    "stuck_hold_text",
    "stuck_text",
    "verification_text",
    "vetoed_text",
]


def report_text(decision: Decision, *, enabled: bool) -> str:
    """The reference's ScalingReport text: its header, then one ``{ Vertex ID … }`` block per change.

    The expected capacity is the one of the parallelism the block states (TPR / current * target), not
    the evaluator's: the scale-down delay applies the window's highest recommendation and a plugin may
    modify a target, so the recommended parallelism's capacity would describe another change.
    """
    header = "Scaling execution enabled, begin scaling vertices:" if enabled else _disabled_header(decision)
    ev = decision.evaluation
    lines = []
    for vid, c in decision.changes.items():
        v = ev.vertices.get(vid) if ev else None
        tpr = v.true_processing_rate if v else float("nan")
        exp = expected_processing_rate(tpr, c.current, c.target)
        tdr = v.target_data_rate if v else float("nan")
        lines.append(
            f"{{ Vertex ID {vid} | Parallelism {c.current} -> {c.target} | "
            f"Processing capacity {java_fixed(tpr)} -> {java_fixed(exp)} | "
            f"Target data rate {java_fixed(tdr)}}}"
        )
    return header + "".join(lines)


def _disabled_header(decision: Decision) -> str:
    """The reference's header of a report that is not executed: which key disabled it, and its value
    (``ScalingExecutor#checkIfBlockedAndTriggerScalingEvent``; a list prints as Java's ``[a, b]``)."""
    options = decision.evaluation.sample.target.options if decision.evaluation else AutoscalerOptions()
    if decision.outcome is Reason.EXCLUDED_PERIOD:
        key = options.canonical_key("excluded_periods")
        value = "[" + ", ".join(options.excluded_periods) + "]"
    else:
        key, value = options.canonical_key("scaling_enabled"), "false"
    return f"Scaling execution disabled by config {key}:{value}, recommended parallelism change:"


def changes_key(decision: Decision) -> str:
    """A short, stable digest of a decision's changes: the same recommendation dedups to one event."""
    text = ";".join(f"{vid}:{c.current}->{c.target}" for vid, c in sorted(decision.changes.items()))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def verification_text(record: ScalingRecord, names: Mapping[VertexId, str], samples: int = 0) -> str:
    """The ScalingVerified event: per rescaled vertex the capacity measured over the first full window
    after the rescale against the one expected, and what a shortfall means for the operator; with the
    number of ``samples`` in that window when known (> 0), so a verdict from a thin window shows."""
    verification = record.verification
    assert verification is not None, "only a verified record has a verification text"
    parts = []
    for vid, v in verification.vertices.items():
        before, decided = record.changes.get(vid, (0, v.parallelism))
        got = f" (Flink runs it at {v.parallelism})" if v.parallelism != decided else ""
        head = f"{names.get(vid, vid)} {before} -> {decided}{got}: "
        if math.isnan(v.ratio):
            parts.append(f"{head}capacity not measured (idle or unknown), {_expected(v.expected)}")
        else:
            parts.append(
                f"{head}{v.measured:.2f} rec/s at full load, {v.ratio:.0%} of the {v.expected:.2f} expected"
            )
    when = utc_text(record.ts_ms)
    window = f" ({samples} samples)" if samples > 0 else ""
    if verification.as_expected:
        return (
            f"Rescale of {when} verified over a full metric window{window}: {'; '.join(parts)} "
            f"(threshold {verification.threshold:.0%})"
        )
    return (
        f"Rescale of {when} delivered less processing capacity than expected over a full metric "
        f"window{window}: {'; '.join(parts)}. "
        f"Below {verification.threshold:.0%} of the expected capacity the vertex does not scale linearly "
        "(data skew, an external system or a shared resource limits it): the next decisions start from "
        "the measured rate"
    )


def _expected(rate: float) -> str:
    """The capacity a rescale was expected to give, or words when the decision had none to expect."""
    return "no expected capacity known" if math.isnan(rate) else f"{rate:.2f} rec/s expected"


def ineffective_text(vid: VertexId, gain: tuple[float, float], *, blocking: bool) -> str:
    """The reference's IneffectiveScaling text (``JobVertexScaler#detectIneffectiveScaleUp``): the
    (expected, actual) increases as Java doubles print them."""
    expected, actual = java_double_text(gain[0]), java_double_text(gain[1])
    return (
        f"Ineffective scaling detected for {vid} (expected increase: {expected}, actual increase "
        f"{actual}). Blocking of ineffective scaling decisions is {'enabled' if blocking else 'disabled'}"
    )


def limited_text(vid: VertexId, v: VertexEvaluation) -> str:
    """The reference's ScalingLimited text (``ParallelismAligner#SCALE_LIMITED_MESSAGE_FORMAT``) verbatim,
    its full-width comma included, so what parses the reference's events parses these."""
    units, upper, lower = v.limited_by if v.limited_by else ("?", "?", "?")
    return (
        f"Scaling limited detected for {vid} (expected parallelism: {v.limited_from}, actual "
        f"parallelism {v.target_parallelism}). Scaling limited due to numKeyGroupsOrPartitions : "
        f"{units}\uff0cupperBoundForAlignment(maxParallelism or parallelismUpperLimit): {upper}, "
        f"parallelismLowerLimit: {lower}."
    )


def resubmission_text(old_job_id: str, job_id: str, before: JobState) -> str:
    """The JobResubmitted event: which JobIDs, what the job name keeps and what of the old JobID's
    state was dropped (so an operator knows why a rescale in flight will not be confirmed)."""
    dropped = []
    if before.pending is not None:
        dropped.append(f"its unconfirmed rescale to {dict(before.pending.target)}")
    if before.stuck_rescales:
        dropped.append(f"{before.stuck_rescales} stuck rescale(s) and their backoff")
    if before.delayed_scale_down:
        dropped.append(f"the delayed scale-downs of {len(before.delayed_scale_down)} vertices")
    last = before.history[-1] if before.history and before.pending is None else None
    if last is not None and last.confirmed_ms is not None:
        # Flink held the old JobID's requirements; the new JobID runs what it was submitted with, so
        # nothing stands for it (no WaitingForSlots behind the old request, issue 36).
        targets = {vid: new for vid, (_, new) in last.changes.items()}
        dropped.append(f"its standing request {targets} (the new JobID runs what it was submitted with)")
        if last.verification is None:
            dropped.append("the verification of that rescale (the new JobID's metrics say nothing of it)")
    kept = f"kept the job name's scaling history ({len(before.history)} rescales)"
    gone = f"; dropped what belonged to the old JobID: {', '.join(dropped)}" if dropped else ""
    return f"job resubmitted: JobID {old_job_id} -> {job_id}; {kept}{gone}"


# The two backoffs: the hold a gate of ``tick/decide.py`` answers with while one runs, and the event that
# starts it (the record stage). Each text is written here only.
def stuck_hold_text(n: int, retry_ms: int, now_ms: int) -> str:
    """The ``RescaleStuck`` hold: ``n`` rescales in a row never ran, none before ``retry_ms``."""
    return (
        f"the last {n} rescale(s) were accepted by Flink but never ran (too few "
        f"free slots?): no new one before {utc_text(retry_ms)} "
        f"({(retry_ms - now_ms) / 1000:.0f} s)"
    )


def stuck_text(
    target: Mapping[VertexId, int], timeout: timedelta, n: int, retry_ms: int | None, now_ms: int
) -> str:
    """The ``RescaleStuck`` event: a rescale to ``target`` not running after ``timeout``."""
    after = _next_rescale(retry_ms, now_ms)
    return f"rescale to {dict(target)} not running after {timeout} ({n} in a row){after}"


def refused_hold_text(n: int, retry_ms: int, now_ms: int) -> str:
    """The ``RescaleRejected`` hold: Flink refused ``n`` PUTs in a row, none before ``retry_ms``."""
    return (
        f"Flink refused the last {n} rescale(s) in a row: no new one before "
        f"{(retry_ms - now_ms) / 1000:.0f} s from now"
    )


def rejected_text(rejected: Rejected, now_ms: int) -> str:
    """The ``RescaleRejected`` event and outcome: Flink refused the PUT (its HTTP status, its words)."""
    why = "; ".join(rejected.messages) or "no message"
    after = _next_rescale(rejected.retry_ms, now_ms)
    return (
        f"Flink refused the rescale to {dict(rejected.desired)} (HTTP {rejected.status}: {why}; "
        f"{rejected.in_a_row} in a row){after}"
    )


def _next_rescale(retry_ms: int | None, now_ms: int) -> str:
    return f"; the next rescale not before {(retry_ms - now_ms) / 1000:.0f} s from now" if retry_ms else ""


def vetoed_text(chain: ChainResult) -> str:
    """A vetoed job's outcome, and its ``ScalingVetoed`` event: which plugin, and its words."""
    vetoed = chain.vetoed_by
    plugin, why = (vetoed.plugin, vetoed.detail) if vetoed else ("?", "")
    return f"scaling vetoed by plugin {plugin}" + (f": {why}" if why else "")


LEASE_EXPIRED_TEXT = (
    "the job's lease (its cluster's or shard's) expired during this tick (another daemon may act): "
    "not rescaling"
)


def slots_text(limited: SlotsLimited) -> str:
    """The ``ScalingLimited`` text of a rescale that does not fit the free slots, as the job's
    decision or outcome says it too: what it needs and what the mode did, and who claimed before it."""
    numbers = limited.fit.numbers
    if limited.action == "ignored":
        text = f"{numbers}: asking for all of it (scaling.insufficient-slots IGNORE)"
    elif limited.action == "capped":
        asked = ", ".join(f"{name} {target} (wanted {wanted})" for name, target, wanted in limited.asked)
        text = f"{numbers}: {CAPPED_TEXT}, {asked}"
    else:
        text = f"{numbers}: not rescaling until it fits"
    if limited.before:
        text += f"; before it this tick (scaling.slot-priority, then backlog): {', '.join(limited.before)}"
    return text


def idle_wait_text(waits: WaitsForIdleSlots) -> str:
    """The ``ScalingLimited`` text (and outcome) of a rescale waiting for slots other jobs left idle."""
    until = max(i.until_ms for i in waits.idle)
    whose = ", ".join(f"{i.job} ({i.slots})" for i in waits.idle)
    return (
        f"{waits.fit.numbers}: slots that smaller runs left idle come free by {utc_text(until)} ({whose}; "
        "Flink keeps them for slot.idle.timeout after the restart): waiting for them instead of "
        "restarting now onto fewer and again later"
    )


def confirmed_text(confirmed: Confirmed) -> str:
    """The ``ScalingConfirmed`` text, or the ``ScalingLimited`` one of a rescale Flink ran below what
    was asked (too few free slots)."""
    result, names = confirmed.confirmation, confirmed.names
    got = ", ".join(f"{names.get(v, v)} {p}" for v, p in result.actual.items())
    if not result.capped:
        return f"rescale running: {got}"
    asked = result.asked
    below = {v: (p, asked[v]) for v, p in result.actual.items() if v in asked and p < asked[v]}
    short = below_text(below, names)
    return (
        f"Flink runs {short or got} (too few free slots): the request stands, and Flink scales "
        "the job to it as slots come"
    )


def requirements_text(realized: RealizeResult) -> str:
    """The reference's ``Scaling`` event text: the requirements Flink was asked for."""
    body = ", ".join(f"{vid}: {b.lower}..{b.upper}" for vid, b in realized.requirements.items())
    return f"In-place scaling triggered, the new requirements is {{{body}}}"


def plugin_text(outcome: PluginOutcome) -> str:
    """One executor plugin's verdict, as its event says it."""
    return f"executor plugin {outcome.plugin}: {outcome.outcome}" + (
        f" ({outcome.detail})" if outcome.detail else ""
    )
