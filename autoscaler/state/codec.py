"""JSON for the stored values, one schema version per row.

Why hand-written rather than a generic dataclass dump: the stored form must outlive refactors of the
classes, so each field is spelled out once here, readers check every type (a bad value raises
``CodecError`` and the caller discards it instead of crashing), and a version bump comes with an
explicit upgrade of the older shape. Non-finite floats are written as strings ("NaN", "Infinity") so
the text is strict JSON that any database or tool accepts.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from autoscaler.state.model import DelayedScaleDown, JobState, PendingRescale, ScalingRecord

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
            "delayed_scale_down": {
                vid: {
                    "first_trigger_ms": d.first_trigger_ms,
                    "recommendations": [list(r) for r in d.recommendations],
                }
                for vid, d in state.delayed_scale_down.items()
            },
            "overrides": dict(state.overrides),
        }
    )


def encode_record(record: ScalingRecord) -> str:
    return _dumps(
        {
            "ts_ms": record.ts_ms,
            "changes": {vid: [old, new] for vid, (old, new) in record.changes.items()},
            "confirmed_ms": record.confirmed_ms,
            "restart_duration_ms": record.restart_duration_ms,
            "metrics": {vid: [_float(tpr), _float(epr)] for vid, (tpr, epr) in record.metrics.items()},
        }
    )


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
    delayed = {}
    for vid, d in _obj(data.get("delayed_scale_down", {}), "delayed_scale_down").items():
        d = _obj(d, "delayed_scale_down")
        recs = _list(d.get("recommendations"), "delayed_scale_down.recommendations")
        delayed[vid] = DelayedScaleDown(
            _int(d.get("first_trigger_ms"), "delayed_scale_down.first_trigger_ms"),
            tuple(_pair(r, "delayed_scale_down.recommendations", _int) for r in recs),
        )
        if not delayed[vid].recommendations:
            raise CodecError("delayed_scale_down: no recommendations")
    overrides = {k: _int(v, "overrides") for k, v in _obj(data.get("overrides", {}), "overrides").items()}
    return JobState(
        last_rescale_ms=_opt_int(data.get("last_rescale_ms"), "last_rescale_ms"),
        pending=pending,
        delayed_scale_down=delayed,
        overrides=overrides,
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
    )
