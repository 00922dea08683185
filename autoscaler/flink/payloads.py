"""Reading a 2xx answer of the Flink REST API into the typed value its endpoint promises.

Each reader takes the decoded JSON body and returns the value, or raises :class:`InvalidPayload` with a
one-line reason. The client runs the reader *before* it reports the request to its hook, so an answer
that is valid JSON but not of the expected shape (a truncated list, a proxy's own JSON, a schema change)
is counted once as ``bad_payload``, never first as a 200 (issue 12). Keeping the schemas here leaves
the client one method per endpoint and its request plumbing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from autoscaler.flink.models import (
    AggregatedMetric,
    JobOverview,
    MetricId,
    MetricValue,
    ParallelismBounds,
    TaskManagerInfo,
    VertexRequirement,
)
from autoscaler.flink.rest import describe_validation, snippet
from autoscaler.flink.wire import Answer

__all__ = [
    "InvalidPayload",
    "Read",
    "aggregated",
    "decode",
    "jobs",
    "key_values",
    "metric_names",
    "model",
    "parse",
    "requirements",
    "taskmanagers",
    "values",
]

_T = TypeVar("_T")
_M = TypeVar("_M", bound=BaseModel)

# A decoded JSON body -> the endpoint's value; raises InvalidPayload when the body does not fit.
Read = Callable[[Any], _T]

_NAMES = TypeAdapter(list[MetricId])
_VALUES = TypeAdapter(list[MetricValue])
_AGGREGATED = TypeAdapter(list[AggregatedMetric])
_KEY_VALUES = TypeAdapter(list[dict[str, Any]])
_REQUIREMENTS = TypeAdapter(dict[str, VertexRequirement])


class InvalidPayload(ValueError):
    """A 2xx answer that is not JSON, or not of the shape its endpoint promises (the client's
    ``FlinkBadPayload`` carries the text)."""


class _JobsOverview(BaseModel):
    jobs: list[JobOverview]


class _TaskManagers(BaseModel):
    taskmanagers: list[TaskManagerInfo]


NESTED_TOO_DEEPLY = "JSON nested too deeply to read"


def decode(response: Answer) -> Any:
    """The answer's JSON; a truncated, malformed or HTML body is an InvalidPayload, and so is one nested
    deeper than Python's JSON parser recurses (``[[[[…`` a thousand deep: no Flink answer is)."""
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise InvalidPayload(f"invalid JSON ({exc}): {snippet(response.text)}") from exc
    except RecursionError as exc:
        raise InvalidPayload(NESTED_TOO_DEEPLY) from exc


def parse(response: Answer, read: Read[_T]) -> _T:
    """``read`` of the answer's JSON, or InvalidPayload. JSON just shallow enough to parse can still be
    too deep for what reads it (a validator, a ``str()`` of a nested value, a stack already deep in
    the tick), so a RecursionError anywhere here is the payload's fault, not the daemon's."""
    try:
        return read(decode(response))
    except RecursionError as exc:
        raise InvalidPayload(NESTED_TOO_DEEPLY) from exc


def model(kind: type[_M]) -> Read[_M]:
    """The reader of an endpoint whose answer is one pydantic model."""

    def read(payload: Any) -> _M:
        try:
            return kind.model_validate(payload)
        except ValidationError as exc:
            raise InvalidPayload(describe_validation(exc)) from exc

    return read


def _validated(adapter: TypeAdapter[_T], payload: Any) -> _T:
    try:
        return adapter.validate_python(payload)
    except ValidationError as exc:
        raise InvalidPayload(describe_validation(exc)) from exc


def jobs(payload: Any) -> list[JobOverview]:
    """``/jobs/overview``."""
    return model(_JobsOverview)(payload).jobs


def taskmanagers(payload: Any) -> list[TaskManagerInfo]:
    """``/taskmanagers``."""
    return model(_TaskManagers)(payload).taskmanagers


def key_values(payload: Any) -> dict[str, str]:
    """A configuration listed as ``[{"key": ..., "value": ...}]``, as flat keys (a null value is "")."""
    rows = _validated(_KEY_VALUES, payload)
    try:
        return {str(row["key"]): "" if row.get("value") is None else str(row["value"]) for row in rows}
    except KeyError as exc:
        raise InvalidPayload(f"config entry without {exc.args[0]!r}") from exc


def metric_names(payload: Any) -> list[str]:
    """A metric listing: ``[{"id": ...}]``."""
    return [m.id for m in _validated(_NAMES, payload)]


def aggregated(payload: Any) -> dict[str, AggregatedMetric]:
    """Aggregated metrics by name."""
    return {m.id: m for m in _validated(_AGGREGATED, payload)}


def values(payload: Any) -> dict[str, float]:
    """Plain metric values by name (Flink sends them as strings)."""
    return {v.id: v.value for v in _validated(_VALUES, payload)}


def requirements(payload: Any) -> dict[str, ParallelismBounds]:
    """``/jobs/:id/resource-requirements``: each vertex's parallelism bounds (lower <= upper)."""
    parsed = _validated(_REQUIREMENTS, payload)
    try:
        return {vid: req.bounds() for vid, req in parsed.items()}
    except ValueError as exc:
        raise InvalidPayload(str(exc)) from exc
