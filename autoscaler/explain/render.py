"""Decision records in words: the ``explain`` text for one job and the ``status`` table for all.

:func:`explain` and :func:`status_table` are pure: records (and states, events, ``now``) in, text out,
so they are tested with plain values and can render a record read from any store. The wording the
operator reads lives here, apart from how a record is built, so it can improve without touching either
the records or the daemon.

Names come from Flink (whoever submitted the job chose them) and event messages may quote an error: every
line and cell goes through ``safe_text.for_terminal``, so a newline or ESC sequence in a name shows
escaped instead of faking a row or recolouring the terminal, and a URL's secrets stay hidden. ``status``
also cuts a name beyond :data:`NAME_WIDTH` (``explain`` shows it whole).

Some 450 lines in one module because ``explain`` and ``status`` share its words (the outcomes', a
vertex's, the restart time's, the helpers that print rates and ages): split, each half would import the
other's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from autoscaler.explain.records import (
    BLOCKED,
    FORCED,
    CostRecord,
    DecisionRecord,
    ForecastRecord,
    VerifiedVertex,
    VertexRecord,
)
from autoscaler.reasons import Reason
from autoscaler.safe_text import clip, for_terminal
from autoscaler.shards import describe_lease, is_member

if TYPE_CHECKING:
    from autoscaler.state import JobState
    from autoscaler.state.events import Event
    from autoscaler.state.store import Lease

__all__ = [
    "NAME_WIDTH",
    "cost_words",
    "explain",
    "forecast_words",
    "lag_target_words",
    "outcome_words",
    "status_table",
]

NAME_WIDTH = 64
"""Characters of a job key, vertex name, cluster or daemon name a ``status`` cell shows at most, so one
long name (a Flink SQL vertex is named after its whole plan) does not pad every row to its width."""

# ---------------------------------------------------------------------------------------- explain
_OUTCOME_WORDS: dict[str, str] = {
    Reason.SCALING: "SCALED",
    Reason.IN_BAND: "not scaled: every vertex that could change is within its utilization band",
    Reason.NOT_WORTH_IT: "not scaled: the change costs more than waiting (cost.enabled)",
    Reason.METRICS_UNKNOWN: "not scaled: the rates of the vertices that matter are unknown (NaN, missing)",
    Reason.SCALE_DOWN_DELAYED: "not scaled yet: a scale-down is held for scale-down.interval",
    Reason.ADVISOR_MODE: "recommended only (advisor mode, scaling.enabled=false)",
    Reason.EXCLUDED_PERIOD: "recommended only: now is in an excluded period",
    Reason.RESOURCE_QUOTA_REACHED: "not scaled: the new parallelism would exceed the resource quota",
    Reason.COOLDOWN_DEFERRED: "deferred until the cooldown ends",
    Reason.WAITING_FOR_SLOTS: "waiting: too few free slots for the rescale (scaling.insufficient-slots)",
    Reason.RESCALE_IN_FLIGHT: "waiting: the last rescale is not running yet",
    Reason.RESCALE_STUCK: "waiting: the last rescale never ran (backoff before the next)",
    Reason.RESCALE_REJECTED: "not scaled: Flink refused the new requirements (backoff before the next)",
    Reason.STABILIZING: "waiting: the job (re)started recently",
    Reason.WINDOW_NOT_FULL: "waiting: the metric window is not full yet",
    Reason.LOAD_CHANGING: "waiting: the load may be changing (one more interval tells)",
    Reason.MEMORY_PRESSURE: "not scaled: memory pressure",
    Reason.SCALING_VETOED: "not scaled: an executor plugin vetoed it",
    Reason.PLUGIN_FAILED: "not scaled: a plugin failed",
    Reason.AUTOSCALER_ERROR: "error: the autoscaler could not handle this job",
    Reason.NOT_RUNNING: "skipped: the job is not running",
    Reason.PARTIAL_METRICS: "skipped: Flink returned only part of the metrics",
    Reason.STALE_METRICS: "skipped: Flink kept answering with one old metric fetch",
    Reason.CLUSTER_UNREACHABLE: "skipped: the cluster could not be reached",
    Reason.CLUSTER_ERROR: "skipped: the cluster answered with an error",
}


def outcome_words(outcome: str) -> str:
    """A decision's outcome (a Reason value) in words, as ``explain`` prints it."""
    return _OUTCOME_WORDS.get(outcome, outcome)


def explain(
    record: DecisionRecord,
    *,
    now_ms: int | None = None,
    events: Sequence[Event] = (),
    earlier: Sequence[DecisionRecord] = (),
) -> str:
    """The last decision for one job in plain words: outcome, gates, vertices, plugins, settings, a
    rescale's verification; then the ``earlier`` decisions (oldest first), each with its inputs."""
    age = f" ({_age(now_ms - record.ts_ms)} ago)" if now_ms is not None else ""
    lines = [
        f"Job {record.job_key} (JobID {record.job_id})",
        f"Last decision at {_utc(record.ts_ms)}{age}: "
        f"{_OUTCOME_WORDS.get(record.outcome, record.outcome)} [{record.outcome}]{_run(record)}",
    ]
    if record.detail:
        lines.append(f"Why: {record.detail}")
    if record.retry_at_ms is not None:
        lines.append(f"Decided again at {_utc(record.retry_at_ms)}.")
    elif record.cooldown_until_ms is not None and (now_ms is None or record.cooldown_until_ms > now_ms):
        lines.append(f"No rescale before {_utc(record.cooldown_until_ms)} (scaling-interval.min).")

    if record.gates:
        lines += ["", "Gates, in the order they run:"]
        width = max(len(g.gate) for g in record.gates)
        for g in record.gates:
            mark = {BLOCKED: "BLOCKED", FORCED: "forced"}.get(g.verdict, g.verdict)
            lines.append(f"  {mark:<11} {g.gate:<{width}}  {g.detail}".rstrip())
    else:
        lines += ["", "The decision stage was not reached: nothing was evaluated or decided this tick."]

    if record.vertices:
        state = "in backlog processing (utilization bounds widened to 0..1)"
        backlog = f"; the job is {state}" if record.processing_backlog else ""
        window = f", {record.window_samples} samples in the metric window" if record.window_samples else ""
        lines += ["", f"Vertices{window}{backlog}:"]
        for v in record.vertices:
            lines += _vertex_lines(v)
        if not _unknown(record.restart_time_s):
            lines.append(f"Restart time used: {_restart_words(record)}")

    if record.forecast is not None:
        lines += ["", f"Load forecast: {forecast_words(record.forecast)}"]

    if record.cost is not None:
        lines += ["", *_cost_lines(record.cost)]

    if record.above_lag_target is not None:
        lines += ["", *_lag_target_lines(record, earlier)]

    if record.verification is not None or record.scaled:
        lines += ["", *_verification_lines(record, "")]

    if record.plugins:
        lines += ["", "Executor plugins, in the order they ran:"]
        for p in record.plugins:
            lines.append(f"  {p.plugin}: {_plugin_words(p.outcome)}" + (f" ({p.detail})" if p.detail else ""))

    if record.options:
        lines += ["", "Settings in effect:"]
        lines += [f"  job.autoscaler.{k} = {v}" for k, v in record.options]

    if events:
        lines += ["", "Recent events:"]
        for e in list(events)[-5:]:
            count = f" (x{e.count}, first {_utc(e.ts_ms)})" if e.count > 1 else ""
            lines.append(f"  {_utc(e.last_seen_ms)} {e.type} {e.reason}{count}: {_clip(e.message, 160)}")

    if earlier:
        lines += ["", "Earlier decisions, newest first:"]
        newer, rescaled_since = record, record.scaled
        for r in reversed(earlier):
            lines += _earlier_lines(r, newer, rescaled_since)
            newer, rescaled_since = r, rescaled_since or r.scaled
    return "\n".join(for_terminal(line) for line in lines)


def _run(record: DecisionRecord) -> str:
    return f" (the same for {record.ticks} ticks since {_utc(record.first_ms)})" if record.ticks > 1 else ""


def _earlier_lines(r: DecisionRecord, newer: DecisionRecord, rescaled_since: bool) -> list[str]:
    """One earlier decision, compact: what it was, why, the inputs that drove it, its gates and, for a
    rescale, its verification; settings only where they differ from the next newer decision's.
    ``rescaled_since``: a later rescale came, so an unverified one here will never be verified."""
    lines = [f"  {_utc(r.ts_ms)}  {_OUTCOME_WORDS.get(r.outcome, r.outcome)} [{r.outcome}]{_run(r)}"]
    if r.detail:
        lines.append(f"    why: {_clip(r.detail, 200)}")
    if r.vertices:
        backlog = {True: "yes", False: "no", None: "unknown"}[r.processing_backlog]
        window = f", {r.window_samples} samples in the window" if r.window_samples else ""
        restart = f", restart time {_restart_short(r)}" if not _unknown(r.restart_time_s) else ""
        lines.append(f"    backlog processing: {backlog}{window}{restart}")
        lines += [f"    {_vertex_inputs(v)}" for v in r.vertices]
    if r.gates:
        lines.append(f"    gates: {_gates_summary(r)}")
    if r.cost is not None:
        lines.append(f"    costs: {cost_words(r.cost)}")
    if r.above_lag_target is not None:
        lines.append(f"    lag target: {lag_target_words(r)}")
    if r.plugins:
        lines.append("    plugins: " + ", ".join(f"{p.plugin} {_plugin_words(p.outcome)}" for p in r.plugins))
    now = dict(newer.options)
    changed = [f"{k} = {v} (later {now[k]})" for k, v in r.options if k in now and now[k] != v]
    if changed:
        lines.append("    settings then: " + "; ".join(changed))
    if r.scaled or r.verification is not None:
        lines += _verification_lines(r, "    ", superseded=rescaled_since)
    return lines


def _restart_words(r: DecisionRecord) -> str:
    """The restart time the capacities were computed with (the catch-up term after a rescale), and where
    it came from: restart.time, or the longest restart measured for the job (restart.time-tracking)."""
    longest = r.restart_longest_ms
    restarts = f"{r.restarts_measured} restart{'s' if r.restarts_measured != 1 else ''}"
    if r.restart_time_measured and longest is not None:
        capped = ", cut to restart.time-tracking.limit" if r.restart_time_capped else ""
        return (
            f"{r.restart_time_s:.0f} s, measured: the longest of the {restarts} measured for this job, "
            f"{longest / 1000:.1f} s "
            f"(restart.time-tracking.enabled; whole seconds{capped})"
        )
    tracking = dict(r.options).get("restart.time-tracking.enabled")
    if tracking == "true":
        why = "no restart of this job measured yet (restart.time-tracking.enabled)"
    else:
        why = "restart.time-tracking.enabled is false"
        if longest is not None:
            why += f"; the longest of the {restarts} measured was {longest / 1000:.1f} s, not used"
    return f"{r.restart_time_s:.0f} s, configured (restart.time; {why})"


def forecast_words(f: ForecastRecord) -> str:
    """The job's load forecast (forecast.enabled) in a line: the expected peak and when, or why none."""
    horizon = "unknown" if _unknown(f.horizon_s) else _age(round(f.horizon_s * 1000))
    if f.none:
        return f"none ({f.none}: {f.detail}); the decision reacts to the load it measures"
    confidence = "unknown" if _unknown(f.confidence) else f"{f.confidence:.2f}"
    when = "now" if _unknown(f.peak_in_s) or not f.peak_in_s else f"in {_age(round(f.peak_in_s * 1000))}"
    return (
        f"peak {_rate(f.peak_rate)} expected {when}, up from {_rate(f.level_rate)} "
        f"({f.basis}, confidence {confidence}, horizon {horizon}); with cost.enabled the decision "
        "weighs its changes at that peak"
    )


def _cost_lines(c: CostRecord) -> list[str]:
    """Both costs a change was weighed by (cost.enabled), each with what it is made of."""
    verdict = (
        "changing cost less: the change was made" if c.worth_it else "waiting cost less: held (NotWorthIt)"
    )
    horizon = _age(round(c.horizon_s * 1000))
    change = _cost_parts(c.change_slot_seconds, c.change_restarts, c.change_lag_s)
    wait = _cost_parts(c.wait_slot_seconds, c.wait_restarts, c.wait_lag_s)
    return [
        f"Costs weighed (cost.enabled), over {horizon} at {_rate(c.rate)} offered: {verdict}",
        f"  changing now: {_slot_s(c.change_total)} = {change} "
        f"({c.slots_then} slots, capacity {_rate(c.capacity_then)} after the restart)",
        f"  waiting:      {_slot_s(c.wait_total)} = {wait} "
        f"({c.slots_now} slots, capacity {_rate(c.capacity_now)})",
    ]


def cost_words(c: CostRecord) -> str:
    """Both costs in a line: ``explain``'s earlier decisions and the ``--html`` table."""
    return (
        f"changing now {_slot_s(c.change_total)}, waiting {_slot_s(c.wait_total)} "
        f"over {_age(round(c.horizon_s * 1000))} at {_rate(c.rate)} "
        f"({'changed' if c.worth_it else 'held'}; slot-s held / restarts / s above the lag target: "
        f"{c.change_slot_seconds:,.0f} / {c.change_restarts} / {c.change_lag_s:,.0f} against "
        f"{c.wait_slot_seconds:,.0f} / {c.wait_restarts} / {c.wait_lag_s:,.0f})"
    )


def _slot_s(value: float) -> str:
    return f"{value:,.0f} slot-s"


def _cost_parts(slot_seconds: float, restarts: int, lag_s: float) -> str:
    return (
        f"{slot_seconds:,.0f} slot-s held + {restarts} restart{'s' if restarts != 1 else ''} "
        f"+ {lag_s:,.0f} s above the lag target"
    )


def _lag_target_lines(record: DecisionRecord, earlier: Sequence[DecisionRecord]) -> list[str]:
    """The seconds the job spent above its lag target, over this decision's run and the kept ones."""
    kept = [r for r in (*earlier, record) if r.lag_above_target_s is not None]
    total = math.fsum(r.lag_above_target_s or 0.0 for r in kept)
    since = min(r.first_ms for r in kept)
    target = dict(record.options).get("lag.target")
    bound = f"lag.target {target}" if target else "lag.target unset: the catch-up bound, catch-up.duration"
    return [
        f"Lag target ({bound}): {lag_target_words(record)}; {total:,.0f} s above it over the "
        f"{len(kept)} decision{'s' if len(kept) != 1 else ''} kept since {_utc(since)}",
        "  (judged at each tick from the sources' lag, their offered rate and the job's capacity, as the "
        "cost model judges a second; each tick found above counts the time since the job's previous one)",
    ]


def lag_target_words(r: DecisionRecord) -> str:
    """Whether the job was above its lag target at the record's tick, and the seconds over its run."""
    now = "above it at the decision" if r.above_lag_target else "within it at the decision"
    return f"{now}, {r.lag_above_target_s or 0.0:,.0f} s above it over this decision's run"


def _restart_short(r: DecisionRecord) -> str:
    """The record's restart time and its source, short (``7 s (measured)``, ``300 s (configured)``)."""
    source = "measured" if r.restart_time_measured else "configured"
    return f"{r.restart_time_s:.0f} s ({source})"


def _vertex_inputs(v: VertexRecord) -> str:
    change = f"{v.parallelism} -> {v.decided}" if v.decided is not None else f"{v.parallelism}"
    load = _percent(v.load)
    return (
        f"{v.name}: p {change} (recommended {v.recommended}), load {load}, capacity "
        f"{_rate(v.true_processing_rate)}, must process {_rate(v.target_data_rate)} "
        f"(+ {_rate(v.catch_up_data_rate)} to catch up), {_thresholds(v)}, lag {_count(v.lag)}"
    )


def _gates_summary(r: DecisionRecord) -> str:
    blocked = r.blocked_by
    forced = [g.gate for g in r.gates if g.verdict == FORCED]
    text = f"BLOCKED at {blocked.gate}" if blocked is not None else "all passed"
    return text + (f" ({', '.join(forced)} forced)" if forced else "")


def _verification_lines(r: DecisionRecord, indent: str, *, superseded: bool = False) -> list[str]:
    """A rescale's verification, or why it has none; on the tick that made it, which rescale it judged."""
    v = r.verification
    if v is None and superseded:
        return [f"{indent}Verification: none (the job was rescaled again before it could be measured)"]
    if v is None:
        return [f"{indent}Verification: none yet (made once the metric window is full after the restart)"]
    head = (
        f"Verification at {_utc(v.ts_ms)}, over a full metric window"
        if v.rescale_ts_ms == r.ts_ms
        else f"This tick verified the rescale at {_utc(v.rescale_ts_ms)} over a full metric window"
    )
    verdict = (
        "the expected capacity was delivered"
        if v.as_expected
        else f"LESS capacity than expected (below {v.threshold:.0%})"
    )
    lines = [f"{indent}{head}: {verdict}"]
    lines += [f"{indent}  {_verified_vertex(x)}" for x in v.vertices]
    return lines


def _verified_vertex(x: VerifiedVertex) -> str:
    capped = f" (Flink runs it at {x.parallelism})" if x.parallelism != x.decided else ""
    head = f"{x.name}: parallelism {x.before} -> {x.decided}{capped}:"
    if _unknown(x.measured) or _unknown(x.ratio):
        return f"{head} capacity not measured (idle or unknown), {_rate(x.expected)} expected"
    return f"{head} {_rate(x.measured)} at full load of {_rate(x.expected)} expected ({x.ratio:.0%})"


def _vertex_lines(v: VertexRecord) -> list[str]:
    change = (
        f"parallelism {v.parallelism} -> {v.decided}"
        if v.decided is not None
        else f"parallelism {v.parallelism}, recommended {v.recommended}"
    )
    named = v.name if v.name == v.vertex else f"{v.name} ({v.vertex})"
    head = f"  {named}: {change} (max {v.max_parallelism}): {_vertex_verdict(v)}"
    load = _percent(v.load)
    body = [
        f"    load {load}; it can process {_rate(v.true_processing_rate)} at full load and must "
        f"process {_rate(v.target_data_rate)} (+ {_rate(v.catch_up_data_rate)} to catch up)",
        f"    {_thresholds(v)}; lag {_count(v.lag)}",
    ]
    if v.recommended != v.parallelism:
        body.append(
            f"    at parallelism {v.recommended} it should process {_rate(v.expected_processing_rate)}"
        )
    if v.ineffective_scale_up:
        gain = (
            f": it raised the rate by {_rate(v.actual_increase)} of the {_rate(v.expected_increase)} expected"
            if v.expected_increase is not None or v.actual_increase is not None
            else " (did not raise its rate enough)"
        )
        body.append(f"    the last scale-up of this vertex was ineffective{gain}")
    if not _unknown(v.busy_skew) and v.busy_skew >= 1.05:
        body.append(f"    busy-time skew {v.busy_skew:.2f} (busiest subtask over the average; 1 is even)")
    if v.slow_subtasks:
        body.append(f"    {v.slow_subtasks}")
    return [head, *body]


def _thresholds(v: VertexRecord) -> str:
    if v.scale_up_threshold is None and v.scale_down_threshold is None:
        return "scale-up and scale-down thresholds unknown"
    return f"scale-up below {_rate(v.scale_up_threshold)}, scale-down above {_rate(v.scale_down_threshold)}"


def _vertex_verdict(v: VertexRecord) -> str:
    """Why the vertex is where it is, from its capacity against the two thresholds."""
    if v.excluded:
        return "excluded (vertex.exclude.ids), never changed"
    tpr, up, down = v.true_processing_rate, v.scale_up_threshold, v.scale_down_threshold
    if tpr is None or v.target_data_rate is None:
        return "metrics unknown, not judged"
    if up is not None and tpr < up:
        return f"too slow (capacity {_rate(tpr)} is below the scale-up threshold)"
    if down is not None and tpr > down:
        return f"more capacity than needed ({_rate(tpr)} is above the scale-down threshold)"
    if v.outside_band:
        return "outside its utilization band"
    if v.recommended != v.parallelism:
        return f"within its band (the recommended {v.recommended} moves only with a vertex outside it)"
    return "within its utilization band"


def _plugin_words(outcome: str) -> str:
    return {
        Reason.SCALING_APPROVED: "approved",
        Reason.SCALING_MODIFIED: "approved with changes",
        Reason.SCALING_VETOED: "VETOED",
        Reason.PLUGIN_FAILED: "FAILED (counts as a veto)",
    }.get(outcome, outcome)


# ---------------------------------------------------------------------------------------- status
# Outcomes of a job the daemon could not read from its cluster this tick: its last real decision is
# older, so the row says since when the reads fail (the run of such ticks, ``DecisionRecord.first_ms``).
_NOT_READ = frozenset({Reason.CLUSTER_UNREACHABLE, Reason.CLUSTER_ERROR})


def status_table(
    records: Mapping[str, DecisionRecord],
    states: Mapping[str, JobState],
    now_ms: int,
    last_events: Mapping[str, Event] | None = None,
    leases: Sequence[Lease] = (),
) -> str:
    """One row per job (outcome, cooldown left, last event), then one per vertex (parallelism,
    recommendation, load, lag). Jobs with a state but no decision yet are listed too; a job its cluster
    could not be read for says since when. Then which daemon acts on each cluster, or on each of its
    shards, and which daemons share a sharded one (the leases in the state database; a membership
    that ran out is left out: its daemon is gone)."""
    last_events = last_events or {}
    header = ("JOB / VERTEX", "P", "REC", "LOAD", "LAG", "COOLDOWN", "LAST DECISION", "LAST EVENT")
    rows: list[tuple[str, ...]] = []
    for key in sorted(set(records) | set(states)):
        record, state = records.get(key), states.get(key)
        event = last_events.get(key)
        event_text = f"{event.reason}: {_clip(event.message, 50)}" if event is not None else "-"
        if record is None:
            rows.append((key, "", "", "", "", "-", "none yet", event_text))
            continue
        decision = f"{record.outcome} ({_age(now_ms - record.ts_ms)} ago)"
        if record.outcome in _NOT_READ:
            ticks = f", {record.ticks} ticks" if record.ticks > 1 else ""
            decision += f", not read since {_utc(record.first_ms)} ({_age(now_ms - record.first_ms)}{ticks})"
        if state is not None and state.pending is not None:
            decision += ", rescale pending"
        rows.append((key, "", "", "", "", _cooldown(record, now_ms), decision, event_text))
        for v in record.vertices:
            rec = str(v.decided if v.decided is not None else v.recommended)
            load = "-" if _unknown(v.load) else f"{v.load:.2f}"
            note = _vertex_note(record, v)
            rows.append((f"  {v.name}", str(v.parallelism), rec, load, _count(v.lag, unit=""), "", note, ""))
    table = (
        _columns(header, rows, clipped=(0,)) if rows else "no jobs recorded yet (has the daemon run a tick?)"
    )
    if not leases:
        return table
    lease_rows = [
        (
            describe_lease(lease.name),
            lease.owner,
            f"{_age(lease.expires_ms - now_ms)} left"
            if lease.expires_ms > now_ms
            else "expired: no daemon acts on it",
        )
        for lease in leases
        if lease.expires_ms > now_ms or not is_member(lease.name)
    ]
    return table + "\n\n" + _columns(("CLUSTER", "ACTED ON BY", "LEASE"), lease_rows, clipped=(0, 1))


# Why a vertex's REC differs from its P although nothing is sent, in a few words for its status row: a REC
# above P alone reads as a scale-up on its way. By the job's outcome; others say their reason code.
_NO_ACTION_WORDS: dict[str, str] = {
    Reason.IN_BAND: "no vertex outside its utilization band",
    Reason.NOT_WORTH_IT: "costs more than waiting",
    Reason.SCALE_DOWN_DELAYED: "scale-down held for scale-down.interval",
    Reason.COOLDOWN_DEFERRED: "deferred: cooldown",
    Reason.ADVISOR_MODE: "recommended only: advisor mode",
    Reason.EXCLUDED_PERIOD: "recommended only: excluded period",
    Reason.RESOURCE_QUOTA_REACHED: "over the resource quota",
    Reason.WAITING_FOR_SLOTS: "too few free slots",
    Reason.RESCALE_IN_FLIGHT: "the last rescale is not running yet",
    Reason.RESCALE_STUCK: "backoff after a rescale that never ran",
    Reason.RESCALE_REJECTED: "backoff after Flink refused a rescale",
    Reason.MEMORY_PRESSURE: "memory pressure",
    Reason.METRICS_UNKNOWN: "rates unknown",
    Reason.SCALING_VETOED: "vetoed by an executor plugin",
    Reason.PLUGIN_FAILED: "a plugin failed",
    Reason.STABILIZING: "the job (re)started recently",
    Reason.WINDOW_NOT_FULL: "metric window not full",
    Reason.LOAD_CHANGING: "the load may be changing",
}


def _vertex_note(record: DecisionRecord, v: VertexRecord) -> str:
    """A vertex row's LAST DECISION cell: empty when REC is what runs or what was just sent; otherwise
    why no rescale to REC is under way (the job's outcome, in words)."""
    rec = v.decided if v.decided is not None else v.recommended
    if rec == v.parallelism or record.scaled:
        return ""
    if v.excluded:
        return "no action: excluded (vertex.exclude.ids)"
    if record.outcome == Reason.SCALING:  # others changed; this one's recommendation was not part of it
        return "no action: not part of the rescale"
    return f"no action: {_NO_ACTION_WORDS.get(record.outcome, record.outcome)}"


def _columns(header: Sequence[str], rows: Sequence[Sequence[str]], clipped: Sequence[int] = ()) -> str:
    """Aligned columns of cells made safe to print; the ``clipped`` columns cut at :data:`NAME_WIDTH`."""
    rows = [
        [clip(text, NAME_WIDTH) if i in clipped else text for i, text in enumerate(map(for_terminal, row))]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    )


def _cooldown(record: DecisionRecord, now_ms: int) -> str:
    until = record.cooldown_until_ms if record.cooldown_until_ms is not None else record.retry_at_ms
    return _age(until - now_ms) if until is not None and until > now_ms else "-"


# ---------------------------------------------------------------------------------------- words
def _unknown(value: float | None) -> bool:
    """None, or NaN: a record read back from elsewhere than the build stage may still carry one, and a
    user must read words, not ``nan``."""
    return value is None or math.isnan(value)


def _percent(value: float | None) -> str:
    return "unknown" if _unknown(value) else f"{value:.0%}"


def _rate(value: float | None) -> str:
    if _unknown(value):
        return "unknown"
    if math.isinf(value):
        return "no limit"
    return f"{value:,.0f} rec/s" if abs(value) >= 10 else f"{value:,.2f} rec/s"


def _count(value: float | None, unit: str = " records") -> str:
    if _unknown(value):
        return "-" if not unit else "unknown"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}{unit}"
    return f"{value:.0f}{unit}"


def _age(ms: int) -> str:
    s = max(0, ms) // 1000
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
