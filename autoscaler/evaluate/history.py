"""What past scalings teach: restart time, ineffective scale-ups, observed scalability, verification.

Pure functions over ``ScalingRecord`` sequences (oldest first), reference §1.8-§1.10. The daemon keeps
the records in ``JobState.history``; the evaluator only reads them, so the rules stay testable with
plain values and never depend on how or where the history is stored. Ours: :func:`verify_scaling`
measures, once per rescale, what it delivered against the capacity the record promised (the decide
stage calls it, the record stage reports it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import ROUND_CEILING, Decimal

from autoscaler.evaluate.scaler import expected_processing_rate
from autoscaler.model import JobEvaluation, ScaleUpGain, VertexId
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import ScalingRecord, ScalingVerification, VertexVerification

__all__ = [
    "VERIFICATION_THRESHOLD",
    "RestartTime",
    "VertexScaling",
    "ineffective_scale_up",
    "is_ineffective_scale_up",
    "last_scaling",
    "needed_capacity",
    "record_metrics",
    "restart_time",
    "restart_time_s",
    "scalability_coefficient",
    "trim_history",
    "verify_last_scaling",
    "verify_scaling",
    "vertex_history",
]

_MS_PER_S = 1000
_SECOND = timedelta(seconds=1)
# A rescaled vertex delivered what was expected when its measured capacity reaches this share of the
# expected one. A rate averaged over a full window is steady to a few %, so a shortfall beyond 10 % is
# the linear model's (TPR / p * p') error, not noise: the vertex scales sub-linearly and the job may
# leave its utilization band again, which the operator should hear of before the next restart.
VERIFICATION_THRESHOLD = 0.9


@dataclass(frozen=True, slots=True)
class VertexScaling:
    """One vertex's part of a past scaling: parallelism before/after and the rates at decision time."""

    ts_ms: int
    current: int  # parallelism the TPR was measured at
    new: int
    true_processing_rate: float = math.nan
    expected_processing_rate: float = math.nan

    @property
    def scaled_up(self) -> bool:
        return self.new > self.current


# ---------------------------------------------------------------------------------------------- restart time
@dataclass(frozen=True, slots=True)
class RestartTime:
    """The restart time a decision uses, and where it comes from (``explain`` says both)."""

    seconds: float  # what the capacity formula uses, in whole seconds
    measured: bool  # from the job's measured restarts (restart.time-tracking.enabled); else restart.time
    longest_ms: int | None = None  # the longest restart measured for the job, used or not
    restarts: int = 0  # how many restarts were measured
    capped: bool = False  # the longest measured one was cut to restart.time-tracking.limit


def restart_time(history: Sequence[ScalingRecord], options: AutoscalerOptions) -> RestartTime:
    """Reference §1.9 getMaxRestartTimeOrDefault, in whole seconds as the capacity formula uses them.

    With ``restart.time-tracking.enabled`` the longest recorded restart, capped by
    ``restart.time-tracking.limit``; otherwise, or before any restart was measured, ``restart.time``.
    Whole seconds because the reference feeds ``Duration#toSeconds`` into the restart catch-up term.
    """
    configured = float(options.restart_time // _SECOND)
    measured = [r.restart_duration_ms for r in history if r.restart_duration_ms is not None]
    longest = max(measured) if measured else None
    if not options.restart_time_tracking_enabled or longest is None:
        return RestartTime(configured, False, longest, len(measured))
    limit_s = options.restart_time_tracking_limit // _SECOND
    return RestartTime(
        float(min(longest // _MS_PER_S, limit_s)),
        True,
        longest,
        len(measured),
        longest // _MS_PER_S > limit_s,
    )


def restart_time_s(history: Sequence[ScalingRecord], options: AutoscalerOptions) -> float:
    """:func:`restart_time`'s seconds: what the capacities are computed with."""
    return restart_time(history, options).seconds


# ---------------------------------------------------------------------------------------------- trimming
def trim_history(
    history: Sequence[ScalingRecord], now_ms: int, options: AutoscalerOptions
) -> tuple[ScalingRecord, ...]:
    """Reference §1.9: keep per vertex its newest ``history.max.count`` entries within ``history.max.age``.

    Per vertex, not per job, so a vertex that rarely scales keeps its observations while another vertex
    scales often. A record keeps only its retained vertices and is dropped when none is left, except the
    newest record, which always stays: its restart duration is the freshest one restart tracking has.
    """
    if not history:
        return ()
    oldest_ms = now_ms - round(options.history_max_age.total_seconds() * _MS_PER_S)
    count = options.history_max_count
    kept: dict[int, set[VertexId]] = {}
    per_vertex: dict[VertexId, int] = {}
    for index in range(len(history) - 1, -1, -1):  # newest first
        record = history[index]
        if record.ts_ms < oldest_ms:
            continue
        for vid in record.changes:
            if per_vertex.get(vid, 0) < count:
                per_vertex[vid] = per_vertex.get(vid, 0) + 1
                kept.setdefault(index, set()).add(vid)
    newest = len(history) - 1
    out: list[ScalingRecord] = []
    for index, record in enumerate(history):
        vertices = kept.get(index, set())
        if not vertices and index != newest:
            continue
        if vertices == set(record.changes):
            out.append(record)
            continue
        verification = record.verification
        if verification is not None:
            kept_vertices = {v: x for v, x in verification.vertices.items() if v in vertices}
            verification = replace(verification, vertices=kept_vertices)
        out.append(
            replace(
                record,
                changes={v: c for v, c in record.changes.items() if v in vertices},
                metrics={v: m for v, m in record.metrics.items() if v in vertices},
                needed_capacity={v: c for v, c in record.needed_capacity.items() if v in vertices},
                verification=verification,
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------------------------------- per vertex
def vertex_history(history: Sequence[ScalingRecord], vertex: VertexId) -> tuple[VertexScaling, ...]:
    """The vertex's past scalings, oldest first; rates are NaN where the record holds none."""
    out = []
    for record in history:
        change = record.changes.get(vertex)
        if change is None:
            continue
        tpr, expected = record.metrics.get(vertex, (math.nan, math.nan))
        out.append(VertexScaling(record.ts_ms, change[0], change[1], tpr, expected))
    return tuple(out)


def last_scaling(history: Sequence[ScalingRecord], vertex: VertexId) -> VertexScaling | None:
    entries = vertex_history(history, vertex)
    return entries[-1] if entries else None


def ineffective_scale_up(
    last: VertexScaling | None, *, parallelism: int, true_processing_rate: float, threshold: float
) -> ScaleUpGain | None:
    """Reference §1.8 detectIneffectiveScaleUp: did the last scale-up deliver what it promised?

    Judged only when the vertex's last scaling was a scale-up to its current parallelism: the gain
    realised (TPR now - TPR then) over the gain expected (expected rate then - TPR then) below
    ``threshold`` is ineffective, and both gains are returned (the IneffectiveScaling event states
    them); None otherwise. Unlike the reference, a rate that is unknown or infinite, or an expected
    gain that is not positive, gives no verdict (Java's NaN comparison would say "ineffective").
    """
    if last is None or not last.scaled_up or last.new != parallelism:
        return None
    expected_gain = last.expected_processing_rate - last.true_processing_rate
    actual_gain = true_processing_rate - last.true_processing_rate
    if not (math.isfinite(expected_gain) and math.isfinite(actual_gain)) or expected_gain <= 0:
        return None
    if actual_gain / expected_gain < threshold:
        return ScaleUpGain(expected_gain, actual_gain)
    return None


def is_ineffective_scale_up(
    last: VertexScaling | None, *, parallelism: int, true_processing_rate: float, threshold: float
) -> bool:
    """Whether :func:`ineffective_scale_up` finds the last scale-up ineffective."""
    gain = ineffective_scale_up(
        last, parallelism=parallelism, true_processing_rate=true_processing_rate, threshold=threshold
    )
    return gain is not None


def scalability_coefficient(entries: Sequence[VertexScaling], options: AutoscalerOptions) -> float:
    """Reference §1.10: alpha of the least-squares fit R_i = beta * alpha * P_i over past scalings.

    beta (the rate of one subtask) is TPR/P of the newest entry at parallelism 1, else of the newest
    entry with the smallest parallelism. alpha = sum(P*R) / (sum(P^2) * beta), clamped to
    [coefficient-min, 1] and rounded up to 2 decimals. Fewer than min-observations entries, or any
    rate that is unknown or infinite, assume linear scaling (1.0); the reference would fail on an
    infinite rate instead.
    """
    if len(entries) < max(1, options.observed_scalability_min_observations):
        return 1.0
    if any(not math.isfinite(e.true_processing_rate) for e in entries):
        return 1.0
    baseline_entry = None
    for entry in reversed(entries):  # newest first: ties keep the newest
        if baseline_entry is None or entry.current < baseline_entry.current:
            baseline_entry = entry
    assert baseline_entry is not None
    baseline = baseline_entry.true_processing_rate / baseline_entry.current
    weighted = math.fsum(e.current * e.true_processing_rate for e in entries)
    squares = math.fsum(e.current * e.current for e in entries)
    if baseline <= 0 or squares == 0:
        return 1.0
    alpha = min(1.0, max(options.observed_scalability_coefficient_min, weighted / (squares * baseline)))
    # Rounded up on the decimal text, like Java's BigDecimal.valueOf(...).setScale(2, CEILING):
    # math.ceil(0.07 * 100) would give 0.08.
    return float(Decimal(repr(alpha)).quantize(Decimal("0.01"), rounding=ROUND_CEILING))


# ---------------------------------------------------------------------------------------------- recording
def record_metrics(
    evaluation: JobEvaluation, changes: Mapping[VertexId, tuple[int, int]]
) -> dict[VertexId, tuple[float, float]]:
    """``ScalingRecord.metrics`` for the changes actually applied: (TPR, TPR / current * new).

    The expected rate is recomputed for the applied parallelism because the scale-down delay or a
    plugin may apply something other than the evaluator's recommendation (FLINK-39743: the expected
    rate must match the parallelism really set).
    """
    out: dict[VertexId, tuple[float, float]] = {}
    for vid, (current, new) in changes.items():
        vertex = evaluation.vertices.get(vid)
        if vertex is None or current < 1:
            continue
        tpr = vertex.true_processing_rate
        out[vid] = (tpr, expected_processing_rate(tpr, current, new))
    return out


def needed_capacity(
    evaluation: JobEvaluation, changes: Mapping[VertexId, tuple[int, int]]
) -> dict[VertexId, float]:
    """``ScalingRecord.needed_capacity``: per vertex scaled up, its scale-up threshold then (finite only)."""
    out: dict[VertexId, float] = {}
    for vid, (current, new) in changes.items():
        vertex = evaluation.vertices.get(vid)
        if vertex is not None and new > current and math.isfinite(vertex.scale_up_threshold):
            out[vid] = vertex.scale_up_threshold
    return out


# ---------------------------------------------------------------------------------------------- verification
def verify_scaling(
    record: ScalingRecord,
    measured: Mapping[VertexId, tuple[int, float]],
    *,
    now_ms: int,
    running_since_ms: int,
    metrics_window_ms: int,
    threshold: float = VERIFICATION_THRESHOLD,
) -> ScalingVerification | None:
    """What ``record``'s rescale delivered: each rescaled vertex's measured capacity against the one
    its record promised, or None while that cannot be judged yet (or ever).

    ``measured`` maps a vertex to (its parallelism now, its true processing rate over a full metric
    window); the caller passes a window that may drive a decision. Judged once the record is confirmed
    and not verified yet, and only when every sample of that window was taken after the rescale: the
    job restarted after it was requested (a restart starts a new window), or the window is younger
    than the confirmation. The expectation is the record's expected rate, or, if the vertex runs at
    another parallelism than decided (Flink capped it), the same linear formula for the parallelism
    it got. A vertex with no usable expectation (its TPR was unknown at decision time) is left out; one
    whose rate is unknown or infinite now (idle) stays in as not measured. None when no vertex could
    be measured: a later window will try again.
    """
    confirmed = record.confirmed_ms
    if confirmed is None or record.verification is not None:
        return None
    if running_since_ms < record.ts_ms and now_ms - metrics_window_ms < confirmed:
        return None  # the window may still hold samples from before the rescale
    vertices: dict[VertexId, VertexVerification] = {}
    for vid in record.changes:
        scaling = last_scaling((record,), vid)
        now = measured.get(vid)
        if scaling is None or now is None or scaling.current < 1:
            continue
        parallelism, tpr = now
        expected = scaling.expected_processing_rate
        if parallelism != scaling.new:
            expected = expected_processing_rate(scaling.true_processing_rate, scaling.current, parallelism)
        if not math.isfinite(expected) or expected <= 0:
            continue
        vertices[vid] = VertexVerification(parallelism, expected, tpr if math.isfinite(tpr) else math.nan)
    if not any(math.isfinite(v.measured) for v in vertices.values()):
        return None
    return ScalingVerification(now_ms, threshold, vertices)


def verify_last_scaling(
    history: Sequence[ScalingRecord], evaluation: JobEvaluation, now_ms: int
) -> ScalingRecord | None:
    """The job's newest scaling with its verification from this evaluation (:func:`verify_scaling`), or
    None if there is nothing to verify now. Only a ready evaluation (window full) may be passed."""
    if not history:
        return None
    record = history[-1]
    sample = evaluation.sample
    verification = verify_scaling(
        record,
        {vid: (v.parallelism, v.true_processing_rate) for vid, v in evaluation.vertices.items()},
        now_ms=now_ms,
        running_since_ms=sample.running_since_ms,
        metrics_window_ms=round(sample.target.options.metrics_window.total_seconds() * _MS_PER_S),
    )
    return None if verification is None else replace(record, verification=verification)
