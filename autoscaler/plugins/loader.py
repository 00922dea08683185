"""Finds executor plugins: installed distributions and wheels dropped into a plugins directory.

Both ways end in the same place: an entry point in the group ``flink_autoscaler.executor_plugins``
naming a ``ScalingExecutorPlugin`` subclass. A wheel in the plugins directory is put on ``sys.path``
as it is (pure-Python wheels import from the zip), so an operator installs a plugin by copying one
file. A broken plugin is reported and skipped; it never stops the daemon from starting.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog

from autoscaler.plugins.api import ScalingExecutorPlugin

__all__ = ["ENTRY_POINT_GROUP", "DiscoveredPlugin", "PluginError", "PluginRegistry", "discover_plugins"]

ENTRY_POINT_GROUP = "flink_autoscaler.executor_plugins"

log = structlog.get_logger(__name__)


class PluginError(Exception):
    """A plugin that cannot be found, loaded or instantiated; the message says which and why."""


@dataclass(frozen=True, slots=True)
class DiscoveredPlugin:
    name: str  # the entry point's name, e.g. "cpu-gate"
    target: str  # "module:Class"
    origin: str  # "installed <dist> <version>" or "wheel <file>"
    entry_point: metadata.EntryPoint

    @property
    def class_path(self) -> str:
        """``module.Class``, the spelling the reference's ``custom-executor.<name>.class`` uses."""
        return self.target.replace(":", ".")

    def load(self) -> type[ScalingExecutorPlugin]:
        try:
            cls = self.entry_point.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {self.name!r} ({self.target}, {self.origin}) failed to import: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, ScalingExecutorPlugin)):
            raise PluginError(f"plugin {self.name!r} ({self.target}) is not a ScalingExecutorPlugin subclass")
        return cls


class PluginRegistry:
    """Discovered plugins, looked up by entry-point name or by class path."""

    def __init__(self, plugins: Iterable[DiscoveredPlugin] = ()) -> None:
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
        raise PluginError(f"no executor plugin {ref!r} is installed; discovered: {known}")

    def resolve(self, ref: str) -> type[ScalingExecutorPlugin]:
        return self.find(ref).load()


def discover_plugins(plugins_dir: Path | None = None) -> tuple[PluginRegistry, list[str]]:
    """Every plugin installed in this environment, then every wheel in ``plugins_dir``.

    Returns the registry and the problems found (unreadable wheels, duplicate names), already logged.
    """
    found: list[DiscoveredPlugin] = []
    problems: list[str] = []
    # Installed distributions only: wheels this loader put on sys.path earlier are not "installed".
    installed_path = [p for p in sys.path if not p.endswith(".whl")]
    for dist in metadata.distributions(path=installed_path):
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                origin = f"installed {dist.metadata['Name']} {dist.version}"
                found.append(DiscoveredPlugin(ep.name, ep.value, origin, ep))
    if plugins_dir is not None:
        wheels = sorted(Path(plugins_dir).glob("*.whl"))
        if not Path(plugins_dir).is_dir():
            problems.append(f"plugins directory {plugins_dir} does not exist")
        for wheel in wheels:
            found.extend(_from_wheel(wheel, problems))
    names = [p.name for p in found]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"plugin name {name!r} is provided twice; the installed one is used")
    for problem in problems:
        log.warning("plugin_discovery_problem", problem=problem)
    return PluginRegistry(found), problems


def _from_wheel(wheel: Path, problems: list[str]) -> list[DiscoveredPlugin]:
    try:
        with zipfile.ZipFile(wheel) as zf:
            if zf.testzip() is not None:
                raise zipfile.BadZipFile("corrupt member")
    except (OSError, zipfile.BadZipFile) as exc:
        problems.append(f"wheel {wheel.name} is unreadable: {exc}")
        return []
    entry_points = [
        (dist, ep)
        for dist in metadata.distributions(path=[str(wheel)])
        for ep in dist.entry_points
        if ep.group == ENTRY_POINT_GROUP
    ]
    if not entry_points:
        problems.append(f"wheel {wheel.name} declares no {ENTRY_POINT_GROUP} entry point")
        return []
    if str(wheel) not in sys.path:
        sys.path.append(str(wheel))  # after installed packages: a dropped wheel cannot shadow them
    return [DiscoveredPlugin(ep.name, ep.value, f"wheel {wheel.name}", ep) for _, ep in entry_points]
