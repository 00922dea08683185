"""``GET /jobs/:id/checkpoints``: checkpoint statistics in Flink's shape.

The numbers come from the engine's fixed cadence (a checkpoint every 2 s that takes 150 ms), so the
history, the latest completed and the restored checkpoint agree with the job metrics.
"""

from __future__ import annotations

from typing import Any

from autoscaler.simulator.engine import CHECKPOINT_DURATION_MS, CHECKPOINT_INTERVAL_MS
from autoscaler.simulator.rest.view import Params, Response, View

__all__ = ["checkpoints"]


def checkpoints(view: View, params: Params, *_: Any) -> Response:
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
