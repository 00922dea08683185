"""Flink-style key names: the ``job.autoscaler.`` prefixes, the plugins' dynamic key prefixes, flattening.

Kept apart from the options model so that the field declarations (``option_groups``) and the model's
key handling (``options``), which imports them, can both use these names without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["EVALUATOR_PREFIX", "EXECUTOR_PREFIX", "KEY_PREFIX", "LEGACY_KEY_PREFIX", "flatten_keys"]

KEY_PREFIX = "job.autoscaler."
EXECUTOR_PREFIX = "scaling.custom-executor."  # + <name>.class / <name>.<param>
EVALUATOR_PREFIX = "metrics.custom-evaluator."  # + <name>.class / <name>.<param>
LEGACY_KEY_PREFIX = "kubernetes.operator.job.autoscaler."


def flatten_keys(conf: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested YAML mappings into Flink's dotted keys (Flink 2's config.yaml allows both)."""
    flat: dict[str, Any] = {}
    for key, value in conf.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_keys(value, full + "."))
        else:
            flat[full] = value
    return flat
