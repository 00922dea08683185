"""The decision record: what ``status`` and ``explain`` know about one job's last tick, and its JSON.

A :class:`DecisionRecord` is a frozen, JSON-round-tripping snapshot of one job's outcome: the evaluated
metrics and thresholds per vertex (:class:`VertexRecord`), each gate's verdict (:class:`GateVerdict`),
the executor plugins' outcomes (:class:`PluginRecord`) and when the job is decided again. It is a module
of its own because both sides depend on these values alone: ``build`` fills them from a tick, ``render``
and the decision store read them, and a record read back from a store needs nothing else.

Floats are ``None`` when not measured (the pipeline's NaN), so records compare equal after a round trip;
an infinite threshold (utilization bound 0) stays infinite and is written ``"inf"`` in JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "BLOCKED",
    "FORCED",
    "NOT_REACHED",
    "PASSED",
    "SCHEMA_VERSION",
    "DecisionRecord",
    "GateVerdict",
    "PluginRecord",
    "VertexRecord",
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
    options: tuple[tuple[str, str], ...] = field(default=())  # the keys `build._EXPLAIN_KEYS` picked

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


# ---------------------------------------------------------------------------------------- lookup
def find_record(records: Mapping[str, DecisionRecord], query: str) -> DecisionRecord | None:
    """A job by key (``cluster/name``), by name when only one cluster has it, or by JobID."""
    if query in records:
        return records[query]
    matches = [r for r in records.values() if query in (r.job_name, r.job_id)]
    return matches[0] if len(matches) == 1 else None
