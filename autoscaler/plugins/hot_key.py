"""The built-in ``hot-key-guard`` executor plugin: no scale-up for a vertex whose load sits on a hot key.

A keyed vertex sends every record of one key to one subtask. When one key carries much of the load,
that subtask is busy while its peers idle, the vertex's busy time (the max over subtasks, by default)
says it is saturated, and the scaler asks for more parallelism, which cannot spread one key: the
restart buys nothing, and the next evaluation asks again (the reference notices only after the
restart, as an ineffective scale-up). The collector already tells such a vertex
(:mod:`autoscaler.skew`: slow subtasks that also receive far more records than the median); this
plugin acts on it.

It is off by default and enabled like any other executor plugin::

    job.autoscaler.scaling.custom-executors: hot-key
    job.autoscaler.scaling.custom-executor.hot-key.class: hot-key-guard
    job.autoscaler.scaling.custom-executor.hot-key.mode: trim      # or veto

``trim`` (the default) keeps each hot vertex at its parallelism and lets the other changes through (a
veto when none is left); ``veto`` drops the whole rescale. Either way the reason, with the slow
subtasks and their share of the records, is in the ``ScalingModified`` / ``ScalingVetoed`` event and in
``explain``. A scale-down of a hot vertex passes: fewer subtasks do not slow the hot one.
"""

from __future__ import annotations

from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin, Verdict

__all__ = ["MODES", "HotKeyGuard"]

MODES = ("trim", "veto")


class HotKeyGuard(ScalingExecutorPlugin):
    """Holds back the scale-up of a vertex with a hot key (``mode``: trim or veto)."""

    name = "hot-key-guard"

    def apply(self, context: PluginContext, changes: Changes) -> Changes | Verdict:
        mode = context.config.get("mode", "trim").strip().lower()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        sample = context.evaluation.sample
        names = {v.id: v.name for v in sample.topology}
        hot = [
            vid
            for vid, change in changes.items()
            if change.is_scale_up and (skew := sample.skew.get(vid)) is not None and skew.hot_key
        ]
        if not hot:
            return changes
        why = "; ".join(sample.skew[vid].text(names[vid]) for vid in hot)
        held = ", ".join(f"{names[vid]} {changes[vid].current} -> {changes[vid].target}" for vid in hot)
        if mode == "veto":
            return Verdict(None, f"scale-up of {held} vetoed: {why}")
        kept = {vid: change for vid, change in changes.items() if vid not in hot}
        if not kept:
            return Verdict(None, f"scale-up of {held} held, and nothing else changes: {why}")
        return Verdict(kept, f"scale-up of {held} held, the other changes kept: {why}")
