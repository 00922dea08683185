"""A tick's jobs between the window's bookkeeping and their :class:`~autoscaler.model.JobEvaluation`.

What the Spark evaluator (:mod:`autoscaler.evaluate.spark.evaluator`) does with each job around the batched
computation: before it, what the job's evaluation reads besides the window (restart time, history,
custom evaluators, windowed custom metrics) and whether it is evaluated at all; after it, the job's
result with its window's status. Apart from ``spark.py`` because none of it touches Spark, and the
evaluator's module is about keeping the window there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from autoscaler.evaluate.aggregates import CustomAggregate
from autoscaler.evaluate.custom import ConfiguredEvaluator, unavailable
from autoscaler.evaluate.fleet.evaluator import FleetJob
from autoscaler.evaluate.history import restart_time_s as restart_time_from_history
from autoscaler.evaluate.oracle.formulas import GraphEvaluation
from autoscaler.evaluate.window.job_window import WindowStatus
from autoscaler.model import JOB_SCOPE, JobEvaluation, JobSample
from autoscaler.reasons import Reason
from autoscaler.state import ScalingRecord

__all__ = ["PreparedJob", "TickJob", "prepare_job", "rows_per_job", "windowed_custom_metrics"]


@dataclass(frozen=True, slots=True)
class TickJob:
    """One job's sample and what it did to its window this tick."""

    sample: JobSample
    status: WindowStatus


def rows_per_job(standard: pa.Table) -> dict[str, tuple[int, int]]:
    """Per job with rows in the window: (rows, samples of its fullest vertex)."""
    if standard.num_rows == 0:
        return {}
    grouped = standard.group_by("job_key").aggregate([("samples", "sum"), ("samples", "max")])
    return dict(
        zip(
            grouped["job_key"].to_pylist(),
            zip(grouped["samples_sum"].to_pylist(), grouped["samples_max"].to_pylist(), strict=True),
            strict=True,
        )
    )


@dataclass(frozen=True, slots=True)
class PreparedJob:
    """One job of the tick between the window's bookkeeping and its :class:`JobEvaluation`."""

    tick: TickJob
    fleet: FleetJob
    window_samples: int
    missing: tuple[str, ...]
    evaluated: bool  # its window holds rows, it is not stabilizing and no evaluator is missing

    def evaluation(self, graph: GraphEvaluation | None) -> JobEvaluation:
        """The job's result; ``not_ready`` says whether it may drive a decision.

        A configured custom evaluator that is not installed makes the job ``PluginFailed`` with no
        vertex evaluated: scaling it without an evaluator its operator relies on would be a silent
        misjudgement.
        """
        status = self.tick.status
        return JobEvaluation(
            sample=self.fleet.sample,
            vertices=graph.vertices if graph is not None else {},
            processing_backlog=graph.processing_backlog if graph is not None else False,
            window_samples=self.window_samples,
            window_full=status.full,
            not_ready=Reason.PLUGIN_FAILED if self.missing else status.not_ready,
            restart_time_s=self.fleet.restart_s if self.evaluated else math.nan,
            custom_metrics=self.fleet.custom_metrics,
            not_ready_detail="; ".join(self.missing) or status.detail,
            evaluator_failures=graph.evaluator_failures if graph is not None else (),
            load_change_ms=status.load_change_ms,
            level_since_ms=status.level_since_ms,
            counters_fell=status.counters_fell,
        )


def prepare_job(
    tick: TickJob,
    window_samples: int,
    custom: Mapping[str, Mapping[str, CustomAggregate]],
    restart_time_s: float | None,
    history: Sequence[ScalingRecord],
    evaluators: Sequence[ConfiguredEvaluator],
) -> PreparedJob:
    """Evaluate upfront whenever the window holds rows (``window_samples`` > 0), and not stabilizing."""
    sample = tick.sample
    restart_s = (
        restart_time_s
        if restart_time_s is not None
        else restart_time_from_history(history, sample.target.options)
    )
    missing = tuple(unavailable(evaluators))
    return PreparedJob(
        tick=tick,
        fleet=FleetJob(sample, restart_s, history, evaluators, windowed_custom_metrics(sample, custom)),
        window_samples=window_samples,
        missing=missing,
        evaluated=window_samples > 0 and not tick.status.stabilizing and not missing,
    )


def windowed_custom_metrics(
    sample: JobSample, custom: Mapping[str, Mapping[str, CustomAggregate]]
) -> dict[str, dict[str, tuple[float, float]]]:
    """scope -> name -> (current, average): the window's aggregates, and this tick's declared names.

    A name declared this tick but never measured in the window is there as (NaN, NaN), so a plugin can
    tell "declared, unknown" from a typo only by its spelling, never by a KeyError.
    """
    out: dict[str, dict[str, tuple[float, float]]] = {}
    declared = [*sample.custom_vertex_metrics.items(), (JOB_SCOPE, sample.custom_job_metrics)]
    for scope, names in declared:
        for name in names:
            out.setdefault(scope, {})[name] = (math.nan, math.nan)
    for scope, per_name in custom.items():
        for name, agg in per_name.items():
            out.setdefault(scope, {})[name] = agg.pair
    return out
