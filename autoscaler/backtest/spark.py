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

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from autoscaler.archive.layout import PARTITIONING, partition_dir
from autoscaler.archive.schema import DECISIONS, SAMPLES
from autoscaler.backtest.history import DECISION_COLUMNS
from autoscaler.backtest.jobs import RESULT_SCHEMA, BacktestOptions, backtest_tables
from autoscaler.logs import configure_logging

__all__ = ["backtest_on_spark", "job_files"]

_KEYS = ("cluster", "job_name")
_SPARK_TYPES = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double"}
_RESULT_DDL = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in RESULT_SCHEMA)
_DECIDED = (*_KEYS, "job", *DECISION_COLUMNS)  # what a replay reads of the decisions


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
    listed = _jobs(spark, root / SAMPLES, clusters, job_names)
    if listed is None:
        return RESULT_SCHEMA.empty_table()
    jobs = listed.groupBy(*_KEYS).agg(F.sort_array(F.collect_set("job")).alias("job_ids"))
    count = jobs.count()
    if count == 0:
        return RESULT_SCHEMA.empty_table()
    base = str(root)

    def replay_jobs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        configure_logging(level="WARNING")  # a replay's every tick would log its decision at INFO
        for batch in batches:
            for job in batch.to_pylist():
                samples = read_job(Path(base), SAMPLES, job["cluster"], job["job_name"], job["job_ids"])
                decisions = read_job(
                    Path(base), DECISIONS, job["cluster"], job["job_name"], job["job_ids"], _DECIDED
                )
                yield from backtest_tables(samples, decisions, options).to_batches()

    # One job per task: jobs differ in what a replay costs, and a task is cheap beside a job-day's replay.
    result = jobs.repartition(count).mapInArrow(replay_jobs, schema=_RESULT_DDL)
    return result.toArrow().cast(RESULT_SCHEMA)


def _jobs(
    spark: SparkSession, directory: Path, clusters: Iterable[str], names: Iterable[str]
) -> DataFrame | None:
    """``(cluster, job, job_name)`` of every archived JobID (only these clusters and names): the partition
    columns and one dictionary-encoded column, so the JVM reads next to nothing of the files."""
    if not directory.is_dir():
        return None
    frame = (
        spark.read.option("mergeSchema", "true").parquet(str(directory)).select("cluster", "job", "job_name")
    )
    wanted_clusters, wanted_names = list(clusters), list(names)
    if wanted_clusters:
        frame = frame.where(F.col("cluster").isin(wanted_clusters))
    if wanted_names:
        frame = frame.where(F.col("job_name").isin(wanted_names))
    return frame.distinct()


def job_files(root: Path, table: str, cluster: str, job_ids: Sequence[str]) -> list[str]:
    """The visible Parquet files of these JobIDs in ``table`` (every day), as pyarrow's discovery would
    list them: names starting with ``.`` or ``_`` (a file being written, Spark's markers) skipped."""
    files: list[str] = []
    for job_id in job_ids:
        job_dir = partition_dir(root, table, cluster, job_id, "x").parent
        if not job_dir.is_dir():
            continue
        files.extend(
            str(path)
            for path in sorted(job_dir.glob("day=*/*.parquet"))
            if not path.name.startswith((".", "_")) and not path.parent.name.startswith((".", "_"))
        )
    return files


def read_job(
    root: Path,
    table: str,
    cluster: str,
    job_name: str,
    job_ids: Sequence[str],
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """One job's rows of ``table`` (these ``columns``, else all), with their partition columns, as the
    plain-Python reader gets them (files written by older daemons may lack newer columns: the schemas
    are merged, missing ones null)."""
    files = job_files(root, table, cluster, job_ids)
    if not files:
        return None
    schema = pa.unify_schemas([pq.read_schema(f) for f in files] + [PARTITIONING.schema])
    dataset = ds.dataset(
        files,
        schema=schema,
        format="parquet",
        partitioning=PARTITIONING,
        partition_base_dir=str(root / table),
    )
    return dataset.to_table(
        columns=None if columns is None else list(columns), filter=ds.field("job_name") == job_name
    )
