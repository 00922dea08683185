"""Plugin discovery from wheels dropped into a directory (built by hand here: no network, no build)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from autoscaler.evaluate.custom import CustomEvaluator
from autoscaler.plugins.api import ScalingExecutorPlugin
from autoscaler.plugins.evaluators import EvaluatorInstances, discover_evaluators
from autoscaler.plugins.loader import (
    ENTRY_POINT_GROUP,
    EVALUATOR_ENTRY_POINT_GROUP,
    PluginError,
    discover_plugins,
)
from autoscaler.settings import AutoscalerOptions


def make_wheel(
    directory: Path,
    dist: str,
    module: str,
    source: str,
    entry_points: dict[str, str],
    evaluators: dict[str, str] | None = None,
) -> Path:
    """A minimal pure-Python wheel: the module, METADATA and entry_points.txt (both plugin groups)."""
    wheel = directory / f"{dist}-0.1-py3-none-any.whl"
    info = f"{dist}-0.1.dist-info"
    groups = {ENTRY_POINT_GROUP: entry_points, EVALUATOR_ENTRY_POINT_GROUP: evaluators or {}}
    text = "".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in eps.items())
        for group, eps in groups.items()
        if eps or group == ENTRY_POINT_GROUP
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{module}/__init__.py", source)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        zf.writestr(f"{info}/entry_points.txt", text)
        zf.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.fixture(autouse=True)
def isolated_sys_path(monkeypatch):
    """Discovery appends dropped wheels to sys.path; keep each test's additions to itself."""
    monkeypatch.setattr(sys, "path", list(sys.path))


PLUGIN_SOURCE = """
from autoscaler.plugins.api import ScalingExecutorPlugin

class Approve(ScalingExecutorPlugin):
    name = "approve-all"
    def apply(self, context, changes):
        return changes

class NotAPlugin:
    pass
"""


def test_a_dropped_wheel_is_discovered_and_resolved_by_name_or_class(tmp_path):
    make_wheel(
        tmp_path,
        "approve_plugin",
        "approve_plugin_mod",
        PLUGIN_SOURCE,
        {"approve-all": "approve_plugin_mod:Approve", "broken": "approve_plugin_mod:NotAPlugin"},
    )
    registry, problems = discover_plugins(tmp_path)
    assert problems == []
    found = registry.find("approve-all")
    assert found.origin == "wheel approve_plugin-0.1-py3-none-any.whl"
    for ref in ("approve-all", "approve_plugin_mod:Approve", "approve_plugin_mod.Approve"):
        cls = registry.resolve(ref)
        assert issubclass(cls, ScalingExecutorPlugin) and cls.__name__ == "Approve"
    with pytest.raises(PluginError, match="not a ScalingExecutorPlugin"):
        registry.resolve("broken")
    with pytest.raises(
        PluginError, match=r"no executor plugin 'nope' is installed; discovered: .*approve-all"
    ):
        registry.resolve("nope")


def test_unreadable_or_empty_wheels_are_reported_not_fatal(tmp_path):
    (tmp_path / "garbage-0.1-py3-none-any.whl").write_bytes(b"not a zip")
    make_wheel(tmp_path, "empty_plugin", "empty_plugin_mod", "", {})
    registry, problems = discover_plugins(tmp_path)
    assert any("garbage" in p and "unreadable" in p for p in problems)
    assert any("empty_plugin" in p and "declares no" in p for p in problems)
    assert "approve-all" not in [p.name for p in registry]


def test_discovering_twice_does_not_count_a_dropped_wheel_twice(tmp_path):
    make_wheel(
        tmp_path, "twice_plugin", "twice_plugin_mod", PLUGIN_SOURCE, {"twice": "twice_plugin_mod:Approve"}
    )
    discover_plugins(tmp_path)
    registry, problems = discover_plugins(tmp_path)
    assert problems == [] and registry.find("twice").origin.startswith("wheel ")


def test_missing_directory_is_a_problem_not_a_crash(tmp_path):
    _, problems = discover_plugins(tmp_path / "nowhere")
    assert problems == [f"plugins directory {tmp_path / 'nowhere'} does not exist"]


EVALUATOR_SOURCE = """
from autoscaler.evaluate.custom import CustomEvaluator
from autoscaler.plugins.api import ScalingExecutorPlugin

class Halve(CustomEvaluator):
    def evaluate(self, vertex, context):
        return {"true_processing_rate": (float("nan"), context.metrics.true_processing_rate / 2)}

class Gate(ScalingExecutorPlugin):
    def apply(self, context, changes):
        return changes
"""


def test_evaluators_are_discovered_from_their_own_group_with_the_same_mechanism(tmp_path):
    """One wheel may ship both kinds; each discovery finds its own and checks its own base class."""
    make_wheel(
        tmp_path,
        "both_plugin",
        "both_plugin_mod",
        EVALUATOR_SOURCE,
        {"gate": "both_plugin_mod:Gate"},
        evaluators={"halve": "both_plugin_mod:Halve", "wrong-kind": "both_plugin_mod:Gate"},
    )
    evaluators, problems = discover_evaluators(tmp_path)
    assert problems == [] and sorted(p.name for p in evaluators) == ["halve", "wrong-kind"]
    assert issubclass(evaluators.resolve("halve"), CustomEvaluator)
    with pytest.raises(PluginError, match="not a CustomEvaluator subclass"):
        evaluators.resolve("wrong-kind")
    with pytest.raises(PluginError, match="no custom evaluator 'gate' is installed"):
        evaluators.resolve("gate")
    executors, problems = discover_plugins(tmp_path)
    assert problems == [] and [p.name for p in executors if p.origin.startswith("wheel")] == ["gate"]
    options = AutoscalerOptions.from_flink_conf(
        {
            "job.autoscaler.metrics.custom-evaluators": "h",
            "job.autoscaler.metrics.custom-evaluator.h.class": "both_plugin_mod.Halve",
        }
    )
    ((instance, config),) = EvaluatorInstances(evaluators).for_options(options)
    assert type(instance).__name__ == "Halve" and instance.name == "h" and dict(config) == {}


def test_a_wheel_with_only_evaluators_is_no_problem_for_the_executor_discovery(tmp_path):
    make_wheel(
        tmp_path,
        "eval_only",
        "eval_only_mod",
        EVALUATOR_SOURCE,
        {},
        evaluators={"halve": "eval_only_mod:Halve"},
    )
    registry, problems = discover_plugins(tmp_path)
    assert problems == [] and not [p for p in registry if p.origin.startswith("wheel")]
    _, problems = discover_evaluators(tmp_path)
    assert problems == []
