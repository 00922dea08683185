"""Executor plugins: approve, modify or veto a scaling decision before it is applied."""

from __future__ import annotations

from autoscaler.plugins.api import PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.chain import ChainResult, PluginOutcome, run_chain

__all__ = ["ChainResult", "PluginContext", "PluginOutcome", "ScalingExecutorPlugin", "run_chain"]
