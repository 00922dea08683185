"""The Spark backend of the evaluator: one long-lived session, one batched computation per tick.

Split of work (see ``/work/shared/reference/spark.md`` §3 and §6): Spark keeps the metric window and
reduces it to ONE ROW PER VERTEX; the driver does the graph propagation and the parallelism arithmetic
(:func:`autoscaler.evaluate.formulas.evaluate_graph`, custom evaluators included). Each tick appends only
the new samples to the window held in Spark, drops what left the window with a broadcast semi-join
against a tiny ``(job_key, epoch, start_ms)`` frame, and cuts the lineage with ``localCheckpoint`` so a
loop that runs for months never grows its plan.

Custom metrics (declared by plugins, :mod:`autoscaler.plugins.metrics`) live beside the window in a
long frame ``(job_key, epoch, scope, name, ts_ms, value)``: one row per measured value, so any number of
names costs no schema change. It goes through the same append/drop cycle with the same keep frame, and
its aggregation is unioned into the standard one, so a tick is still ONE aggregation query for every
job. Jobs without custom metrics cost nothing: the frame exists only while it holds rows.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import math
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import structlog

from autoscaler.evaluate.custom import ConfiguredEvaluator, unavailable
from autoscaler.evaluate.formulas import (
    AverageParts,
    CustomAggregate,
    RatePoints,
    VertexAggregates,
    evaluate_graph,
    get_average,
    get_rate,
)
from autoscaler.evaluate.history import restart_time_s as restart_time_from_history
from autoscaler.evaluate.window import WindowBook, WindowStatus
from autoscaler.model import JobEvaluation, JobSample, VertexEvaluation, VertexId, VertexSample
from autoscaler.plugins.metrics import JOB_SCOPE
from autoscaler.reasons import Reason
from autoscaler.settings import SparkSettings
from autoscaler.state import ScalingRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = structlog.get_logger(__name__)

__all__ = [
    "CUSTOM_COLUMNS",
    "CUSTOM_DDL",
    "ROW_COLUMNS",
    "ROW_DDL",
    "CustomAggregates",
    "SparkEvaluator",
    "aggregate_frame",
    "collect_aggregates",
    "collect_tick_aggregates",
    "create_spark_session",
    "custom_aggregate_frame",
    "custom_rows_frame",
    "is_connect",
    "rows_frame",
    "session_conf",
    "windowed_custom_metrics",
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
_KEEP_DDL = "job_key string, epoch bigint, start_ms bigint"
# Spark's error class for a local checkpoint whose blocks went with their executor: not recomputable.
_LOST_WINDOW = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",)
# A Connect session the server no longer knows (it restarted, or expired the session): the client closes
# itself and every later call fails with NO_ACTIVE_SESSION until a new session is created.
_GONE_SESSION = ("NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION_")
# Connect's default retry policy waits out an unreachable server for at least 10 minutes inside one
# call. A tick fails fast instead (about 17 s: 5 retries from 50 ms, x4, at most 15 s apart): nothing
# scales on a tick without Spark, and the next tick reconnects.
_CONNECT_RETRIES = {"max_retries": 5, "max_backoff": 15_000}
_STATIC_CONF = ("spark.ui.", "spark.default.parallelism", "spark.driver.", "spark.executor.")
# A Connect server keeps each session's last resolved plans (16 by default). Every plan of ours reads a
# window checkpoint that the next tick supersedes, so that cache would pin up to 16 stale windows in the
# server's memory; our plans never repeat, so it saves nothing. Without it the server's ContextCleaner
# unpersists a superseded checkpoint at its first GC after the client drops it (see :func:`_release`).
_CONNECT_CONF = {"spark.connect.session.planCache.enabled": "false"}


# ---------------------------------------------------------------------------------------------- session
def _cores(master: str) -> int:
    """Cores the session may use: N of ``local[N]`` / ``local[N,F]``; the machine's for ``local[*]`` etc."""
    m = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", master.strip())
    if m:
        return max(1, int(m.group(1)))
    if master.strip() == "local":
        return 1
    return os.cpu_count() or 1


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """The session settings (spark.md §2): UI off, ~2x cores partitions, Arrow, UTC; the user's win."""
    partitions = str(2 * _cores(settings.master))
    connect = is_connect(settings.master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": partitions,
        "spark.default.parallelism": partitions,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        **(_CONNECT_CONF if connect else {}),
    }
    conf.update(settings.conf)
    if connect:  # a Connect client can only set runtime SQL confs
        conf = {k: v for k, v in conf.items() if not k.startswith(_STATIC_CONF)}
    return conf


def is_connect(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``sc://host:port``) rather than a classic master."""
    return master.strip().startswith("sc://")


def _on_loopback(master: str) -> bool:
    """Whether every host of a ``spark://h1:p1,h2:p2`` master is this machine's loopback."""
    hosts = [part.rsplit(":", 1)[0].strip("[]") for part in master.strip()[len("spark://") :].split(",")]
    for host in hosts:
        try:
            address = ipaddress.ip_address(host if host != "localhost" else "127.0.0.1")
        except ValueError:
            try:
                address = ipaddress.ip_address(socket.gethostbyname(host))
            except OSError:
                return False
        if not address.is_loopback:
            return False
    return bool(hosts)


def _prepare_environment(master: str) -> None:
    """Environment for the local JVM, which reads it once, at the first session.

    Local mode binds to loopback and runs this venv's Python. A standalone cluster's executors must
    reach the driver, so the driver binds to loopback only when the master is on loopback too, and an
    operator's ``PYSPARK_PYTHON`` (the executors' interpreter) is kept. A Connect client starts no JVM.
    """
    if is_connect(master):
        return
    if master.strip().startswith("spark://"):
        if _on_loopback(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        return
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must run this venv's Python (pyarrow)


def create_spark_session(settings: SparkSettings) -> SparkSession:
    """Start (or join) the process's one SparkSession: local, on a standalone cluster, or over Connect."""
    _prepare_environment(settings.master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(settings.app_name)
    if is_connect(settings.master):
        builder = builder.remote(settings.master.strip())
    else:
        builder = builder.master(settings.master)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except ImportError as err:  # PySpark's own message names one package, not how to get them all
        if not is_connect(settings.master):
            raise
        raise ImportError(
            f"spark.master {settings.master} needs the Spark Connect client: "
            f"pip install 'flink-autoscaler[connect]' ({err})"
        ) from err
    if is_connect(settings.master):
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session.client.set_retry_policies([DefaultPolicy(**_CONNECT_RETRIES)])  # type: ignore[attr-defined]
    else:
        session.sparkContext.setLogLevel("WARN")
        _quiet_expected_warnings(session)
    return session


def start_evaluator(settings: SparkSettings) -> SparkEvaluator:
    """The process's session and its evaluator; over Connect, one that reconnects if the server restarts
    (a classic session's driver JVM is this process's own: there is nothing to reconnect to)."""
    spark = create_spark_session(settings)
    reconnect = functools.partial(create_spark_session, settings) if is_connect(settings.master) else None
    try:
        return SparkEvaluator(spark, reconnect=reconnect)
    except BaseException:
        spark.stop()
        raise


# Loggers that warn on every tick about things this evaluator does on purpose: releasing a superseded
# local checkpoint, and printing a wide plan. Everything else keeps Spark's WARN level.
_EXPECTED_WARNINGS = ("org.apache.spark.rdd.MapPartitionsRDD", "org.apache.spark.util.SparkStringUtils")


def _quiet_expected_warnings(session: SparkSession) -> None:
    with contextlib.suppress(Exception):  # only classic sessions expose log4j through py4j
        jvm = session.sparkContext._jvm  # type: ignore[attr-defined]
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in _EXPECTED_WARNINGS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)


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


def _custom_rows(job_key: str, epoch: int, sample: JobSample) -> Iterable[CustomRow]:
    """A sample's measured custom values (NaN adds nothing to either aggregate, so no row)."""
    for scope, name, value in sample.measured_custom_metrics():
        yield job_key, epoch, scope, name, sample.ts_ms, value


def _to_spark(spark: SparkSession, frame: pd.DataFrame, ddl: str) -> DataFrame:
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


def _release(frame: DataFrame | None) -> None:
    """Free a superseded local checkpoint now instead of whenever the JVM's GC gets to it.

    Classic sessions (local or standalone): unpersist the checkpointed RDD behind the plan. A Connect
    client has no handle on RDDs: dropping the DataFrame makes the client remove it from the server's
    session (``CachedRemoteRelation.__del__``), and with the session's plan cache off
    (:data:`_CONNECT_CONF`) nothing else holds it, so the server's ContextCleaner unpersists it at its
    next GC.
    """
    if frame is None:
        return
    # Connect (no _jdf) or a plan that is not a LogicalRDD: nothing to free by hand.
    with contextlib.suppress(Exception):
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)  # type: ignore[attr-defined]


def _spark_error(err: BaseException, classes: Sequence[str]) -> str | None:
    """The first line of Spark's message from one of the error ``classes`` on, if ``err`` has one.

    Matched in the text: classic (py4j) and Connect errors carry the class alike.
    """
    try:
        text = str(err)
    except Exception:  # a py4j error whose JVM is gone cannot even describe itself
        return None
    found = [at for at in (text.find(c) for c in classes) if at >= 0]
    return text[min(found) :].split("\n", 1)[0] if found else None


# ---------------------------------------------------------------------------------------------- evaluator
@dataclass(frozen=True, slots=True)
class _Tick:
    """One job's bookkeeping for the current tick."""

    sample: JobSample
    status: WindowStatus


class SparkEvaluator:
    """Keeps every job's metric window in Spark and evaluates all jobs of a tick in one batch.

    ``evaluate`` must be called from one thread at a time (the daemon's tick).
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        partitions: int | None = None,
        reconnect: Callable[[], SparkSession] | None = None,
    ) -> None:
        """``reconnect`` makes a new session when Spark Connect no longer knows this one (the server
        restarted); without it such a session fails every tick until the process restarts."""
        self._spark = spark
        self._reconnect = reconnect
        self._partitions = partitions or max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or "4"))
        self._book = WindowBook()
        self._window: DataFrame | None = None
        self._custom: DataFrame | None = None  # custom-metric rows; None while there are none
        self._rows_by_job: dict[str, int] = {}
        self._custom_rows_by_job: dict[str, int] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Run the tick's Spark operations once on throwaway rows (JIT, codegen, Arrow, workers)."""
        rows = rows_frame([("warm-up", 0, "v", 0, VertexSample()), ("warm-up", 0, "v", 1, VertexSample())])
        custom = custom_rows_frame([("warm-up", 0, "v", "m", 0, 1.0)])
        keep = pd.DataFrame({"job_key": ["warm-up"], "epoch": [0], "start_ms": [0]})
        frame = self._materialize(None, rows, keep)
        custom_frame = self._materialize(None, custom, keep, CUSTOM_DDL)
        if frame is not None:
            collect_tick_aggregates(frame, custom_frame)
        _release(frame)
        _release(custom_frame)

    @property
    def session(self) -> SparkSession:
        """The session this evaluator runs on now."""
        return self._spark

    def stop(self) -> None:
        """Stop the session this evaluator runs on now (a reconnect replaces the one it started with)."""
        with contextlib.suppress(Exception):  # a session that is gone has nothing left to stop
            self._spark.stop()

    def forget(self, job_keys: Iterable[str]) -> None:
        """Drop jobs (stopped or removed); their rows leave Spark at the next tick."""
        keys = list(job_keys)
        self._book.forget(keys)
        for key in keys:
            self._rows_by_job.pop(key, None)
            self._custom_rows_by_job.pop(key, None)

    def window_size(self) -> int:
        """Rows retained in Spark as of the last tick, minus forgotten jobs."""
        return sum(self._rows_by_job.values())

    def custom_window_size(self) -> int:
        """Custom-metric rows (one per measured value) retained as of the last tick, minus forgotten jobs."""
        return sum(self._custom_rows_by_job.values())

    # -- the tick ------------------------------------------------------------------------------
    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        restart_times_s: Mapping[str, float] | None = None,
        history: Mapping[str, Sequence[ScalingRecord]] | None = None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        """Append this tick's samples, slide every window, aggregate all jobs at once, evaluate each job.

        ``restored`` (by job key, any order) are samples a previous daemon process stored for jobs
        this one has not seen yet: they are replayed into the window at their own timestamps before
        this tick's samples, and their rows join this tick's single append, so a restarted daemon
        resumes its windows instead of waiting a full ``metrics.window``.

        ``history`` (by job key, oldest first) feeds the history-dependent rules: restart-time tracking,
        ineffective scale-up detection and the observed scalability coefficient. ``restart_times_s`` (by
        job key) overrides the restart time; without it a job's restart time comes from its history
        (:func:`autoscaler.evaluate.history.restart_time_s`), i.e. ``restart.time`` unless tracked.
        ``evaluators`` (by job key) are the job's custom evaluators with their config, in order
        (:class:`autoscaler.plugins.evaluators.EvaluatorInstances`); a job whose list holds an
        :class:`~autoscaler.evaluate.custom.UnavailableEvaluator` is not evaluated (``PluginFailed``).
        If Spark fails, the window bookkeeping rolls back so the next tick starts from the rows Spark has.
        If Spark lost the rows (an executor holding a local checkpoint died: a standalone cluster or a
        Connect server's cluster), every window starts afresh with this tick instead of every later
        tick failing on the missing blocks; so do they on a new session when the Connect server lost
        ours (``reconnect``). ``reload`` (this tick's samples -> the stored samples older than them, by
        job key, as ``restored``) refills them at once; without it, or if it fails, jobs read
        ``WindowNotFull`` for one ``metrics.window``.
        """
        try:
            return self._evaluate(samples, now_ms, restart_times_s, history, evaluators, restored)
        except Exception as err:
            self._recover(err)
        refill = restored
        if reload is not None:
            try:
                refill = reload(samples)
            except Exception as exc:  # the windows then fill from this tick on
                log.warning("spark_window_reload_failed", error=str(exc))
            else:
                log.info("spark_window_reloaded", jobs={k: len(v) for k, v in refill.items()})
        return self._evaluate(samples, now_ms, restart_times_s, history, evaluators, refill)

    def _evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        restart_times_s: Mapping[str, float] | None,
        history: Mapping[str, Sequence[ScalingRecord]] | None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None,
        restored: Mapping[str, Sequence[JobSample]] | None,
    ) -> dict[str, JobEvaluation]:
        saved = self._book.copy()
        replayed = self._replay(restored or {})
        ticks = self._observe(samples, now_ms)
        keep = self._book.retain(now_ms, present=ticks)
        kept = [(key, t) for key, t in ticks.items() if t.status.kept]
        rows = rows_frame(
            [
                *(
                    (s.job.key, epoch, vid, s.ts_ms, s.vertices[vid])
                    for epoch, s in replayed
                    for vid in s.vertices
                ),
                *(
                    (key, t.status.epoch, vid, t.sample.ts_ms, t.sample.vertices[vid])
                    for key, t in kept
                    for vid in t.sample.topology.vertices
                ),
            ]
        )
        custom_rows = custom_rows_frame(
            [
                *(row for epoch, s in replayed for row in _custom_rows(s.job.key, epoch, s)),
                *(row for key, t in kept for row in _custom_rows(key, t.status.epoch, t.sample)),
            ]
        )
        keep_frame = pd.DataFrame(
            {
                "job_key": list(keep),
                "epoch": [epoch for epoch, _ in keep.values()],
                "start_ms": [start for _, start in keep.values()],
            }
        )
        previous, previous_custom = self._window, self._custom
        window: DataFrame | None = None
        try:
            window = self._materialize(previous, rows, keep_frame)
            custom = (
                self._materialize(previous_custom, custom_rows, keep_frame, CUSTOM_DDL)
                if previous_custom is not None or not custom_rows.empty
                else None
            )
        except BaseException:
            self._book = saved
            if window is not previous:
                _release(window)
            raise
        self._window, self._custom = window, custom
        _release(previous)
        _release(previous_custom)
        aggregates, custom_aggregates = collect_tick_aggregates(self._window, self._custom)
        self._rows_by_job = {
            key: sum(a.samples for a in per_vertex.values()) for key, per_vertex in aggregates.items()
        }
        self._custom_rows_by_job = {
            key: sum(m.points for per_scope in scopes.values() for m in per_scope.values())
            for key, scopes in custom_aggregates.items()
        }
        if self._custom is not None and not self._custom_rows_by_job:
            _release(self._custom)  # every custom row left the window: back to the no-cost path
            self._custom = None
        restart = restart_times_s or {}
        past = history or {}
        configured = evaluators or {}
        return {
            key: _job_evaluation(
                t,
                aggregates.get(key, {}),
                custom_aggregates.get(key, {}),
                restart.get(key),
                past.get(key, ()),
                configured.get(key, ()),
            )
            for key, t in ticks.items()
        }

    def _recover(self, err: Exception) -> None:
        """Start every window afresh if ``err`` says Spark lost them, on a new session if it lost ours;
        re-raise anything else (and a failing reconnect: the next tick tries again)."""
        lost = _spark_error(err, _LOST_WINDOW)
        gone = None if lost is not None or self._reconnect is None else _spark_error(err, _GONE_SESSION)
        if lost is None and gone is None:
            raise err
        jobs = len(self._rows_by_job)
        self._drop_windows()
        if lost is not None:
            log.warning("spark_window_lost", jobs=jobs, detail=lost)
            return
        log.warning("spark_session_lost", jobs=jobs, detail=gone)
        assert self._reconnect is not None
        # Stopped, the dead session stops being PySpark's default: the new one takes its place, which
        # Connect's DataFrames look up (the tick runs on worker threads that have no active session).
        self.stop()
        self._spark = self._reconnect()
        log.info("spark_session_reconnected")

    def _drop_windows(self) -> None:
        """Forget every window, in Spark and in the bookkeeping: what is left of the frames is unusable."""
        _release(self._window)
        _release(self._custom)
        self._window = self._custom = None
        self._book = WindowBook()
        self._rows_by_job.clear()
        self._custom_rows_by_job.clear()

    def _replay(self, restored: Mapping[str, Sequence[JobSample]]) -> list[tuple[int, JobSample]]:
        """Fold stored samples into the window bookkeeping as their ticks did; the (epoch, sample) kept."""
        kept: list[tuple[int, JobSample]] = []
        for past in restored.values():
            for sample in sorted(past, key=lambda s: s.ts_ms):
                status = self._book.observe_sample(sample, sample.ts_ms)
                if status.kept:
                    kept.append((status.epoch, sample))
        return kept

    def _observe(self, samples: Sequence[JobSample], now_ms: int) -> dict[str, _Tick]:
        """Fold each job's sample into its window; of two samples with one job key the newest wins."""
        latest: dict[str, JobSample] = {}
        for sample in samples:
            seen = latest.get(sample.job.key)
            if seen is None or sample.ts_ms > seen.ts_ms:
                latest[sample.job.key] = sample
        ticks: dict[str, _Tick] = {}
        for sample in latest.values():
            status = self._book.observe_sample(sample, now_ms)
            ticks[sample.job.key] = _Tick(sample, status)
        return ticks

    def _materialize(
        self, previous: DataFrame | None, rows: pd.DataFrame, keep: pd.DataFrame, ddl: str = ROW_DDL
    ) -> DataFrame | None:
        """previous + new rows, semi-joined with ``keep`` on (job, epoch, ts >= start), checkpointed."""
        from pyspark.sql import functions as F

        if keep.empty:
            return None
        frame = previous
        if not rows.empty:
            new = _to_spark(self._spark, rows, ddl)
            frame = new if frame is None else frame.unionByName(new)
        if frame is None:
            return None
        kept = _to_spark(self._spark, keep, _KEEP_DDL).alias("k")
        condition = (
            (F.col("w.job_key") == F.col("k.job_key"))
            & (F.col("w.epoch") == F.col("k.epoch"))
            & (F.col("w.ts_ms") >= F.col("k.start_ms"))
        )
        window = frame.alias("w").join(F.broadcast(kept), condition, "left_semi")
        return window.coalesce(self._partitions).localCheckpoint(eager=True)


def _job_evaluation(
    tick: _Tick,
    aggregates: Mapping[VertexId, VertexAggregates],
    custom: Mapping[str, Mapping[str, CustomAggregate]],
    restart_time_s: float | None,
    history: Sequence[ScalingRecord],
    evaluators: Sequence[ConfiguredEvaluator],
) -> JobEvaluation:
    """Evaluate upfront whenever the window holds rows; ``not_ready`` says whether it may drive a decision.

    A configured custom evaluator that is not installed makes the job ``PluginFailed`` with no vertex
    evaluated: scaling it without an evaluator its operator relies on would be a silent misjudgement.
    """
    sample, status = tick.sample, tick.status
    options = sample.target.options
    restart_s = restart_time_s if restart_time_s is not None else restart_time_from_history(history, options)
    custom_metrics = windowed_custom_metrics(sample, custom)
    missing = unavailable(evaluators)
    vertices: dict[VertexId, VertexEvaluation] = {}
    backlog = False
    failures: tuple[str, ...] = ()
    evaluated = bool(aggregates) and not status.stabilizing and not missing
    if evaluated:
        graph = evaluate_graph(
            sample,
            aggregates,
            options,
            restart_s,
            history,
            evaluators=evaluators,
            custom_metrics=custom_metrics,
        )
        vertices, backlog, failures = graph.vertices, graph.processing_backlog, graph.evaluator_failures
    return JobEvaluation(
        sample=sample,
        vertices=vertices,
        processing_backlog=backlog,
        window_samples=max((a.samples for a in aggregates.values()), default=0),
        window_full=status.full,
        not_ready=Reason.PLUGIN_FAILED if missing else status.not_ready,
        restart_time_s=restart_s if evaluated else math.nan,
        custom_metrics=custom_metrics,
        not_ready_detail="; ".join(missing),
        evaluator_failures=failures,
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
