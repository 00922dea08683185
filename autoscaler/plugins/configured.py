"""The executor-plugin instances a job's options ask for, built once and reused across ticks.

``job.autoscaler.scaling.custom-executors: [a, b]`` names instances; each instance's
``scaling.custom-executor.<name>.class`` picks a discovered plugin (entry-point name or class path),
and its other ``.<param>`` keys become the plugin's config. A configured plugin that cannot be
found or built is a problem the daemon turns into a veto: a missing gate must never let a scaling through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.plugins.api import ScalingExecutorPlugin
from autoscaler.plugins.loader import PluginError, PluginRegistry
from autoscaler.settings import AutoscalerOptions

__all__ = ["ConfiguredChain", "PluginInstances"]


@dataclass(frozen=True, slots=True)
class ConfiguredChain:
    plugins: tuple[ScalingExecutorPlugin, ...] = ()
    configs: Mapping[int, Mapping[str, str]] = field(default_factory=dict)  # id(plugin) -> its params
    problems: tuple[str, ...] = ()

    def config_for(self, plugin: ScalingExecutorPlugin) -> Mapping[str, str]:
        return self.configs.get(id(plugin), {})


class PluginInstances:
    """Resolves each job's configured chain; ``fixed`` plugins (given in code) run for every job."""

    def __init__(
        self, registry: PluginRegistry | None = None, fixed: Sequence[ScalingExecutorPlugin] = ()
    ) -> None:
        self.registry = registry or PluginRegistry()
        self.fixed = tuple(fixed)
        self._instances: dict[tuple[str, str], ScalingExecutorPlugin] = {}

    def chain_for(self, options: AutoscalerOptions) -> ConfiguredChain:
        plugins: list[ScalingExecutorPlugin] = list(self.fixed)
        configs: dict[int, Mapping[str, str]] = {}
        problems: list[str] = []
        for name in options.custom_executors:
            settings = options.custom_executor_settings.get(name, {})
            class_ref = settings.get("class", "")
            try:
                plugin = self._instance(name, class_ref)
            except PluginError as exc:
                problems.append(f"executor plugin instance {name!r}: {exc}")
                continue
            plugins.append(plugin)
            configs[id(plugin)] = {k: v for k, v in settings.items() if k != "class"}
        return ConfiguredChain(tuple(plugins), configs, tuple(problems))

    def _instance(self, name: str, class_ref: str) -> ScalingExecutorPlugin:
        key = (name, class_ref)
        if key not in self._instances:
            cls = self.registry.resolve(class_ref)
            try:
                plugin = cls()
            except Exception as exc:
                raise PluginError(f"{class_ref} could not be created: {type(exc).__name__}: {exc}") from exc
            plugin.name = name  # events and metrics name the configured instance, as the reference does
            self._instances[key] = plugin
        return self._instances[key]
