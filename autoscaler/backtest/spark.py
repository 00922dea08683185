"""The backtest on Spark: the archive's jobs listed as a small DataFrame, one row per job, and each job
read and replayed by the task that holds its row (``autoscaler.backtest.jobs``); the per-job results
collected.

Spark moves the jobs, not their rows. A first query lists which JobIDs make each history (a job is
grouped by cluster and job name, so a resubmitted job's JobIDs stay one history), reading only the
partition columns and the job name. Each task then reads its job's own Parquet files (the archive is
partitioned by cluster and JobID, ``autoscaler.archive.layout``) with pyarrow. Before, the archive's
rows were read as DataFrames and cogrouped by job: every row crossed the JVM, a shuffle and Arrow
before its replay began, some 86 million rows for 1,000 jobs x 10 vertices x 1 day, while a task only
ever needs one job's.

Jobs replay in parallel across the cluster's cores, one Spark task per job, and a fleet scales out by
adding workers: ``spark.master`` set to ``spark://…`` runs the same plan on a standalone cluster. The
archive must be readable at the same path by every worker (a shared filesystem). The replayed decisions
need no Spark themselves (the plain-Python evaluator runs inside each task: there is no Spark within
Spark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from autoscaler.archive.schema import SAMPLES
from autoscaler.backtest.files import backtest_archived_job
from autoscaler.backtest.jobs import BacktestOptions, result_schema
from autoscaler.backtest.progress import EVERY_S, JobsDone, replay_progress
from autoscaler.logs import configure_logging

__all__ = ["backtest_on_spark"]

_KEYS = ("cluster", "job_name")
_SPARK_TYPES = {
    pa.string(): "string",
    pa.int64(): "bigint",
    pa.float64(): "double",
    pa.list_(pa.int64()): "array<bigint>",
    pa.list_(pa.float64()): "array<double>",
}
_JOBS_DDL = "cluster string, job_name string, job_ids array<string>"


def backtest_on_spark(
    spark: SparkSession,
    root: Path,
    options: BacktestOptions,
    *,
    clusters: Iterable[str] = (),
    job_names: Iterable[str] = (),
    progress: Callable[[JobsDone], None] | None = None,
    progress_every_s: float = EVERY_S,
) -> pa.Table:
    """Every archived job under ``root`` (only these clusters and job names, when given), backtested:
    one row per job and world (``autoscaler.backtest.jobs.RESULT_SCHEMA``). ``progress`` is told every
    ``progress_every_s`` how many jobs are replayed (``autoscaler.backtest.progress``)."""
    # Partition values stay strings: an all-digit JobID must not become a number, nor the day a date.
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    schema = result_schema(options.series)
    listed = _jobs(spark, root / SAMPLES, clusters, job_names)
    if not listed:
        return schema.empty_table()

    def replay_jobs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        configure_logging(level="WARNING")  # a replay's every tick would log its decision at INFO
        for batch in batches:
            for job in batch.to_pylist():
                yield from backtest_archived_job(
                    root, job["cluster"], job["job_name"], job["job_ids"], options
                ).to_batches()

    # One job per task: jobs differ in what a replay costs, and a task is cheap beside a job-day's replay.
    jobs = spark.createDataFrame(listed, schema=_JOBS_DDL).repartition(len(listed))
    ddl = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in schema)
    result = jobs.mapInArrow(replay_jobs, schema=ddl)
    with replay_progress(spark, len(listed), progress, every_s=progress_every_s):
        return result.toArrow().cast(schema)


def _jobs(
    spark: SparkSession, directory: Path, clusters: Iterable[str], names: Iterable[str]
) -> list[tuple[str, str, list[str]]]:
    """``(cluster, job_name, JobIDs)`` of every archived job (only these clusters and names), from the
    partition columns and one dictionary-encoded column: the JVM reads next to nothing of the files,
    and the list (a row per job) is small enough for the driver."""
    if not directory.is_dir():
        return []
    frame = (
        spark.read.option("mergeSchema", "true").parquet(str(directory)).select("cluster", "job", "job_name")
    )
    wanted_clusters, wanted_names = list(clusters), list(names)
    if wanted_clusters:
        frame = frame.where(F.col("cluster").isin(wanted_clusters))
    if wanted_names:
        frame = frame.where(F.col("job_name").isin(wanted_names))
    jobs = frame.distinct().groupBy(*_KEYS).agg(F.sort_array(F.collect_set("job")).alias("job_ids"))
    listed = jobs.toArrow()
    return sorted(
        zip(*(listed.column(c).to_pylist() for c in ("cluster", "job_name", "job_ids")), strict=True)
    )
