"""Slots this daemon's scale-downs left idle: Flink gives them back about a minute after the restart.

A job that restarts onto fewer slots keeps the ones it no longer uses in its slot pool until
``slot.idle.timeout`` (50 s by default) and a little more have passed: on Flink 2.3 they went back to the
cluster 69-78 s after the restart (``docs/e2e.md``, "Slots"). Another job's scale-up that needs them in
that minute finds them taken. With ``scaling.insufficient-slots: CAP`` it would restart now onto what
is free, and again once it could have had the rest: two restarts where waiting a minute costs one.
So :mod:`autoscaler.tick.slots` counts these slots as coming, and a rescale that fits with them waits
for them instead of being capped.

What counts: the scale-downs this tick is about to ask for (:func:`scale_downs`), and the ones this daemon
asked for in the last minute or so (:class:`IdleSlotBook`, kept in memory across ticks: a job that is
restarting is not sampled, so its state is not at hand). Another daemon's scale-downs are not known
here, and their slots come free unannounced, as before; so do a restarted daemon's for that minute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.resources import required_slots
from autoscaler.slot_fit import IdleSlots
from autoscaler.tick.steps import Decision, JobOutcome, JobStep

__all__ = ["RELEASE_MARGIN_MS", "IdleSlotBook", "IdleSlots", "scale_downs"]

RELEASE_MARGIN_MS = 40_000
"""From a scale-down's PUT to its slots being free is ``slot.idle.timeout`` plus this: the restart
(seconds) and 19-28 s more were measured. Longer than needed costs only a rescale that waits for slots
already back, which then fits and goes; shorter would cap one whose slots were a moment away."""


def scale_downs(
    steps: Iterable[JobStep], now_ms: int, idle_timeout_ms: Mapping[str, int]
) -> dict[str, list[IdleSlots]]:
    """By cluster: the slots this tick's rescales about to be asked for leave idle after their restart.

    ``idle_timeout_ms`` is each cluster's ``slot.idle.timeout`` (``/jobmanager/config``)."""
    out: dict[str, list[IdleSlots]] = {}
    for step in steps:
        if step.outcome is None and step.decision is not None and step.decision.applies:
            idle = _left_idle(step.decision, now_ms, idle_timeout_ms)
            if idle is not None:
                out.setdefault(step.job.cluster, []).append(idle)
    return out


def _left_idle(decision: Decision, now_ms: int, idle_timeout_ms: Mapping[str, int]) -> IdleSlots | None:
    """The slots a rescale asked for at ``now_ms`` leaves idle, if it shrinks the job."""
    if decision.evaluation is None:
        return None
    topology = decision.evaluation.sample.topology
    targets = {vid: c.target for vid, c in decision.changes.items()}
    freed = required_slots(topology) - required_slots(topology, targets)
    if freed <= 0:
        return None
    until = now_ms + idle_timeout_ms.get(decision.job.cluster, 0) + RELEASE_MARGIN_MS
    return IdleSlots(decision.job.key, freed, until)


class IdleSlotBook:
    """The slots the scale-downs this daemon asked for left idle, until they are free again."""

    def __init__(self) -> None:
        self._idle: dict[str, tuple[JobRef, IdleSlots]] = {}  # job key -> (the JobID asked, its latest)

    def note(self, outcomes: Iterable[JobOutcome], idle_timeout_ms: Mapping[str, int]) -> None:
        """Remember the scale-downs of this tick that Flink was asked for."""
        for o in outcomes:
            if o.outcome is Reason.SCALING and o.realized is not None and o.decision is not None:
                idle = _left_idle(o.decision, o.now_ms, idle_timeout_ms)
                if idle is not None:
                    self._idle[o.job.key] = (o.job, idle)

    def current(self, now_ms: int) -> dict[str, list[IdleSlots]]:
        """By cluster, the idle slots not yet due back by ``now_ms`` (the others are forgotten)."""
        self._idle = {key: (j, i) for key, (j, i) in self._idle.items() if now_ms < i.until_ms}
        out: dict[str, list[IdleSlots]] = {}
        for job, idle in self._idle.values():
            out.setdefault(job.cluster, []).append(idle)
        return out

    def for_claims(
        self, steps: Iterable[JobStep], now_ms: int, idle_timeout_ms: Mapping[str, int]
    ) -> dict[str, list[IdleSlots]]:
        """What the slot stage may wait for: the idle slots of earlier ticks' scale-downs and of this
        tick's (:func:`scale_downs`), by cluster.

        A job name that runs under another JobID than the one whose scale-down left them was cancelled
        (and submitted again): Flink released the old run's slots with it, so they are free already,
        not coming; they are forgotten."""
        steps = list(steps)
        running = {s.job.key: s.job.job_id for s in steps}
        self._idle = {
            key: (j, i) for key, (j, i) in self._idle.items() if running.get(key, j.job_id) == j.job_id
        }
        out = self.current(now_ms)
        for cluster, idle in scale_downs(steps, now_ms, idle_timeout_ms).items():
            out.setdefault(cluster, []).extend(idle)
        return out
