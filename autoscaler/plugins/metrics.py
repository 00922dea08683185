"""The custom metric provider SPI: plugins declare the extra metrics they need, the collector reads them.

This is the "Custom Metric Provider SPI" the ScalingExecutorPlugin proposal leaves as future work. An
executor plugin or a custom evaluator that also subclasses :class:`CustomMetricProvider` declares:

- TaskManager metrics (``Status.JVM.CPU.Load``), aggregated over the TaskManagers;
- per-vertex metrics, aggregated over the vertex's subtasks;
- metrics from external systems, returned by ``collect_external_metrics``.

Why declare instead of querying in ``apply``: the collector reads them in the same tick as the standard
metrics (one point in time), each name once however many plugins want it, and the evaluator keeps them
in the metric window, so a plugin reads ``(current, window average)`` from ``context.evaluation``
without any I/O, and is tested without mocking a REST client.

Aggregation: a declared Flink name may end with ``:min``, ``:max``, ``:avg`` or ``:sum`` to pick how
subtasks (or TaskManagers) are combined; without a suffix it is ``avg``. The declared spelling, suffix
included, is the key under which the value appears. A name that Flink does not list, or that cannot be
read this tick, is NaN: it never fails the job's collection.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from autoscaler.model import JobRef, JobTopology, VertexId
from autoscaler.plugins.calls import call_blocking, describe
from autoscaler.settings import AutoscalerOptions

if TYPE_CHECKING:
    from autoscaler.plugins.configured import PluginInstances
    from autoscaler.plugins.evaluators import EvaluatorInstances

__all__ = [
    "AGGREGATES",
    "EXTERNAL_METRICS_BUDGET_S",
    "ConfiguredProvider",
    "CustomMetricProvider",
    "ExternalMetricsContext",
    "MetricRef",
    "declared_taskmanager_names",
    "declared_vertex_names",
    "external_metrics",
    "metric_providers",
]

log = structlog.get_logger(__name__)

AGGREGATES = ("min", "max", "avg", "sum")  # what Flink's aggregating metric endpoints can answer
DEFAULT_AGGREGATE = "avg"
EXTERNAL_METRICS_BUDGET_S = 5.0  # per provider and tick; collection must not wait on a slow system


@dataclass(frozen=True, slots=True)
class ExternalMetricsContext:
    """What a provider knows when it asks an external system: the job, its options, its own config."""

    job: JobRef
    options: AutoscalerOptions
    config: Mapping[str, str] = field(default_factory=dict)  # the instance's keys, prefix stripped
    now_ms: int = 0  # the tick's time; the value returned should describe this moment


class CustomMetricProvider:
    """Mixin for executor plugins and custom evaluators that need metrics the autoscaler does not read.

    Every method has a harmless default, so a provider overrides only what it needs. Declarations are
    asked every tick (they may depend on the topology); keep them cheap and free of I/O.
    """

    def taskmanager_metric_names(self) -> list[str]:
        """TaskManager metrics to read, e.g. ``["Status.JVM.CPU.Load"]`` (``:max`` etc. to aggregate)."""
        return []

    def vertex_metric_names(self, topology: JobTopology) -> Mapping[VertexId, list[str]]:
        """Per vertex id, the subtask metrics to read, e.g. ``{src: ["Source__s.pendingRecords:max"]}``."""
        return {}

    def external_metric_names(self) -> list[str]:
        """The names ``collect_external_metrics`` reports; they are NaN for the tick when it fails."""
        return []

    async def collect_external_metrics(self, context: ExternalMetricsContext) -> Mapping[str, float]:
        """Metrics from outside Flink (Prometheus, a cloud API). Raising or timing out only makes them NaN."""
        return {}


@dataclass(frozen=True, slots=True)
class ConfiguredProvider:
    """A provider instance of one job, with the name and config it was configured under."""

    name: str
    provider: CustomMetricProvider
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetricRef:
    """A declared Flink metric: the name to query and how to aggregate it over subtasks/TaskManagers."""

    declared: str  # the key the value is stored under
    flink_name: str
    aggregate: str = DEFAULT_AGGREGATE

    @classmethod
    def parse(cls, declared: str) -> MetricRef:
        """``name`` or ``name:agg``; a colon followed by anything else belongs to the name."""
        base, sep, agg = declared.rpartition(":")
        if sep and base and agg in AGGREGATES:
            return cls(declared, base, agg)
        return cls(declared, declared)


def declared_taskmanager_names(providers: Sequence[ConfiguredProvider]) -> tuple[str, ...]:
    """The union of the TaskManager names the providers declare, first declaration first."""
    names: list[str] = []
    for p in providers:
        names.extend(_declared(p, "taskmanager_metric_names", p.provider.taskmanager_metric_names))
    return tuple(dict.fromkeys(names))


def declared_vertex_names(
    providers: Sequence[ConfiguredProvider], topology: JobTopology
) -> dict[VertexId, tuple[str, ...]]:
    """The union per vertex of the names the providers declare; unknown vertex ids are dropped."""
    union: dict[VertexId, list[str]] = {}
    for p in providers:
        try:
            declared = {
                vid: _strings(names, p.name)
                for vid, names in dict(p.provider.vertex_metric_names(topology)).items()
                if vid in topology.vertices
            }
        except Exception as exc:  # a broken declaration costs that provider its metrics, nothing else
            _provider_failed(p, "vertex_metric_names", exc)
            continue
        for vid, names in declared.items():
            union.setdefault(vid, []).extend(names)
    return {vid: tuple(dict.fromkeys(names)) for vid, names in union.items() if names}


async def external_metrics(
    provider: ConfiguredProvider, context: ExternalMetricsContext, budget_s: float = EXTERNAL_METRICS_BUDGET_S
) -> dict[str, float]:
    """One provider's external metrics within ``budget_s``; on any failure its declared names are NaN.

    ``collect_external_metrics`` may be ``async`` (awaited within the budget) or plain. A plain one runs
    on a daemon thread of its own (:mod:`autoscaler.plugins.calls`): on the event loop, one that blocks
    froze the daemon, signals included, so SIGTERM could not stop it. While a job's call has not
    returned, that provider is not called again for that job. A value that is not a number becomes NaN
    on its own: one bad value must not cost the others.
    """
    declared = _declared(provider, "external_metric_names", provider.provider.external_metric_names)
    out = dict.fromkeys(declared, math.nan)
    try:
        values = dict(await asyncio.wait_for(_collect(provider, context), timeout=budget_s))
    except Exception as exc:  # TimeoutError included: never fatal, the names are simply not measured
        _provider_failed(provider, "collect_external_metrics", exc, job=context.job.key)
        return out
    for name, value in values.items():
        out[str(name)] = _float(value, provider.name, str(name))
    return out


async def _collect(provider: ConfiguredProvider, context: ExternalMetricsContext) -> Mapping[str, float]:
    collect = provider.provider.collect_external_metrics
    if inspect.iscoroutinefunction(collect):
        return await collect(context)
    label = f"metric provider {describe(provider.provider, provider.name)}.collect_external_metrics"
    key = (id(provider.provider), "collect_external_metrics", context.job.key)
    result = await call_blocking(key, f"{label} for {context.job.key}", lambda: collect(context))
    return await result if inspect.isawaitable(result) else result


def _declared(p: ConfiguredProvider, method: str, call: Callable[[], Iterable[object]]) -> list[str]:
    try:
        return _strings(call(), p.name)
    except Exception as exc:
        _provider_failed(p, method, exc)
        return []


def _strings(names: Iterable[object], provider: str) -> list[str]:
    """The declared names that are non-empty strings; anything else is logged and dropped."""
    items = [names] if isinstance(names, str) else list(names)  # a lone string is one name, not letters
    good = [n for n in items if isinstance(n, str) and n]
    if len(good) != len(items):
        log.warning("metric_provider_bad_names", provider=provider, names=repr(items))
    return good


def _float(value: object, provider: str, name: str) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        log.warning("external_metric_not_a_number", provider=provider, name=name, value=repr(value))
        return math.nan


def _provider_failed(p: ConfiguredProvider, method: str, exc: BaseException, **extra: str) -> None:
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    log.warning("metric_provider_failed", provider=p.name, method=method, error=error, **extra)


def metric_providers(
    options: AutoscalerOptions,
    *,
    plugins: PluginInstances | None = None,
    evaluators: EvaluatorInstances | None = None,
) -> tuple[ConfiguredProvider, ...]:
    """The job's configured executor plugins and custom evaluators that are metric providers.

    In configured order (executor plugins first), each instance once. Instances that cannot be found
    are skipped here: the executor chain and the evaluator already refuse to scale without them.
    """
    found: list[ConfiguredProvider] = []
    if plugins is not None:
        chain = plugins.chain_for(options)
        for plugin in chain.plugins:
            if isinstance(plugin, CustomMetricProvider):
                found.append(ConfiguredProvider(plugin.name, plugin, chain.config_for(plugin)))
    if evaluators is not None:
        for evaluator, config in evaluators.for_options(options):
            if isinstance(evaluator, CustomMetricProvider):
                found.append(ConfiguredProvider(evaluator.name, evaluator, config))
    unique = {id(p.provider): p for p in reversed(found)}  # the first configuration of an instance wins
    return tuple(p for p in found if unique[id(p.provider)] is p)
