"""The custom-evaluator instances a job's options ask for, built once and reused across ticks.

``job.autoscaler.metrics.custom-evaluators: [a, b]`` names instances, applied in that order; each
instance's ``metrics.custom-evaluator.<name>.class`` picks a discovered evaluator (entry-point name in
the group ``flink_autoscaler.evaluators``, or its class path), and its other ``.<param>`` keys become
the evaluator's config. An instance that cannot be found or built is returned as an
:class:`~autoscaler.evaluate.custom.UnavailableEvaluator`, which the evaluator turns into a
``PluginFailed`` not-ready job: a job configured with an evaluator is never scaled without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from autoscaler.evaluate.custom import ConfiguredEvaluator, CustomEvaluator, UnavailableEvaluator
from autoscaler.model import JobSample
from autoscaler.plugins.loader import (
    EVALUATOR_ENTRY_POINT_GROUP,
    PluginError,
    PluginRegistry,
    discover_plugins,
)
from autoscaler.settings import AutoscalerOptions

__all__ = ["EvaluatorInstances", "discover_evaluators"]


def discover_evaluators(plugins_dir: Path | None = None) -> tuple[PluginRegistry, list[str]]:
    """Installed custom evaluators, then those in the wheels of ``plugins_dir`` (like executor plugins)."""
    return discover_plugins(plugins_dir, group=EVALUATOR_ENTRY_POINT_GROUP, base=CustomEvaluator)


class EvaluatorInstances:
    """Resolves each job's configured evaluators; ``fixed`` ones (given in code) run first for every job."""

    def __init__(
        self,
        registry: PluginRegistry | None = None,
        fixed: Sequence[ConfiguredEvaluator] = (),
    ) -> None:
        self.registry = registry or PluginRegistry(kind="custom evaluator")
        self.fixed = tuple(fixed)
        self._instances: dict[tuple[str, str], CustomEvaluator] = {}

    def for_options(self, options: AutoscalerOptions) -> tuple[ConfiguredEvaluator, ...]:
        """The job's evaluators with their config, in configured order (duplicate names run once)."""
        out: list[ConfiguredEvaluator] = list(self.fixed)
        for name in dict.fromkeys(options.custom_evaluators):
            settings = options.custom_evaluator_settings.get(name, {})
            class_ref = settings.get("class", "")
            config: Mapping[str, str] = {k: v for k, v in settings.items() if k != "class"}
            try:
                out.append((self._instance(name, class_ref), config))
            except PluginError as exc:
                out.append((UnavailableEvaluator(name, f"custom evaluator instance {name!r}: {exc}"), config))
        return tuple(out)

    def for_samples(self, samples: Sequence[JobSample]) -> dict[str, tuple[ConfiguredEvaluator, ...]]:
        """``SparkEvaluator.evaluate(..., evaluators=...)`` for a tick: job key -> its evaluators."""
        return {s.job.key: found for s in samples if (found := self.for_options(s.target.options))}

    def _instance(self, name: str, class_ref: str) -> CustomEvaluator:
        key = (name, class_ref)
        if key not in self._instances:
            if not class_ref.strip():
                raise PluginError(f"metrics.custom-evaluator.{name}.class is not set")
            cls = self.registry.resolve(class_ref)
            try:
                evaluator = cls()
            except Exception as exc:
                raise PluginError(f"{class_ref} could not be created: {type(exc).__name__}: {exc}") from exc
            evaluator.name = name  # logs and failures name the configured instance
            self._instances[key] = evaluator
        return self._instances[key]
