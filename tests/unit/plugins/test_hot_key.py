"""The built-in hot-key-guard executor plugin (autoscaler/plugins/hot_key.py), through the real chain."""

from __future__ import annotations

from autoscaler.model import VertexChange
from autoscaler.plugins import PluginContext, run_chain
from autoscaler.plugins.hot_key import HotKeyGuard
from autoscaler.plugins.loader import discover_plugins
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.skew import SlowSubtaskRule, judge
from autoscaler.testing import JOB, make_evaluation, vertex_eval

RULE = SlowSubtaskRule()
HOT = judge(2.5, [1000.0, 200.0, 200.0, 200.0], [1000.0, 200.0, 200.0, 200.0], RULE)
SLOW_NODE = judge(1.9, [900.0, 300.0, 300.0, 300.0], [100.0, 100.0, 100.0, 100.0], RULE)
EV = make_evaluation(
    [vertex_eval("src", 2, 4), vertex_eval("keyed", 4, 8), vertex_eval("sink", 4, 2)],
    skew={"keyed": HOT},
)


def context(mode: str | None = None, evaluation=EV) -> PluginContext:
    config = {"mode": mode} if mode else {}
    return PluginContext(JOB, AutoscalerOptions(enabled=True), evaluation, config)


CHANGES = {
    "src": VertexChange("src", 2, 4),
    "keyed": VertexChange("keyed", 4, 8),
    "sink": VertexChange("sink", 4, 2),
}


async def test_trim_holds_the_hot_vertex_and_keeps_the_other_changes_saying_why() -> None:
    result = await run_chain([HotKeyGuard()], context(), CHANGES)
    assert result.changes == {"src": CHANGES["src"], "sink": CHANGES["sink"]}
    (outcome,) = result.outcomes
    assert outcome.outcome is Reason.SCALING_MODIFIED
    held = "scale-up of keyed 4 -> 8 held, the other changes kept: keyed: subtask 0 of 4 is slow"
    assert outcome.detail.startswith(held)
    assert "a hot key" in outcome.detail


async def test_trim_with_nothing_left_and_veto_mode_veto_with_the_reason() -> None:
    only = {"keyed": CHANGES["keyed"]}
    trimmed = await run_chain([HotKeyGuard()], context(), only)
    assert trimmed.changes is None and trimmed.vetoed_by.outcome is Reason.SCALING_VETOED
    assert "held, and nothing else changes" in trimmed.vetoed_by.detail
    vetoed = await run_chain([HotKeyGuard()], context("VETO"), CHANGES)
    assert vetoed.changes is None and vetoed.vetoed_by.detail.startswith("scale-up of keyed 4 -> 8 vetoed:")


async def test_a_slow_subtask_without_a_hot_key_a_scale_down_and_an_even_job_pass() -> None:
    slow_node = make_evaluation(
        [vertex_eval("src", 2, 4), vertex_eval("keyed", 4, 8), vertex_eval("sink", 4, 2)],
        skew={"keyed": SLOW_NODE},
    )
    passed = await run_chain([HotKeyGuard()], context(evaluation=slow_node), CHANGES)
    assert passed.changes == CHANGES and passed.outcomes[0].outcome is Reason.SCALING_APPROVED
    down = {"keyed": VertexChange("keyed", 4, 2)}
    assert (await run_chain([HotKeyGuard()], context(), down)).changes == down


async def test_an_unknown_mode_fails_the_chain_which_vetoes() -> None:
    result = await run_chain([HotKeyGuard()], context("spread"), CHANGES)
    assert result.changes is None and result.vetoed_by.outcome is Reason.PLUGIN_FAILED
    assert "mode must be one of trim, veto, not 'spread'" in result.vetoed_by.detail


def test_it_is_installed_with_the_daemon_and_found_like_any_plugin() -> None:
    registry, problems = discover_plugins()
    assert registry.resolve("hot-key-guard") is HotKeyGuard
    assert registry.resolve("autoscaler.plugins.hot_key.HotKeyGuard") is HotKeyGuard
    assert problems == []
