"""Finds plugins: installed distributions and wheels dropped into a plugins directory.

Both ways end in the same place: an entry point in a plugin group naming a subclass of that group's
base class. Executor plugins are ``flink_autoscaler.executor_plugins`` / ``ScalingExecutorPlugin``
(the defaults here); custom evaluators use the same mechanism with ``flink_autoscaler.evaluators``
(:func:`autoscaler.plugins.evaluators.discover_evaluators`). A wheel in the plugins directory is put
on ``sys.path`` as it is (pure-Python wheels import from the zip), so an operator installs a plugin by
copying one file; one wheel may provide both kinds. A broken plugin is reported and skipped; it never
stops the daemon from starting.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from autoscaler.plugins.api import ScalingExecutorPlugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVALUATOR_ENTRY_POINT_GROUP",
    "PLUGIN_GROUPS",
    "DiscoveredPlugin",
    "PluginError",
    "PluginRegistry",
    "discover_plugins",
]

ENTRY_POINT_GROUP = "flink_autoscaler.executor_plugins"
EVALUATOR_ENTRY_POINT_GROUP = "flink_autoscaler.evaluators"
# Every group a plugin wheel may declare, with the words messages use for its plugins.
PLUGIN_GROUPS: dict[str, str] = {
    ENTRY_POINT_GROUP: "executor plugin",
    EVALUATOR_ENTRY_POINT_GROUP: "custom evaluator",
}

log = structlog.get_logger(__name__)


class PluginError(Exception):
    """A plugin that cannot be found, loaded or instantiated; the message says which and why."""


@dataclass(frozen=True, slots=True)
class DiscoveredPlugin:
    name: str  # the entry point's name, e.g. "cpu-gate"
    target: str  # "module:Class"
    origin: str  # "installed <dist> <version>" or "wheel <file>"
    entry_point: metadata.EntryPoint
    base: type = ScalingExecutorPlugin  # what the loaded class must subclass

    @property
    def class_path(self) -> str:
        """``module.Class``, the spelling the reference's ``custom-executor.<name>.class`` uses."""
        return self.target.replace(":", ".")

    def load(self) -> type[Any]:
        """The plugin class; a ``PluginError`` if it fails to import or is not a ``base`` subclass."""
        try:
            cls = self.entry_point.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {self.name!r} ({self.target}, {self.origin}) failed to import: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise PluginError(f"plugin {self.name!r} ({self.target}) is not a {self.base.__name__} subclass")
        return cls


class PluginRegistry:
    """Discovered plugins of one kind, looked up by entry-point name or by class path."""

    def __init__(self, plugins: Iterable[DiscoveredPlugin] = (), kind: str = "executor plugin") -> None:
        self.kind = kind  # "executor plugin" or "custom evaluator", for messages
        self._plugins: dict[str, DiscoveredPlugin] = {}
        for p in plugins:
            self._plugins.setdefault(p.name, p)  # the first found wins: installed before directory wheels

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._plugins.values())

    def __len__(self) -> int:
        return len(self._plugins)

    def find(self, ref: str) -> DiscoveredPlugin:
        """``ref`` is an entry-point name, ``module:Class`` or ``module.Class``."""
        ref = ref.strip()
        if ref in self._plugins:
            return self._plugins[ref]
        for p in self._plugins.values():
            if ref in (p.target, p.class_path):
                return p
        known = ", ".join(f"{p.name} ({p.class_path})" for p in self._plugins.values()) or "none"
        raise PluginError(f"no {self.kind} {ref!r} is installed; discovered: {known}")

    def resolve(self, ref: str) -> type[Any]:
        return self.find(ref).load()


def discover_plugins(
    plugins_dir: Path | None = None,
    *,
    group: str = ENTRY_POINT_GROUP,
    base: type = ScalingExecutorPlugin,
) -> tuple[PluginRegistry, list[str]]:
    """Every plugin of ``group`` installed in this environment, then every wheel in ``plugins_dir``.

    Loaded classes must subclass ``base``. Returns the registry and the problems found (unreadable
    wheels, wheels declaring no plugin of any kind, duplicate names), already logged.
    """
    found: list[DiscoveredPlugin] = []
    problems: list[str] = []
    # Installed distributions only: wheels this loader put on sys.path earlier are not "installed".
    installed_path = [p for p in sys.path if not p.endswith(".whl")]
    seen: set[tuple[str, str]] = set()
    for dist in metadata.distributions(path=installed_path):
        for ep in dist.entry_points:
            # One distribution can be found twice (an editable install's metadata in site-packages and
            # its egg-info in the working directory): the same plugin, not a clash.
            if ep.group == group and (ep.name, ep.value) not in seen:
                seen.add((ep.name, ep.value))
                origin = f"installed {dist.metadata['Name']} {dist.version}"
                found.append(DiscoveredPlugin(ep.name, ep.value, origin, ep, base))
    if plugins_dir is not None:
        wheels = sorted(Path(plugins_dir).glob("*.whl"))
        if not Path(plugins_dir).is_dir():
            problems.append(f"plugins directory {plugins_dir} does not exist")
        for wheel in wheels:
            found.extend(_from_wheel(wheel, problems, group, base))
    names = [p.name for p in found]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"plugin name {name!r} is provided twice; the installed one is used")
    for problem in problems:
        log.warning("plugin_discovery_problem", problem=problem, group=group)
    return PluginRegistry(found, PLUGIN_GROUPS.get(group, "plugin")), problems


def _from_wheel(wheel: Path, problems: list[str], group: str, base: type) -> list[DiscoveredPlugin]:
    try:
        with zipfile.ZipFile(wheel) as zf:
            if zf.testzip() is not None:
                raise zipfile.BadZipFile("corrupt member")
    except (OSError, zipfile.BadZipFile) as exc:
        problems.append(f"wheel {wheel.name} is unreadable: {exc}")
        return []
    declared = [ep for dist in metadata.distributions(path=[str(wheel)]) for ep in dist.entry_points]
    entry_points = [ep for ep in declared if ep.group == group]
    if not entry_points:
        # A wheel with only the other kind of plugin is fine; one with no plugin at all is a mistake.
        if not any(ep.group in PLUGIN_GROUPS for ep in declared):
            problems.append(f"wheel {wheel.name} declares no {group} entry point")
        return []
    if str(wheel) not in sys.path:
        sys.path.append(str(wheel))  # after installed packages: a dropped wheel cannot shadow them
    return [DiscoveredPlugin(ep.name, ep.value, f"wheel {wheel.name}", ep, base) for ep in entry_points]
