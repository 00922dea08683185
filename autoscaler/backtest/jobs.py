"""Backtest one job, or the jobs of one table of archived rows: what actually happened, and each
configuration replayed, scored alike. This is what every Spark task runs for its group of rows
(``autoscaler.backtest.spark``); it needs no Spark itself, so tests and small histories call it directly.

With ``BacktestOptions.series`` (``backtest --html``), each row also carries its world over time (the
``SERIES_FIELDS``: slots and backlog per tick, thinned to ``series_points``, and when it restarted),
which the scorer walks anyway; without, the rows are as before and small.

A job whose replay fails (a history the daemon's code cannot evaluate, a bug) gets a row with the error
instead of its scores: one job never ends the backtest of the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa
import structlog

from autoscaler.backtest.history import JobHistory, histories_from_tables
from autoscaler.backtest.optimum import best_in_hindsight
from autoscaler.backtest.replay import replay_job, replay_settings, trace_actual
from autoscaler.backtest.score import Score, Trace, slots_of, thin_trace
from autoscaler.backtest.workload import estimate_workload
from autoscaler.durations import to_ms
from autoscaler.foresight.cost import Cost, CostModel
from autoscaler.settings import AutoscalerOptions, Settings

__all__ = [
    "ACTUAL",
    "BEST",
    "RESULT_SCHEMA",
    "SERIES_FIELDS",
    "BacktestOptions",
    "backtest_job",
    "backtest_tables",
    "result_schema",
    "unreadable",
]

log = structlog.get_logger(__name__)

ACTUAL = "actual"  # the world label of what the live daemon did
BEST = "best"  # the world label of the best plan in hindsight (autoscaler.backtest.optimum)

RESULT_SCHEMA = pa.schema(
    [
        pa.field("cluster", pa.string()),
        pa.field("job_name", pa.string()),
        pa.field("world", pa.string()),  # "actual", or a configuration's label
        pa.field("ticks", pa.int64()),
        pa.field("first_ms", pa.int64()),
        pa.field("last_ms", pa.int64()),
        pa.field("restarts", pa.int64()),
        pa.field("below_capacity_s", pa.float64()),
        pa.field("backlog_above_target_s", pa.float64()),
        pa.field("slot_hours", pa.float64()),
        pa.field("diverged_ms", pa.int64()),  # the replay's first own rescale; null: never, or "actual"
        pa.field("final_slots", pa.int64()),
        pa.field("cost", pa.float64()),  # slot-seconds, restarts and lag priced (autoscaler.foresight.cost)
        pa.field("error", pa.string()),
    ]
)
SERIES_FIELDS = (
    pa.field("series_ms", pa.list_(pa.int64())),  # the ticks (or the best plan's steps)
    pa.field("series_slots", pa.list_(pa.int64())),  # the slots the job held then
    pa.field("series_backlog", pa.list_(pa.float64())),  # its sources' backlog then (records)
    pa.field("restarts_ms", pa.list_(pa.int64())),  # when it asked Flink for a rescale
)
SERIES_POINTS = 1000


def result_schema(series: bool) -> pa.Schema:
    """The results' columns: ``RESULT_SCHEMA``, and the ``SERIES_FIELDS`` when the series are kept."""
    return pa.schema([*RESULT_SCHEMA, *SERIES_FIELDS]) if series else RESULT_SCHEMA


@dataclass(frozen=True, slots=True)
class BacktestOptions:
    """What every job of a backtest is replayed with."""

    configs: Mapping[str, Settings]  # label -> configuration, in the order to report them
    flink_cooldown_ms: int = 30_000  # the clusters' adaptive-scheduler cooldown (not archived)
    lag_target_s: float = 30.0  # a source further behind than this is "above target"
    series: bool = False  # keep each world over time (SERIES_FIELDS), for the page
    series_points: int = SERIES_POINTS  # at most this many points per world (score.thin_trace)


def backtest_job(history: JobHistory, options: BacktestOptions) -> list[dict[str, object]]:
    """One row per world: what actually happened, each configuration, then the best plan in hindsight
    (none when the history gives it nothing to plan). Every world is priced by the first configuration's
    ``job.autoscaler.cost.*`` options for the job, with ``lag_target_s`` as the lag target."""
    cluster, name = history.key.split("/", 1)
    base = {
        "cluster": cluster,
        "job_name": name,
        "ticks": len(history.ticks),
        "first_ms": history.ticks[0],
        "last_ms": history.ticks[-1],
    }
    first = replay_settings(next(iter(options.configs.values())), cluster)
    workload = estimate_workload(history, to_ms(first.options_for(first.clusters[0]).restart_time))
    model = replace(CostModel.of(first.options_for(first.clusters[0])), lag_target_s=options.lag_target_s)
    last = history.samples[max(history.samples)].topology
    actual, traced = trace_actual(history, workload, options.lag_target_s, trace=options.series)
    rows = [_row(base, ACTUAL, actual, None, slots_of(last, last.parallelisms), model)]
    if options.series:
        rows[-1].update(_series(traced, history.puts, options))
    for label, settings in options.configs.items():
        try:
            replayed = asyncio.run(
                replay_job(
                    history,
                    settings,
                    workload,
                    flink_cooldown_ms=options.flink_cooldown_ms,
                    lag_target_s=options.lag_target_s,
                    trace=options.series,
                )
            )
        except Exception as exc:  # one job's failure stays with that job
            log.warning("backtest_job_failed", job=history.key, world=label, error=str(exc))
            rows.append({**base, "world": label, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append(_row(base, label, replayed.score, replayed.diverged_ms, replayed.final_slots, model))
        if options.series:
            rows[-1].update(_series(replayed.trace, replayed.puts, options))
    try:
        best = best_in_hindsight(history, workload, model)
    except Exception as exc:  # the yardstick's failure costs the job its regret, not its scores
        log.warning("backtest_best_plan_failed", job=history.key, error=str(exc))
        best = None
    if best is not None:
        cost = best.best.cost
        score = Score(cost.restarts, best.below_capacity_s, cost.lag_seconds, cost.slot_seconds / 3600)
        rows.append(_row(base, BEST, score, None, best.final_slots, model))
        if options.series:
            rows[-1].update(_series(best.trace, best.restarts_ms, options))
    return rows


def backtest_tables(samples: pa.Table, decisions: pa.Table | None, options: BacktestOptions) -> pa.Table:
    """Every job in these rows (with their ``cluster`` and ``job`` columns), as a table of results."""
    try:
        histories = histories_from_tables(samples, decisions, AutoscalerOptions())
    except Exception as exc:  # rows that do not make a job (a graph naming unknown vertices, a bad type)
        error = f"unreadable history: {type(exc).__name__}: {exc}"
        names = sorted(
            set(
                zip(
                    samples.column("cluster").to_pylist(), samples.column("job_name").to_pylist(), strict=True
                )
            )
        )
        log.warning("backtest_history_unreadable", jobs=len(names), error=error)
        return unreadable(names, error, result_schema(options.series))
    rows = []
    for history in histories:
        rows.extend(backtest_job(history, options))
    return pa.Table.from_pylist(rows, schema=result_schema(options.series))


def unreadable(jobs: Iterable[tuple[str, str]], error: str, schema: pa.Schema = RESULT_SCHEMA) -> pa.Table:
    """The result of jobs (cluster, job name) whose history could not be read: one error row each."""
    rows = [{"cluster": c, "job_name": n, "world": ACTUAL, "error": error} for c, n in jobs]
    return pa.Table.from_pylist(rows, schema=schema)


def _series(trace: Trace, restarts: Iterable[int], options: BacktestOptions) -> dict[str, list[object]]:
    thinned = thin_trace(trace, options.series_points)
    return {
        "series_ms": [ms for ms, _, _ in thinned],
        "series_slots": [slots for _, slots, _ in thinned],
        "series_backlog": [backlog for _, _, backlog in thinned],
        "restarts_ms": sorted(restarts),
    }


def _row(
    base: Mapping[str, object], world: str, score: Score, diverged: int | None, slots: int, model: CostModel
) -> dict[str, object]:
    cost = Cost.of(score.slot_hours * 3600, score.restarts, score.backlog_above_target_s, model)
    return {
        **base,
        "world": world,
        "restarts": score.restarts,
        "below_capacity_s": score.below_capacity_s,
        "backlog_above_target_s": score.backlog_above_target_s,
        "slot_hours": score.slot_hours,
        "diverged_ms": diverged,
        "final_slots": slots,
        "cost": cost.total,
        "error": None,
    }
