"""The window as Spark frames, and the ONE aggregation query per tick that reduces it to one row per vertex.

Its own module because it is the data layout and the SQL, apart from the evaluator's bookkeeping across
ticks (:mod:`autoscaler.evaluate.spark.evaluator`): the Arrow tables that carry new rows to Spark (the
window's own rows and their integer key are in :mod:`autoscaler.evaluate.spark.series`), the aggregate
expressions (getAverage and getRate of every metric, in Spark SQL, with the parts the driver needs to finish
the observed TPR per job), their collection as one Arrow table, and the release of a superseded
checkpoint. Tests and the benchmark aggregate a frame with it and no evaluator.

Arrow both ways, column by column, because the rows are many: a tick at 10,000 jobs x 10 vertices ships
100,000 new rows and gets 100,000 aggregate rows back, and building or reading them as Python objects
(a pandas frame from row tuples, a ``VertexAggregates`` per row) cost more than the Spark query.

Custom metrics (declared by plugins, :mod:`autoscaler.plugins.metrics`) live beside the window in a
long frame ``(job_key, epoch, scope, name, ts_ms, value)``: one row per measured value, so any number of
names costs no schema change. Their aggregation is unioned into the standard one
(:func:`collect_tick_aggregates`), so a tick is still ONE aggregation query for every job.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.evaluate.aggregates import AverageParts, CustomAggregate, VertexAggregates, get_average
from autoscaler.evaluate.fleet.columns import AGGREGATE_FIELDS, aggregates_by_job
from autoscaler.evaluate.spark.series import ROW_DDL, VERTEX_BITS, SeriesNames, rows_frame, window_rows
from autoscaler.model import JobSample, VertexId

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "CUSTOM_COLUMNS",
    "CUSTOM_DDL",
    "KEEP_DDL",
    "ROW_DDL",
    "CustomAggregates",
    "SeriesNames",
    "aggregate_frame",
    "collect_aggregates",
    "collect_tick_aggregates",
    "collect_tick_columns",
    "custom_aggregate_frame",
    "custom_rows_frame",
    "extend_window",
    "job_custom_rows",
    "keep_frame",
    "release_frame",
    "rows_frame",
    "series_slot",
    "to_spark",
    "window_rows",
]

# Custom metrics, long format: scope is the vertex id, or "" for job-level (TaskManager, external) ones.
CUSTOM_COLUMNS = ("job_key", "epoch", "scope", "name", "ts_ms", "value")
CUSTOM_DDL = "job_key string, epoch bigint, scope string, name string, ts_ms bigint, value double"
KEEP_DDL = "job_key string, epoch bigint, start_ms bigint"
SINGLE_TASK_ROWS = 500_000
"""Windows of at most this many rows are aggregated in one task, without a shuffle (:func:`aggregate_frame`).

Below it, what a shuffle's two stages cost (tasks, shuffle files, a second scheduling round) is more
than the aggregation's own work: at 1,000 jobs x 10 vertices (130,000 rows) one task took the tick from
1.11 to 0.81 s and the JVM's CPU from 1.45 to 0.91 s (ticks alternating in one process, 2 cores). At
10,000 jobs (1.3 million rows) one task was no slower on 2 cores (3.43 s against 3.51) but uses one core
where the shuffle uses all of them, so a bigger window keeps the shuffle, which more cores or a cluster
share out (``docs/performance.md``, "Evaluator")."""


# ---------------------------------------------------------------------------------------------- frames
CustomRow = tuple[str, int, str, str, int, float]  # (job_key, epoch, scope, name, ts_ms, value)
_CUSTOM_TYPES = (pa.string(), pa.int64(), pa.string(), pa.string(), pa.int64(), pa.float64())


def custom_rows_frame(rows: Iterable[CustomRow]) -> pa.Table:
    """Custom-metric rows ``(job_key, epoch, scope, name, ts_ms, value)`` as an Arrow table."""
    listed = list(rows)
    columns = list(zip(*listed, strict=True)) if listed else [()] * len(CUSTOM_COLUMNS)
    return pa.table(
        {
            name: pa.array(list(values), type=kind)
            for name, values, kind in zip(CUSTOM_COLUMNS, columns, _CUSTOM_TYPES, strict=True)
        }
    )


def keep_frame(keep: Mapping[str, tuple[int, int]]) -> pa.Table:
    """The rows to keep, ``{job_key: (epoch, start_ms)}`` (``WindowBook.retain``), as an Arrow table."""
    return pa.table(
        {
            "job_key": pa.array(list(keep), type=pa.string()),
            "epoch": pa.array([epoch for epoch, _ in keep.values()], type=pa.int64()),
            "start_ms": pa.array([start for _, start in keep.values()], type=pa.int64()),
        }
    )


def series_slot(series: Column) -> Column:
    """A window row's slot, its job window's epoch, from its ``series`` (``evaluate.spark.series``)."""
    from pyspark.sql import functions as F

    return F.shiftright(series, VERTEX_BITS)


def job_custom_rows(job_key: str, epoch: int, sample: JobSample) -> Iterable[CustomRow]:
    """A sample's measured custom values (NaN adds nothing to either aggregate, so no row)."""
    for scope, name, value in sample.measured_custom_metrics():
        yield job_key, epoch, scope, name, sample.ts_ms, value


def to_spark(spark: SparkSession, frame: pa.Table, ddl: str) -> DataFrame:
    if frame.num_rows == 0:  # Arrow needs at least a schema; an empty list is the cheap way
        return spark.createDataFrame([], ddl)
    return spark.createDataFrame(frame, ddl)


def extend_window(
    spark: SparkSession,
    previous: DataFrame | None,
    rows: pa.Table,
    keep: pa.Table,
    ddl: str = ROW_DDL,
    *,
    partitions: int,
    single_task: bool = False,
) -> DataFrame | None:
    """The previous rows semi-joined with ``keep`` on (job, epoch, ts >= start), plus the new ``rows``
    (the ones ``keep`` keeps): the window as a plan, which the tick aggregates and then checkpoints.

    ``single_task`` (a window of at most :data:`SINGLE_TASK_ROWS`) keeps the window in one partition and
    joins it there: a hash join of two single-partition sides needs no exchange, where a broadcast join
    first runs a job of its own to collect the keep frame, and the aggregation of one partition needs
    none either, so the tick is one job of one task. The join is on the previous rows alone: Spark
    pushes a semi-join below a union or a coalesce, which would take the one partition apart again.
    Larger windows are broadcast-joined and spread over ``partitions``.
    """
    from pyspark.sql import functions as F

    if keep.num_rows == 0:
        return None
    parts = []
    if previous is not None:
        kept = to_spark(spark, keep, KEEP_DDL)
        if ddl == ROW_DDL:  # a series' slot is its window's epoch, which no other job's window has
            same = series_slot(F.col("w.series")) == F.col("k.epoch")
        else:
            same = (F.col("w.job_key") == F.col("k.job_key")) & (F.col("w.epoch") == F.col("k.epoch"))
        condition = same & (F.col("w.ts_ms") >= F.col("k.start_ms"))
        side = kept.coalesce(1).hint("shuffle_hash") if single_task else F.broadcast(kept)
        parts.append(previous.alias("w").join(side.alias("k"), condition, "left_semi"))
    if rows.num_rows > 0:
        parts.append(to_spark(spark, rows, ddl))
    if not parts:
        return None
    frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return frame.coalesce(1 if single_task else partitions)


def _value(column: str) -> str:
    """The column with NaN turned into null, so every aggregate below skips it."""
    return f"nanvl({column}, CAST(NULL AS DOUBLE))"


_INF = "CAST('Infinity' AS DOUBLE)"


def _average_aggs(value: str, name: str) -> list[str]:
    """getAverage parts: sum and count of finite values, count of infinite ones."""
    return [
        f"sum(CASE WHEN abs({value}) != {_INF} THEN {value} END) AS {name}_sum",
        f"count(CASE WHEN abs({value}) != {_INF} THEN 1 END) AS {name}_n",
        f"count(CASE WHEN abs({value}) = {_INF} THEN 1 END) AS {name}_inf",
    ]


def _rate_aggs(value: str, name: str) -> list[str]:
    """getRate parts: how many non-null points, and the first and last of them by timestamp."""
    ts = f"CASE WHEN {value} IS NOT NULL THEN ts_ms END"
    return [
        f"count({value}) AS {name}_n",
        f"min({ts}) AS {name}_t0",
        f"min_by({value}, {ts}) AS {name}_v0",
        f"max({ts}) AS {name}_t1",
        f"max_by({value}, {ts}) AS {name}_v1",
    ]


_LOAD = f"CASE WHEN {_value('busy')} < 0 THEN 0D ELSE {_value('busy')} END"  # max(0, busy), null stays
# SQL text, not Column objects: building ~30 Columns costs ~1,000 py4j round trips per tick.
PART_AGGREGATES: tuple[str, ...] = (
    "count(1) AS samples",
    *_average_aggs(_LOAD, "busy"),
    *_average_aggs(_value("records_in_per_s"), "in_per_s"),
    *_average_aggs(_value("observed_tpr"), "tpr"),
    *_average_aggs(_value("backpressure"), "bp"),
    *_rate_aggs(_value("acc_busy"), "acc_busy"),
    *_rate_aggs(_value("acc_busy_agg"), "acc_busy_agg"),
    *_rate_aggs(_value("records_in"), "in"),
    *_rate_aggs(_value("records_out"), "out"),
    *_rate_aggs(_value("pending"), "lag"),
)


def _total(name: str) -> str:
    """getAverage's total from its parts: the sum of the finite values, 0 when there are none."""
    return f"coalesce(nanvl({name}_sum, 0D), 0D)"


def _average(name: str) -> str:
    """Reference getAverage (``aggregates.get_average``): the mean of the finite values, +inf if there
    are only infinite ones, null (NaN in the driver) if none. ``n > 0`` keeps the division finite-only:
    Spark's division by zero is null or an error, never Java's infinity."""
    return f"CASE WHEN {name}_n > 0 THEN {_total(name)} / {name}_n WHEN {name}_inf > 0 THEN {_INF} END"


def _rate(name: str) -> str:
    """Reference getRate (``aggregates.get_rate``): 1000 * (last - first) / max(1 ms, their time apart),
    null below two points. Same operations in the same order as the oracle, so the same double."""
    span = f"greatest(1D, CAST({name}_t1 - {name}_t0 AS DOUBLE))"
    return f"CASE WHEN {name}_n >= 2 THEN 1000D * ({name}_v1 - {name}_v0) / {span} END"


# One row per vertex series, VertexAggregates' fields by name (fleet_columns.AGGREGATE_FIELDS). The
# observed TPR stays in parts: its min-observations is a per-job option the driver applies.
AGGREGATES: tuple[str, ...] = (
    "series",
    "samples",
    f"{_total('busy')} AS busy_sum",
    "busy_n AS busy_count",
    "busy_inf AS busy_infinite",
    f"{_rate('acc_busy')} AS accumulated_busy_rate",
    f"{_rate('acc_busy_agg')} AS accumulated_busy_agg_rate",
    f"{_rate('in')} AS records_in_rate",
    f"{_rate('out')} AS records_out_rate",
    f"{_rate('lag')} AS lag_rate",
    "lag_v1 AS lag_latest",
    f"{_average('in_per_s')} AS records_in_per_s_avg",
    f"{_total('tpr')} AS observed_tpr_sum",
    "tpr_n AS observed_tpr_count",
    "tpr_inf AS observed_tpr_infinite",
    f"{_average('bp')} AS backpressure_avg",
)
assert [a.rsplit(" AS ", 1)[-1] for a in AGGREGATES[1:]] == list(AGGREGATE_FIELDS), "VertexAggregates changed"


_CUSTOM_VALUE = _value("value")
CUSTOM_AGGREGATES: tuple[str, ...] = (
    f"count({_CUSTOM_VALUE}) AS cm_points",
    f"max_by({_CUSTOM_VALUE}, CASE WHEN {_CUSTOM_VALUE} IS NOT NULL THEN ts_ms END) AS cm_current",
    *_average_aggs(_CUSTOM_VALUE, "cm"),
)


def custom_aggregate_frame(custom: DataFrame) -> DataFrame:
    """ONE ROW PER (job_key, scope, name): the latest value and the getAverage parts."""
    return custom.groupBy("job_key", "scope", "name").agg(*_parsed(custom, CUSTOM_AGGREGATES))


def aggregate_frame(window: DataFrame, *, single_task: bool = False) -> DataFrame:
    """ONE ROW PER vertex ``series``: every window aggregate the formulas need (:data:`AGGREGATES`).

    ``single_task`` aggregates in one task with no shuffle (:data:`SINGLE_TASK_ROWS`): a shuffle's
    stages cost a small window more than the aggregation itself."""
    if single_task:
        window = window.coalesce(1)  # one partition: the grouping needs no exchange
    parts = window.groupBy("series").agg(*_parsed(window, PART_AGGREGATES))
    return parts.selectExpr(*AGGREGATES)


# Per session, the aggregate expressions parsed into Columns. On a classic session each F.expr is a round
# trip to the JVM and a parse there: some 100 ms of a tick for the 38 of them, every tick, for the same
# text. A Column is an unresolved expression, so one parse serves every later query of its session.
_PARSED: dict[tuple[int, tuple[str, ...]], tuple[Any, list[Any]]] = {}


def _parsed(frame: DataFrame, expressions: tuple[str, ...]) -> list[Any]:
    from pyspark.sql import functions as F

    session = frame.sparkSession
    key = (id(session), expressions)
    cached = _PARSED.get(key)
    if cached is None or cached[0] is not session:  # a new session (a reconnect): parse again
        for stale in [k for k, (s, _) in _PARSED.items() if s is not session]:
            del _PARSED[stale]  # a replaced session's Columns belong to its JVM
        cached = _PARSED[key] = (session, [F.expr(e) for e in expressions])
    return cached[1]


def collect_aggregates(window: DataFrame, names: SeriesNames) -> dict[str, dict[VertexId, VertexAggregates]]:
    """Run :func:`aggregate_frame` and bring the per-vertex rows to the driver as ``VertexAggregates``."""
    return aggregates_by_job(names.name(aggregate_frame(window).toArrow()))


# job key -> scope -> name -> the metric's window
CustomAggregates = dict[str, dict[str, dict[str, CustomAggregate]]]

_STANDARD_SCHEMA = pa.schema(
    [
        ("series", pa.int64()),
        *(
            (name, pa.int64() if isinstance(getattr(VertexAggregates(), name), int) else pa.float64())
            for name in AGGREGATE_FIELDS
        ),
    ]
)


def collect_tick_columns(
    window: DataFrame | None, custom: DataFrame | None, names: SeriesNames, *, single_task: bool = False
) -> tuple[pa.Table, CustomAggregates]:
    """Both aggregations of a tick in ONE Spark query (the custom rows are unioned into the standard
    ones), collected through Arrow: the standard rows as a table (``job_key``, ``vertex_id`` from
    ``names``, and ``VertexAggregates``' fields), the custom ones read into their aggregates.

    The two kinds of rows are told apart by ``name``, which only custom rows have.
    """
    standard = functools.partial(aggregate_frame, single_task=single_task)
    candidates = (_maybe(window, standard), _maybe(custom, custom_aggregate_frame))
    frames = [f for f in candidates if f is not None]
    if not frames:
        return names.name(_STANDARD_SCHEMA.empty_table()), {}
    frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1], allowMissingColumns=True)
    table = frame.toArrow()
    if "name" not in table.column_names:
        return names.name(table.select(_STANDARD_SCHEMA.names)), {}
    is_custom = pc.is_valid(table["name"])
    standard = _STANDARD_SCHEMA.empty_table()
    if "series" in table.column_names:
        standard = table.filter(pc.invert(is_custom)).select(_STANDARD_SCHEMA.names)
    return names.name(standard), _custom_aggregates(table.filter(is_custom))


def collect_tick_aggregates(
    window: DataFrame | None, custom: DataFrame | None, names: SeriesNames
) -> tuple[dict[str, dict[VertexId, VertexAggregates]], CustomAggregates]:
    """:func:`collect_tick_columns` with the standard rows as ``{job_key: {vertex_id: VertexAggregates}}``."""
    standard, custom_aggregates = collect_tick_columns(window, custom, names)
    return aggregates_by_job(standard), custom_aggregates


def _maybe(frame: DataFrame | None, aggregate: Callable[[DataFrame], DataFrame]) -> DataFrame | None:
    return None if frame is None else aggregate(frame)


def _num(x: Any) -> float:
    """A collected value as a float; null (None or NaN) becomes NaN."""
    return math.nan if x is None else float(x)


def _custom_aggregates(table: pa.Table) -> CustomAggregates:
    """Collected custom rows -> their aggregates (a few per job: read row by row)."""
    names = ("job_key", "scope", "name", "cm_points", "cm_current", "cm_sum", "cm_n", "cm_inf")
    out: CustomAggregates = {}
    for key, scope, name, points, current, total, count, infinite in zip(
        *(table[n].to_pylist() for n in names), strict=True
    ):
        finite_total = _num(total)
        parts = AverageParts(0.0 if math.isnan(finite_total) else finite_total, int(count), int(infinite))
        aggregate = CustomAggregate(points=int(points), current=_num(current), average=get_average(parts))
        out.setdefault(str(key), {}).setdefault(str(scope), {})[str(name)] = aggregate
    return out


def release_frame(frame: DataFrame | None) -> None:
    """Free a superseded local checkpoint now instead of whenever the JVM's GC gets to it.

    Classic sessions (local or standalone): unpersist the checkpointed RDD behind the plan. A Connect
    client has no handle on RDDs: dropping the DataFrame makes the client remove it from the server's
    session (``CachedRemoteRelation.__del__``), and with the session's plan cache off
    (:data:`autoscaler.evaluate.spark.session._CONNECT_CONF`) nothing else holds it, so the server's
    ContextCleaner unpersists it at its next GC.
    """
    if frame is None:
        return
    # Connect (no _jdf) or a plan that is not a LogicalRDD: nothing to free by hand.
    with contextlib.suppress(Exception):
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)  # type: ignore[attr-defined]
