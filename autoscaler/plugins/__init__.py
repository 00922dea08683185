"""Plugins: executor plugins approve, modify or veto a scaling decision before it is applied; metric
providers declare extra metrics to collect; custom evaluators (``autoscaler.plugins.evaluators``) are
resolved per job like executor plugins."""

from __future__ import annotations

from autoscaler.model import JOB_SCOPE
from autoscaler.plugins.api import PluginContext, ScalingExecutorPlugin, Verdict
from autoscaler.plugins.chain import ChainResult, PluginOutcome, run_chain
from autoscaler.plugins.metrics import (
    ConfiguredProvider,
    CustomMetricProvider,
    ExternalMetricsContext,
    metric_providers,
)

__all__ = [
    "JOB_SCOPE",
    "ChainResult",
    "ConfiguredProvider",
    "CustomMetricProvider",
    "ExternalMetricsContext",
    "PluginContext",
    "PluginOutcome",
    "ScalingExecutorPlugin",
    "Verdict",
    "metric_providers",
    "run_chain",
]
