"""A daemon ``JobOutcome`` turned into its :class:`DecisionRecord`: the gates it passed, its vertices.

:func:`record_from_outcome` is what the daemon's ``on_outcome`` callback calls to save a record. It lives
apart from the record values because only it knows the pipeline's types (the decision, the evaluation,
the plugin chain) and the order in which ``autoscaler.tick.decide`` runs its gates (:data:`GATES`); the
records, and whoever reads them back, do not.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from autoscaler.evaluate.history import RestartTime, restart_time, trim_history
from autoscaler.explain.records import (
    BLOCKED,
    FORCED,
    NOT_REACHED,
    PASSED,
    CostRecord,
    DecisionRecord,
    ForecastRecord,
    GateVerdict,
    PluginRecord,
    VerificationRecord,
    VerifiedVertex,
    VertexRecord,
)
from autoscaler.foresight.cost import CostModel, above_target
from autoscaler.foresight.forecast import NoForecast
from autoscaler.reasons import Reason
from autoscaler.settings import KEY_PREFIX
from autoscaler.slot_fit import CAPPED_TEXT
from autoscaler.tick.decide import queue_of

if TYPE_CHECKING:
    from autoscaler.model import JobEvaluation
    from autoscaler.plugins.chain import ChainResult
    from autoscaler.state import ScalingRecord
    from autoscaler.tick.steps import Decision, JobOutcome

__all__ = ["GATES", "record_from_outcome"]

# The decision stage's gates in the order autoscaler.tick.decide runs them, with the reasons by which
# each says "no" and what passing it means. "metrics ready" blocks with whatever the evaluation's
# not_ready is.
GATES: tuple[tuple[str, frozenset[Reason], str], ...] = (
    ("rescale in flight", frozenset({Reason.RESCALE_IN_FLIGHT}), "no earlier rescale is still settling"),
    (
        "metrics ready",
        frozenset({Reason.STABILIZING, Reason.WINDOW_NOT_FULL, Reason.LOAD_CHANGING, Reason.PARTIAL_METRICS}),
        "the job is stable and the metric window is full, of one load",
    ),
    (
        "metrics known",
        frozenset({Reason.METRICS_UNKNOWN}),
        "the rates of the sources and of a vertex that could be scaled are known",
    ),
    ("memory pressure", frozenset({Reason.MEMORY_PRESSURE}), "GC time and heap usage are below limits"),
    ("scale-down delay", frozenset({Reason.SCALE_DOWN_DELAYED}), "no scale-down is still being held"),
    (
        "utilization band",
        frozenset({Reason.IN_BAND}),
        "a vertex that would change is outside its utilization band",
    ),
    (
        "worth a restart",
        frozenset({Reason.NOT_WORTH_IT}),
        "changing now costs less than waiting (or cost.enabled is false)",
    ),
    ("advisor mode", frozenset({Reason.ADVISOR_MODE}), "scaling.enabled is true"),
    ("excluded periods", frozenset({Reason.EXCLUDED_PERIOD}), "now is outside excluded.periods"),
    ("resource quota", frozenset({Reason.RESOURCE_QUOTA_REACHED}), "the new parallelism fits the quota"),
    (
        "cooldown",
        frozenset({Reason.COOLDOWN_DEFERRED}),
        "scaling-interval.min and Flink's cooldown have passed",
    ),
    (
        "standing request",
        frozenset({Reason.WAITING_FOR_SLOTS}),
        "no change is one Flink already holds for a vertex it runs below it",
    ),
    (
        "refused rescale",
        frozenset({Reason.RESCALE_REJECTED}),
        "Flink did not refuse the last rescale, or the backoff after it has passed",
    ),
)
_PLUGINS_GATE = "executor plugins"
_SLOTS_GATE = "free slots"

# Options that explain a decision (thresholds, delays and limits); shown by `explain` under "Settings".
_EXPLAIN_KEYS = (
    "scaling.enabled",
    "utilization.target",
    "target.utilization.boundary",
    "utilization.min",
    "utilization.max",
    "scale-down.interval",
    "scaling-interval.min",
    "scaling-interval.max",
    "scaling.min-parallelism-change",
    "catch-up.duration",
    "lag.target",
    "backlog-processing.lag-threshold",
    "metrics.window",
    "vertex.min-parallelism",
    "vertex.max-parallelism",
    "scale-up.max-factor",
    "scale-down.max-factor",
    "vertex.exclude.ids",
    "excluded.periods",
    "restart.time",
    "restart.time-tracking.enabled",
    "restart.time-tracking.limit",
)


def _measured(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


# ---------------------------------------------------------------------------------------- building one
def record_from_outcome(outcome: JobOutcome) -> DecisionRecord:
    """The record of a daemon ``JobOutcome`` (the daemon's ``on_outcome`` callback can save it)."""
    job, decision = outcome.job, outcome.decision
    evaluation = decision.evaluation if decision is not None else None
    vertices: tuple[VertexRecord, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    cooldown_until = decision.retry_at_ms if decision is not None else None
    if evaluation is not None:
        opts = evaluation.sample.target.options
        conf = opts.to_flink_conf()
        options = tuple((k, conf[KEY_PREFIX + k]) for k in _EXPLAIN_KEYS if conf.get(KEY_PREFIX + k, ""))
        names = {v.id: v.name for v in evaluation.sample.topology}
        changes = decision.changes if decision is not None else {}
        vertices = tuple(
            VertexRecord(
                vertex=v.vertex,
                name=names.get(v.vertex, v.vertex),
                parallelism=v.parallelism,
                recommended=v.target_parallelism,
                max_parallelism=v.max_parallelism,
                load=_measured(v.load),
                true_processing_rate=_measured(v.true_processing_rate),
                target_data_rate=_measured(v.target_data_rate),
                catch_up_data_rate=_measured(v.catch_up_data_rate),
                lag=_measured(v.lag),
                scale_up_threshold=_measured(v.scale_up_threshold),
                scale_down_threshold=_measured(v.scale_down_threshold),
                expected_processing_rate=_measured(v.expected_processing_rate),
                outside_band=v.outside_band,
                excluded=v.vertex in opts.vertex_exclude_ids,
                ineffective_scale_up=v.ineffective_scale_up,
                expected_increase=_measured(v.scale_up_gain.expected) if v.scale_up_gain else None,
                actual_increase=_measured(v.scale_up_gain.actual) if v.scale_up_gain else None,
                decided=changes[v.vertex].target if v.vertex in changes else None,
                busy_skew=_measured(skew.skew) if (skew := evaluation.sample.skew.get(v.vertex)) else None,
                slow_subtasks=skew.text(names.get(v.vertex, v.vertex)) if skew else "",
            )
            for v in evaluation.vertices.values()
        )
        if decision is not None and opts.scaling_interval_min is not None:
            rescaled = outcome.now_ms if outcome.realized is not None else decision.state.last_rescale_ms
            if rescaled is not None:
                until = rescaled + round(opts.scaling_interval_min.total_seconds() * 1000)
                cooldown_until = max(until, cooldown_until or 0)
    chain = outcome.chain
    restart = _restart_time(outcome)
    above = _above_lag_target(evaluation)
    return DecisionRecord(
        job_key=job.key,
        cluster=job.cluster,
        job_name=job.name,
        job_id=job.job_id,
        ts_ms=outcome.now_ms,
        outcome=str(outcome.outcome),
        detail=outcome.detail,
        scaled=outcome.realized is not None,
        vertices=vertices,
        gates=_gates(decision, chain, outcome),
        plugins=tuple(PluginRecord(o.plugin, str(o.outcome), o.detail) for o in chain.outcomes)
        if chain is not None
        else (),
        retry_at_ms=decision.retry_at_ms if decision is not None else None,
        cooldown_until_ms=cooldown_until,
        processing_backlog=evaluation.processing_backlog if evaluation is not None else None,
        window_samples=evaluation.window_samples if evaluation is not None else None,
        restart_time_s=_measured(evaluation.restart_time_s) if evaluation is not None else None,
        restart_time_measured=restart is not None and restart.measured,
        restart_longest_ms=restart.longest_ms if restart is not None else None,
        restarts_measured=restart.restarts if restart is not None else 0,
        restart_time_capped=restart is not None and restart.capped,
        options=options,
        verification=_verified_now(decision, outcome.now_ms),
        forecast=_forecast(decision, outcome.now_ms),
        cost=_cost(decision),
        above_lag_target=above,
        lag_above_target_s=None if above is None else 0.0,
    )


def _cost(decision: Decision | None) -> CostRecord | None:
    """Both costs of a weighed change (``cost.enabled``; the decision carries them), or None."""
    weighing = decision.weighing if decision is not None else None
    if weighing is None:
        return None
    change, wait, queue = weighing.change, weighing.wait, weighing.queue
    return CostRecord(
        horizon_s=weighing.horizon_s,
        rate=_measured(weighing.rate),
        change_total=change.total,
        change_slot_seconds=change.slot_seconds,
        change_restarts=change.restarts,
        change_lag_s=change.lag_seconds,
        wait_total=wait.total,
        wait_slot_seconds=wait.slot_seconds,
        wait_restarts=wait.restarts,
        wait_lag_s=wait.lag_seconds,
        slots_now=queue.slots_now,
        slots_then=queue.slots_then,
        capacity_now=_measured(queue.capacity_now),
        capacity_then=_measured(queue.capacity_then),
        worth_it=weighing.worth_it,
    )


def _above_lag_target(evaluation: JobEvaluation | None) -> bool | None:
    """Whether the job's backlog is above its lag target at this tick (issue 38, item 5): its sources'
    lag against ``lag.target`` x their offered rate, or, unset, against what the job's capacity drains
    within ``catch-up.duration`` (:func:`autoscaler.foresight.cost.above_target`, the job as one queue
    as the gate "worth a restart" sees it). None where not judged: neither ``cost.enabled`` nor a
    ``lag.target`` (the reference's record stays as it was), or the job's rates are unknown."""
    if evaluation is None:
        return None
    options = evaluation.sample.target.options
    if not (options.cost_enabled or options.lag_target is not None):
        return None
    queue = queue_of(evaluation, {})
    if queue is None:
        return None
    return above_target(queue.backlog, queue.rate, queue.capacity_now, CostModel.of(options))


def _forecast(decision: Decision | None, now_ms: int) -> ForecastRecord | None:
    """What ``explain`` shows of a decision's load forecast (forecast.enabled), or None."""
    forecast = decision.forecast if decision is not None else None
    if decision is None or forecast is None:
        return None
    if isinstance(forecast, NoForecast):
        evaluation = decision.evaluation
        horizon_s = evaluation.sample.target.options.forecast_horizon.total_seconds() if evaluation else 0.0
        return ForecastRecord(horizon_s, none=str(forecast.why), detail=forecast.detail)
    return ForecastRecord(
        forecast.horizon_s,
        peak_rate=forecast.peak_rate,
        level_rate=forecast.level_rate,
        peak_in_s=forecast.peak_in_s(now_ms),
        confidence=forecast.confidence,
        basis=forecast.basis,
    )


def _restart_time(outcome: JobOutcome) -> RestartTime | None:
    """Where the restart time the evaluation used came from: the rule it applies
    (:func:`~autoscaler.evaluate.history.restart_time`) over the history it read (the job's, trimmed)."""
    decision = outcome.decision
    evaluation = decision.evaluation if decision is not None else None
    if decision is None or evaluation is None or math.isnan(evaluation.restart_time_s):
        return None
    options = evaluation.sample.target.options
    return restart_time(trim_history(decision.state.history, outcome.now_ms, options), options)


def _verified_now(decision: Decision | None, now_ms: int) -> VerificationRecord | None:
    """The verification of a past rescale that this tick made (the decide stage put it in the state)."""
    if decision is None or decision.evaluation is None:
        return None
    made = [r for r in decision.state.history if r.verification and r.verification.ts_ms == now_ms]
    return verification_record(made[-1], decision.evaluation) if made else None


def verification_record(record: ScalingRecord, evaluation: JobEvaluation) -> VerificationRecord:
    """A scaling record's verification as ``explain`` shows it (vertex names from ``evaluation``)."""
    verification = record.verification
    assert verification is not None
    names = {v.id: v.name for v in evaluation.sample.topology}
    return VerificationRecord(
        rescale_ts_ms=record.ts_ms,
        ts_ms=verification.ts_ms,
        threshold=verification.threshold,
        as_expected=verification.as_expected,
        vertices=tuple(
            VerifiedVertex(
                vertex=vid,
                name=names.get(vid, vid),
                before=record.changes[vid][0] if vid in record.changes else v.parallelism,
                decided=record.changes[vid][1] if vid in record.changes else v.parallelism,
                parallelism=v.parallelism,
                expected=_measured(v.expected),
                measured=_measured(v.measured),
                ratio=_measured(v.ratio),
            )
            for vid, v in verification.vertices.items()
        ),
    )


def _gates(
    decision: Decision | None, chain: ChainResult | None, outcome: JobOutcome
) -> tuple[GateVerdict, ...]:
    """Each gate's verdict: the ones before the blocking gate passed, the ones after were not reached.
    The slot check (``autoscaler.tick.slots``) runs after the executor plugins, on what they approved."""
    if decision is None:
        return ()
    reason = decision.outcome
    evaluation = decision.evaluation
    if evaluation is not None and evaluation.not_ready is not None and reason == evaluation.not_ready:
        blocking: int | None = 1
    else:
        blocking = next((i for i, (_, reasons, _) in enumerate(GATES) if reason in reasons), None)
    if blocking is None and reason is not Reason.SCALING:
        blocking = len(GATES)  # a gate this table does not know yet: say so instead of guessing
    verdicts = []
    for i, (name, _, passing) in enumerate(GATES):
        if blocking is not None and i == blocking:
            verdicts.append(GateVerdict(name, BLOCKED, decision.detail))
        elif blocking is not None and i > blocking:
            verdicts.append(GateVerdict(name, NOT_REACHED))
        elif name == "utilization band" and decision.forced:
            verdicts.append(GateVerdict(name, FORCED, "last rescale is older than scaling-interval.max"))
        else:
            verdicts.append(GateVerdict(name, PASSED, passing))
    if blocking == len(GATES):
        verdicts.append(GateVerdict(f"decision ({reason})", BLOCKED, decision.detail))
    plugins = _plugins_verdict(blocking is None, chain)
    verdicts += [plugins, _slots_verdict(plugins.verdict == PASSED, outcome)]
    return tuple(verdicts)


def _slots_verdict(reached: bool, outcome: JobOutcome) -> GateVerdict:
    """The slot check's verdict on what the plugins passed: it held the rescale back (waiting), trimmed
    it (its text joins the decision's detail), or let it through."""
    if not reached:
        return GateVerdict(_SLOTS_GATE, NOT_REACHED)
    if outcome.outcome is Reason.WAITING_FOR_SLOTS:
        return GateVerdict(_SLOTS_GATE, BLOCKED, outcome.detail)
    if CAPPED_TEXT in outcome.detail:
        return GateVerdict(_SLOTS_GATE, PASSED, "capped to what fits the free slots and the job's own")
    return GateVerdict(_SLOTS_GATE, PASSED, "the rescale fits the free slots and the job's own")


def _plugins_verdict(reached: bool, chain: ChainResult | None) -> GateVerdict:
    if not reached:
        return GateVerdict(_PLUGINS_GATE, NOT_REACHED)
    if chain is None:
        return GateVerdict(_PLUGINS_GATE, PASSED, "no executor plugins configured")
    vetoed = chain.vetoed_by
    if vetoed is not None or chain.changes is None:
        why = f"{vetoed.plugin}: {vetoed.detail or vetoed.outcome}" if vetoed else "vetoed"
        return GateVerdict(_PLUGINS_GATE, BLOCKED, why)
    return GateVerdict(_PLUGINS_GATE, PASSED, ", ".join(f"{o.plugin} {o.outcome}" for o in chain.outcomes))
