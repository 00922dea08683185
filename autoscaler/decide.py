"""The decision stage: evaluation + remembered state + options + now -> Decision (and the next state).

Pure: no I/O, no clock. The gates run in one fixed order (the policy), and every "no" carries a
``Reason``. Per vertex the evaluator's recommendation passes the scale-down delay first; then the
job-level gates decide whether anything is applied. The order follows the reference's
``ScalingExecutor`` (§1.8), after two of ours that come first:

1. a rescale still in flight (ours), 2. an evaluation that is not ready (ours),
3. memory pressure, 4. vertex.exclude.ids and the scale-down delay, 5. the utilization band,
6. advisor mode (``scaling.enabled=false``), 7. ``excluded.periods``, 8. ``quota.cpu`` / ``quota.memory``.

Advisor mode and excluded periods keep the changes in the decision, so they can be reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from autoscaler.calendar import excluded_period_at
from autoscaler.model import JobEvaluation, JobRef, VertexEvaluation, VertexId, frozen_map
from autoscaler.reasons import Reason
from autoscaler.resources import quota_exceeded
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import DelayedScaleDown, JobState

__all__ = ["Decision", "VertexChange", "decide"]


@dataclass(frozen=True, slots=True)
class VertexChange:
    vertex: VertexId
    current: int
    target: int

    def __post_init__(self) -> None:
        if self.current < 1 or self.target < 1:
            raise ValueError(f"parallelism must be >= 1: {self!r}")
        if self.current == self.target:
            raise ValueError(f"a change must change the parallelism: {self!r}")

    @property
    def is_scale_up(self) -> bool:
        return self.target > self.current


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one job this tick.

    ``outcome`` is ``Reason.SCALING`` when ``changes`` are to be applied; any other reason means
    nothing is applied (``changes`` still hold what advisor mode, an excluded period or a quota
    blocked, so it can be reported).
    """

    job: JobRef
    outcome: Reason
    detail: str
    changes: Mapping[VertexId, VertexChange]
    state: JobState
    evaluation: JobEvaluation | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", frozen_map(self.changes))

    @property
    def applies(self) -> bool:
        return self.outcome is Reason.SCALING and bool(self.changes)

    def with_changes(
        self, changes: Mapping[VertexId, VertexChange], outcome: Reason, detail: str
    ) -> Decision:
        return replace(self, changes=changes, outcome=outcome, detail=detail)


def decide(evaluation: JobEvaluation, state: JobState, options: AutoscalerOptions, now_ms: int) -> Decision:
    """Run the gates in order; the TaskManager resources for the quota come with the evaluation's sample."""
    job = evaluation.job

    def no(reason: Reason, detail: str, new_state: JobState = state) -> Decision:
        return Decision(job, reason, detail, {}, new_state, evaluation)

    if state.pending is not None:
        return no(Reason.RESCALE_IN_FLIGHT, "waiting for the last rescale to show in /jobs/:id")
    if evaluation.not_ready is not None:
        return no(evaluation.not_ready, _not_ready_text(evaluation))

    pressure = _memory_pressure(evaluation, options)
    if pressure:
        return no(Reason.MEMORY_PRESSURE, pressure)

    changes, delayed = _vertex_changes(evaluation, state, options, now_ms)
    new_state = replace(state, delayed_scale_down=delayed)
    # Reference ScalingExecutor: only a vertex that would change counts as outside its band. A vertex
    # stuck at a limit (e.g. p=1 with far more capacity than needed) must not hold the gate open, or
    # every in-band recommendation of the other vertices would be applied on every tick.
    outside = [vid for vid in changes if evaluation.vertices[vid].outside_band]
    if not outside:
        held = [vid for vid in delayed if evaluation.vertices[vid].outside_band]
        if held:
            first = min(delayed[vid].first_trigger_ms for vid in held)
            wait_s = max(0, first + _ms(options.scale_down_interval) - now_ms) / 1000
            return no(
                Reason.SCALE_DOWN_DELAYED,
                f"scale-down held for scale-down.interval ({wait_s:.0f} s left)",
                new_state,
            )
        return no(
            Reason.IN_BAND, "all vertices that could change are within their utilization band", new_state
        )
    if not options.scaling_enabled:
        return Decision(
            job,
            Reason.ADVISOR_MODE,
            "scaling execution disabled by config (advisor mode)",
            changes,
            new_state,
            evaluation,
        )
    period = excluded_period_at(options.excluded_periods, now_ms)
    if period is not None:
        return Decision(
            job,
            Reason.EXCLUDED_PERIOD,
            f"Scaling execution disabled by config {_EXCLUDED_KEY}: now ({_utc(now_ms)}) is in the "
            f"excluded period {period.text!r}",
            changes,
            new_state,
            evaluation,
        )
    quota = quota_exceeded(
        evaluation.sample.topology,
        {vid: c.target for vid, c in changes.items()},
        evaluation.sample.taskmanagers,
        options.quota_cpu,
        options.quota_memory,
    )
    if quota:
        return Decision(job, Reason.RESOURCE_QUOTA_REACHED, quota, changes, new_state, evaluation)
    return Decision(job, Reason.SCALING, _describe(changes, evaluation), changes, new_state, evaluation)


def _vertex_changes(
    evaluation: JobEvaluation, state: JobState, options: AutoscalerOptions, now_ms: int
) -> tuple[dict[VertexId, VertexChange], dict[VertexId, DelayedScaleDown]]:
    """Apply the scale-down delay per vertex (reference: DelayedScaleDown / FLINK-36535).

    Returns the changes and the delayed scale-downs to remember; a vertex whose delay has elapsed is in
    both.
    """
    interval_ms = _ms(options.scale_down_interval)
    changes: dict[VertexId, VertexChange] = {}
    delayed: dict[VertexId, DelayedScaleDown] = {}
    for v in evaluation.vertices.values():
        if _excluded(v, options) or v.unknown or v.target_parallelism == v.parallelism:
            continue
        if v.target_parallelism > v.parallelism or interval_ms <= 0:
            changes[v.vertex] = VertexChange(v.vertex, v.parallelism, v.target_parallelism)
            continue
        previous = state.delayed_scale_down.get(v.vertex)
        pending = (previous or DelayedScaleDown(now_ms, ())).add(now_ms, v.target_parallelism, interval_ms)
        if now_ms - interval_ms < pending.first_trigger_ms:
            delayed[v.vertex] = pending
            continue
        # Kept until a scaling executes (JobState.with_scaling clears it), as in the reference: a
        # scale-down blocked by a later gate (advisor mode, excluded period, quota, a plugin's veto)
        # must not start its delay over on the next tick.
        delayed[v.vertex] = pending
        target = pending.window_max()
        if target < v.parallelism:
            changes[v.vertex] = VertexChange(v.vertex, v.parallelism, target)
    return changes, delayed


def _excluded(v: VertexEvaluation, options: AutoscalerOptions) -> bool:
    return v.vertex in options.vertex_exclude_ids


def _memory_pressure(evaluation: JobEvaluation, options: AutoscalerOptions) -> str | None:
    """GC time or heap usage above threshold blocks scaling; NaN (unmeasured) never blocks."""
    tm = evaluation.sample.taskmanagers
    gc = tm.gc_time_ms_per_s / 1000
    if not math.isnan(gc) and gc > options.memory_gc_pressure_threshold:
        return (
            f"GC pressure {gc:.2f} above memory.gc-pressure.threshold {options.memory_gc_pressure_threshold}"
        )
    heap = tm.heap_used / tm.heap_max if tm.heap_max and tm.heap_max > 0 else math.nan
    if not math.isnan(heap) and heap > options.memory_heap_usage_threshold:
        return (
            f"heap usage {heap:.2f} above memory.heap-usage.threshold {options.memory_heap_usage_threshold}"
        )
    return None


def _not_ready_text(evaluation: JobEvaluation) -> str:
    if evaluation.not_ready is Reason.STABILIZING:
        return "job recently (re)started: waiting for stabilization.interval"
    return f"metric window not full yet ({evaluation.window_samples} samples)"


def _describe(changes: Mapping[VertexId, VertexChange], evaluation: JobEvaluation) -> str:
    names = {v.id: v.name for v in evaluation.sample.topology}
    return ", ".join(f"{names.get(c.vertex, c.vertex)} {c.current}->{c.target}" for c in changes.values())


def _ms(delta: timedelta) -> int:
    return round(delta.total_seconds() * 1000)


_EXCLUDED_KEY = "job.autoscaler.excluded.periods"


def _utc(now_ms: int) -> str:
    return datetime.fromtimestamp(now_ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
