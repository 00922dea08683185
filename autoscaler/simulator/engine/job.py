"""One simulated job: its topology, the fluid flow model, its state machine and its task counters.

``_TaskCounters`` keeps a vertex's counters the way Flink's metric views do (``MeterView``,
``TimerGauge``); ``SimJob`` moves them when ``SimCluster`` integrates it. What the TaskManagers would
report from these counters is in ``reporting``.

Network buffers (``SimVertexSpec.in_flight_records``): in Flink a task is back-pressured only when it
finds no free output buffer, i.e. once the buffers between it and a slower downstream are full. Until
then it reads and emits everything offered (its ``numRecordsOut`` counts what it wrote into them, its
source's ``pendingRecords`` stays 0 and its ``backPressuredTimeMsPerSecond`` 0) while the downstream reads
only its capacity (``numRecordsIn``, 100 % busy). The lab measured about 230 KB of in-flight data in an
unaligned checkpoint under back-pressure (flink-rest.md), some 11,000 of its records. The records stay in
the buffers across a restart: an unaligned checkpoint persists them and the new tasks read them first.
Without buffers anywhere the whole job moves at one rate (the closed form in :meth:`SimJob.integrate`).

The module is some 460 lines because both flow models and the state machine move the same task
counters, and one is not read without the others.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.simulator.engine.store import (
    CHECKPOINT_DURATION_MS,
    CHECKPOINT_INTERVAL_MS,
    JOB_STATES,
    TICK_MS,
    CheckpointSummary,
    ResourceRequirementsError,
)
from autoscaler.simulator.spec import RateSchedule, SimEdgeSpec, SimJobSpec, SimVertexSpec, stable_hex_id

__all__ = ["LAB_IN_FLIGHT_RECORDS", "SimJob"]

_METER_SLOTS = 13  # MeterView: 60 s / 5 s + 1
_TIMER_SLOTS = 12  # TimerGauge: 60 s / 5 s
_METER_SPAN_S = 60.0
_SATURATED = 1.0 - 1e-9
LAB_IN_FLIGHT_RECORDS = 11_000.0
"""Records in flight in front of one subtask of the lab's Work once its input is back-pressured: the
230 KB of in-flight data an unaligned checkpoint held there (flink-rest.md), at 21 bytes a record."""


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


class SimJob:
    """One submitted job: spec, topology, state machine and task counters.

    The REST handlers read the attributes; only ``SimCluster`` changes them.
    """

    def __init__(self, spec: SimJobSpec, job_id: str, submitted_ms: int, slots: int) -> None:
        """``slots``: what the job may run on at submission (the cluster's free slots)."""
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
            name: min(self.vertex_specs[name].parallelism, slots) for name in self.order
        }
        self.requirements: dict[str, tuple[int, int]] = {
            self.vertex_ids[name]: (1, self.vertex_specs[name].parallelism) for name in self.order
        }
        # The slots the job's slot pool holds: what it runs on, the slots a raised request took before
        # its restart, and the ones a smaller run left idle until they are released (``SimCluster``).
        self.slots_held = max(self.parallelism.values())
        self.slot_release_ms: int | None = None  # when the idle ones go back to the cluster
        self.schedule: RateSchedule = spec.input_rate
        self.backlog = float(spec.initial_backlog)
        # Records waiting in the network buffers in front of each vertex (in its input records).
        self.in_flight: dict[str, float] = dict.fromkeys(self.order, 0.0)
        self.buffered = any(self.vertex_specs[name].in_flight_records > 0 for name in self.order)
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
        self.hottest: dict[str, float] = {}  # each vertex's largest subtask weight (1 without a hot key)
        self.max_emission_rate = 0.0
        self._start_tasks()

    def frozen(self) -> SimJob:
        """This job as it is now, for a metric fetch that reports it later: what moves is copied (the
        state and counters, the parallelism, the task counters' scalars); the topology is shared."""
        twin = copy.copy(self)
        twin.parallelism = dict(self.parallelism)
        twin.tasks = {name: copy.copy(task) for name, task in self.tasks.items()}
        twin.in_flight = dict(self.in_flight)
        return twin

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
    def ended(self) -> bool:
        return self.state in ("CANCELED", "FINISHED", "FAILED")

    @property
    def slots_used(self) -> int:
        """One slot-sharing group: a running job runs on as many slots as its widest vertex."""
        return 0 if self.ended else max(self.parallelism.values())

    @property
    def slots_requested(self) -> int:
        """The slots its request asks for: the widest upper bound (one slot-sharing group)."""
        return max(upper for _, upper in self.requirements.values())

    @property
    def slots_taken(self) -> int:
        """The slots that are not free because of this job: its slot pool's (none once it ended)."""
        return 0 if self.ended else max(self.slots_held, self.slots_used)

    @property
    def max_parallelism(self) -> int:
        return max(v.max_parallelism for v in self.vertex_specs.values())

    def desired_parallelism(self, slots: int) -> dict[str, int]:
        """What a restart would run with: the requested upper bounds, capped by the slots the job may
        run on (its own and the cluster's free ones)."""
        return {name: min(self.requirements[self.vertex_ids[name]][1], slots) for name in self.order}

    def check_requirements(self, requirements: Mapping[str, tuple[int, int]]) -> None:
        """Flink's ``JobResourceRequirements`` checks on a PUT, with its messages: every vertex, each
        bound pair ordered, at least 1 and at most the vertex's max parallelism, no unknown vertex."""
        for name in self.order:
            vid = self.vertex_ids[name]
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
            if upper > self.vertex_specs[name].max_parallelism:
                raise ResourceRequirementsError(
                    f"The newly requested parallelism {upper} for the job vertex {vid} exceeds its "
                    f"maximum parallelism {self.vertex_specs[name].max_parallelism}."
                )
            if lower < 1:
                raise ResourceRequirementsError(
                    f"The requested lower bound [{lower}] for job vertex [{vid}] must be at least 1."
                )
        known = set(self.vertex_ids.values())
        for vid in requirements:
            if vid not in known:
                raise ResourceRequirementsError(f"Job vertex [{vid}] was not found in the JobGraph.")

    def weights(self, name: str) -> tuple[float, ...]:
        """Each subtask's share of the vertex's records times its parallelism (they average 1): subtask 0
        takes the hot key's share on top of its even part of the rest; all 1 without a hot key."""
        p = self.parallelism[name]
        hot = self.vertex_specs[name].hot_key_share
        if not hot:
            return (1.0,) * p
        rest = 1.0 - hot
        return (hot * p + rest, *([rest] * (p - 1)))

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
        self.hottest = {name: max(self.weights(name)) for name in self.order}
        # A vertex saturates with its busiest subtask: p * capacity / w_max (p * capacity without a hot key).
        self.max_emission_rate = min(
            self.parallelism[name]
            * self.vertex_specs[name].capacity_per_subtask
            / (gain * self.hottest[name])
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
        if self.buffered:
            self._integrate_buffered(dt_ms, available)
            return
        emitted = min(available, self.max_emission_rate * dt_s)
        self.backlog = max(0.0, available - emitted)
        self.source_records_read += emitted

        utilization: dict[str, float] = {}  # averaged over subtasks
        saturated: set[str] = set()  # where the busiest subtask is saturated
        for name in self.order:
            capacity = self.parallelism[name] * self.vertex_specs[name].capacity_per_subtask * dt_s
            utilization[name] = min(1.0, self.gains[name] * emitted / capacity)
            if utilization[name] * self.hottest[name] >= _SATURATED:
                saturated.add(name)
        for name in self.order:
            backpressured = bool(saturated & self._downstream[name])
            records_in = self.gains[name] * emitted
            self._account(name, dt_ms, utilization[name], backpressured, name in saturated, records_in)

    def _integrate_buffered(self, dt_ms: int, available: float) -> None:
        """One step with network buffers: each vertex processes what reaches it up to its capacity, and
        an upstream is held back only as far as the buffers in front of a vertex would overflow.

        Every source emits alike (one backlog). The limits start at each vertex's capacity (its busiest
        subtask's) and only fall, so the repeated pass ends: each round throttles the inputs of the
        vertices whose buffers would overflow to what fits, which may overflow the buffers before those.
        """
        dt_s = dt_ms / 1000.0
        limit = {
            name: self.parallelism[name]
            * self.vertex_specs[name].capacity_per_subtask
            * dt_s
            / self.hottest[name]
            for name in self.order
        }
        held: set[str] = set()  # vertices whose output buffers are full: back-pressured this step
        for _ in range(len(self.order) + 1):
            processed, inflow = self._flow(limit, available)
            over = [
                name
                for name in self.order
                if self.inputs[name]
                and self.in_flight[name] + inflow[name] - processed[name]
                > self._buffer(name) * (1 + 1e-12) + 1e-9
            ]
            if not over:
                break
            for name in over:
                room = max(0.0, self._buffer(name) - self.in_flight[name] + processed[name])
                share = room / inflow[name] if inflow[name] > 0 else 0.0
                for edge in self.inputs[name]:
                    limit[edge.source] = min(limit[edge.source], processed[edge.source] * share)
                    held.add(edge.source)
        self.backlog = max(0.0, available - processed[self.sources[0]])
        self.source_records_read += processed[self.sources[0]]
        for name in self.order:
            capacity = self.parallelism[name] * self.vertex_specs[name].capacity_per_subtask * dt_s
            u = min(1.0, processed[name] / capacity)
            saturated = u * self.hottest[name] >= _SATURATED
            if self.inputs[name]:
                self.in_flight[name] = max(0.0, self.in_flight[name] + inflow[name] - processed[name])
            backpressured = name in held and processed[name] >= limit[name] * _SATURATED
            self._account(name, dt_ms, u, backpressured, saturated, processed[name])

    def _flow(
        self, limit: Mapping[str, float], available: float
    ) -> tuple[dict[str, float], dict[str, float]]:
        """(processed, arrived) per vertex in one step under ``limit``: a source emits what is available
        up to every source's limit; any other vertex reads its buffers and what arrives, up to its own."""
        emitted = min(available, *(limit[name] for name in self.sources))
        processed: dict[str, float] = {}
        inflow: dict[str, float] = {}
        for name in self.order:
            if not self.inputs[name]:
                inflow[name] = processed[name] = emitted
                continue
            arrived = 0.0
            for edge in self.inputs[name]:
                fan_out = self.parallelism[name] if edge.ship_strategy == "BROADCAST" else 1
                arrived += processed[edge.source] * self.vertex_specs[edge.source].output_ratio * fan_out
            inflow[name] = arrived
            processed[name] = min(limit[name], self.in_flight[name] + arrived)
        return processed, inflow

    def _buffer(self, name: str) -> float:
        """Records the network buffers in front of ``name`` hold, over all its subtasks."""
        return self.vertex_specs[name].in_flight_records * self.parallelism[name]

    def _account(
        self, name: str, dt_ms: int, u: float, backpressured: bool, saturated: bool, records_in: float
    ) -> None:
        """One vertex's counters over a step (of either model): busy ``u``, the rest back-pressured when
        its output is held back (buffers full, or a saturated vertex downstream), else idle."""
        task = self.tasks[name]
        slot_ms = dt_ms * self.parallelism[name]
        bp = 1.0 - u if backpressured else 0.0
        idle = max(0.0, 1.0 - u - bp)
        task.records_in += records_in
        task.records_out += records_in * self.vertex_specs[name].output_ratio
        task.busy_ms += u * slot_ms
        task.backpressured_ms += bp * slot_ms
        task.idle_ms += idle * slot_ms
        task.interval_bp_ms += bp * slot_ms
        task.interval_idle_ms += idle * slot_ms
        task.backpressured_now = backpressured and bp > 0
        task.saturated_now = saturated

    def tick(self) -> None:
        if self.state == "RUNNING":
            for name, task in self.tasks.items():
                task.tick(self.parallelism[name])

    def next_event_ms(self) -> int | None:
        if self.state == "RESTARTING":
            due = self.restart_end_ms
        elif self.state == "RUNNING":
            due = self.pending_restart_ms
        else:
            return None
        events = [t for t in (due, self.slot_release_ms) if t is not None]
        return min(events) if events else None

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

    def finish_restart(self, now_ms: int, slots: int) -> None:
        """Back to RUNNING with what is requested now, within ``slots`` (its own and the free ones); the
        backlog comes back from the checkpoint."""
        self.parallelism = self.desired_parallelism(slots)
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
        self.slot_release_ms = None
        self.slots_held = 0

    def _set_state(self, state: str, now_ms: int) -> None:
        self.state = state
        self.timestamps[state] = now_ms
        self.last_modified_ms = now_ms
