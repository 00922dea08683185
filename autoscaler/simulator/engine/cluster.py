"""The simulated session cluster: the clock, the adaptive scheduler, and the metric fetcher.

``SimCluster`` owns the jobs and is the only thing that moves them: every public read first integrates
the jobs it reads up to the clock, fires their due restarts, and answers under one lock. It also plays the
JobManager's ``MetricFetcher`` (a fresh or lazy metric store) and the TaskManagers' and JobManager's
own JVM metrics.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from autoscaler.clock import Clock
from autoscaler.simulator.engine.job import SimJob
from autoscaler.simulator.engine.reporting import report
from autoscaler.simulator.engine.slots import SlotPools
from autoscaler.simulator.engine.store import (
    TICK_MS,
    LazyMapping,
    MetricStore,
    MetricValue,
    UnknownJobError,
)
from autoscaler.simulator.spec import RateSchedule, SimClusterSpec, SimJobSpec, stable_hex_id

__all__ = ["SimCluster"]


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
        self._slots = SlotPools(self._jobs, spec)
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
        """Integrate every job up to the clock and return the simulated now."""
        self.advance_to(self._sync_ms())
        return self._now_ms

    @_synchronized
    def current_ms(self) -> int:
        """The simulated now, integrating no job: a REST request's start. Integrating every job on every
        request made one cost O(jobs); each job catches up when read (``job``, ``jobs``, a metric fetch),
        so only where its integration steps are cut differs: nothing for a constant load."""
        return self._sync_ms()

    def _sync_ms(self) -> int:
        now = self.clock.now_ms()
        if now > self._now_ms:
            self._now_ms = now
        return self._now_ms

    @_synchronized
    def advance_to(self, now_ms: int) -> None:
        """Integrate every job from where it was to ``now_ms``; going backwards is a no-op."""
        if now_ms > self._now_ms:
            self._now_ms = now_ms
        self._release_due_slots(self._now_ms)
        for job in self._jobs.values():
            self._advance_job(job, self._now_ms)

    def _current(self, job: SimJob) -> SimJob:
        """``job`` integrated up to the cluster's now (the clock already read)."""
        self._release_due_slots(self._now_ms)
        self._advance_job(job, self._now_ms)
        return job

    def _release_due_slots(self, now_ms: int) -> None:
        """Slots another job lets go change what this one may take: every job is integrated up to each
        release due by ``now_ms``, in time order, before anything reads past it (releases are rare, so
        the jobs otherwise still catch up only when read)."""
        while (due := self._slots.next_release_ms()) is not None and due <= now_ms:
            for job in self._jobs.values():
                self._advance_job(job, due)
            for job in self._slots.due(due):  # not fired by its job's own events: it ran no more
                self._slots.release_idle(job)

    def _current_jobs(self) -> list[SimJob]:
        """Every job integrated up to the clock: for whatever reads more than one job."""
        self.advance_to(self._sync_ms())
        return list(self._jobs.values())

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
            if job.slot_release_ms is not None and job.slot_release_ms <= job.t_ms:
                self._slots.release_idle(job)
            elif (
                job.state == "RESTARTING"
                and job.restart_end_ms is not None
                and job.restart_end_ms <= job.t_ms
            ):
                job.finish_restart(job.t_ms, self._slots.for_restart(job))
                job.slots_held = max(job.slots_held, job.slots_used)
                self._schedule_restart(job)
                self._slots.schedule_release(job)
            elif (
                job.state == "RUNNING"
                and job.pending_restart_ms is not None
                and job.pending_restart_ms <= job.t_ms
            ):
                if job.desired_parallelism(self._slots.for_restart(job)) == job.parallelism:
                    job.pending_restart_ms = None  # the slots it was to grow into went to another job
                    self._slots.schedule_release(job)
                    return
                job.begin_restart(job.t_ms, round(self.spec.restart_pause_s * 1000))
            else:
                return

    def _schedule_restart(self, job: SimJob) -> None:
        """Adaptive scheduler: a changed requirement waits for the cooldown since the last (re)start."""
        if job.state != "RUNNING":
            return
        if job.desired_parallelism(self._slots.for_restart(job)) == job.parallelism:
            job.pending_restart_ms = None
            return
        cooldown_ms = round(self.spec.cooldown_after_rescaling_s * 1000)
        job.pending_restart_ms = max(job.t_ms, job.running_since_ms + cooldown_ms)

    # ---- jobs ----------------------------------------------------------------------------------

    @_synchronized
    def submit(self, job: SimJobSpec) -> str:
        """Start a job now (RUNNING at once); the id depends only on the name and the submission count."""
        now = self._sync_ms()  # the other jobs catch up when read: they do not depend on this one
        job_id = stable_hex_id("job", job.name, str(len(self._jobs)))
        self._jobs[job_id] = SimJob(job, job_id, now, max(1, self._slots.free()))
        return job_id

    @_synchronized
    def cancel(self, job_id: str) -> None:
        job = self.job(job_id)
        if job.state in ("RUNNING", "RESTARTING"):
            job.cancel(self._now_ms)
            self._slots.ended(job)

    @_synchronized
    def set_input_rate(self, job_id: str, schedule: RateSchedule) -> None:
        """Change the offered load from now on (offsets in ``schedule`` still count from job submission)."""
        self.job(job_id).schedule = schedule

    @_synchronized
    def job(self, job_id: str) -> SimJob:
        """The job, integrated up to now; ``UnknownJobError`` if it was never submitted."""
        self._sync_ms()
        try:
            job = self._jobs[job_id]
        except KeyError:
            raise UnknownJobError(job_id) from None
        return self._current(job)

    @_synchronized
    def jobs(self) -> list[SimJob]:
        return self._current_jobs()

    @_synchronized
    def slots_used(self) -> int:
        """The slots that are not free: every job's slot pool's (``SimJob.slots_taken``)."""
        return min(self.slots_total, sum(job.slots_taken for job in self._current_jobs()))

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
        job.check_requirements(requirements)
        job.requirements = {vid: requirements[vid] for vid in job.vertex_ids.values()}
        self.advance_to(self._now_ms)  # what the other jobs' slot pools hold now
        self._slots.take_free(job)
        self._schedule_restart(job)
        self._slots.schedule_release(job)
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
        triggers a new fetch, if the last one is *more* than an interval old: Flink's
        ``MetricFetcherImpl.update`` compares strictly, so a client polling exactly once per interval
        gets a new fetch only every other time. Only a fetch integrates the jobs (all of them): serving
        the last one needs none, so a metric query costs the same whatever the number of jobs.
        """
        now = self._sync_ms()
        interval_ms = round(self.spec.metric_fetch_interval_s * 1000)
        if interval_ms <= 0:
            return self._fetch(now)
        answer = self._store if self._store is not None else MetricStore(taken_ms=now)
        if self._store is None or now - self._store.taken_ms > interval_ms:
            self._store = self._fetch(now)
        return answer

    def _fetch(self, now_ms: int) -> MetricStore:
        """Every job's metrics at ``now_ms``, each job frozen now and reported when first read: Flink
        fetches in the background, answering from the last store meanwhile; building every job's here
        held the lock for seconds on a fleet (0.7 s for 1,000 jobs), a stall no JobManager has."""
        self.advance_to(now_ms)
        jobs = LazyMapping(
            {job.job_id: functools.partial(report, job.frozen(), now_ms) for job in self._jobs.values()}
        )
        return MetricStore(
            taken_ms=now_ms,
            jobs=jobs,
            taskmanagers=self._taskmanager_metrics(),
            jobmanager=self._jobmanager_metrics(),
        )

    @_synchronized
    def tasks_per_taskmanager(self) -> list[int]:
        """Subtasks per TaskManager: slots fill TaskManager 0 first; a slot runs a subtask of each vertex."""
        per_tm = [0] * self.spec.taskmanagers
        slot = 0
        for job in self._current_jobs():
            if job.slots_taken == 0:
                continue
            for k in range(job.slots_taken):
                tm = min(slot // self.spec.slots, self.spec.taskmanagers - 1)
                per_tm[tm] += sum(1 for p in job.parallelism.values() if p > k)
                slot += 1
        return per_tm

    @_synchronized
    def slots_used_per_taskmanager(self) -> list[int]:
        used = self.slots_used()
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
                "Status.JVM.Memory.Heap.Max": self.spec.taskmanager_heap_bytes,
                "Status.JVM.Memory.Heap.Committed": self.spec.taskmanager_heap_bytes,
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
        used = min(self.slots_total, sum(job.slots_taken for job in self._jobs.values()))
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
