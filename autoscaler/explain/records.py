"""The decision record: what ``status`` and ``explain`` know about one job's decisions, and its JSON.

A :class:`DecisionRecord` is a frozen, JSON-round-tripping snapshot of one job's outcome: the evaluated
metrics and thresholds per vertex (:class:`VertexRecord`), each gate's verdict (:class:`GateVerdict`),
the executor plugins' outcomes (:class:`PluginRecord`), when the job is decided again and, for a
rescale, what it delivered once measured (:class:`VerificationRecord`). It is a module of its own
because both sides depend on these values alone: ``build`` fills them from a tick, ``render`` and the
decision store read them, and a record read back from a store needs nothing else.
:func:`add_decision` keeps a job's last decisions: a tick that repeats the previous decision extends it
(``since_ms``, ``ticks``) instead of pushing a rescale out of the list.

Floats are ``None`` when not measured (the pipeline's NaN), so records compare equal after a round trip;
an infinite threshold (utilization bound 0) stays infinite and is written ``"inf"`` in JSON.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

__all__ = [
    "BLOCKED",
    "FORCED",
    "NOT_REACHED",
    "PASSED",
    "SCHEMA_VERSION",
    "CostRecord",
    "DecisionRecord",
    "ForecastRecord",
    "GateVerdict",
    "PluginRecord",
    "VerificationRecord",
    "VerifiedVertex",
    "VertexRecord",
    "add_decision",
    "find_record",
]

SCHEMA_VERSION = 1

PASSED, BLOCKED, NOT_REACHED, FORCED = "passed", "blocked", "not reached", "forced"


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
    # With ineffective_scale_up: the processing-rate increase the last scale-up promised and delivered.
    expected_increase: float | None = None
    actual_increase: float | None = None
    decided: int | None = None  # the parallelism the decision carried (applied or blocked); None: none
    busy_skew: float | None = None  # max / avg busy time over its subtasks (autoscaler/skew.py)
    slow_subtasks: str = ""  # which subtasks are slow and why, in words; empty: none (or not read)


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
class VerifiedVertex:
    """One rescaled vertex's capacity, measured over the first full window after the rescale."""

    vertex: str
    name: str
    before: int  # parallelism before the rescale
    decided: int  # what the rescale asked for
    parallelism: int  # what it ran at when measured (less than decided if Flink capped it)
    expected: float | None = None  # records/s expected at that parallelism
    measured: float | None = None  # None: not measured (idle or unknown)
    ratio: float | None = None


@dataclass(frozen=True, slots=True)
class ForecastRecord:
    """The job's load forecast at the decision (``forecast.enabled``): the expected peak of its offered
    load within the horizon, how far ahead, how confident and from what; or why there is none
    (``none``: short, gappy, wrong, no-pattern, no-rise, and ``detail``)."""

    horizon_s: float
    peak_rate: float | None = None  # records/s
    level_rate: float | None = None  # the current level it rises from
    peak_in_s: float | None = None
    confidence: float | None = None
    basis: str = ""  # trend, daily, weekly, every <period>
    none: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CostRecord:
    """Both costs a change was weighed by (``cost.enabled``; ``autoscaler.foresight.worth``), in
    slot-seconds over ``horizon_s`` at the offered ``rate`` (records/s): changing now (``change_*``) and
    waiting (``wait_*``), each as its total and what it is made of: the slot-seconds held, the restarts,
    and the seconds above the lag target. ``worth_it``: changing cost less (the change was made)."""

    horizon_s: float
    rate: float | None
    change_total: float
    change_slot_seconds: float
    change_restarts: int
    change_lag_s: float
    wait_total: float
    wait_slot_seconds: float
    wait_restarts: int
    wait_lag_s: float
    slots_now: int
    slots_then: int
    capacity_now: float | None = None  # records/s the job processes now ...
    capacity_then: float | None = None  # ... and would after the change
    worth_it: bool = False


@dataclass(frozen=True, slots=True)
class VerificationRecord:
    """What the rescale decided at ``rescale_ts_ms`` delivered, measured at ``ts_ms``."""

    rescale_ts_ms: int
    ts_ms: int
    threshold: float  # the ratio a vertex had to reach
    as_expected: bool
    vertices: tuple[VerifiedVertex, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerificationRecord:
        return cls(
            **_decode_floats(cls, {k: v for k, v in data.items() if k != "vertices"}),
            vertices=tuple(
                VerifiedVertex(**_decode_floats(VerifiedVertex, v)) for v in data.get("vertices", ())
            ),
        )


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """Why one job ended a tick the way it did (the newest of a run of ticks that decided the same).

    ``verification`` is, on a rescale's record, what that rescale delivered once measured; on the
    record of the tick that measured it (``rescale_ts_ms`` earlier than ``ts_ms``), the same verdict.
    """

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
    restart_time_s: float | None = None  # what the capacities were computed with
    # Where it came from: the job's measured restarts (restart.time-tracking.enabled) or restart.time;
    # the longest restart measured (used or not), how many were, and whether the limit cut it.
    restart_time_measured: bool = False
    restart_longest_ms: int | None = None
    restarts_measured: int = 0
    restart_time_capped: bool = False
    options: tuple[tuple[str, str], ...] = field(default=())  # the keys `build._EXPLAIN_KEYS` picked
    verification: VerificationRecord | None = None
    since_ms: int | None = None  # first tick of the run this record ends (None: this tick alone)
    ticks: int = 1  # ticks in that run
    forecast: ForecastRecord | None = None  # forecast.enabled only; left out of the JSON when None
    cost: CostRecord | None = None  # a weighed change (cost.enabled) only; left out of the JSON when None
    # cost.enabled or lag.target set (None otherwise, and left out of the JSON): whether the job's
    # backlog was above its lag target at this tick, and the seconds it was over this record's run (each
    # tick found above counts the time since the job's previous record; add_decision sums a run)
    above_lag_target: bool | None = None
    lag_above_target_s: float | None = None

    @property
    def blocked_by(self) -> GateVerdict | None:
        return next((g for g in self.gates if g.verdict == BLOCKED), None)

    @property
    def first_ms(self) -> int:
        """When this decision was first taken (the run's first tick)."""
        return self.ts_ms if self.since_ms is None else self.since_ms

    def continues(self, previous: DecisionRecord) -> bool:
        """Whether this tick repeats ``previous``'s decision: same job run, outcome, parallelisms and
        decided changes, neither a rescale nor a verification (each of those stands on its own)."""
        return (
            self.job_id == previous.job_id
            and self.outcome == previous.outcome
            and not (self.scaled or previous.scaled)
            and self.verification is None
            and previous.verification is None
            and _shape(self) == _shape(previous)
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = _plain(self)
        data["schema"] = SCHEMA_VERSION
        for name in ("forecast", "cost", "above_lag_target", "lag_above_target_s"):
            if data[name] is None:  # a job without them writes the record it wrote before them
                del data[name]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionRecord:
        nested = ("schema", "vertices", "gates", "plugins", "options", "verification", "forecast", "cost")
        verification, forecast, cost = data.get("verification"), data.get("forecast"), data.get("cost")
        return cls(
            **_decode_floats(cls, {k: v for k, v in data.items() if k not in nested}),
            vertices=tuple(
                VertexRecord(**_decode_floats(VertexRecord, vr)) for vr in data.get("vertices", ())
            ),
            gates=tuple(GateVerdict(**_decode_floats(GateVerdict, g)) for g in data.get("gates", ())),
            plugins=tuple(PluginRecord(**_decode_floats(PluginRecord, p)) for p in data.get("plugins", ())),
            options=tuple((str(k), str(v)) for k, v in data.get("options", ())),
            verification=None if verification is None else VerificationRecord.from_dict(verification),
            forecast=None if forecast is None else ForecastRecord(**_decode_floats(ForecastRecord, forecast)),
            cost=None if cost is None else CostRecord(**_decode_floats(CostRecord, cost)),
        )

    @classmethod
    def from_json(cls, text: str) -> DecisionRecord:
        return cls.from_dict(json.loads(text))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _plain(value: Any) -> Any:
    """The record as JSON-ready values, the dataclasses as dicts: what ``dataclasses.asdict`` gives,
    without its deep copy of every leaf (the daemon writes every job's record every tick, and asdict
    was half the cost of a write). NaN is already None; infinities become "inf" / "-inf" so the JSON
    stays strict."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else value
    if is_dataclass(value):
        return {name: _plain(getattr(value, name)) for name in _field_names(kind)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _decode_floats(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``cls`` knows (a newer writer's extra fields are dropped), with "inf" / "-inf" turned
    back into floats in float fields only (a vertex may be named "inf")."""
    known = {f.name: "float" in str(f.type) for f in fields(cls)}
    special = {"inf": math.inf, "-inf": -math.inf}
    return {
        k: special.get(v, v) if known[k] and isinstance(v, str) else v for k, v in data.items() if k in known
    }


def _shape(record: DecisionRecord) -> tuple[tuple[str, int, int | None], ...]:
    return tuple((v.vertex, v.parallelism, v.decided) for v in record.vertices)


# ---------------------------------------------------------------------------------------- history
def add_decision(
    history: Sequence[DecisionRecord], record: DecisionRecord, keep: int
) -> tuple[DecisionRecord, ...]:
    """A job's last ``keep`` decisions (oldest first) after ``record``.

    A record that :meth:`~DecisionRecord.continues` the newest one replaces it, extending its run, so
    ticks that keep deciding the same (``InBand`` for hours) count as one decision and a rescale stays
    in view until ``keep`` other decisions followed it. A record with a verification also gives it to
    the rescale it verified, if that is still kept.
    """
    kept = list(history)
    if kept and record.above_lag_target is not None:
        record = replace(record, lag_above_target_s=_above_since(kept[-1], record))
    if kept and record.continues(kept[-1]):
        previous = kept.pop()
        record = replace(record, since_ms=previous.first_ms, ticks=previous.ticks + record.ticks)
        if record.lag_above_target_s is not None:
            record = replace(
                record, lag_above_target_s=(previous.lag_above_target_s or 0.0) + record.lag_above_target_s
            )
    verification = record.verification
    if verification is not None and verification.rescale_ts_ms != record.ts_ms:
        kept = [
            replace(r, verification=verification) if r.scaled and r.ts_ms == verification.rescale_ts_ms else r
            for r in kept
        ]
    kept.append(record)
    return tuple(kept[-keep:]) if keep > 0 else ()


def _above_since(previous: DecisionRecord, record: DecisionRecord) -> float:
    """The seconds above the lag target ``record``'s tick adds: the time since the job's previous record
    when the tick found it above (an interval judged at its end, as the cost model and the bench judge
    one), none otherwise or when the clock ran back."""
    if not record.above_lag_target or record.ts_ms <= previous.ts_ms:
        return 0.0
    return (record.ts_ms - previous.ts_ms) / 1000


# ---------------------------------------------------------------------------------------- lookup
def find_record(records: Mapping[str, DecisionRecord], query: str) -> DecisionRecord | None:
    """A job by key (``cluster/name``), by name when only one cluster has it, or by JobID."""
    if query in records:
        return records[query]
    matches = [r for r in records.values() if query in (r.job_name, r.job_id)]
    return matches[0] if len(matches) == 1 else None
