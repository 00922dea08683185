"""The read-only job and vertex endpoints: the job list and overview, job details, plan, config, vertex.

Task counts, durations and the IO metrics of job and vertex details follow the job's state and the
metric store the way a real JobManager's execution-graph handlers do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.simulator.engine import JOB_STATES, MetricValue, SimJob
from autoscaler.simulator.rest.metrics import json_number
from autoscaler.simulator.rest.view import Params, Response, View

__all__ = ["job_config", "job_details", "job_plan", "jobs", "jobs_overview", "vertex_details"]

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
                "accumulated-busy-time": json_number(float(busy)) if not isinstance(busy, str) else busy,
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


def jobs(view: View, *_: Any) -> Response:
    return 200, {"jobs": [{"id": job.job_id, "status": job.state} for job in view.cluster.jobs()]}


def jobs_overview(view: View, *_: Any) -> Response:
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


def job_details(view: View, params: Params, *_: Any) -> Response:
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


def job_plan(view: View, params: Params, *_: Any) -> Response:
    return 200, {"plan": _plan(view.job(params["jobid"]))}


def job_config(view: View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    return 200, {
        "jid": job.job_id,
        "name": job.name,
        "execution-config": {
            "restart-strategy": "Cluster level default restart strategy",
            "job-parallelism": 1,
            "object-reuse-mode": False,
            "user-config": dict(job.spec.job_config),  # its global job parameters
        },
    }


def vertex_details(view: View, params: Params, *_: Any) -> Response:
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
