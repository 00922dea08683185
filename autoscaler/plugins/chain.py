"""Runs the executor-plugin chain for one job: priority order, per-plugin budget, veto on failure."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from autoscaler.decide import VertexChange
from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin
from autoscaler.reasons import Reason

__all__ = ["ChainResult", "PluginOutcome", "order_plugins", "run_chain"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class PluginOutcome:
    plugin: str
    outcome: Reason  # SCALING_APPROVED, SCALING_MODIFIED, SCALING_VETOED or PLUGIN_FAILED
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ChainResult:
    changes: Changes | None  # None: vetoed
    outcomes: tuple[PluginOutcome, ...]

    @property
    def vetoed_by(self) -> PluginOutcome | None:
        return next(
            (o for o in self.outcomes if o.outcome in (Reason.SCALING_VETOED, Reason.PLUGIN_FAILED)), None
        )


def order_plugins(plugins: Sequence[ScalingExecutorPlugin]) -> list[ScalingExecutorPlugin]:
    """Ascending priority; equal priorities keep the given (configured) order — sorted() is stable."""
    return sorted(plugins, key=lambda p: p.priority())


async def run_chain(
    plugins: Sequence[ScalingExecutorPlugin],
    context: PluginContext | Callable[[ScalingExecutorPlugin], PluginContext],
    changes: Changes,
    *,
    budget_s: float = 10.0,
) -> ChainResult:
    outcomes: list[PluginOutcome] = []
    current: Changes = changes
    for plugin in order_plugins(plugins):
        ctx = context(plugin) if callable(context) else context
        try:
            result = plugin.apply(ctx, current)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, timeout=budget_s)
        except TimeoutError:
            outcomes.append(
                PluginOutcome(plugin.name, Reason.PLUGIN_FAILED, f"exceeded its {budget_s:g} s budget")
            )
            log.warning("plugin_timed_out", plugin=plugin.name, budget_s=budget_s)
            return ChainResult(None, tuple(outcomes))
        except Exception as exc:  # a broken plugin must veto, never crash the tick
            outcomes.append(PluginOutcome(plugin.name, Reason.PLUGIN_FAILED, f"{type(exc).__name__}: {exc}"))
            log.warning("plugin_failed", plugin=plugin.name, error=str(exc), exc_info=True)
            return ChainResult(None, tuple(outcomes))
        if not result:
            outcomes.append(PluginOutcome(plugin.name, Reason.SCALING_VETOED, "returned no changes"))
            return ChainResult(None, tuple(outcomes))
        problem = _invalid(result, ctx)
        if problem:
            outcomes.append(PluginOutcome(plugin.name, Reason.PLUGIN_FAILED, f"invalid result: {problem}"))
            return ChainResult(None, tuple(outcomes))
        same = dict(result) == dict(current)
        outcomes.append(
            PluginOutcome(plugin.name, Reason.SCALING_APPROVED if same else Reason.SCALING_MODIFIED)
        )
        current = result
    return ChainResult(current, tuple(outcomes))


def _invalid(result: Mapping[object, object], ctx: PluginContext) -> str | None:
    """A modified result must name known vertices with a parallelism within 1..max parallelism."""
    vertices = ctx.evaluation.sample.topology.vertices
    for vid, change in result.items():
        if vid not in vertices:
            return f"unknown vertex {vid}"
        if not isinstance(change, VertexChange) or change.vertex != vid:
            return f"vertex {vid}: expected a VertexChange for that vertex"
        limit = vertices[vid].max_parallelism
        if not 1 <= change.target <= limit:
            return f"vertex {vid}: parallelism {change.target} outside 1..{limit}"
    return None
