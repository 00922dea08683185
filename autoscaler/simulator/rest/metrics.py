"""The metric endpoints, and how Flink formats what they return.

Two families, with Flink's quirks kept: the aggregating handlers (``/jobs/metrics``,
``/taskmanagers/metrics``, ``.../subtasks/metrics``) answer doubles with ``min``/``max``/``avg``/``sum``/
``skew``; the per-component handlers answer each value as Java's ``String.valueOf`` would print it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from autoscaler.simulator.engine import MetricValue
from autoscaler.simulator.rest.errors import bad_parameter
from autoscaler.simulator.rest.view import Params, Response, View, check_job_id

__all__ = [
    "java_string",
    "job_metrics",
    "jobmanager_metrics",
    "jobs_metrics",
    "json_number",
    "subtask_metrics",
    "subtasks_metrics",
    "taskmanager_metrics",
    "taskmanagers_metrics",
    "vertex_metrics",
]

_AGGREGATIONS = ("min", "max", "avg", "sum", "skew")


# ---- value formatting ---------------------------------------------------------------------------


def java_string(value: MetricValue) -> str:
    """A metric value the way Java's ``String.valueOf`` prints it (the string-valued endpoints)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # plain notation in this range, shortest digits like Double.toString
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exponent}"


def json_number(value: float) -> float | str:
    """Jackson writes non-finite doubles as strings: NaN comes back as ``"NaN"``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _as_double(value: MetricValue) -> float | None:
    """``Double.valueOf`` on the stored string; None where Flink would log 'not numeric' and skip."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return None


# ---- aggregation and query parameters -----------------------------------------------------------


def _names(stores: Sequence[Mapping[str, MetricValue]], prefix: str = "") -> list[dict[str, str]]:
    seen: dict[str, None] = {}
    for store in stores:
        seen.update(dict.fromkeys(store))
    return [{"id": f"{prefix}{name}"} for name in seen]


def _aggregated(
    stores: Sequence[Mapping[str, MetricValue]], query: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The aggregating metric handlers: names without ``get``; with it, one entry per requested name.

    Quirk kept from Flink: if any requested name has no value in any store, the whole answer is ``[]``.
    A non-numeric metric is silently left out instead.
    """
    requested = _csv(query.get("get"))
    if not requested:
        return _names(stores)
    aggregations = _parse_aggregations(query.get("agg"))
    answer: list[dict[str, Any]] = []
    for name in requested:
        present = [store[name] for store in stores if name in store]
        if not present:
            return []
        values = [_as_double(v) for v in present]
        if any(v is None for v in values):
            continue
        numbers = [v for v in values if v is not None]
        entry: dict[str, Any] = {"id": name}
        stats = _statistics(numbers)
        for agg in _AGGREGATIONS:
            if agg in aggregations:
                entry[agg] = json_number(stats[agg])
        answer.append(entry)
    return answer


def _statistics(values: list[float]) -> dict[str, float]:
    has_nan = any(math.isnan(v) for v in values)
    total = math.fsum(values) if not has_nan else math.nan
    avg = total / len(values)
    if has_nan:
        skew = math.nan
    elif avg == 0:
        skew = 0.0
    else:
        # Flink's DoubleDataSkew: mean absolute deviation over the mean, in percent, capped at 100.
        skew = min(math.fsum(abs(avg - v) for v in values) / len(values) / avg * 100.0, 100.0)
    return {
        "min": math.nan if has_nan else min(values),
        "max": math.nan if has_nan else max(values),
        "avg": avg,
        "sum": total,
        "skew": skew,
    }


def _component(store: Mapping[str, MetricValue], query: Mapping[str, str], prefix: str = "") -> list[Any]:
    """The per-component metric handlers: values are strings, unknown names are simply left out."""
    requested = _csv(query.get("get"))
    if not requested:
        return _names([store], prefix)
    return [{"id": name, "value": java_string(store[name])} for name in requested if name in store]


def _csv(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _parse_aggregations(value: str | None) -> set[str]:
    requested = {part.lower() for part in _csv(value)}
    unknown = requested - set(_AGGREGATIONS)
    if unknown:
        raise bad_parameter("query", "agg", value or "")
    return requested or set(_AGGREGATIONS)


def _parse_indices(value: str | None, name: str) -> set[int] | None:
    """Flink's ``subtasks=0,2-4`` style filter; None means all."""
    if not value:
        return None
    indices: set[int] = set()
    try:
        for part in _csv(value):
            if "-" in part:
                low, high = part.split("-", 1)
                indices.update(range(int(low), int(high) + 1))
            else:
                indices.add(int(part))
    except ValueError:
        raise bad_parameter("query", name, value) from None
    return indices


# ---- handlers -----------------------------------------------------------------------------------


def subtasks_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    wanted = _parse_indices(query.get("subtasks"), "subtasks")
    if wanted is not None:
        stores = tuple(s for i, s in enumerate(stores) if i in wanted)
    return 200, _aggregated(stores, query)


def vertex_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    """``/vertices/:vid/metrics``: names are ``<subtask>.<metric>`` and values are strings."""
    check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    flat = {f"{i}.{name}": value for i, store in enumerate(stores) for name, value in store.items()}
    return 200, _component(flat, query)


def subtask_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    try:
        index = int(params["subtaskindex"])
    except ValueError:
        raise bad_parameter("path", "subtaskindex", params["subtaskindex"]) from None
    return 200, _component(stores[index] if 0 <= index < len(stores) else {}, query)


def job_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    check_job_id(params["jobid"])
    job_metrics = view.store.jobs.get(params["jobid"].lower())
    return 200, _component(job_metrics.job if job_metrics else {}, query)


def jobs_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    wanted = set(_csv(query.get("jobs")))
    stores = [jm.job for jid, jm in view.store.jobs.items() if not wanted or jid in wanted]
    return 200, _aggregated(stores, query)


def jobmanager_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    return 200, _component(view.store.jobmanager, query)


def taskmanagers_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    wanted = set(_csv(query.get("taskmanagers")))
    stores = [m for tm, m in view.store.taskmanagers.items() if not wanted or tm in wanted]
    return 200, _aggregated(stores, query)


def taskmanager_metrics(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    return 200, _component(view.store.taskmanagers.get(params["taskmanagerid"], {}), query)
