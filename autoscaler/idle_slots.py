"""Slots this daemon's scale-downs left idle: Flink gives them back about a minute after the restart.

A job that restarts onto fewer slots keeps the ones it no longer uses in its slot pool until
``slot.idle.timeout`` (50 s by default) and a little more have passed: on Flink 2.3 they went back to the
cluster 69-78 s after the restart (``docs/e2e.md``, "Slots"). Another job's scale-up that needs them in
that minute finds them taken. With ``scaling.insufficient-slots: CAP`` it would restart now onto what
is free, and again once it could have had the rest: two restarts where waiting a minute costs one.
So :mod:`autoscaler.claim_slots` counts these slots as coming, and a rescale that fits with them waits
for them instead of being capped.

What counts: the scale-downs this tick decided (their restart is about to happen) and the last rescale
in each job's history if it shrank the job and its slots may still be idle. Only this daemon's jobs:
another daemon's scale-downs are not known here, and their slots come free unannounced, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.act import JobStep
from autoscaler.resources import required_slots
from autoscaler.slot_fit import IdleSlots

__all__ = ["RELEASE_MARGIN_MS", "IdleSlots", "idle_slots"]

RELEASE_MARGIN_MS = 40_000
"""From a scale-down's restart (or its PUT, before it is confirmed) to the slots being free is
``slot.idle.timeout`` plus this: 19-28 s more were measured, and the restart itself takes seconds.
Longer than needed costs only a rescale that waits for slots already back (it then fits and goes)."""


def idle_slots(
    steps: Iterable[JobStep], now_ms: int, idle_timeout_ms: Mapping[str, int]
) -> dict[str, list[IdleSlots]]:
    """By cluster: the slots the jobs' scale-downs (this tick's and recent ones) leave idle for a while.

    ``idle_timeout_ms`` is each cluster's ``slot.idle.timeout`` (``/jobmanager/config``)."""
    out: dict[str, list[IdleSlots]] = {}
    for step in steps:
        decision = step.decision
        if decision is None:
            continue
        topology, cluster = step.sample.topology, step.job.cluster
        release_ms = idle_timeout_ms.get(cluster, 0) + RELEASE_MARGIN_MS
        if step.outcome is None and decision.applies:  # this tick's rescale, about to be asked for
            freed = required_slots(topology) - required_slots(
                topology, {vid: c.target for vid, c in decision.changes.items()}
            )
            since_ms = now_ms
        elif decision.state.history:
            last = decision.state.history[-1]
            before = required_slots(topology, {vid: old for vid, (old, _) in last.changes.items()})
            after = required_slots(topology, {vid: new for vid, (_, new) in last.changes.items()})
            freed = before - after
            since_ms = last.confirmed_ms if last.confirmed_ms is not None else last.ts_ms
        else:
            continue
        if freed > 0 and now_ms < since_ms + release_ms:
            out.setdefault(cluster, []).append(IdleSlots(step.job.key, freed, since_ms + release_ms))
    return out
