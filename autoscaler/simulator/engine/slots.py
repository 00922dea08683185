"""The simulated session cluster's slots: which ones each job's slot pool holds, and when they change hands.

Flink 2.3's adaptive scheduler declares a job's request to the resource manager at once. Measured on the
lab cluster (``docs/e2e.md``, "Slots"):

* a PUT that raises the request takes the free slots it wants within a second, while the job runs on at
  its old parallelism until the cooldown ends (7 free slots became 4 a second after the PUT; the job
  restarted 27 s later);
* a restart to fewer slots keeps the ones it no longer uses, idle, for 69-78 s (with the default
  ``slot.idle.timeout`` of 50 s), before they go back to the cluster;
* slots that come free go at once to a job that runs below its request, which scales up to them after
  its cooldown.

So what another job's rescale finds free, in the ticks between a PUT and its restart and for a while
after a scale-down, depends on this; a simulator that freed and took slots only at restarts let the
daemon see slots that real Flink had already given away.

Its own module because it is the bookkeeping of slots between jobs, apart from the clock, the restarts
and the metric fetcher (:mod:`autoscaler.simulator.engine.cluster`), which call it.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.simulator.engine.job import SimJob
from autoscaler.simulator.spec import SimClusterSpec

__all__ = ["SlotPools"]


class SlotPools:
    """Every job's slot pool (``SimJob.slots_held``) over the cluster's slots; the cluster's lock held."""

    def __init__(self, jobs: Mapping[str, SimJob], spec: SimClusterSpec) -> None:
        self._jobs = jobs
        self._spec = spec
        self._releases: dict[str, int] = {}  # job id -> when its idle slots go back (SimJob.slot_release_ms)

    def free(self) -> int:
        """The slots no job's pool holds."""
        return self._spec.slots_total - sum(job.slots_taken for job in self._jobs.values())

    def for_restart(self, job: SimJob) -> int:
        """The slots a (re)starting job may run on: its own and the free ones, as Flink's adaptive
        scheduler sees them (the other jobs keep theirs, through their restarts too)."""
        others = sum(other.slots_taken for other in self._jobs.values() if other is not job)
        return max(1, self._spec.slots_total - others)

    def take_free(self, job: SimJob) -> None:
        """The job's pool takes the free slots its request wants (none if it wants no more)."""
        wanted = job.slots_requested - job.slots_taken
        if wanted > 0 and not job.ended:
            job.slots_held = job.slots_taken + min(wanted, max(0, self.free()))

    def schedule_release(self, job: SimJob) -> None:
        """Slots the job holds beyond what it runs on and asks for go back after the idle timeout; a
        restart to come still uses them, so their time counts from its end."""
        idle = job.slots_held > max(job.slots_used, job.slots_requested)
        if not idle or job.state != "RUNNING" or job.pending_restart_ms is not None:
            return
        if job.slot_release_ms is None:
            job.slot_release_ms = job.t_ms + round(self._spec.idle_slot_release_s * 1000)
            self._releases[job.job_id] = job.slot_release_ms

    def next_release_ms(self) -> int | None:
        """When the next idle slots go back, if any are to."""
        return min(self._releases.values(), default=None)

    def due(self, at_ms: int) -> list[SimJob]:
        """The jobs whose idle slots were to go back by ``at_ms`` and have not."""
        return [self._jobs[job_id] for job_id, release_ms in self._releases.items() if release_ms <= at_ms]

    def release_idle(self, job: SimJob) -> None:
        """The job's idle slots go back (its release is due) and are offered to the others."""
        job.slot_release_ms = None
        self._releases.pop(job.job_id, None)
        keep = max(job.slots_used, min(job.slots_held, job.slots_requested))
        if job.slots_held > keep:
            job.slots_held = keep
            self._offer(job)

    def ended(self, job: SimJob) -> None:
        """The job ended: its slots are free now, and offered to the others."""
        self._releases.pop(job.job_id, None)
        self._offer(job)

    def _offer(self, freed_by: SimJob) -> None:
        """Slots came free: every job that runs below its request takes them at once and scales up to
        them once its cooldown has passed."""
        cooldown_ms = round(self._spec.cooldown_after_rescaling_s * 1000)
        for job in self._jobs.values():
            if job is freed_by or job.state not in ("RUNNING", "RESTARTING"):
                continue
            self.take_free(job)
            if job.state != "RUNNING" or job.pending_restart_ms is not None:
                continue
            desired = job.desired_parallelism(job.slots_taken)
            if any(desired[name] > job.parallelism[name] for name in job.order):
                job.pending_restart_ms = max(job.t_ms, freed_by.t_ms, job.running_since_ms + cooldown_ms)
