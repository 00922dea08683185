"""The executor-plugin chain mechanics (the loader and config come with the plugin issue)."""

from __future__ import annotations

import asyncio

from autoscaler.model import VertexChange
from autoscaler.plugins import PluginContext, ScalingExecutorPlugin, run_chain
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import JOB, make_evaluation, vertex_eval

EV = make_evaluation([vertex_eval("src", 1), vertex_eval("work", 1, 3)])
CTX = PluginContext(JOB, AutoscalerOptions(enabled=True), EV)
CHANGES = {"work": VertexChange("work", 1, 3)}


class Fn(ScalingExecutorPlugin):
    def __init__(self, name, fn, priority=0, seen=None):
        self.name, self._fn, self._priority, self.seen = name, fn, priority, seen if seen is not None else []

    def priority(self):
        return self._priority

    def apply(self, context, changes):
        self.seen.append((self.name, dict(changes)))
        return self._fn(changes)


async def test_no_plugins_passes_changes_through():
    result = await run_chain([], CTX, CHANGES)
    assert result.changes == CHANGES and result.outcomes == ()


async def test_approve_modify_and_order_by_priority_then_configuration():
    seen: list = []
    bump = Fn("bump", lambda c: {"work": VertexChange("work", 1, 4)}, priority=5, seen=seen)
    first = Fn("first", lambda c: c, priority=-1, seen=seen)
    tie = Fn("tie", lambda c: c, priority=5, seen=seen)
    result = await run_chain([bump, tie, first], CTX, CHANGES)
    assert [name for name, _ in seen] == ["first", "bump", "tie"]
    assert seen[2][1] == {"work": VertexChange("work", 1, 4)}  # tie saw bump's output
    assert [o.outcome for o in result.outcomes] == [
        Reason.SCALING_APPROVED,
        Reason.SCALING_MODIFIED,
        Reason.SCALING_APPROVED,
    ]
    assert result.changes == {"work": VertexChange("work", 1, 4)}


async def test_none_or_empty_vetoes_and_short_circuits():
    later = Fn("later", lambda c: c)
    for veto in (lambda c: None, lambda c: {}):
        result = await run_chain([Fn("v", veto), later], CTX, CHANGES)
        assert result.changes is None and result.vetoed_by.plugin == "v"
        assert later.seen == []


async def test_raising_or_slow_or_invalid_plugin_is_a_veto():
    def boom(c):
        raise RuntimeError("boom")

    class Slow(ScalingExecutorPlugin):
        name = "slow"

        async def apply(self, context, changes):
            await asyncio.sleep(10)
            return changes

    invalid = Fn("bad", lambda c: {"work": VertexChange("work", 1, 999)})
    unknown = Fn("ghost", lambda c: {"nope": VertexChange("nope", 1, 2)})
    for plugin in (Fn("boom", boom), Slow(), invalid, unknown):
        result = await run_chain([plugin], CTX, CHANGES, budget_s=0.01)
        assert result.changes is None
        assert result.outcomes[-1].outcome is Reason.PLUGIN_FAILED


async def test_a_result_that_is_not_changes_fails_the_chain_with_plugin_failed():
    """Issue 12: a string or a number used to escape as an AutoscalerError (no PluginFailed outcome, so
    no plugin alert), and a fractional target was PUT to Flink on every tick."""
    cases = {
        "text": (lambda c: "approve", "expected a mapping of vertex id to VertexChange, got str"),
        "number": (lambda c: 5, "got int"),
        "list": (lambda c: [VertexChange("work", 1, 3)], "got list"),
        "fraction": (lambda c: {"work": VertexChange("work", 1, 3.5)}, "parallelism 3.5 is not a whole"),
        "flag": (lambda c: {"work": VertexChange("work", 2, True)}, "is not a whole number"),
        "tuple": (lambda c: {"work": (1, 3)}, "expected a VertexChange for that vertex, got tuple"),
    }
    for name, (fn, message) in cases.items():
        result = await run_chain([Fn(name, fn)], CTX, CHANGES)
        assert result.changes is None, name
        (outcome,) = result.outcomes
        assert outcome.outcome is Reason.PLUGIN_FAILED and message in outcome.detail, (name, outcome)


async def test_a_plain_plugin_that_blocks_does_not_block_the_loop_and_is_not_called_twice():
    """Issue 12: a synchronous apply that never returns froze the daemon (health, signals, every tick).
    It runs on a worker thread under its budget; while it is still blocked it is not called again."""
    import threading

    release = threading.Event()
    calls = []

    class Blocking(ScalingExecutorPlugin):
        name = "blocking"

        def apply(self, context, changes):
            calls.append(1)
            release.wait(30)
            return changes

    plugin = Blocking()
    beats = []

    async def heartbeat():
        for _ in range(20):
            beats.append(1)
            await asyncio.sleep(0.005)

    try:
        beat = asyncio.create_task(heartbeat())
        first = await run_chain([plugin], CTX, CHANGES, budget_s=0.05)
        await beat
        assert first.changes is None and first.outcomes[-1].outcome is Reason.PLUGIN_FAILED
        assert "budget" in first.outcomes[-1].detail
        assert len(beats) == 20  # the loop kept running while the plugin was blocked
        again = await run_chain([plugin], CTX, CHANGES, budget_s=0.05)
        assert "previous call has not returned" in again.outcomes[-1].detail and len(calls) == 1
    finally:
        release.set()
    for _ in range(100):  # once it returns, it is called again
        result = await run_chain([plugin], CTX, CHANGES, budget_s=1.0)
        if result.changes is not None:
            break
        await asyncio.sleep(0.01)
    assert result.changes == CHANGES and len(calls) == 2
