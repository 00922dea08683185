"""Daemon settings (YAML file + env vars) and the reference autoscaler's ``job.autoscaler.*`` options.

Precedence, lowest to highest: built-in defaults, the YAML file, environment variables
(``FLINK_AUTOSCALER_<FIELD>``, nested with ``__``), then per cluster and per job the Flink-style
``job.autoscaler.*`` keys (daemon ``autoscaler:`` section < cluster ``autoscaler:`` < the job's own
configuration on the cluster). Keys and defaults are the reference's, so a config written for the Java
autoscaler means the same thing here.

Import from this package; its modules, each importing only those above it:

- ``values``: how option values are written (Flink durations, memory sizes, lists) and the enums;
- ``keys``: the ``job.autoscaler.`` prefixes and the flattening of nested YAML keys;
- ``errors``: :class:`ConfigError` and the wording of a validation error;
- ``option_groups``: the ``job.autoscaler.*`` fields, in groups;
- ``options``: :class:`AutoscalerOptions`, which combines the groups and reads Flink-style keys;
- ``daemon_settings``: :class:`Settings` (the YAML file), :class:`ClusterSettings`, :class:`SparkSettings`.
"""

from __future__ import annotations

from autoscaler.settings.daemon_settings import ClusterSettings, Settings, SparkSettings
from autoscaler.settings.errors import ConfigError
from autoscaler.settings.keys import EVALUATOR_PREFIX as EVALUATOR_PREFIX
from autoscaler.settings.keys import EXECUTOR_PREFIX as EXECUTOR_PREFIX
from autoscaler.settings.keys import KEY_PREFIX, LEGACY_KEY_PREFIX, flatten_keys
from autoscaler.settings.option_groups import DEFAULT_MAX_ANSWER_BYTES as DEFAULT_MAX_ANSWER_BYTES
from autoscaler.settings.option_groups import OURS as OURS
from autoscaler.settings.options import AutoscalerOptions
from autoscaler.settings.values import AlignmentMode, BusyTimeAggregator, InsufficientSlots
from autoscaler.settings.values import Duration as Duration
from autoscaler.settings.values import parse_memory_size as parse_memory_size

# The names imported "as" themselves above were importable from the single settings.py module; they
# stay importable from here without joining __all__, which is unchanged.
__all__ = [
    "KEY_PREFIX",
    "LEGACY_KEY_PREFIX",
    "AlignmentMode",
    "AutoscalerOptions",
    "BusyTimeAggregator",
    "ClusterSettings",
    "ConfigError",
    "InsufficientSlots",
    "Settings",
    "SparkSettings",
    "flatten_keys",
]
