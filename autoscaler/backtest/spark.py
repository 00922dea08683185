"""The backtest on Spark: the archive read as two DataFrames, cogrouped by job, each job replayed by the
task that holds its rows (``autoscaler.backtest.jobs``), the per-job results collected.

A job's rows travel together (grouped by cluster and job name: a resubmitted job's JobIDs stay one
history), so jobs replay in parallel across the cluster's cores, one Python task per group, and a fleet
scales out by adding workers: ``spark.master`` set to ``spark://…`` runs the same plan on a standalone
cluster. The archive must be readable at the same path by every worker (a shared filesystem or an
object store). The replayed decisions need no Spark themselves (the plain-Python evaluator runs inside
each task: there is no Spark within Spark).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from autoscaler.archive.reader import NESTED_COLUMNS
from autoscaler.archive.schema import DECISIONS, SAMPLES
from autoscaler.backtest.history import DECISION_COLUMNS
from autoscaler.backtest.jobs import RESULT_SCHEMA, BacktestOptions, backtest_tables
from autoscaler.logs import configure_logging

__all__ = ["backtest_on_spark"]

_KEYS = ("cluster", "job_name")
_SPARK_TYPES = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double"}
_RESULT_DDL = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in RESULT_SCHEMA)


def backtest_on_spark(
    spark: SparkSession,
    root: Path,
    options: BacktestOptions,
    *,
    clusters: Iterable[str] = (),
    job_names: Iterable[str] = (),
) -> pa.Table:
    """Every archived job under ``root`` (only these clusters and job names, when given), backtested:
    one row per job and world (``autoscaler.backtest.jobs.RESULT_SCHEMA``)."""
    # Partition values stay strings: an all-digit JobID must not become a number, nor the day a date.
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    samples = _read(spark, root / SAMPLES, clusters, job_names)
    if samples is None:
        return RESULT_SCHEMA.empty_table()
    # Nested columns travel as JSON text: Spark's Arrow writer takes three times as long on the nested
    # types (the reader parses them back, each distinct text once); of the decisions, only what a
    # replay reads (the ticks and the PUTs).
    samples = samples.select(*(F.to_json(c).alias(c) if c in NESTED_COLUMNS else c for c in samples.columns))
    decisions = _read(spark, root / DECISIONS, clusters, job_names)
    if decisions is not None:
        decisions = decisions.select(*_KEYS, *DECISION_COLUMNS)

    def replay_group(rows: pa.Table, decided: pa.Table | None = None) -> pa.Table:
        configure_logging(level="WARNING")  # a replay's every tick would log its decision at INFO
        return backtest_tables(rows, decided, options)

    grouped = samples.groupBy(*_KEYS)
    if decisions is None:
        result = grouped.applyInArrow(replay_group, schema=_RESULT_DDL)
    else:
        result = grouped.cogroup(decisions.groupBy(*_KEYS)).applyInArrow(replay_group, schema=_RESULT_DDL)
    return result.toArrow().cast(RESULT_SCHEMA)


def _read(
    spark: SparkSession, directory: Path, clusters: Iterable[str], names: Iterable[str]
) -> DataFrame | None:
    if not directory.is_dir():
        return None
    frame = spark.read.option("mergeSchema", "true").parquet(str(directory))
    wanted_clusters, wanted_names = list(clusters), list(names)
    if wanted_clusters:
        frame = frame.where(F.col("cluster").isin(wanted_clusters))
    if wanted_names:
        frame = frame.where(F.col("job_name").isin(wanted_names))
    return frame
