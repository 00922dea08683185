"""Flink 2.3 REST answers for a ``SimCluster``: same endpoints, same JSON shapes, same quirks.

``handle`` is a pure function of the cluster and one request, so it serves both the HTTP server and
an in-process ``httpx.MockTransport``. Shapes follow the answers recorded from a real cluster
(tests/fixtures/flink-2.3); the quirks worth knowing are in docs of the functions that produce them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import httpx

from autoscaler.simulator.engine import (
    CHECKPOINT_DURATION_MS,
    CHECKPOINT_INTERVAL_MS,
    JOB_STATES,
    MetricStore,
    MetricValue,
    ResourceRequirementsError,
    SimCluster,
    SimJob,
    UnknownJobError,
)

__all__ = ["FLINK_COMMIT", "FLINK_VERSION", "handle", "java_string", "transport"]

FLINK_VERSION = "2.3.0"
FLINK_COMMIT = "c0f8d1a"
REFRESH_INTERVAL_MS = 3000
_JOB_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_TASK_STATES = (
    "RECONCILING",
    "FAILED",
    "RUNNING",
    "CANCELED",
    "INITIALIZING",
    "CANCELING",
    "SCHEDULED",
    "CREATED",
    "DEPLOYING",
    "FINISHED",
)
_AGGREGATIONS = ("min", "max", "avg", "sum", "skew")
_HANDLER = "org.apache.flink.runtime.rest.handler"
_HANDLER_EXCEPTION = f"{_HANDLER}.RestHandlerException"
_NOT_FOUND_EXCEPTION = "org.apache.flink.runtime.rest.NotFoundException"

Response = tuple[int, Any]


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _bad_parameter(kind: str, name: str, value: str) -> _HttpError:
    return _HttpError(
        400,
        "Bad request, could not parse parameters: "
        f'Cannot resolve {kind} parameter ({name}) from value "{value}".',
    )


def _stringified(exception: str, message: str, frame: str) -> str:
    """Flink puts the stringified exception, stack and all, into ``errors`` (two frames here).

    ``frame`` is ``"<package.Class>.<method>:<line>"`` below ``org.apache.flink.runtime.rest.handler``.
    """
    where, line = frame.rsplit(":", 1)
    qualified_class, method = where.rsplit(".", 1)
    simple = qualified_class.rsplit(".", 1)[-1]
    return (
        f"{exception}: {message}\n\tat {_HANDLER}.{qualified_class}.{method}({simple}.java:{line})"
        f"\n\tat {_HANDLER}.AbstractRestHandler.respondToRequest(AbstractRestHandler.java:85)"
    )


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


def _json_number(value: float) -> float | str:
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


# ---- metric endpoints ---------------------------------------------------------------------------


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
                entry[agg] = _json_number(stats[agg])
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
        raise _bad_parameter("query", "agg", value or "")
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
        raise _bad_parameter("query", name, value) from None
    return indices


# ---- helpers over the cluster -------------------------------------------------------------------


class _View:
    """One request's consistent look at the cluster."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.now = cluster.now_ms()
        self._store: MetricStore | None = None

    @property
    def store(self) -> MetricStore:
        """Fetched at most once per request (each fetch may trigger the lazy fetcher's refresh)."""
        if self._store is None:
            self._store = self.cluster.metric_store()
        return self._store

    def job(self, job_id: str) -> SimJob:
        _check_job_id(job_id)
        try:
            return self.cluster.job(job_id.lower())
        except UnknownJobError:
            raise _HttpError(
                404,
                _stringified(
                    _NOT_FOUND_EXCEPTION,
                    f"Job {job_id} not found",
                    "job.AbstractExecutionGraphHandler.handleRequest:99",
                ),
            ) from None

    def subtask_stores(self, job_id: str, vertex_id: str) -> tuple[Mapping[str, MetricValue], ...]:
        job_metrics = self.store.jobs.get(job_id.lower())
        return job_metrics.vertices.get(vertex_id, ()) if job_metrics else ()

    def vertex_name(self, job: SimJob, vertex_id: str) -> str:
        for name, vid in job.vertex_ids.items():
            if vid == vertex_id:
                return name
        raise _HttpError(
            404,
            _stringified(
                _NOT_FOUND_EXCEPTION,
                f"JobVertex {vertex_id} not found",
                "job.JobVertexDetailsHandler.handleRequest:91",
            ),
        )

    def first_slot(self, job: SimJob) -> int:
        slot = 0
        for other in self.cluster.jobs():
            if other is job:
                break
            slot += other.slots_used
        return slot

    def taskmanager_of(self, job: SimJob, subtask: int) -> int:
        slot = self.first_slot(job) + subtask
        return min(slot // self.cluster.spec.slots, self.cluster.spec.taskmanagers - 1)


def _check_job_id(job_id: str) -> None:
    if not _JOB_ID.match(job_id):
        raise _bad_parameter("path", "jobid", job_id)


def _duration(start: int, end: int, now: int) -> int:
    if start <= 0:
        return -1
    return (end if end > 0 else now) - start


def _vertex_status(job: SimJob) -> str:
    return {"RUNNING": "RUNNING", "RESTARTING": "CREATED"}.get(job.state, job.state)


def _task_counts(job: SimJob, name: str | None = None) -> dict[str, int]:
    counts = dict.fromkeys(_TASK_STATES, 0)
    total = job.parallelism[name] if name else sum(job.parallelism.values())
    counts[_vertex_status(job)] += total
    return counts


def _io_metrics(stores: Sequence[Mapping[str, MetricValue]]) -> list[dict[str, Any]]:
    """Job-details IO metrics per subtask, read from the metric store (zeros where it has nothing yet)."""
    result = []
    for store in stores:
        busy = store.get("accumulateBusyTimeMs", 0.0)
        result.append(
            {
                "read-bytes": int(store.get("numBytesIn", 0)),
                "read-bytes-complete": True,
                "write-bytes": int(store.get("numBytesOut", 0)),
                "write-bytes-complete": True,
                "read-records": int(store.get("numRecordsIn", 0)),
                "read-records-complete": True,
                "write-records": int(store.get("numRecordsOut", 0)),
                "write-records-complete": True,
                "accumulated-backpressured-time": int(store.get("accumulateBackPressuredTimeMs", 0)),
                "accumulated-idle-time": int(store.get("accumulateIdleTimeMs", 0)),
                "accumulated-busy-time": _json_number(float(busy)) if not isinstance(busy, str) else busy,
            }
        )
    return result


def _summed_io(per_subtask: list[dict[str, Any]]) -> dict[str, Any]:
    zero: dict[str, Any] = {
        "read-bytes": 0,
        "read-bytes-complete": True,
        "write-bytes": 0,
        "write-bytes-complete": True,
        "read-records": 0,
        "read-records-complete": True,
        "write-records": 0,
        "write-records-complete": True,
        "accumulated-backpressured-time": 0,
        "accumulated-idle-time": 0,
        "accumulated-busy-time": 0.0,
    }
    for io in per_subtask:
        for key, value in io.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, str) or isinstance(zero[key], str):
                zero[key] = "NaN"
            else:
                zero[key] += value
    return zero


def _plan(job: SimJob) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    for name in job.order:
        node: dict[str, Any] = {
            "id": job.vertex_ids[name],
            "operator": "",
            "parallelism": job.parallelism[name],
            "operator_strategy": "",
            "description": "<br/>+- ".join(name.split(" -> ")) + "<br/>",
            "optimizer_properties": {},
        }
        if job.inputs[name]:
            node["inputs"] = [
                {
                    "id": job.vertex_ids[edge.source],
                    "num": num,
                    "exchange": "pipelined_bounded",
                    "ship_strategy": edge.ship_strategy,
                }
                for num, edge in enumerate(job.inputs[name])
            ]
        nodes.append(node)
    return {"jid": job.job_id, "name": job.name, "type": "STREAMING", "nodes": nodes}


def _flink_duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _cluster_config(cluster: SimCluster) -> dict[str, str]:
    spec = cluster.spec
    config = {
        "jobmanager.scheduler": "adaptive",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": _flink_duration(
            spec.cooldown_after_rescaling_s
        ),
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "0s",
        "jobmanager.execution.failover-strategy": "region",
        "jobmanager.rpc.address": "127.0.0.1",
        "jobmanager.rpc.port": "6123",
        "taskmanager.numberOfTaskSlots": str(spec.slots),
        "parallelism.default": "1",
        "metrics.fetcher.update-interval": str(round(spec.metric_fetch_interval_s * 1000)),
        "web.refresh-interval": str(REFRESH_INTERVAL_MS),
        "execution.checkpointing.interval": "2s",
        "execution.checkpointing.unaligned.enabled": "true",
        "rest.address": "127.0.0.1",
    }
    config.update(spec.config)
    return config


def _key_values(config: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"key": key, "value": value} for key, value in config.items()]


# ---- handlers -----------------------------------------------------------------------------------

Params = dict[str, str]
Handler = Callable[[_View, Params, Mapping[str, str], bytes | None, Mapping[str, str]], Response]


def _overview(view: _View, *_: Any) -> Response:
    jobs = view.cluster.jobs()
    return 200, {
        "taskmanagers": view.cluster.spec.taskmanagers,
        "slots-total": view.cluster.slots_total,
        "slots-available": view.cluster.slots_total - view.cluster.slots_used(),
        "jobs-running": sum(1 for j in jobs if j.state in ("RUNNING", "RESTARTING")),
        "jobs-finished": sum(1 for j in jobs if j.state == "FINISHED"),
        "jobs-cancelled": sum(1 for j in jobs if j.state == "CANCELED"),
        "jobs-failed": sum(1 for j in jobs if j.state == "FAILED"),
        "flink-version": FLINK_VERSION,
        "flink-commit": FLINK_COMMIT,
    }


def _config(view: _View, *_: Any) -> Response:
    return 200, {
        "refresh-interval": REFRESH_INTERVAL_MS,
        "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0,
        "flink-version": FLINK_VERSION,
        "flink-revision": f"{FLINK_COMMIT} @ simulated",
        "features": {"web-submit": False, "web-cancel": True, "web-rescale": True, "web-history": False},
    }


def _jobs(view: _View, *_: Any) -> Response:
    return 200, {"jobs": [{"id": job.job_id, "status": job.state} for job in view.cluster.jobs()]}


def _jobs_overview(view: _View, *_: Any) -> Response:
    jobs = []
    for job in view.cluster.jobs():
        counts = _task_counts(job)
        jobs.append(
            {
                "jid": job.job_id,
                "name": job.name,
                "jobType": "STREAMING",
                "schedulerType": "Adaptive",
                "start-time": job.start_ms,
                "end-time": job.end_ms,
                "duration": _duration(job.start_ms, job.end_ms, view.now),
                "state": job.state,
                "last-modification": job.last_modified_ms,
                "tasks": {
                    "running": counts["RUNNING"],
                    "canceling": counts["CANCELING"],
                    "canceled": counts["CANCELED"],
                    "total": sum(job.parallelism.values()),
                    "created": counts["CREATED"],
                    "scheduled": counts["SCHEDULED"],
                    "deploying": counts["DEPLOYING"],
                    "reconciling": counts["RECONCILING"],
                    "finished": counts["FINISHED"],
                    "initializing": counts["INITIALIZING"],
                    "failed": counts["FAILED"],
                },
                "pending-operators": 0,
            }
        )
    return 200, {"jobs": jobs}


def _job_details(view: _View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    vertices = []
    for name in job.order:
        vid = job.vertex_ids[name]
        started = job.running_since_ms if job.state == "RUNNING" else -1
        vertices.append(
            {
                "id": vid,
                "slotSharingGroupId": job.slot_sharing_group_id,
                "name": name,
                "maxParallelism": job.vertex_specs[name].max_parallelism,
                "parallelism": job.parallelism[name],
                "status": _vertex_status(job),
                "start-time": started,
                "end-time": job.end_ms,
                "duration": _duration(started, job.end_ms, view.now),
                "tasks": _task_counts(job, name),
                "metrics": _summed_io(_io_metrics(view.subtask_stores(job.job_id, vid))),
            }
        )
    status_counts = dict.fromkeys(_TASK_STATES, 0)
    status_counts[_vertex_status(job)] = len(job.order)
    return 200, {
        "jid": job.job_id,
        "application-id": job.job_id,
        "name": job.name,
        "isStoppable": False,
        "state": job.state,
        "job-type": "STREAMING",
        "schedulerType": "Adaptive",
        "start-time": job.start_ms,
        "end-time": job.end_ms,
        "duration": _duration(job.start_ms, job.end_ms, view.now),
        "maxParallelism": job.max_parallelism,
        "now": view.now,
        "timestamps": {state: job.timestamps[state] for state in JOB_STATES},
        "vertices": vertices,
        "status-counts": status_counts,
        "plan": _plan(job),
        "pending-operators": 0,
    }


def _cancel_job(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    job = view.job(params["jobid"])
    mode = query.get("mode", "cancel")
    if mode != "cancel":
        raise _bad_parameter("query", "mode", mode)
    if job.state not in ("RUNNING", "RESTARTING"):
        raise _HttpError(
            409,
            _stringified(
                _HANDLER_EXCEPTION,
                "Job cancellation failed because the job has already reached another terminal state "
                f"({job.state}).",
                "job.JobCancellationHandler.handleRequest:131",
            ),
        )
    view.cluster.cancel(job.job_id)
    return 202, {}


def _job_plan(view: _View, params: Params, *_: Any) -> Response:
    return 200, {"plan": _plan(view.job(params["jobid"]))}


def _job_config(view: _View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    return 200, {
        "jid": job.job_id,
        "name": job.name,
        "execution-config": {
            "restart-strategy": "Cluster level default restart strategy",
            "job-parallelism": 1,
            "object-reuse-mode": False,
            "user-config": {},
        },
    }


def _job_jobmanager_config(view: _View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    return 200, _key_values(_cluster_config(view.cluster) | dict(job.spec.job_config))


def _jobmanager_config(view: _View, *_: Any) -> Response:
    return 200, _key_values(_cluster_config(view.cluster))


def _get_requirements(view: _View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    return 200, {
        vid: {"parallelism": {"lowerBound": lower, "upperBound": upper}}
        for vid, (lower, upper) in job.requirements.items()
    }


def _put_requirements(
    view: _View, params: Params, query: Mapping[str, str], body: bytes | None, headers: Mapping[str, str]
) -> Response:
    """Rescale. Flink answers 200 ``{}`` at once and restarts later; it only accepts a full body."""
    job = view.job(params["jobid"])
    content_type = headers.get("content-type")
    if content_type is not None and not content_type.lower().startswith("application/json"):
        raise _HttpError(400, "Bad request received. Content-Type must be application/json.")
    requirements = _parse_requirements(body)
    try:
        view.cluster.set_resource_requirements(job.job_id, requirements)
    except ResourceRequirementsError as error:
        raise _HttpError(
            400,
            _stringified(
                _HANDLER_EXCEPTION, str(error), "job.JobResourceRequirementsUpdateHandler.handleRequest:80"
            ),
        ) from None
    except UnknownJobError:
        raise _HttpError(
            404,
            _stringified(
                _NOT_FOUND_EXCEPTION,
                f"Job {job.job_id} not found",
                "job.JobResourceRequirementsUpdateHandler.handleRequest:80",
            ),
        ) from None
    return 200, {}


def _parse_requirements(body: bytes | None) -> dict[str, tuple[int, int]]:
    """``{vid: {"parallelism": {"lowerBound": l, "upperBound": u}}}``; an empty body reads as ``{}``."""
    malformed = _HttpError(
        400,
        _stringified(
            _HANDLER_EXCEPTION,
            "Request did not match expected format JobResourceRequirementsBody.",
            "AbstractHandler.respondAsLeader:193",
        ),
    )
    try:
        data = json.loads(body) if body and body.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise malformed from None
    if not isinstance(data, dict):
        raise malformed
    result: dict[str, tuple[int, int]] = {}
    for vid, entry in data.items():
        parallelism = entry.get("parallelism") if isinstance(entry, dict) else None
        if not (_JOB_ID.match(vid) and isinstance(parallelism, dict)):
            raise malformed
        lower, upper = parallelism.get("lowerBound"), parallelism.get("upperBound")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lower, upper)):
            raise malformed
        assert isinstance(lower, int) and isinstance(upper, int)
        result[vid.lower()] = (lower, upper)
    return result


def _checkpoints(view: _View, params: Params, *_: Any) -> Response:
    """Checkpoint statistics in Flink's shape, from the engine's fixed 2 s / 150 ms checkpoint cadence."""
    job = view.job(params["jobid"])
    stats = job.checkpoints(view.now)
    tasks = sum(job.parallelism.values())
    state_size = 20_000

    def entry(checkpoint_id: int, trigger_ms: int, *, done: bool) -> dict[str, Any]:
        duration = CHECKPOINT_DURATION_MS if done else max(0, view.now - trigger_ms)
        return {
            "className": "completed" if done else "in_progress",
            "id": checkpoint_id,
            "status": "COMPLETED" if done else "IN_PROGRESS",
            "is_savepoint": False,
            "savepointFormat": None,
            "trigger_timestamp": trigger_ms,
            "latest_ack_timestamp": trigger_ms + duration,
            "checkpointed_size": state_size,
            "state_size": state_size,
            "end_to_end_duration": duration,
            "alignment_buffered": 0,
            "processed_data": 0,
            "persisted_data": 0,
            "num_subtasks": tasks,
            "num_acknowledged_subtasks": tasks if done else 0,
            "checkpoint_type": "UNALIGNED_CHECKPOINT",
            "tasks": {},
        }

    history: list[dict[str, Any]] = []
    if stats.in_progress:
        history.append(
            entry(stats.completed + 1, stats.latest_trigger_ms + CHECKPOINT_INTERVAL_MS, done=False)
        )
    latest_completed = None
    if stats.latest_trigger_ms > 0:
        latest_completed = entry(stats.completed, stats.latest_trigger_ms, done=True) | {
            "external_path": "<checkpoint-not-externally-addressable>",
            "discarded": False,
        }
        current_run = (stats.latest_trigger_ms - job.running_since_ms) // CHECKPOINT_INTERVAL_MS
        for back in range(min(10 - len(history), current_run)):
            trigger = stats.latest_trigger_ms - back * CHECKPOINT_INTERVAL_MS
            history.append(entry(stats.completed - back, trigger, done=True))

    def summary(value: int) -> dict[str, Any]:
        if not stats.completed:
            return {"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0}
        as_float = float(value)
        return {
            "min": value,
            "max": value,
            "avg": value,
            "p50": as_float,
            "p90": as_float,
            "p95": as_float,
            "p99": as_float,
            "p999": as_float,
        }

    restored = None
    if stats.restored_id > 0:
        restored = {
            "id": stats.restored_id,
            "restore_timestamp": job.last_restore_ms,
            "is_savepoint": False,
            "external_path": "<checkpoint-not-externally-addressable>",
        }
    return 200, {
        "counts": {
            "restored": job.num_restarts if stats.restored_id > 0 else 0,
            "total": stats.completed + stats.in_progress,
            "in_progress": stats.in_progress,
            "completed": stats.completed,
            "failed": 0,
        },
        "summary": {
            "checkpointed_size": summary(state_size),
            "state_size": summary(state_size),
            "end_to_end_duration": summary(CHECKPOINT_DURATION_MS),
            "alignment_buffered": summary(0),
            "processed_data": summary(0),
            "persisted_data": summary(0),
        },
        "latest": {"completed": latest_completed, "savepoint": None, "failed": None, "restored": restored},
        "history": history,
    }


def _vertex_details(view: _View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    vid = params["vertexid"]
    name = view.vertex_name(job, vid)
    io = _io_metrics(view.subtask_stores(job.job_id, vid))
    started = job.running_since_ms if job.state == "RUNNING" else -1
    p = job.parallelism[name]
    subtasks = []
    for i in range(p):
        tm = view.taskmanager_of(job, i)
        tm_id = view.cluster.taskmanager_ids[tm]
        running_ms = max(0, view.now - started) if started > 0 else 0
        subtasks.append(
            {
                "subtask": i,
                "status": _vertex_status(job),
                "attempt": 0,
                "endpoint": f"localhost:{35861 + tm}",
                "start-time": started,
                "end-time": job.end_ms,
                "duration": _duration(started, job.end_ms, view.now),
                "metrics": io[i] if i < len(io) else _summed_io([]),
                "taskmanager-id": tm_id,
                "status-duration": {
                    "RUNNING": running_ms,
                    "INITIALIZING": 0,
                    "SCHEDULED": 0,
                    "CREATED": 0,
                    "DEPLOYING": 0,
                },
                "start_time": started,
            }
        )
    stat_keys = [key for key in _summed_io([]) if not key.endswith("-complete")]
    aggregated_metrics = {key: _percentiles([s["metrics"][key] for s in subtasks]) for key in stat_keys}
    status_duration = {
        state: _percentiles([s["status-duration"][state] for s in subtasks])
        for state in ("CREATED", "RUNNING", "INITIALIZING", "SCHEDULED", "DEPLOYING")
    }
    return 200, {
        "id": vid,
        "name": name,
        "parallelism": p,
        "maxParallelism": job.vertex_specs[name].max_parallelism,
        "now": view.now,
        "subtasks": subtasks,
        "aggregated": {"metrics": aggregated_metrics, "status-duration": status_duration},
    }


def _percentiles(values: list[Any]) -> dict[str, Any]:
    numbers = sorted(int(v) if not isinstance(v, str) else 0 for v in values) or [0]

    def rank(q: float) -> int:
        return numbers[min(len(numbers) - 1, max(0, math.ceil(q * len(numbers)) - 1))]

    return {
        "p25": rank(0.25),
        "min": numbers[0],
        "avg": sum(numbers) // len(numbers),
        "median": rank(0.5),
        "max": numbers[-1],
        "sum": sum(numbers),
        "p95": rank(0.95),
        "p75": rank(0.75),
    }


def _subtasks_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    _check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    wanted = _parse_indices(query.get("subtasks"), "subtasks")
    if wanted is not None:
        stores = tuple(s for i, s in enumerate(stores) if i in wanted)
    return 200, _aggregated(stores, query)


def _vertex_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    """``/vertices/:vid/metrics``: names are ``<subtask>.<metric>`` and values are strings."""
    _check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    flat = {f"{i}.{name}": value for i, store in enumerate(stores) for name, value in store.items()}
    return 200, _component(flat, query)


def _subtask_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    _check_job_id(params["jobid"])
    stores = view.subtask_stores(params["jobid"], params["vertexid"])
    try:
        index = int(params["subtaskindex"])
    except ValueError:
        raise _bad_parameter("path", "subtaskindex", params["subtaskindex"]) from None
    return 200, _component(stores[index] if 0 <= index < len(stores) else {}, query)


def _job_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    _check_job_id(params["jobid"])
    job_metrics = view.store.jobs.get(params["jobid"].lower())
    return 200, _component(job_metrics.job if job_metrics else {}, query)


def _jobs_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    wanted = set(_csv(query.get("jobs")))
    stores = [jm.job for jid, jm in view.store.jobs.items() if not wanted or jid in wanted]
    return 200, _aggregated(stores, query)


def _jobmanager_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    return 200, _component(view.store.jobmanager, query)


def _taskmanagers_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    wanted = set(_csv(query.get("taskmanagers")))
    stores = [m for tm, m in view.store.taskmanagers.items() if not wanted or tm in wanted]
    return 200, _aggregated(stores, query)


def _taskmanager_metrics(view: _View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    return 200, _component(view.store.taskmanagers.get(params["taskmanagerid"], {}), query)


def _taskmanager_entries(view: _View) -> list[dict[str, Any]]:
    spec = view.cluster.spec
    used = view.cluster.slots_used_per_taskmanager()
    tasks = view.cluster.tasks_per_taskmanager()
    entries = []
    for i, tm_id in enumerate(view.cluster.taskmanager_ids):
        free = spec.slots - used[i]
        port = int(tm_id.split(":")[1].split("-")[0])

        def resource(share: float) -> dict[str, Any]:
            return {
                "cpuCores": float(spec.slots) * share,
                "taskHeapMemory": int(287 * share),
                "taskOffHeapMemory": 0,
                "managedMemory": int(435 * share),
                "networkMemory": int(108 * share),
                "extendedResources": {},
            }

        entries.append(
            {
                "id": tm_id,
                "path": f"pekko.tcp://flink@127.0.0.1:{port}/user/rpc/taskmanager_{i}",
                "dataPort": 35861 + i,
                "jmxPort": -1,
                "timeSinceLastHeartbeat": view.now,
                "slotsNumber": spec.slots,
                "freeSlots": free,
                "assignedTasks": tasks[i],
                "totalResource": resource(1.0),
                "freeResource": resource(free / spec.slots),
                "hardware": {
                    "cpuCores": 2,
                    "physicalMemory": 25_276_502_016,
                    "freeMemory": 436_207_616,
                    "managedMemory": 456_340_282,
                },
                "memoryConfiguration": {
                    "frameworkHeap": 134_217_728,
                    "taskHeap": 301_989_880,
                    "frameworkOffHeap": 134_217_728,
                    "taskOffHeap": 0,
                    "networkMemory": 114_085_070,
                    "managedMemory": 456_340_282,
                    "jvmMetaspace": 268_435_456,
                    "jvmOverhead": 201_326_592,
                    "totalFlinkMemory": 1_140_850_688,
                    "totalProcessMemory": 1_610_612_736,
                },
            }
        )
    return entries


def _taskmanagers(view: _View, *_: Any) -> Response:
    return 200, {"taskmanagers": _taskmanager_entries(view)}


def _taskmanager_details(view: _View, params: Params, *_: Any) -> Response:
    tm_id = params["taskmanagerid"]
    for i, entry in enumerate(_taskmanager_entries(view)):
        if entry["id"] != tm_id:
            continue
        metrics = view.store.taskmanagers.get(tm_id, {})
        allocated = []
        for job in view.cluster.jobs():
            on_tm = [k for k in range(job.slots_used) if view.taskmanager_of(job, k) == i]
            if on_tm:
                allocated.append(
                    {
                        "jobId": job.job_id,
                        "resource": {
                            "cpuCores": float(len(on_tm)),
                            "taskHeapMemory": 35 * len(on_tm),
                            "taskOffHeapMemory": 0,
                            "managedMemory": 54 * len(on_tm),
                            "networkMemory": 13 * len(on_tm),
                            "extendedResources": {},
                        },
                        "assignedTasks": sum(1 for k in on_tm for p in job.parallelism.values() if p > k),
                    }
                )

        def number(key: str, metrics: Mapping[str, MetricValue] = metrics) -> int:
            value = metrics.get(key, 0)
            return int(value) if isinstance(value, int | float) else 0

        detail = dict(entry)
        detail["allocatedSlots"] = allocated
        detail["metrics"] = {
            "heapUsed": number("Status.JVM.Memory.Heap.Used"),
            "heapCommitted": number("Status.JVM.Memory.Heap.Committed"),
            "heapMax": number("Status.JVM.Memory.Heap.Max"),
            "nonHeapUsed": number("Status.JVM.Memory.NonHeap.Used"),
            "nonHeapCommitted": number("Status.JVM.Memory.NonHeap.Committed"),
            "nonHeapMax": number("Status.JVM.Memory.NonHeap.Max"),
            "directCount": number("Status.JVM.Memory.Direct.Count"),
            "directUsed": number("Status.JVM.Memory.Direct.MemoryUsed"),
            "directMax": number("Status.JVM.Memory.Direct.TotalCapacity"),
            "mappedCount": number("Status.JVM.Memory.Mapped.Count"),
            "mappedUsed": number("Status.JVM.Memory.Mapped.MemoryUsed"),
            "mappedMax": number("Status.JVM.Memory.Mapped.TotalCapacity"),
            "nettyShuffleMemorySegmentsAvailable": number("Status.Shuffle.Netty.AvailableMemorySegments"),
            "nettyShuffleMemorySegmentsUsed": number("Status.Shuffle.Netty.UsedMemorySegments"),
            "nettyShuffleMemorySegmentsTotal": number("Status.Shuffle.Netty.TotalMemorySegments"),
            "nettyShuffleMemoryAvailable": number("Status.Shuffle.Netty.AvailableMemory"),
            "nettyShuffleMemoryUsed": number("Status.Shuffle.Netty.UsedMemory"),
            "nettyShuffleMemoryTotal": number("Status.Shuffle.Netty.TotalMemory"),
            "garbageCollectors": [
                {
                    "name": gc,
                    "count": number(f"Status.JVM.GarbageCollector.{gc}.Count"),
                    "time": number(f"Status.JVM.GarbageCollector.{gc}.Time"),
                }
                for gc in ("All", "G1_Young_Generation", "G1_Old_Generation")
            ],
        }
        return 200, detail
    raise _HttpError(
        404,
        _stringified(
            _HANDLER_EXCEPTION,
            f"Could not find TaskExecutor {tm_id}.",
            "taskmanager.TaskManagerDetailsHandler.handleRequest:103",
        ),
    )


# Literal segments are listed before parameterised ones so "/jobs/overview" never reads as a job id.
_ROUTES: list[tuple[str, tuple[str, ...], Handler]] = [
    ("GET", ("overview",), _overview),
    ("GET", ("config",), _config),
    ("GET", ("jobs",), _jobs),
    ("GET", ("jobs", "overview"), _jobs_overview),
    ("GET", ("jobs", "metrics"), _jobs_metrics),
    ("GET", ("jobs", ":jobid"), _job_details),
    ("PATCH", ("jobs", ":jobid"), _cancel_job),
    ("GET", ("jobs", ":jobid", "plan"), _job_plan),
    ("GET", ("jobs", ":jobid", "config"), _job_config),
    ("GET", ("jobs", ":jobid", "checkpoints"), _checkpoints),
    ("GET", ("jobs", ":jobid", "jobmanager", "config"), _job_jobmanager_config),
    ("GET", ("jobs", ":jobid", "metrics"), _job_metrics),
    ("GET", ("jobs", ":jobid", "resource-requirements"), _get_requirements),
    ("PUT", ("jobs", ":jobid", "resource-requirements"), _put_requirements),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid"), _vertex_details),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid", "metrics"), _vertex_metrics),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid", "subtasks", "metrics"), _subtasks_metrics),
    (
        "GET",
        ("jobs", ":jobid", "vertices", ":vertexid", "subtasks", ":subtaskindex", "metrics"),
        _subtask_metrics,
    ),
    ("GET", ("jobmanager", "config"), _jobmanager_config),
    ("GET", ("jobmanager", "metrics"), _jobmanager_metrics),
    ("GET", ("taskmanagers",), _taskmanagers),
    ("GET", ("taskmanagers", "metrics"), _taskmanagers_metrics),
    ("GET", ("taskmanagers", ":taskmanagerid"), _taskmanager_details),
    ("GET", ("taskmanagers", ":taskmanagerid", "metrics"), _taskmanager_metrics),
]


def _match(method: str, segments: list[str]) -> tuple[Handler, Params] | None:
    for route_method, pattern, handler in _ROUTES:
        if route_method != method or len(pattern) != len(segments):
            continue
        params: Params = {}
        for expected, actual in zip(pattern, segments, strict=True):
            if expected.startswith(":"):
                params[expected[1:]] = actual
            elif expected != actual:
                break
        else:
            return handler, params
    return None


def handle(
    cluster: SimCluster,
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes | None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Answer one REST request: ``(status, JSON-able payload)``. Holds the cluster still while answering.

    ``headers`` (lower-case names) is optional; when given, a PUT must say ``Content-Type: application/json``.
    """
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["v1"]:
        segments = segments[1:]
    with cluster.locked():
        found = _match(method.upper(), segments)
        if found is None:
            return 404, {"errors": [f"Not found: {path}"]}
        handler, params = found
        try:
            return handler(
                _View(cluster), params, query, body, {k.lower(): v for k, v in (headers or {}).items()}
            )
        except _HttpError as error:
            return error.status, {"errors": [error.message]}


def transport(cluster: SimCluster) -> httpx.MockTransport:
    """An httpx transport answering from ``cluster`` in-process: ``httpx.AsyncClient(transport=...)``."""

    def respond(request: httpx.Request) -> httpx.Response:
        status, payload = handle(
            cluster,
            request.method,
            request.url.path,
            dict(request.url.params),
            request.content,
            dict(request.headers),
        )
        return httpx.Response(status, json=payload)

    return httpx.MockTransport(respond)
