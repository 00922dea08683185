"""A job's metrics as its TaskManagers would report them, read off ``SimJob``'s counters.

The names, scopes and value types follow a real Flink 2.3 cluster (tests/fixtures/flink-2.3), quirks
included: a source task reads no network input, a legacy source reports NaN busy time, an operator's
metrics are scoped by its name with spaces and colons turned into underscores.
"""

from __future__ import annotations

import itertools
import math

from autoscaler.simulator.engine.job import SimJob
from autoscaler.simulator.engine.store import CHECKPOINT_DURATION_MS, JobMetrics, MetricValue
from autoscaler.simulator.spec import SimVertexSpec

__all__ = ["BYTES_PER_RECORD", "job_metrics", "operator_metric_prefix", "report", "subtask_metrics"]

BYTES_PER_RECORD = 21
_NO_WATERMARK = -9223372036854775808  # Long.MIN_VALUE: no watermark yet


def operator_metric_prefix(operator_name: str) -> str:
    """Flink's metric scope for an operator: ``"Source: Numbers"`` -> ``"Source__Numbers"``."""
    return operator_name.replace(" ", "_").replace(":", "_")


def _split_int(total: float, parts: int) -> list[int]:
    """``int(total)`` cut into ``parts`` near-equal integers that sum back to it."""
    whole = max(0, int(total))
    return [(whole * (i + 1)) // parts - (whole * i) // parts for i in range(parts)]


def _split_weighted(total: float, weights: tuple[float, ...]) -> list[int]:
    """``int(total)`` cut in proportion to ``weights`` into integers that sum back to it (``_split_int``'s
    near-equal cut when the weights are all equal)."""
    if len(set(weights)) <= 1:
        return _split_int(total, len(weights))
    whole = max(0, int(total))
    scale = sum(weights)
    bounds = [0]
    running = 0.0
    for weight in weights[:-1]:
        running += weight
        bounds.append(min(whole, max(bounds[-1], int(whole * running / scale))))
    bounds.append(whole)
    return [hi - lo for lo, hi in itertools.pairwise(bounds)]


def _time_split(
    busy: float, bp: float, idle: float, weight: float, span: float
) -> tuple[float, float, float]:
    """One subtask's share of a vertex's average busy/back-pressured/idle time over ``span`` (1000 for the
    per-second gauges): busy times ``weight``, the rest of ``span`` back-pressured and idle in the
    vertex's proportion (all idle when the vertex has neither)."""
    if math.isnan(busy):  # a legacy source's: no busy time to weigh
        return busy, bp, idle
    busy_i = min(span, busy * weight)
    rest = span - busy_i
    bp_i = rest * bp / (bp + idle) if bp + idle > 0 else 0.0
    return busy_i, bp_i, rest - bp_i


def report(job: SimJob, now_ms: int) -> JobMetrics:
    """What a metric fetch at ``now_ms`` holds for ``job``: its job metrics, and its vertices' while
    it runs (a restarting job's tasks have unregistered theirs)."""
    return JobMetrics(
        job=job_metrics(job, now_ms),
        vertices={
            job.vertex_ids[name]: subtask_metrics(job, name) for name in job.order if job.state == "RUNNING"
        },
    )


def job_metrics(job: SimJob, now_ms: int) -> dict[str, MetricValue]:
    """The job-level metrics at ``now_ms``: restarts, rescales, up- and downtime, checkpoints."""
    running = job.state == "RUNNING"
    restarting = job.state == "RESTARTING"
    restart_ms = now_ms - job.restart_started_ms if restarting and job.restart_started_ms else 0
    terminal = job.state in ("CANCELED", "FINISHED", "FAILED")
    checkpoints = job.checkpoints(now_ms)
    latest_done = checkpoints.latest_trigger_ms + CHECKPOINT_DURATION_MS if checkpoints.completed else -1
    return {
        "numRestarts": job.num_restarts,
        "numRescales": job.num_rescales,
        "uptime": -1 if terminal else (now_ms - job.running_since_ms if running else 0),
        "downtime": restart_ms,
        "runningTime": now_ms - job.running_since_ms if running else 0,
        "restartingTime": restart_ms,
        "createdTime": 0,
        "initializingTime": 0,
        "deployingTime": 0,
        "cancellingTime": 0,
        "failingTime": 0,
        "allSubTasksRunningOrFinishedTime": 0,
        "lastCheckpointSize": 0,
        "lastCheckpointFullSize": 0,
        "lastCheckpointMetadataSize": 0,
        "lastCheckpointProcessedData": 0,
        "lastCheckpointPersistedData": 0,
        "lastCheckpointDuration": CHECKPOINT_DURATION_MS if checkpoints.completed else 0,
        "lastCheckpointExternalPath": "<checkpoint-not-externally-addressable>",
        "lastCheckpointCompletedTimestamp": latest_done,
        "lastCheckpointRestoreTimestamp": job.last_restore_ms,
        "lastCompletedCheckpointId": checkpoints.completed or -1,
        "numberOfCompletedCheckpoints": checkpoints.completed,
        "numberOfFailedCheckpoints": 0,
        "numberOfInProgressCheckpoints": checkpoints.in_progress,
        "totalNumberOfCheckpoints": checkpoints.completed + checkpoints.in_progress,
    }


def subtask_metrics(job: SimJob, name: str) -> tuple[dict[str, MetricValue], ...]:
    """Every task and operator metric of one vertex, one dict per subtask (empty while not running)."""
    if job.state != "RUNNING":
        return ()
    spec = job.vertex_specs[name]
    p = job.parallelism[name]
    task = job.tasks[name]
    is_source = not job.inputs[name]
    operators = [operator_metric_prefix(op) for op in spec.name.split(" -> ")]

    busy: float = float("nan") if spec.legacy_source else 1000.0 - min(task.idle_gauge + task.bp_gauge, 1000)
    acc_busy: float = float("nan") if spec.legacy_source else task.busy_ms / p
    weights = job.weights(name)  # a hot key's subtask 0 gets more than its 1/p of every record and rate
    hottest = max(weights)
    in_rate, out_rate = task.in_rate / p, task.out_rate / p
    task_in_rate = 0.0 if is_source else in_rate
    task_in = [0] * p if is_source else _split_weighted(task.records_in, weights)
    task_out = _split_weighted(task.records_out, weights)
    ops_in = _split_weighted(task.records_in, weights)
    common: dict[str, MetricValue] = {
        "busyTimeMsPerSecond": busy,
        "backPressuredTimeMsPerSecond": task.bp_gauge,
        "softBackPressuredTimeMsPerSecond": task.bp_gauge,
        "hardBackPressuredTimeMsPerSecond": 0,
        "idleTimeMsPerSecond": task.idle_gauge,
        "changelogBusyTimeMsPerSecond": 0.0,
        "accumulateBusyTimeMs": acc_busy,
        "accumulateBackPressuredTimeMs": int(task.backpressured_ms / p),
        "accumulateIdleTimeMs": int(task.idle_ms / p),
        "maxSoftBackPressureTimeMs": 0,
        "maxHardBackPressureTimeMs": 0,
        "isBackPressured": task.backpressured_now,
        "numRecordsInPerSecond": task_in_rate,
        "numRecordsOutPerSecond": out_rate,
        "numBytesInPerSecond": task_in_rate * BYTES_PER_RECORD,
        "numBytesOutPerSecond": out_rate * BYTES_PER_RECORD,
        "numBytesInLocalPerSecond": task_in_rate * BYTES_PER_RECORD,
        "numBytesInRemotePerSecond": 0.0,
        "numBuffersInLocalPerSecond": 0.0,
        "numBuffersInRemotePerSecond": 0.0,
        "numBuffersOutPerSecond": 0.0,
        "numBuffersInLocal": 0,
        "numBuffersInRemote": 0,
        "numBuffersOut": 0,
        "numBytesInRemote": 0,
        "numFiredTimers": 0,
        "numFiredTimersPerSecond": 0.0,
        "mailboxMailsPerSecond": 0.0,
        "mailboxQueueSize": 0,
        "initializationTime": 300,
        "checkpointStartDelayNanos": 0,
        "Shuffle.Netty.Input.Buffers.inPoolUsage": 1.0 if task.saturated_now and not is_source else 0.0,
        "Shuffle.Netty.Input.Buffers.inputExclusiveBuffersUsage": 0.0,
        "Shuffle.Netty.Input.Buffers.inputFloatingBuffersUsage": 0.0,
        "Shuffle.Netty.Input.Buffers.inputQueueLength": 0,
        "Shuffle.Netty.Input.Buffers.inputQueueSize": 0,
        "Shuffle.Netty.Input.numBuffersInLocal": 0,
        "Shuffle.Netty.Input.numBuffersInLocalPerSecond": 0.0,
        "Shuffle.Netty.Input.numBuffersInRemote": 0,
        "Shuffle.Netty.Input.numBuffersInRemotePerSecond": 0.0,
        "Shuffle.Netty.Input.numBytesInRemote": 0,
        "Shuffle.Netty.Input.numBytesInRemotePerSecond": 0.0,
        "Shuffle.Netty.Input.numBytesInLocalPerSecond": task_in_rate * BYTES_PER_RECORD,
        "Shuffle.Netty.Output.Buffers.outPoolUsage": 1.0 if task.backpressured_now else 0.0,
        "Shuffle.Netty.Output.Buffers.outputQueueLength": 0,
        "Shuffle.Netty.Output.Buffers.outputQueueSize": 0,
    }
    for suffix in ("min", "max", "mean", "median", "stddev", "p75", "p90", "p95", "p98", "p99", "p999"):
        common[f"mailboxLatencyMs_{suffix}"] = 0.0
    if not is_source:
        common["checkpointAlignmentTime"] = 0
        common["currentInputWatermark"] = _NO_WATERMARK

    pending = _pending_split(job, spec, p)
    partitions_of = [[n for n in range(spec.source_partitions) if n % p == i] for i in range(p)]
    per_partition_offset = (
        int(job.source_records_read / spec.source_partitions) if spec.source_partitions else 0
    )
    result: list[dict[str, MetricValue]] = []
    for i in range(p):
        w = weights[i]
        metrics = dict(common)
        if w != 1.0:
            metrics.update(_weighted_times(job, name, busy, acc_busy, w))
        in_rate_i, out_rate_i, task_in_rate_i = in_rate * w, out_rate * w, task_in_rate * w
        metrics["numRecordsInPerSecond"] = task_in_rate_i
        metrics["numRecordsOutPerSecond"] = out_rate_i
        for key in (
            "numBytesInPerSecond",
            "numBytesInLocalPerSecond",
            "Shuffle.Netty.Input.numBytesInLocalPerSecond",
        ):
            metrics[key] = task_in_rate_i * BYTES_PER_RECORD
        metrics["numBytesOutPerSecond"] = out_rate_i * BYTES_PER_RECORD
        hot_and_saturated = task.saturated_now and not is_source and w == hottest
        metrics["Shuffle.Netty.Input.Buffers.inPoolUsage"] = 1.0 if hot_and_saturated else 0.0
        metrics["numRecordsIn"] = task_in[i]
        metrics["numRecordsOut"] = task_out[i]
        metrics["numBytesIn"] = task_in[i] * BYTES_PER_RECORD
        metrics["numBytesInLocal"] = task_in[i] * BYTES_PER_RECORD
        metrics["Shuffle.Netty.Input.numBytesInLocal"] = task_in[i] * BYTES_PER_RECORD
        metrics["numBytesOut"] = task_out[i] * BYTES_PER_RECORD
        for k, op in enumerate(operators):
            last = k == len(operators) - 1
            op_out, op_out_rate = (task_out[i], out_rate_i) if last else (ops_in[i], in_rate_i)
            uncounted = is_source and k == 0 and not spec.counts_records_in
            metrics[f"{op}.numRecordsIn"] = 0 if uncounted else ops_in[i]
            metrics[f"{op}.numRecordsInPerSecond"] = 0.0 if uncounted else in_rate_i
            metrics[f"{op}.numRecordsOut"] = op_out
            metrics[f"{op}.numRecordsOutPerSecond"] = op_out_rate
            metrics[f"{op}.numBytesIn"] = 0 if is_source and k == 0 else ops_in[i] * BYTES_PER_RECORD
            metrics[f"{op}.numBytesInPerSecond"] = (
                0.0 if is_source and k == 0 else in_rate_i * BYTES_PER_RECORD
            )
            metrics[f"{op}.numBytesOut"] = op_out * BYTES_PER_RECORD
            metrics[f"{op}.numBytesOutPerSecond"] = op_out_rate * BYTES_PER_RECORD
            metrics[f"{op}.currentOutputWatermark"] = _NO_WATERMARK
            if is_source and k == 0:
                metrics[f"{op}.numRecordsInErrors"] = 0
                metrics[f"{op}.sourceIdleTime"] = 0
                metrics[f"{op}.currentEmitEventTimeLag"] = 0
                if not spec.legacy_source:
                    metrics[f"{op}.pendingRecords"] = pending[i]
                if spec.source_partitions and not spec.legacy_source:
                    metrics[f"{op}.assignedPartitions"] = len(partitions_of[i])
                    for n in partitions_of[i]:
                        metrics[f"{op}.KafkaSourceReader.topic.sim.partition.{n}.currentOffset"] = (
                            per_partition_offset
                        )
                        split = f"{op}.split.{n}.watermark"
                        for gauge in (
                            "activeTimeMsPerSecond",
                            "idleTimeMsPerSecond",
                            "pausedTimeMsPerSecond",
                        ):
                            metrics[f"{split}.{gauge}"] = 0
                        for gauge in (
                            "accumulatedActiveTimeMs",
                            "accumulatedIdleTimeMs",
                            "accumulatedPausedTimeMs",
                        ):
                            metrics[f"{split}.{gauge}"] = 0
                        metrics[f"{split}.currentWatermark"] = _NO_WATERMARK
            else:
                metrics[f"{op}.currentInputWatermark"] = _NO_WATERMARK
        result.append(metrics)
    return tuple(result)


def _weighted_times(
    job: SimJob, name: str, busy: float, acc_busy: float, weight: float
) -> dict[str, MetricValue]:
    """A subtask's time gauges and counters when it gets ``weight`` times the average subtask's records."""
    task, p = job.tasks[name], job.parallelism[name]
    busy_i, bp_i, idle_i = _time_split(busy, task.bp_gauge, task.idle_gauge, weight, 1000.0)
    span = (task.busy_ms + task.backpressured_ms + task.idle_ms) / p
    acc_busy_i, acc_bp_i, acc_idle_i = _time_split(
        acc_busy, task.backpressured_ms / p, task.idle_ms / p, weight, span
    )
    return {
        "busyTimeMsPerSecond": busy_i,
        "backPressuredTimeMsPerSecond": round(bp_i),
        "softBackPressuredTimeMsPerSecond": round(bp_i),
        "idleTimeMsPerSecond": round(idle_i),
        "accumulateBusyTimeMs": acc_busy_i,
        "accumulateBackPressuredTimeMs": int(acc_bp_i),
        "accumulateIdleTimeMs": int(acc_idle_i),
    }


def _pending_split(job: SimJob, spec: SimVertexSpec, p: int) -> list[int]:
    """The backlog over subtasks: by assigned partitions when the source has them, else evenly."""
    if not spec.source_partitions:
        return _split_int(job.backlog, p)
    whole = int(job.backlog)
    per_partition = _split_int(whole, spec.source_partitions)
    pending = [0] * p
    for n, share in enumerate(per_partition):
        pending[n % p] += share
    return pending
