"""The window as Spark frames, and the ONE aggregation query per tick that reduces it to one row per vertex.

Its own module because it is the data layout and the SQL, apart from the evaluator's bookkeeping across
ticks (:mod:`autoscaler.evaluate.spark`): the window's columns and DDL, the pandas frames that carry new
rows to Spark through Arrow, the aggregate expressions (the parts of getAverage / getRate that
:mod:`autoscaler.evaluate.formulas` finishes in the driver), their collection, and the release of a
superseded checkpoint. Tests and the benchmark aggregate a frame with it and no evaluator.

Custom metrics (declared by plugins, :mod:`autoscaler.plugins.metrics`) live beside the window in a
long frame ``(job_key, epoch, scope, name, ts_ms, value)``: one row per measured value, so any number of
names costs no schema change. Their aggregation is unioned into the standard one
(:func:`collect_tick_aggregates`), so a tick is still ONE aggregation query for every job.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from autoscaler.evaluate.aggregates import (
    AverageParts,
    CustomAggregate,
    RatePoints,
    VertexAggregates,
    get_average,
    get_rate,
)
from autoscaler.model import JobSample, VertexId, VertexSample

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CUSTOM_COLUMNS",
    "CUSTOM_DDL",
    "KEEP_DDL",
    "ROW_COLUMNS",
    "ROW_DDL",
    "CustomAggregates",
    "aggregate_frame",
    "collect_aggregates",
    "collect_tick_aggregates",
    "custom_aggregate_frame",
    "custom_rows_frame",
    "job_custom_rows",
    "release_frame",
    "rows_frame",
    "spark_error",
    "to_spark",
]

# VertexSample field -> column name in the window frame.
SAMPLE_COLUMNS: dict[str, str] = {
    "busy_time_ms_per_s": "busy",
    "backpressured_ms_per_s": "backpressure",
    "num_records_in": "records_in",
    "num_records_out": "records_out",
    "accumulated_busy_time_ms": "acc_busy",
    "num_records_in_per_s": "records_in_per_s",
    "pending_records": "pending",
    "observed_tpr": "observed_tpr",
    "accumulated_busy_time_agg_ms": "acc_busy_agg",
}
KEY_COLUMNS = ("job_key", "epoch", "vertex_id", "ts_ms")
ROW_COLUMNS = (*KEY_COLUMNS, *SAMPLE_COLUMNS.values())
ROW_DDL = "job_key string, epoch bigint, vertex_id string, ts_ms bigint, " + ", ".join(
    f"{c} double" for c in SAMPLE_COLUMNS.values()
)
# Custom metrics, long format: scope is the vertex id, or "" for job-level (TaskManager, external) ones.
CUSTOM_COLUMNS = ("job_key", "epoch", "scope", "name", "ts_ms", "value")
CUSTOM_DDL = "job_key string, epoch bigint, scope string, name string, ts_ms bigint, value double"
KEEP_DDL = "job_key string, epoch bigint, start_ms bigint"


# ---------------------------------------------------------------------------------------------- frames
def rows_frame(rows: Iterable[tuple[str, int, VertexId, int, VertexSample]]) -> pd.DataFrame:
    """The window rows ``(job_key, epoch, vertex_id, ts_ms, sample)`` as a pandas frame for Arrow."""
    data: dict[str, list[Any]] = {c: [] for c in ROW_COLUMNS}
    for job_key, epoch, vid, ts_ms, sample in rows:
        data["job_key"].append(job_key)
        data["epoch"].append(epoch)
        data["vertex_id"].append(vid)
        data["ts_ms"].append(ts_ms)
        for field, column in SAMPLE_COLUMNS.items():
            data[column].append(float(getattr(sample, field)))
    frame = pd.DataFrame(data)
    return frame.astype(
        {"epoch": "int64", "ts_ms": "int64", **dict.fromkeys(SAMPLE_COLUMNS.values(), "float64")}
    )


CustomRow = tuple[str, int, str, str, int, float]  # (job_key, epoch, scope, name, ts_ms, value)


def custom_rows_frame(rows: Iterable[CustomRow]) -> pd.DataFrame:
    """Custom-metric rows ``(job_key, epoch, scope, name, ts_ms, value)`` as a pandas frame for Arrow."""
    frame = pd.DataFrame(list(rows), columns=list(CUSTOM_COLUMNS))
    return frame.astype({"epoch": "int64", "ts_ms": "int64", "value": "float64"})


def job_custom_rows(job_key: str, epoch: int, sample: JobSample) -> Iterable[CustomRow]:
    """A sample's measured custom values (NaN adds nothing to either aggregate, so no row)."""
    for scope, name, value in sample.measured_custom_metrics():
        yield job_key, epoch, scope, name, sample.ts_ms, value


def to_spark(spark: SparkSession, frame: pd.DataFrame, ddl: str) -> DataFrame:
    if frame.empty:  # Arrow needs at least a schema; an empty list is the cheap way
        return spark.createDataFrame([], ddl)
    return spark.createDataFrame(frame, ddl)


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
AGGREGATES: tuple[str, ...] = (
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


_CUSTOM_VALUE = _value("value")
CUSTOM_AGGREGATES: tuple[str, ...] = (
    f"count({_CUSTOM_VALUE}) AS cm_points",
    f"max_by({_CUSTOM_VALUE}, CASE WHEN {_CUSTOM_VALUE} IS NOT NULL THEN ts_ms END) AS cm_current",
    *_average_aggs(_CUSTOM_VALUE, "cm"),
)


def custom_aggregate_frame(custom: DataFrame) -> DataFrame:
    """ONE ROW PER (job_key, scope, name): the latest value and the getAverage parts."""
    from pyspark.sql import functions as F

    return custom.groupBy("job_key", "scope", "name").agg(*(F.expr(a) for a in CUSTOM_AGGREGATES))


def aggregate_frame(window: DataFrame) -> DataFrame:
    """ONE ROW PER (job_key, vertex_id): the parts of every window aggregate the formulas need."""
    from pyspark.sql import functions as F

    return window.groupBy("job_key", "vertex_id").agg(*(F.expr(a) for a in AGGREGATES))


def _num(x: Any) -> float:
    """A collected value as a float; null (None, pandas NA or NaN) becomes NaN."""
    return math.nan if x is None or x is pd.NA else float(x)


def _parts(row: Mapping[str, Any], name: str) -> AverageParts:
    total = _num(row[f"{name}_sum"])
    return AverageParts(0.0 if math.isnan(total) else total, int(row[f"{name}_n"]), int(row[f"{name}_inf"]))


def _points(row: Mapping[str, Any], name: str) -> RatePoints:
    return RatePoints(
        int(row[f"{name}_n"]),
        _num(row[f"{name}_t0"]),
        _num(row[f"{name}_v0"]),
        _num(row[f"{name}_t1"]),
        _num(row[f"{name}_v1"]),
    )


def _aggregates(row: Mapping[str, Any]) -> VertexAggregates:
    busy, tpr, lag = _parts(row, "busy"), _parts(row, "tpr"), _points(row, "lag")
    return VertexAggregates(
        samples=int(row["samples"]),
        busy_sum=busy.total,
        busy_count=busy.count,
        busy_infinite=busy.infinite,
        accumulated_busy_rate=get_rate(_points(row, "acc_busy")),
        accumulated_busy_agg_rate=get_rate(_points(row, "acc_busy_agg")),
        records_in_rate=get_rate(_points(row, "in")),
        records_out_rate=get_rate(_points(row, "out")),
        lag_rate=get_rate(lag),
        lag_latest=lag.last,
        records_in_per_s_avg=get_average(_parts(row, "in_per_s")),
        observed_tpr_sum=tpr.total,
        observed_tpr_count=tpr.count,
        observed_tpr_infinite=tpr.infinite,
        backpressure_avg=get_average(_parts(row, "bp")),
    )


def collect_aggregates(window: DataFrame) -> dict[str, dict[VertexId, VertexAggregates]]:
    """Run :func:`aggregate_frame` and bring the per-vertex rows to the driver through Arrow."""
    return _split(aggregate_frame(window).toPandas())[0]


# job key -> scope -> name -> the metric's window
CustomAggregates = dict[str, dict[str, dict[str, CustomAggregate]]]


def collect_tick_aggregates(
    window: DataFrame | None, custom: DataFrame | None
) -> tuple[dict[str, dict[VertexId, VertexAggregates]], CustomAggregates]:
    """Both aggregations of a tick in ONE Spark query: the custom rows are unioned into the standard ones.

    The two kinds of rows are told apart by ``name``, which only custom rows have.
    """
    candidates = (_maybe(window, aggregate_frame), _maybe(custom, custom_aggregate_frame))
    frames = [f for f in candidates if f is not None]
    if not frames:
        return {}, {}
    frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1], allowMissingColumns=True)
    return _split(frame.toPandas())


def _maybe(frame: DataFrame | None, aggregate: Callable[[DataFrame], DataFrame]) -> DataFrame | None:
    return None if frame is None else aggregate(frame)


def _split(frame: pd.DataFrame) -> tuple[dict[str, dict[VertexId, VertexAggregates]], CustomAggregates]:
    """Collected rows -> per-vertex aggregates and custom aggregates.

    Columns become plain Python lists first (``tolist``): per-cell pandas access would cost more than
    the Spark query for a thousand vertices.
    """
    columns = {name: frame[name].tolist() for name in frame.columns}
    standard: dict[str, dict[VertexId, VertexAggregates]] = {}
    custom: CustomAggregates = {}
    for i in range(len(frame)):
        row = {name: values[i] for name, values in columns.items()}
        job_key = str(row["job_key"])
        if _is_null(row.get("name")):
            standard.setdefault(job_key, {})[str(row["vertex_id"])] = _aggregates(row)
        else:
            scope = custom.setdefault(job_key, {}).setdefault(str(row["scope"]), {})
            scope[str(row["name"])] = _custom_aggregate(row)
    return standard, custom


def _is_null(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _custom_aggregate(row: Mapping[str, Any]) -> CustomAggregate:
    return CustomAggregate(
        points=int(row["cm_points"]),
        current=_num(row["cm_current"]),
        average=get_average(_parts(row, "cm")),
    )


def release_frame(frame: DataFrame | None) -> None:
    """Free a superseded local checkpoint now instead of whenever the JVM's GC gets to it.

    Classic sessions (local or standalone): unpersist the checkpointed RDD behind the plan. A Connect
    client has no handle on RDDs: dropping the DataFrame makes the client remove it from the server's
    session (``CachedRemoteRelation.__del__``), and with the session's plan cache off
    (:data:`autoscaler.evaluate.spark_session._CONNECT_CONF`) nothing else holds it, so the server's
    ContextCleaner unpersists it at its next GC.
    """
    if frame is None:
        return
    # Connect (no _jdf) or a plan that is not a LogicalRDD: nothing to free by hand.
    with contextlib.suppress(Exception):
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)  # type: ignore[attr-defined]


def spark_error(err: BaseException, classes: Sequence[str]) -> str | None:
    """The first line of Spark's message from one of the error ``classes`` on, if ``err`` has one.

    Matched in the text: classic (py4j) and Connect errors carry the class alike.
    """
    try:
        text = str(err)
    except Exception:  # a py4j error whose JVM is gone cannot even describe itself
        return None
    found = [at for at in (text.find(c) for c in classes) if at >= 0]
    return text[min(found) :].split("\n", 1)[0] if found else None
