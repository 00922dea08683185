"""Runs the executor-plugin chain for one job: priority order, per-plugin budget, veto on failure.

A plugin's ``apply`` may be ``async`` or plain. A plain one runs on a daemon thread of its own, never on
the event loop (:mod:`autoscaler.plugins.calls`): a plugin that blocks (a synchronous HTTP call without
a timeout, a lock) would otherwise freeze every cluster's tick, the health endpoints and the signal
handlers (issue 12), and a stopping daemon does not wait for it (issue 35). Its budget covers the
thread; a plugin still running from an earlier call when it is due again fails at once instead of
taking a second thread, so a hung plugin holds one thread, not one per tick.

A :class:`~autoscaler.plugins.api.Verdict` is unwrapped, its reason kept in the outcome. Whatever a
plugin returns is checked before it is used: anything but a mapping of vertex ids
to :class:`~autoscaler.model.VertexChange` with whole parallelisms within 1..max parallelism fails
the chain with ``PluginFailed``, which vetoes the scaling.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from autoscaler.model import VertexChange
from autoscaler.plugins.api import Changes, PluginContext, ScalingExecutorPlugin, Verdict
from autoscaler.plugins.calls import StillRunning, call_blocking, describe
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
            result = await asyncio.wait_for(_call(plugin, ctx, current), timeout=budget_s)
        except StillRunning:
            detail = "its previous call has not returned yet (blocked?); not called again"
            outcomes.append(PluginOutcome(plugin.name, Reason.PLUGIN_FAILED, detail))
            log.warning("plugin_still_running", plugin=plugin.name)
            return ChainResult(None, tuple(outcomes))
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
        reason = ""
        if isinstance(result, Verdict):
            result, reason = result.changes, result.reason
        if result is None or (isinstance(result, Mapping) and not result):
            detail = reason or "returned no changes"
            outcomes.append(PluginOutcome(plugin.name, Reason.SCALING_VETOED, detail))
            return ChainResult(None, tuple(outcomes))
        problem = _invalid(result, ctx)
        if problem:
            outcomes.append(PluginOutcome(plugin.name, Reason.PLUGIN_FAILED, f"invalid result: {problem}"))
            log.warning("plugin_result_invalid", plugin=plugin.name, problem=problem)
            return ChainResult(None, tuple(outcomes))
        same = dict(result) == dict(current)
        outcomes.append(
            PluginOutcome(plugin.name, Reason.SCALING_APPROVED if same else Reason.SCALING_MODIFIED, reason)
        )
        current = result
    return ChainResult(current, tuple(outcomes))


async def _call(plugin: ScalingExecutorPlugin, ctx: PluginContext, changes: Changes) -> Any:
    """The plugin's answer: an ``async`` apply on the loop, a plain one on a thread (module doc)."""
    if inspect.iscoroutinefunction(plugin.apply):
        return await plugin.apply(ctx, changes)
    label = f"executor plugin {describe(plugin, plugin.name)}.apply"
    result = await call_blocking((id(plugin), "apply"), label, lambda: plugin.apply(ctx, changes))
    return await result if inspect.isawaitable(result) else result


def _invalid(result: object, ctx: PluginContext) -> str | None:
    """A result must map known vertices to a VertexChange with a whole parallelism in 1..max."""
    if not isinstance(result, Mapping):
        return f"expected a mapping of vertex id to VertexChange, got {type(result).__name__}"
    vertices = ctx.evaluation.sample.topology.vertices
    for vid, change in result.items():
        if vid not in vertices:
            return f"unknown vertex {vid}"
        if not isinstance(change, VertexChange) or change.vertex != vid:
            return f"vertex {vid}: expected a VertexChange for that vertex, got {type(change).__name__}"
        target = change.target
        if isinstance(target, bool) or not isinstance(target, int):
            return f"vertex {vid}: parallelism {target!r} is not a whole number"
        limit = vertices[vid].max_parallelism
        if not 1 <= target <= limit:
            return f"vertex {vid}: parallelism {target} outside 1..{limit}"
    return None
