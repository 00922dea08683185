"""Plugin discovery from wheels dropped into a directory (built by hand here: no network, no build)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from autoscaler.plugins.api import ScalingExecutorPlugin
from autoscaler.plugins.loader import ENTRY_POINT_GROUP, PluginError, discover_plugins


def make_wheel(directory: Path, dist: str, module: str, source: str, entry_points: dict[str, str]) -> Path:
    """A minimal pure-Python wheel: the module, METADATA and entry_points.txt."""
    wheel = directory / f"{dist}-0.1-py3-none-any.whl"
    info = f"{dist}-0.1.dist-info"
    eps = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{module}/__init__.py", source)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        zf.writestr(f"{info}/entry_points.txt", f"[{ENTRY_POINT_GROUP}]\n{eps}\n")
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
