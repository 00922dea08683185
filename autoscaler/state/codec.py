"""JSON for the stored values, one schema version per row.

Why hand-written rather than a generic dataclass dump: the stored form must outlive refactors of the
classes, so each field is spelled out once here, readers check every type (a bad value raises
``CodecError`` and the caller discards it instead of crashing), and a version bump comes with an
explicit upgrade of the older shape. Non-finite floats are written as strings ("NaN", "Infinity") so
the text is strict JSON that any database or tool accepts.

A field added later without a version bump goes under a key of its own that older readers ignore, and
reads as unknown where it is missing: so state written before it loads unchanged, and a daemon not yet
upgraded (sharing the database during a rolling upgrade) still reads state written after it, instead
of discarding it. The delayed scale-downs' ``outside_band`` flags and a scaling record's
``verification`` (written only once there is one, so a record without it encodes as before) are such
fields, and so is the state's ``job_id`` (absent in state stored before it, which then reads as None: the
JobID is learnt again at the job's next tick, from its pending rescale if it has one), and a record's
``job_id``, the JobID its rescale was asked of (None in records stored before it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from autoscaler.state.model import (
    DelayedScaleDown,
    JobState,
    PendingRescale,
    Recommendation,
    ScalingRecord,
    ScalingVerification,
    VertexVerification,
)

__all__ = [
    "RECORD_VERSION",
    "STATE_VERSION",
    "CodecError",
    "decode_record",
    "decode_state",
    "encode_record",
    "encode_state",
    "history_digest",
]

STATE_VERSION = 1  # JobState without its history
RECORD_VERSION = 1  # one ScalingRecord

_T = TypeVar("_T")


class CodecError(ValueError):
    """A stored value that this version cannot read back."""


# ---------------------------------------------------------------------------------------------- encode
def _float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)  # "nan", "inf", "-inf"


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def encode_state(state: JobState) -> str:
    """Everything in ``state`` except its history (stored one row per record)."""
    pending = state.pending
    return _dumps(
        {
            "last_rescale_ms": state.last_rescale_ms,
            "pending": None
            if pending is None
            else {
                "job_id": pending.job_id,
                "issued_ms": pending.issued_ms,
                "target": dict(pending.target),
                "previous": dict(pending.previous),
            },
            "delayed_scale_down": {vid: _delayed(d) for vid, d in state.delayed_scale_down.items()},
            "overrides": dict(state.overrides),
            # Written only while stuck, so a state without a stuck rescale encodes as before.
            **({"stuck": [state.stuck_rescales, state.stuck_ms]} if state.stuck_rescales else {}),
            **({"refused": [state.refused_rescales, state.refused_ms]} if state.refused_rescales else {}),
            # Written once known, so a state without it encodes as before (an older reader ignores it).
            **({"job_id": state.job_id} if state.job_id is not None else {}),
        }
    )


def _delayed(d: DelayedScaleDown) -> dict[str, Any]:
    """(ts, parallelism) pairs as version 1 always wrote them, the band flags in a list beside them."""
    return {
        "first_trigger_ms": d.first_trigger_ms,
        "recommendations": [[r.ts_ms, r.parallelism] for r in d.recommendations],
        "outside_band": [r.outside_band for r in d.recommendations],
    }


def encode_record(record: ScalingRecord) -> str:
    data: dict[str, Any] = {
        "ts_ms": record.ts_ms,
        "changes": {vid: [old, new] for vid, (old, new) in record.changes.items()},
        "confirmed_ms": record.confirmed_ms,
        "restart_duration_ms": record.restart_duration_ms,
        "metrics": {vid: [_float(tpr), _float(epr)] for vid, (tpr, epr) in record.metrics.items()},
    }
    if record.verification is not None:  # absent, not null: an unverified record encodes as before
        data["verification"] = _verification(record.verification)
    if record.needed_capacity:  # absent when empty: a record without it encodes as before
        data["needed_capacity"] = {vid: _float(c) for vid, c in record.needed_capacity.items()}
    if record.job_id is not None:  # absent when not known: a record without it encodes as before
        data["job_id"] = record.job_id
    return _dumps(data)


def _verification(v: ScalingVerification) -> dict[str, Any]:
    """Per vertex ``[parallelism, expected, measured]``, beside when and against which threshold."""
    return {
        "ts_ms": v.ts_ms,
        "threshold": _float(v.threshold),
        "vertices": {
            vid: [x.parallelism, _float(x.expected), _float(x.measured)] for vid, x in v.vertices.items()
        },
    }


def history_digest(encoded_records: Sequence[str]) -> str:
    """A fingerprint of a job's encoded history, so a save rewrites history rows only when it changed."""
    h = hashlib.sha256(f"{RECORD_VERSION}\n".encode())
    for text in encoded_records:
        h.update(text.encode())
        h.update(b"\n")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------- decode
def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{what}: expected an integer, got {value!r}")
    return value


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CodecError(f"{what}: expected a number, got {value!r}")
    try:
        return float(value)
    except ValueError as exc:
        raise CodecError(f"{what}: expected a number, got {value!r}") from exc


def _opt_bool(value: Any, what: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise CodecError(f"{what}: expected true, false or null, got {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{what}: expected a string, got {value!r}")
    return value


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CodecError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise CodecError(f"{what}: expected a list, got {type(value).__name__}")
    return value


def _pair(value: Any, what: str, item: Callable[[Any, str], _T]) -> tuple[_T, _T]:
    items = _list(value, what)
    if len(items) != 2:
        raise CodecError(f"{what}: expected a pair, got {value!r}")
    return item(items[0], what), item(items[1], what)


def _loads(text: str, version: int, supported: int, what: str) -> dict[str, Any]:
    if version != supported:  # older versions get an upgrade step here when there is a version 2
        raise CodecError(f"{what}: schema version {version} is not {supported} (written by another version?)")
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{what}: not JSON: {exc}") from exc
    return _obj(data, what)


def decode_state(version: int, text: str) -> JobState:
    """A ``JobState`` with an empty history; raises ``CodecError`` for anything it cannot trust."""
    data = _loads(text, version, STATE_VERSION, "state")
    pending_data = data.get("pending")
    pending = None
    if pending_data is not None:
        p = _obj(pending_data, "pending")
        pending = PendingRescale(
            job_id=_str(p.get("job_id"), "pending.job_id"),
            issued_ms=_int(p.get("issued_ms"), "pending.issued_ms"),
            target={k: _int(v, "pending.target") for k, v in _obj(p.get("target"), "pending.target").items()},
            previous={
                k: _int(v, "pending.previous") for k, v in _obj(p.get("previous"), "pending.previous").items()
            },
        )
    delayed = {
        vid: _decode_delayed(d)
        for vid, d in _obj(data.get("delayed_scale_down", {}), "delayed_scale_down").items()
    }
    overrides = {k: _int(v, "overrides") for k, v in _obj(data.get("overrides", {}), "overrides").items()}
    stuck, stuck_ms = _pair(data.get("stuck", [0, None]), "stuck", _opt_int)
    refused, refused_ms = _pair(data.get("refused", [0, None]), "refused", _opt_int)
    return JobState(
        last_rescale_ms=_opt_int(data.get("last_rescale_ms"), "last_rescale_ms"),
        pending=pending,
        delayed_scale_down=delayed,
        overrides=overrides,
        stuck_rescales=stuck or 0,
        stuck_ms=stuck_ms,
        refused_rescales=refused or 0,
        refused_ms=refused_ms,
        job_id=None if data.get("job_id") is None else _str(data["job_id"], "job_id"),
    )


def _decode_delayed(value: Any) -> DelayedScaleDown:
    """One vertex's delayed scale-down; state written before the band flags has none (unknown)."""
    d = _obj(value, "delayed_scale_down")
    pairs = [
        _pair(r, "delayed_scale_down.recommendations", _int)
        for r in _list(d.get("recommendations"), "delayed_scale_down.recommendations")
    ]
    if not pairs:
        raise CodecError("delayed_scale_down: no recommendations")
    flags_data = d.get("outside_band")
    flags = (
        [None] * len(pairs)
        if flags_data is None
        else [_opt_bool(f, "delayed_scale_down.outside_band") for f in _list(flags_data, "outside_band")]
    )
    if len(flags) != len(pairs):
        raise CodecError(
            f"delayed_scale_down.outside_band: {len(flags)} flags for {len(pairs)} recommendations"
        )
    return DelayedScaleDown(
        _int(d.get("first_trigger_ms"), "delayed_scale_down.first_trigger_ms"),
        tuple(Recommendation(ts, p, flag) for (ts, p), flag in zip(pairs, flags, strict=True)),
    )


def decode_record(version: int, text: str) -> ScalingRecord:
    data = _loads(text, version, RECORD_VERSION, "record")
    return ScalingRecord(
        ts_ms=_int(data.get("ts_ms"), "record.ts_ms"),
        changes={
            k: _pair(v, "record.changes", _int) for k, v in _obj(data.get("changes"), "changes").items()
        },
        confirmed_ms=_opt_int(data.get("confirmed_ms"), "record.confirmed_ms"),
        restart_duration_ms=_opt_int(data.get("restart_duration_ms"), "record.restart_duration_ms"),
        metrics={
            k: _pair(v, "record.metrics", _num) for k, v in _obj(data.get("metrics", {}), "metrics").items()
        },
        verification=_decode_verification(data.get("verification")),
        needed_capacity={
            k: _num(v, "record.needed_capacity")
            for k, v in _obj(data.get("needed_capacity", {}), "needed_capacity").items()
        },
        job_id=None if data.get("job_id") is None else _str(data["job_id"], "record.job_id"),
    )


def _decode_verification(value: Any) -> ScalingVerification | None:
    """A record's verification; None where it has none (not verified yet, or stored before it existed)."""
    if value is None:
        return None
    v = _obj(value, "record.verification")
    vertices = {}
    for vid, item in _obj(v.get("vertices"), "record.verification.vertices").items():
        parts = _list(item, "record.verification.vertices")
        if len(parts) != 3:
            raise CodecError(f"record.verification.vertices: expected [p, expected, measured], got {item!r}")
        what = "record.verification.vertices"
        vertices[vid] = VertexVerification(_int(parts[0], what), _num(parts[1], what), _num(parts[2], what))
    return ScalingVerification(
        ts_ms=_int(v.get("ts_ms"), "record.verification.ts_ms"),
        threshold=_num(v.get("threshold"), "record.verification.threshold"),
        vertices=vertices,
    )
