"""The last decision per job, kept so ``flink-autoscaler status`` and ``explain`` can answer "why?".

A :class:`DecisionRecord` is a frozen, JSON-round-tripping snapshot of one job's outcome: the evaluated
metrics and thresholds per vertex, each gate's verdict, the executor plugins' outcomes and when the job
is decided again. The daemon saves one per job and tick (``record_from_outcome`` turns its
``JobOutcome`` into one); the CLI reads them back through ``autoscaler.decision_store``.

:func:`explain` and :func:`status_table` are pure: records (and states, events, ``now``) in, text out,
so they are tested with plain values and can render a record read from any store.

Floats are ``None`` when not measured (the pipeline's NaN), so records compare equal after a round trip;
an infinite threshold (utilization bound 0) stays infinite and is written ``"inf"`` in JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from autoscaler.reasons import Reason
from autoscaler.settings import KEY_PREFIX

if TYPE_CHECKING:
    from autoscaler.decide import Decision
    from autoscaler.events import Event
    from autoscaler.outcome import JobOutcome
    from autoscaler.plugins.chain import ChainResult
    from autoscaler.state import JobState
    from autoscaler.state.store import Lease

__all__ = [
    "GATES",
    "DecisionRecord",
    "GateVerdict",
    "PluginRecord",
    "VertexRecord",
    "explain",
    "find_record",
    "record_from_outcome",
    "status_table",
]

SCHEMA_VERSION = 1

# The decision stage's gates in the order autoscaler.decide runs them, with the reasons by which each says
# "no" and what passing it means. "metrics ready" blocks with whatever the evaluation's not_ready is.
GATES: tuple[tuple[str, frozenset[Reason], str], ...] = (
    ("rescale in flight", frozenset({Reason.RESCALE_IN_FLIGHT}), "no earlier rescale is still settling"),
    (
        "metrics ready",
        frozenset({Reason.STABILIZING, Reason.WINDOW_NOT_FULL, Reason.PARTIAL_METRICS}),
        "the job is stable and the metric window is full",
    ),
    ("memory pressure", frozenset({Reason.MEMORY_PRESSURE}), "GC time and heap usage are below limits"),
    ("scale-down delay", frozenset({Reason.SCALE_DOWN_DELAYED}), "no scale-down is still being held"),
    (
        "utilization band",
        frozenset({Reason.IN_BAND}),
        "a vertex that would change is outside its utilization band",
    ),
    ("advisor mode", frozenset({Reason.ADVISOR_MODE}), "scaling.enabled is true"),
    ("excluded periods", frozenset({Reason.EXCLUDED_PERIOD}), "now is outside excluded.periods"),
    ("resource quota", frozenset({Reason.RESOURCE_QUOTA_REACHED}), "the new parallelism fits the quota"),
    (
        "cooldown",
        frozenset({Reason.COOLDOWN_DEFERRED}),
        "scaling-interval.min and Flink's cooldown have passed",
    ),
)
_PLUGINS_GATE = "executor plugins"

PASSED, BLOCKED, NOT_REACHED, FORCED = "passed", "blocked", "not reached", "forced"

# Options that explain a decision; shown by `explain` under "Settings".
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
    "vertex.exclude.ids",
    "excluded.periods",
)


# ---------------------------------------------------------------------------------------- the record
@dataclass(frozen=True, slots=True)
class VertexRecord:
    """One vertex's evaluated metrics (records/s; None = not measured) and what was decided for it."""

    vertex: str
    name: str
    parallelism: int
    recommended: int  # the evaluator's target parallelism
    max_parallelism: int
    load: float | None = None
    true_processing_rate: float | None = None
    target_data_rate: float | None = None
    catch_up_data_rate: float | None = None
    lag: float | None = None
    scale_up_threshold: float | None = None
    scale_down_threshold: float | None = None
    expected_processing_rate: float | None = None
    outside_band: bool = False
    excluded: bool = False  # in vertex.exclude.ids: never changed
    ineffective_scale_up: bool = False
    decided: int | None = None  # the parallelism the decision carried (applied or blocked); None: none


@dataclass(frozen=True, slots=True)
class GateVerdict:
    gate: str
    verdict: str  # passed | blocked | forced | not reached
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PluginRecord:
    plugin: str
    outcome: str  # ScalingApproved, ScalingModified, ScalingVetoed or PluginFailed
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """Why one job ended its last tick the way it did."""

    job_key: str
    cluster: str
    job_name: str
    job_id: str
    ts_ms: int
    outcome: str  # a Reason value
    detail: str
    scaled: bool = False  # the new requirements were sent (or already in place)
    vertices: tuple[VertexRecord, ...] = ()
    gates: tuple[GateVerdict, ...] = ()  # empty when the job never reached the decision stage
    plugins: tuple[PluginRecord, ...] = ()
    retry_at_ms: int | None = None  # a deferred decision is taken again exactly then
    cooldown_until_ms: int | None = None  # no rescale before then (scaling-interval.min or a deferral)
    processing_backlog: bool | None = None
    window_samples: int | None = None
    restart_time_s: float | None = None
    options: tuple[tuple[str, str], ...] = field(default=())  # the _EXPLAIN_KEYS in effect

    @property
    def blocked_by(self) -> GateVerdict | None:
        return next((g for g in self.gates if g.verdict == BLOCKED), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA_VERSION
        return _encode(data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionRecord:
        nested = ("schema", "vertices", "gates", "plugins", "options")
        return cls(
            **_decode_floats(cls, {k: v for k, v in data.items() if k not in nested}),
            vertices=tuple(
                VertexRecord(**_decode_floats(VertexRecord, vr)) for vr in data.get("vertices", ())
            ),
            gates=tuple(GateVerdict(**_decode_floats(GateVerdict, g)) for g in data.get("gates", ())),
            plugins=tuple(PluginRecord(**_decode_floats(PluginRecord, p)) for p in data.get("plugins", ())),
            options=tuple((str(k), str(v)) for k, v in data.get("options", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> DecisionRecord:
        return cls.from_dict(json.loads(text))


def _encode(value: Any) -> Any:
    """NaN is already None; infinities become "inf" / "-inf" so the JSON stays strict."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _decode_floats(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``cls`` knows (a newer writer's extra fields are dropped), with "inf" / "-inf" turned
    back into floats in float fields only (a vertex may be named "inf")."""
    known = {f.name: "float" in str(f.type) for f in fields(cls)}
    special = {"inf": math.inf, "-inf": -math.inf}
    return {
        k: special.get(v, v) if known[k] and isinstance(v, str) else v for k, v in data.items() if k in known
    }


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
                decided=changes[v.vertex].target if v.vertex in changes else None,
            )
            for v in evaluation.vertices.values()
        )
        if decision is not None and opts.scaling_interval_min is not None:
            rescaled = outcome.now_ms if outcome.realized is not None else decision.state.last_rescale_ms
            if rescaled is not None:
                until = rescaled + round(opts.scaling_interval_min.total_seconds() * 1000)
                cooldown_until = max(until, cooldown_until or 0)
    chain = outcome.chain
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
        gates=_gates(decision, chain),
        plugins=tuple(PluginRecord(o.plugin, str(o.outcome), o.detail) for o in chain.outcomes)
        if chain is not None
        else (),
        retry_at_ms=decision.retry_at_ms if decision is not None else None,
        cooldown_until_ms=cooldown_until,
        processing_backlog=evaluation.processing_backlog if evaluation is not None else None,
        window_samples=evaluation.window_samples if evaluation is not None else None,
        restart_time_s=_measured(evaluation.restart_time_s) if evaluation is not None else None,
        options=options,
    )


def _gates(decision: Decision | None, chain: ChainResult | None) -> tuple[GateVerdict, ...]:
    """Each gate's verdict: the ones before the blocking gate passed, the ones after were not reached."""
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
    verdicts.append(_plugins_verdict(blocking is None, chain))
    return tuple(verdicts)


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


# ---------------------------------------------------------------------------------------- lookup
def find_record(records: Mapping[str, DecisionRecord], query: str) -> DecisionRecord | None:
    """A job by key (``cluster/name``), by name when only one cluster has it, or by JobID."""
    if query in records:
        return records[query]
    matches = [r for r in records.values() if query in (r.job_name, r.job_id)]
    return matches[0] if len(matches) == 1 else None


# ---------------------------------------------------------------------------------------- explain
_OUTCOME_WORDS: dict[str, str] = {
    Reason.SCALING: "SCALED",
    Reason.IN_BAND: "not scaled: every vertex is within its utilization band",
    Reason.SCALE_DOWN_DELAYED: "not scaled yet: a scale-down is held for scale-down.interval",
    Reason.ADVISOR_MODE: "recommended only (advisor mode, scaling.enabled=false)",
    Reason.EXCLUDED_PERIOD: "recommended only: now is in an excluded period",
    Reason.RESOURCE_QUOTA_REACHED: "not scaled: the new parallelism would exceed the resource quota",
    Reason.COOLDOWN_DEFERRED: "deferred until the cooldown ends",
    Reason.RESCALE_IN_FLIGHT: "waiting: the last rescale is not running yet",
    Reason.STABILIZING: "waiting: the job (re)started recently",
    Reason.WINDOW_NOT_FULL: "waiting: the metric window is not full yet",
    Reason.MEMORY_PRESSURE: "not scaled: memory pressure",
    Reason.SCALING_VETOED: "not scaled: an executor plugin vetoed it",
    Reason.PLUGIN_FAILED: "not scaled: a plugin failed",
    Reason.AUTOSCALER_ERROR: "error: the autoscaler could not handle this job",
    Reason.NOT_RUNNING: "skipped: the job is not running",
    Reason.PARTIAL_METRICS: "skipped: Flink returned only part of the metrics",
    Reason.CLUSTER_UNREACHABLE: "skipped: the cluster could not be reached",
}


def explain(record: DecisionRecord, *, now_ms: int | None = None, events: Sequence[Event] = ()) -> str:
    """The last decision for one job in plain words: outcome, gates, vertices, plugins, settings."""
    age = f" ({_age(now_ms - record.ts_ms)} ago)" if now_ms is not None else ""
    lines = [
        f"Job {record.job_key} (JobID {record.job_id})",
        f"Last decision at {_utc(record.ts_ms)}{age}: "
        f"{_OUTCOME_WORDS.get(record.outcome, record.outcome)} [{record.outcome}]",
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
    return "\n".join(lines)


def _vertex_lines(v: VertexRecord) -> list[str]:
    change = (
        f"parallelism {v.parallelism} -> {v.decided}"
        if v.decided is not None
        else f"parallelism {v.parallelism}, recommended {v.recommended}"
    )
    named = v.name if v.name == v.vertex else f"{v.name} ({v.vertex})"
    head = f"  {named}: {change} (max {v.max_parallelism}): {_vertex_verdict(v)}"
    load = "unknown" if v.load is None else f"{v.load:.0%}"
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
        body.append("    the last scale-up of this vertex was ineffective (did not raise its rate enough)")
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
def status_table(
    records: Mapping[str, DecisionRecord],
    states: Mapping[str, JobState],
    now_ms: int,
    last_events: Mapping[str, Event] | None = None,
    leases: Sequence[Lease] = (),
) -> str:
    """One row per job (outcome, cooldown left, last event), then one per vertex (parallelism,
    recommendation, load, lag). Jobs with a state but no decision yet are listed too. Then which
    daemon acts on each cluster (the leases in the state database)."""
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
        if state is not None and state.pending is not None:
            decision += ", rescale pending"
        rows.append((key, "", "", "", "", _cooldown(record, now_ms), decision, event_text))
        for v in record.vertices:
            rec = str(v.decided if v.decided is not None else v.recommended)
            load = "-" if v.load is None else f"{v.load:.2f}"
            rows.append((f"  {v.name}", str(v.parallelism), rec, load, _count(v.lag, unit=""), "", "", ""))
    table = _columns(header, rows) if rows else "no jobs recorded yet (has the daemon run a tick?)"
    if not leases:
        return table
    lease_rows = [
        (
            lease.name,
            lease.owner,
            f"{_age(lease.expires_ms - now_ms)} left"
            if lease.expires_ms > now_ms
            else "expired: no daemon acts on it",
        )
        for lease in leases
    ]
    return table + "\n\n" + _columns(("CLUSTER", "ACTED ON BY", "LEASE"), lease_rows)


def _columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    )


def _cooldown(record: DecisionRecord, now_ms: int) -> str:
    until = record.cooldown_until_ms if record.cooldown_until_ms is not None else record.retry_at_ms
    return _age(until - now_ms) if until is not None and until > now_ms else "-"


# ---------------------------------------------------------------------------------------- words
def _rate(value: float | None) -> str:
    if value is None:
        return "unknown"
    if math.isinf(value):
        return "no limit"
    return f"{value:,.0f} rec/s" if abs(value) >= 10 else f"{value:,.2f} rec/s"


def _count(value: float | None, unit: str = " records") -> str:
    if value is None:
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
