"""The physics of a simulated Flink session cluster, driven only by an injected clock.

No threads and no wall time: every public read first integrates the cluster up to ``clock.now_ms()`` in
steps of ``step_s``, so a test moves a ``FakeClock`` and reads. One job is a fluid model: the sources
emit as much of the backlog as the slowest vertex allows, each vertex's utilization follows from its share
of that flow, and vertices upstream of a saturated one are back-pressured.

Metrics are produced the way Flink's task metrics behave, because the autoscaler must cope with them:
``*PerSecond`` meters are ``MeterView``s (13 samples, one every 5 s, always divided by 60 s, hence the
one-minute ramp after a (re)start); idle and back-pressured time are ``TimerGauge``s (the average of the
intervals seen so far, 0 before the first), and busy time is ``1000 - idle - backPressured``, so every
vertex reads 1000 for the first few seconds after a start, like the real cluster.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from autoscaler.clock import Clock
from autoscaler.simulator.spec import (
    RateSchedule,
    SimClusterSpec,
    SimEdgeSpec,
    SimJobSpec,
    SimVertexSpec,
    stable_hex_id,
)

__all__ = [
    "BYTES_PER_RECORD",
    "CHECKPOINT_DURATION_MS",
    "CHECKPOINT_INTERVAL_MS",
    "JOB_STATES",
    "TICK_MS",
    "CheckpointSummary",
    "JobMetrics",
    "MetricStore",
    "MetricValue",
    "ResourceRequirementsError",
    "SimCluster",
    "SimJob",
    "UnknownJobError",
    "operator_metric_prefix",
]

TICK_MS = 5000
"""Flink's metric registry updates every View (meters, timer gauges) every 5 s."""
_METER_SLOTS = 13  # MeterView: 60 s / 5 s + 1
_TIMER_SLOTS = 12  # TimerGauge: 60 s / 5 s
_METER_SPAN_S = 60.0
BYTES_PER_RECORD = 21
CHECKPOINT_INTERVAL_MS = 2000
"""A checkpoint every 2 s while running: the lab's setting, served as execution.checkpointing.interval."""
CHECKPOINT_DURATION_MS = 150
_SATURATED = 1.0 - 1e-9
_NO_WATERMARK = -9223372036854775808  # Long.MIN_VALUE: no watermark yet

JOB_STATES = (
    "CREATED",
    "FAILING",
    "RESTARTING",
    "INITIALIZING",
    "RECONCILING",
    "FAILED",
    "RUNNING",
    "CANCELED",
    "SUSPENDED",
    "CANCELLING",
    "FINISHED",
)

MetricValue = int | float | bool | str
"""A metric as a TaskManager reports it (REST turns it into Java's string form)."""


class UnknownJobError(KeyError):
    """No job with this id was ever submitted to the cluster."""


class ResourceRequirementsError(ValueError):
    """A resource-requirements change Flink would reject; the message is Flink's own wording."""


def operator_metric_prefix(operator_name: str) -> str:
    """Flink's metric scope for an operator: ``"Source: Numbers"`` -> ``"Source__Numbers"``."""
    return operator_name.replace(" ", "_").replace(":", "_")


def _split_int(total: float, parts: int) -> list[int]:
    """``int(total)`` cut into ``parts`` near-equal integers that sum back to it."""
    whole = max(0, int(total))
    return [(whole * (i + 1)) // parts - (whole * i) // parts for i in range(parts)]


@dataclass
class _TaskCounters:
    """One vertex's running tasks since their last (re)start; totals are summed over subtasks."""

    records_in: float = 0.0
    records_out: float = 0.0
    busy_ms: float = 0.0
    backpressured_ms: float = 0.0
    idle_ms: float = 0.0
    backpressured_now: bool = False
    saturated_now: bool = False
    # TimerGauge state: ms accumulated in the current 5 s interval, then per-subtask interval values.
    interval_idle_ms: float = 0.0
    interval_bp_ms: float = 0.0
    idle_window: deque[int] = field(default_factory=lambda: deque(maxlen=_TIMER_SLOTS))
    bp_window: deque[int] = field(default_factory=lambda: deque(maxlen=_TIMER_SLOTS))
    idle_gauge: int = 0
    bp_gauge: int = 0
    # MeterView state: the counter sampled every 5 s, starting from 13 zeros.
    in_samples: deque[float] = field(default_factory=lambda: deque([0.0] * _METER_SLOTS, maxlen=_METER_SLOTS))
    out_samples: deque[float] = field(
        default_factory=lambda: deque([0.0] * _METER_SLOTS, maxlen=_METER_SLOTS)
    )
    in_rate: float = 0.0
    out_rate: float = 0.0

    def tick(self, parallelism: int) -> None:
        """The 5 s view update: close the TimerGauge interval and sample the MeterView counters."""
        self.idle_window.append(int(self.interval_idle_ms / parallelism))
        self.bp_window.append(int(self.interval_bp_ms / parallelism))
        self.interval_idle_ms = self.interval_bp_ms = 0.0
        span_s = TICK_MS // 1000 * len(self.idle_window)
        self.idle_gauge = min(max(sum(self.idle_window) // span_s, 0), 1000)
        self.bp_gauge = min(max(sum(self.bp_window) // span_s, 0), 1000)
        self.in_samples.append(self.records_in)
        self.out_samples.append(self.records_out)
        self.in_rate = (self.in_samples[-1] - self.in_samples[0]) / _METER_SPAN_S
        self.out_rate = (self.out_samples[-1] - self.out_samples[0]) / _METER_SPAN_S


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """Checkpoint counts so far; ids run 1, 2, ... over the job's life, so ``completed`` is the latest id."""

    completed: int
    in_progress: int
    latest_trigger_ms: int  # -1 if none completed in the current run
    restored_id: int  # -1 if never restored


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """What the metric store holds for one job: job-level metrics and, per vertex id, one dict per subtask.

    A vertex is absent while its tasks are not running (they unregister their metrics on cancel).
    """

    job: Mapping[str, MetricValue]
    vertices: Mapping[str, tuple[Mapping[str, MetricValue], ...]]


@dataclass(frozen=True, slots=True)
class MetricStore:
    """One fetch of every metric in the cluster, like the JobManager's ``MetricStore``."""

    taken_ms: int
    jobs: Mapping[str, JobMetrics] = field(default_factory=dict)
    taskmanagers: Mapping[str, Mapping[str, MetricValue]] = field(default_factory=dict)
    jobmanager: Mapping[str, MetricValue] = field(default_factory=dict)


class SimJob:
    """One submitted job: spec, topology, state machine and task counters.

    rest.py reads the attributes; only ``SimCluster`` changes them.
    """

    def __init__(self, spec: SimJobSpec, job_id: str, submitted_ms: int, slots_total: int) -> None:
        self.spec = spec
        self.job_id = job_id
        self.name = spec.name
        self.vertex_specs: dict[str, SimVertexSpec] = {v.name: v for v in spec.vertices}
        self.vertex_ids: dict[str, str] = spec.resolved_vertex_ids()
        self.order: list[str] = spec.topological_order()
        self.inputs: dict[str, list[SimEdgeSpec]] = {name: [] for name in self.order}
        for edge in spec.edges:
            self.inputs[edge.target].append(edge)
        self.sources: list[str] = [name for name in self.order if not self.inputs[name]]
        self._downstream: dict[str, set[str]] = {
            name: self._reachable(name, spec.edges) for name in self.order
        }
        self.slot_sharing_group_id = stable_hex_id(spec.name, "slot-sharing-group")

        self.parallelism: dict[str, int] = {
            name: min(self.vertex_specs[name].parallelism, slots_total) for name in self.order
        }
        self.requirements: dict[str, tuple[int, int]] = {
            self.vertex_ids[name]: (1, self.vertex_specs[name].parallelism) for name in self.order
        }
        self.schedule: RateSchedule = spec.input_rate
        self.backlog = float(spec.initial_backlog)
        self.source_records_read = 0.0  # survives restarts: the source offsets are checkpointed
        self.num_rescales = 0
        self.num_restarts = 0

        self.state = "RUNNING"
        self.timestamps: dict[str, int] = dict.fromkeys(JOB_STATES, 0)
        for state in ("INITIALIZING", "CREATED", "RUNNING"):
            self.timestamps[state] = submitted_ms
        self.start_ms = submitted_ms
        self.end_ms = -1
        self.running_since_ms = submitted_ms
        self.last_modified_ms = submitted_ms
        self.restart_started_ms: int | None = None
        self.restart_end_ms: int | None = None
        self.pending_restart_ms: int | None = None
        self.last_restore_ms = -1
        self.last_restored_checkpoint_id = -1
        self._checkpoints_before_this_run = 0
        self.t_ms = submitted_ms

        self.tasks: dict[str, _TaskCounters] = {}
        self.gains: dict[str, float] = {}
        self.max_emission_rate = 0.0
        self._start_tasks()

    @staticmethod
    def _reachable(start: str, edges: tuple[SimEdgeSpec, ...]) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            current = todo.pop()
            for edge in edges:
                if edge.source == current and edge.target not in seen:
                    seen.add(edge.target)
                    todo.append(edge.target)
        return seen

    @property
    def slots_used(self) -> int:
        """One slot-sharing group: a running job holds as many slots as its widest vertex."""
        return 0 if self.state in ("CANCELED", "FINISHED", "FAILED") else max(self.parallelism.values())

    @property
    def max_parallelism(self) -> int:
        return max(v.max_parallelism for v in self.vertex_specs.values())

    def desired_parallelism(self, slots_total: int) -> dict[str, int]:
        """What a restart would run with: the requested upper bounds, capped by the cluster's slots."""
        return {name: min(self.requirements[self.vertex_ids[name]][1], slots_total) for name in self.order}

    def _start_tasks(self) -> None:
        """New task attempts: fresh counters and meters, and the flow model for the new parallelism."""
        self.tasks = {name: _TaskCounters() for name in self.order}
        gains: dict[str, float] = {}
        for name in self.order:
            if not self.inputs[name]:
                gains[name] = 1.0
                continue
            total = 0.0
            for edge in self.inputs[name]:
                fan_out = self.parallelism[name] if edge.ship_strategy == "BROADCAST" else 1
                total += gains[edge.source] * self.vertex_specs[edge.source].output_ratio * fan_out
            gains[name] = total
        self.gains = gains
        self.max_emission_rate = min(
            self.parallelism[name] * self.vertex_specs[name].capacity_per_subtask / gain
            for name, gain in gains.items()
            if gain > 0
        )

    def integrate(self, t0_ms: int, t1_ms: int) -> None:
        """Move the flow model across ``[t0, t1)``: arrivals, emission, per-vertex utilization."""
        dt_ms = t1_ms - t0_ms
        dt_s = dt_ms / 1000.0
        arrivals = max(0.0, self.schedule.rate_at((t0_ms - self.start_ms) / 1000.0)) * dt_s
        if self.state != "RUNNING":
            if self.state == "RESTARTING":
                self.backlog += arrivals
            return
        available = self.backlog + arrivals
        emitted = min(available, self.max_emission_rate * dt_s)
        self.backlog = max(0.0, available - emitted)
        self.source_records_read += emitted

        utilization: dict[str, float] = {}
        for name in self.order:
            capacity = self.parallelism[name] * self.vertex_specs[name].capacity_per_subtask * dt_s
            utilization[name] = min(1.0, self.gains[name] * emitted / capacity)
        saturated = {name for name, u in utilization.items() if u >= _SATURATED}
        for name in self.order:
            u = utilization[name]
            task = self.tasks[name]
            slot_ms = dt_ms * self.parallelism[name]
            backpressured = bool(saturated & self._downstream[name])
            bp = 1.0 - u if backpressured else 0.0
            idle = max(0.0, 1.0 - u - bp)
            records_in = self.gains[name] * emitted
            task.records_in += records_in
            task.records_out += records_in * self.vertex_specs[name].output_ratio
            task.busy_ms += u * slot_ms
            task.backpressured_ms += bp * slot_ms
            task.idle_ms += idle * slot_ms
            task.interval_bp_ms += bp * slot_ms
            task.interval_idle_ms += idle * slot_ms
            task.backpressured_now = backpressured and bp > 0
            task.saturated_now = name in saturated

    def tick(self) -> None:
        if self.state == "RUNNING":
            for name, task in self.tasks.items():
                task.tick(self.parallelism[name])

    def next_event_ms(self) -> int | None:
        if self.state == "RESTARTING":
            return self.restart_end_ms
        if self.state == "RUNNING":
            return self.pending_restart_ms
        return None

    def checkpoints(self, now_ms: int) -> CheckpointSummary:
        """Checkpoint k of a run triggers k intervals after it started and completes 150 ms later."""
        since = now_ms - self.running_since_ms
        current = (
            max(0, (since - CHECKPOINT_DURATION_MS) // CHECKPOINT_INTERVAL_MS)
            if self.state == "RUNNING"
            else 0
        )
        in_progress = (
            self.state == "RUNNING"
            and since >= CHECKPOINT_INTERVAL_MS
            and (since % CHECKPOINT_INTERVAL_MS < CHECKPOINT_DURATION_MS)
        )
        completed = self._checkpoints_before_this_run + current
        latest_trigger = self.running_since_ms + current * CHECKPOINT_INTERVAL_MS if current else -1
        return CheckpointSummary(
            completed, int(in_progress), latest_trigger, self.last_restored_checkpoint_id
        )

    def _close_run(self, now_ms: int) -> None:
        """The run ends: its completed checkpoints stay counted; the latest is what a restart restores."""
        self._checkpoints_before_this_run = self.checkpoints(now_ms).completed

    def begin_restart(self, now_ms: int, pause_ms: int) -> None:
        self._close_run(now_ms)
        self.last_restored_checkpoint_id = self._checkpoints_before_this_run or -1
        self._set_state("RESTARTING", now_ms)
        self.restart_started_ms = now_ms
        self.restart_end_ms = now_ms + pause_ms
        self.pending_restart_ms = None

    def finish_restart(self, now_ms: int, slots_total: int) -> None:
        """Back to RUNNING with what is requested now; the backlog comes back from the checkpoint."""
        self.parallelism = self.desired_parallelism(slots_total)
        self.num_rescales += 1
        self.num_restarts += 1
        self.running_since_ms = now_ms
        self.last_restore_ms = now_ms
        self.restart_started_ms = self.restart_end_ms = None
        self.timestamps["CREATED"] = now_ms
        self._set_state("RUNNING", now_ms)
        self._start_tasks()

    def cancel(self, now_ms: int) -> None:
        self._close_run(now_ms)
        self.timestamps["CANCELLING"] = now_ms
        self._set_state("CANCELED", now_ms)
        self.end_ms = now_ms
        self.pending_restart_ms = self.restart_started_ms = self.restart_end_ms = None

    def _set_state(self, state: str, now_ms: int) -> None:
        self.state = state
        self.timestamps[state] = now_ms
        self.last_modified_ms = now_ms

    # ---- metrics, as the TaskManagers would report them -------------------------------------------

    def job_metrics(self, now_ms: int) -> dict[str, MetricValue]:
        running = self.state == "RUNNING"
        restarting = self.state == "RESTARTING"
        restart_ms = now_ms - self.restart_started_ms if restarting and self.restart_started_ms else 0
        terminal = self.state in ("CANCELED", "FINISHED", "FAILED")
        checkpoints = self.checkpoints(now_ms)
        latest_done = checkpoints.latest_trigger_ms + CHECKPOINT_DURATION_MS if checkpoints.completed else -1
        return {
            "numRestarts": self.num_restarts,
            "numRescales": self.num_rescales,
            "uptime": -1 if terminal else (now_ms - self.running_since_ms if running else 0),
            "downtime": restart_ms,
            "runningTime": now_ms - self.running_since_ms if running else 0,
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
            "lastCheckpointRestoreTimestamp": self.last_restore_ms,
            "lastCompletedCheckpointId": checkpoints.completed or -1,
            "numberOfCompletedCheckpoints": checkpoints.completed,
            "numberOfFailedCheckpoints": 0,
            "numberOfInProgressCheckpoints": checkpoints.in_progress,
            "totalNumberOfCheckpoints": checkpoints.completed + checkpoints.in_progress,
        }

    def subtask_metrics(self, name: str) -> tuple[dict[str, MetricValue], ...]:
        """Every task and operator metric of one vertex, one dict per subtask (empty while not running)."""
        if self.state != "RUNNING":
            return ()
        spec = self.vertex_specs[name]
        p = self.parallelism[name]
        task = self.tasks[name]
        is_source = not self.inputs[name]
        operators = [operator_metric_prefix(op) for op in spec.name.split(" -> ")]

        busy: float = (
            float("nan") if spec.legacy_source else 1000.0 - min(task.idle_gauge + task.bp_gauge, 1000)
        )
        acc_busy: float = float("nan") if spec.legacy_source else task.busy_ms / p
        in_rate, out_rate = task.in_rate / p, task.out_rate / p
        task_in_rate = 0.0 if is_source else in_rate
        task_in = [0] * p if is_source else _split_int(task.records_in, p)
        task_out = _split_int(task.records_out, p)
        ops_in = _split_int(task.records_in, p)
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

        pending = self._pending_split(spec, p)
        partitions_of = [[n for n in range(spec.source_partitions) if n % p == i] for i in range(p)]
        per_partition_offset = (
            int(self.source_records_read / spec.source_partitions) if spec.source_partitions else 0
        )
        result: list[dict[str, MetricValue]] = []
        for i in range(p):
            metrics = dict(common)
            metrics["numRecordsIn"] = task_in[i]
            metrics["numRecordsOut"] = task_out[i]
            metrics["numBytesIn"] = task_in[i] * BYTES_PER_RECORD
            metrics["numBytesInLocal"] = task_in[i] * BYTES_PER_RECORD
            metrics["Shuffle.Netty.Input.numBytesInLocal"] = task_in[i] * BYTES_PER_RECORD
            metrics["numBytesOut"] = task_out[i] * BYTES_PER_RECORD
            for k, op in enumerate(operators):
                last = k == len(operators) - 1
                op_out, op_out_rate = (task_out[i], out_rate) if last else (ops_in[i], in_rate)
                uncounted = is_source and k == 0 and not spec.counts_records_in
                metrics[f"{op}.numRecordsIn"] = 0 if uncounted else ops_in[i]
                metrics[f"{op}.numRecordsInPerSecond"] = 0.0 if uncounted else in_rate
                metrics[f"{op}.numRecordsOut"] = op_out
                metrics[f"{op}.numRecordsOutPerSecond"] = op_out_rate
                metrics[f"{op}.numBytesIn"] = 0 if is_source and k == 0 else ops_in[i] * BYTES_PER_RECORD
                metrics[f"{op}.numBytesInPerSecond"] = (
                    0.0 if is_source and k == 0 else in_rate * BYTES_PER_RECORD
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

    def _pending_split(self, spec: SimVertexSpec, p: int) -> list[int]:
        """The backlog over subtasks: by assigned partitions when the source has them, else evenly."""
        if not spec.source_partitions:
            return _split_int(self.backlog, p)
        whole = int(self.backlog)
        per_partition = _split_int(whole, spec.source_partitions)
        pending = [0] * p
        for n, share in enumerate(per_partition):
            pending[n % p] += share
        return pending


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _synchronized(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)

    return wrapper


class SimCluster:
    """A Flink 2.3 session cluster with the adaptive scheduler, in simulated time.

    Thread-safe (one re-entrant lock), so a served simulator and a test or demo can share it.
    """

    def __init__(self, spec: SimClusterSpec, clock: Clock) -> None:
        self.spec = spec
        self.clock = clock
        self._lock = threading.RLock()
        self.epoch_ms = clock.now_ms()
        self._now_ms = self.epoch_ms
        self._jobs: dict[str, SimJob] = {}
        self._store: MetricStore | None = None
        self.taskmanager_ids: list[str] = [
            f"127.0.0.1:{32853 + i}-{stable_hex_id('taskmanager', str(i))[:6]}"
            for i in range(spec.taskmanagers)
        ]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the cluster still across several reads (one REST answer)."""
        with self._lock:
            yield

    @property
    def slots_total(self) -> int:
        return self.spec.slots_total

    # ---- time ----------------------------------------------------------------------------------

    @_synchronized
    def now_ms(self) -> int:
        """Integrate up to the clock and return the simulated now."""
        self.advance_to(self.clock.now_ms())
        return self._now_ms

    @_synchronized
    def advance_to(self, now_ms: int) -> None:
        """Integrate every job from where it was to ``now_ms``; going backwards is a no-op."""
        if now_ms <= self._now_ms:
            return
        for job in self._jobs.values():
            self._advance_job(job, now_ms)
        self._now_ms = now_ms

    def _advance_job(self, job: SimJob, now_ms: int) -> None:
        step_ms = max(1, round(self.spec.step_s * 1000))
        while True:
            self._fire_due_events(job)
            if job.t_ms >= now_ms:
                return
            if job.state not in ("RUNNING", "RESTARTING"):
                job.t_ms = now_ms
                return
            t = job.t_ms
            next_tick = self.epoch_ms + ((t - self.epoch_ms) // TICK_MS + 1) * TICK_MS
            until = min(now_ms, t + step_ms, next_tick)
            event = job.next_event_ms()
            if event is not None and event > t:
                until = min(until, event)
            job.integrate(t, until)
            job.t_ms = until
            if until == next_tick:
                job.tick()

    def _fire_due_events(self, job: SimJob) -> None:
        while True:
            if (
                job.state == "RESTARTING"
                and job.restart_end_ms is not None
                and job.restart_end_ms <= job.t_ms
            ):
                job.finish_restart(job.t_ms, self.slots_total)
                self._schedule_restart(job)
            elif (
                job.state == "RUNNING"
                and job.pending_restart_ms is not None
                and job.pending_restart_ms <= job.t_ms
            ):
                job.begin_restart(job.t_ms, round(self.spec.restart_pause_s * 1000))
            else:
                return

    def _schedule_restart(self, job: SimJob) -> None:
        """Adaptive scheduler: a changed requirement waits for the cooldown since the last (re)start."""
        if job.state != "RUNNING":
            return
        if job.desired_parallelism(self.slots_total) == job.parallelism:
            job.pending_restart_ms = None
            return
        cooldown_ms = round(self.spec.cooldown_after_rescaling_s * 1000)
        job.pending_restart_ms = max(job.t_ms, job.running_since_ms + cooldown_ms)

    # ---- jobs ----------------------------------------------------------------------------------

    @_synchronized
    def submit(self, job: SimJobSpec) -> str:
        """Start a job now (RUNNING at once); the id depends only on the name and the submission count."""
        now = self.now_ms()
        job_id = stable_hex_id("job", job.name, str(len(self._jobs)))
        self._jobs[job_id] = SimJob(job, job_id, now, self.slots_total)
        return job_id

    @_synchronized
    def cancel(self, job_id: str) -> None:
        job = self.job(job_id)
        if job.state in ("RUNNING", "RESTARTING"):
            job.cancel(self._now_ms)

    @_synchronized
    def set_input_rate(self, job_id: str, schedule: RateSchedule) -> None:
        """Change the offered load from now on (offsets in ``schedule`` still count from job submission)."""
        self.job(job_id).schedule = schedule

    @_synchronized
    def job(self, job_id: str) -> SimJob:
        """The job, integrated up to now; ``UnknownJobError`` if it was never submitted."""
        self.now_ms()
        try:
            return self._jobs[job_id]
        except KeyError:
            raise UnknownJobError(job_id) from None

    @_synchronized
    def jobs(self) -> list[SimJob]:
        self.now_ms()
        return list(self._jobs.values())

    @_synchronized
    def slots_used(self) -> int:
        self.now_ms()
        return min(self.slots_total, sum(job.slots_used for job in self._jobs.values()))

    # ---- rescaling -----------------------------------------------------------------------------

    @_synchronized
    def resource_requirements(self, job_id: str) -> dict[str, tuple[int, int]]:
        """Vertex id -> (lowerBound, upperBound) as last requested (not the running parallelism)."""
        return dict(self.job(job_id).requirements)

    @_synchronized
    def set_resource_requirements(self, job_id: str, requirements: Mapping[str, tuple[int, int]]) -> None:
        """Validate like Flink's ``JobResourceRequirements``, store, and schedule the restart if needed."""
        job = self.job(job_id)
        if job.state not in ("RUNNING", "RESTARTING"):
            raise UnknownJobError(job_id)
        for name in job.order:
            vid = job.vertex_ids[name]
            if vid not in requirements:
                raise ResourceRequirementsError(
                    f"The request is incomplete, missing job vertex [{vid}] resource requirements."
                )
            lower, upper = requirements[vid]
            if lower > upper:
                raise ResourceRequirementsError(
                    f"The requested lower bound [{lower}] for job vertex [{vid}] is higher than "
                    f"the upper bound [{upper}]."
                )
            if upper > job.vertex_specs[name].max_parallelism:
                raise ResourceRequirementsError(
                    f"The newly requested parallelism {upper} for the job vertex {vid} exceeds its "
                    f"maximum parallelism {job.vertex_specs[name].max_parallelism}."
                )
            if lower < 1:
                raise ResourceRequirementsError(
                    f"The requested lower bound [{lower}] for job vertex [{vid}] must be at least 1."
                )
        known = set(job.vertex_ids.values())
        for vid in requirements:
            if vid not in known:
                raise ResourceRequirementsError(f"Job vertex [{vid}] was not found in the JobGraph.")
        job.requirements = {vid: requirements[vid] for vid in job.vertex_ids.values()}
        self._schedule_restart(job)
        self._fire_due_events(job)

    # ---- read accessors for tests and the demo -------------------------------------------------

    @_synchronized
    def parallelism(self, job_id: str) -> dict[str, int]:
        return dict(self.job(job_id).parallelism)

    @_synchronized
    def backlog(self, job_id: str) -> float:
        return self.job(job_id).backlog

    @_synchronized
    def rescale_count(self, job_id: str) -> int:
        return self.job(job_id).num_rescales

    @_synchronized
    def state(self, job_id: str) -> str:
        return self.job(job_id).state

    @_synchronized
    def input_rate(self, job_id: str) -> float:
        """The offered load right now, in records/s."""
        job = self.job(job_id)
        return max(0.0, job.schedule.rate_at((self._now_ms - job.start_ms) / 1000.0))

    @_synchronized
    def vertex_ids(self, job_id: str) -> dict[str, str]:
        return dict(self.job(job_id).vertex_ids)

    # ---- metrics -------------------------------------------------------------------------------

    @_synchronized
    def metric_store(self) -> MetricStore:
        """The metrics a REST handler sees: fresh, or like Flink's lazy ``MetricFetcher``.

        With a fetch interval, a query gets the last fetch (nothing before the first) and only then
        triggers a new fetch, if the last one is at least an interval old.
        """
        now = self.now_ms()
        interval_ms = round(self.spec.metric_fetch_interval_s * 1000)
        if interval_ms <= 0:
            return self._fetch(now)
        answer = self._store if self._store is not None else MetricStore(taken_ms=now)
        if self._store is None or now - self._store.taken_ms >= interval_ms:
            self._store = self._fetch(now)
        return answer

    def _fetch(self, now_ms: int) -> MetricStore:
        jobs = {
            job.job_id: JobMetrics(
                job=job.job_metrics(now_ms),
                vertices={
                    job.vertex_ids[name]: job.subtask_metrics(name)
                    for name in job.order
                    if job.state == "RUNNING"
                },
            )
            for job in self._jobs.values()
        }
        return MetricStore(
            taken_ms=now_ms,
            jobs=jobs,
            taskmanagers=self._taskmanager_metrics(),
            jobmanager=self._jobmanager_metrics(),
        )

    def tasks_per_taskmanager(self) -> list[int]:
        """Subtasks per TaskManager: slots fill TaskManager 0 first; a slot runs a subtask of each vertex."""
        per_tm = [0] * self.spec.taskmanagers
        slot = 0
        for job in self._jobs.values():
            if job.slots_used == 0:
                continue
            for k in range(job.slots_used):
                tm = min(slot // self.spec.slots, self.spec.taskmanagers - 1)
                per_tm[tm] += sum(1 for p in job.parallelism.values() if p > k)
                slot += 1
        return per_tm

    def slots_used_per_taskmanager(self) -> list[int]:
        used = min(self.slots_total, sum(job.slots_used for job in self._jobs.values()))
        return [
            max(0, min(self.spec.slots, used - i * self.spec.slots)) for i in range(self.spec.taskmanagers)
        ]

    def _taskmanager_metrics(self) -> dict[str, dict[str, MetricValue]]:
        result: dict[str, dict[str, MetricValue]] = {}
        for tm_id, tasks in zip(self.taskmanager_ids, self.tasks_per_taskmanager(), strict=True):
            result[tm_id] = {
                **_JVM_STATUS,
                "Status.JVM.CPU.Load": min(1.0, 0.02 + 0.01 * tasks),
                "Status.JVM.CPU.Time": 1_000_000_000 * (1 + tasks),
                "Status.JVM.Memory.Heap.Used": 150_000_000 + 8_000_000 * tasks,
                "Status.JVM.Memory.Heap.Max": 436_207_616,
                "Status.JVM.Memory.Heap.Committed": 436_207_616,
                "Status.Flink.Memory.Managed.Used": 0,
                "Status.Flink.Memory.Managed.Total": 456_340_282,
                "Status.Shuffle.Netty.AvailableMemorySegments": 3481 - 5 * tasks,
                "Status.Shuffle.Netty.UsedMemorySegments": 5 * tasks,
                "Status.Shuffle.Netty.TotalMemorySegments": 3481,
                "Status.Shuffle.Netty.AvailableMemory": (3481 - 5 * tasks) * 32768,
                "Status.Shuffle.Netty.UsedMemory": 5 * tasks * 32768,
                "Status.Shuffle.Netty.TotalMemory": 3481 * 32768,
                "Status.Shuffle.Netty.RequestedMemoryUsage": 0,
            }
        return result

    def _jobmanager_metrics(self) -> dict[str, MetricValue]:
        used = min(self.slots_total, sum(job.slots_used for job in self._jobs.values()))
        return {
            **_JVM_STATUS,
            "Status.JVM.CPU.Load": 0.01,
            "Status.JVM.CPU.Time": 2_000_000_000,
            "Status.JVM.Memory.Heap.Used": 120_000_000,
            "Status.JVM.Memory.Heap.Max": 469_762_048,
            "Status.JVM.Memory.Heap.Committed": 469_762_048,
            "taskSlotsTotal": self.slots_total,
            "taskSlotsAvailable": self.slots_total - used,
            "numRegisteredTaskManagers": self.spec.taskmanagers,
            "numRunningJobs": sum(1 for job in self._jobs.values() if job.state in ("RUNNING", "RESTARTING")),
        }


_JVM_STATUS: dict[str, MetricValue] = {
    "Status.JVM.ClassLoader.ClassesLoaded": 9000,
    "Status.JVM.ClassLoader.ClassesUnloaded": 0,
    "Status.JVM.FileDescriptor.Max": 1_048_576,
    "Status.JVM.FileDescriptor.Open": 180,
    "Status.JVM.GarbageCollector.All.Count": 7,
    "Status.JVM.GarbageCollector.All.Time": 57,
    "Status.JVM.GarbageCollector.All.TimeMsPerSecond": 0.0,
    "Status.JVM.GarbageCollector.G1_Old_Generation.Count": 0,
    "Status.JVM.GarbageCollector.G1_Old_Generation.Time": 0,
    "Status.JVM.GarbageCollector.G1_Old_Generation.TimeMsPerSecond": 0.0,
    "Status.JVM.GarbageCollector.G1_Young_Generation.Count": 7,
    "Status.JVM.GarbageCollector.G1_Young_Generation.Time": 57,
    "Status.JVM.GarbageCollector.G1_Young_Generation.TimeMsPerSecond": 0.0,
    "Status.JVM.Memory.Direct.Count": 3516,
    "Status.JVM.Memory.Direct.MemoryUsed": 121_453_637,
    "Status.JVM.Memory.Direct.TotalCapacity": 121_453_635,
    "Status.JVM.Memory.Mapped.Count": 0,
    "Status.JVM.Memory.Mapped.MemoryUsed": 0,
    "Status.JVM.Memory.Mapped.TotalCapacity": 0,
    "Status.JVM.Memory.Metaspace.Committed": 60_000_000,
    "Status.JVM.Memory.Metaspace.Max": 268_435_456,
    "Status.JVM.Memory.Metaspace.Used": 58_000_000,
    "Status.JVM.Memory.NonHeap.Committed": 76_021_760,
    "Status.JVM.Memory.NonHeap.Max": 738_197_504,
    "Status.JVM.Memory.NonHeap.Used": 73_828_728,
    "Status.JVM.Threads.Count": 80,
}
