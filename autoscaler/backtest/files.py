"""One archived job read from its own Parquet files and backtested: what each Spark task of the backtest
runs (``autoscaler.backtest.spark``), given the job's cluster, name and JobIDs.

The archive is partitioned by cluster and JobID (``autoscaler.archive.layout``), so a job's rows are in
its JobIDs' directories, every day of them; a task reads those files with pyarrow, as the plain-Python
reader (``autoscaler.archive.reader``) reads a whole archive, and no other job's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import structlog

from autoscaler.archive.layout import PARTITIONING, job_dir
from autoscaler.archive.schema import DECISIONS, SAMPLES
from autoscaler.backtest.history import DECISION_COLUMNS
from autoscaler.backtest.jobs import BacktestOptions, backtest_tables, result_schema, unreadable

__all__ = ["backtest_archived_job", "job_files", "read_job"]

log = structlog.get_logger(__name__)

_DECIDED = ("cluster", "job_name", "job", *DECISION_COLUMNS)  # what a replay reads of the decisions


def backtest_archived_job(
    root: Path, cluster: str, job_name: str, job_ids: Sequence[str], options: BacktestOptions
) -> pa.Table:
    """One job of the archive read (its JobIDs' files) and backtested: what each Spark task runs. Files
    that cannot be read (not Parquet, cut short) give the job an error row; the other jobs go on."""
    try:
        samples = read_job(root, SAMPLES, cluster, job_name, job_ids)
        decisions = read_job(root, DECISIONS, cluster, job_name, job_ids, _DECIDED)
    except (OSError, pa.ArrowException) as exc:
        error = f"unreadable history: {type(exc).__name__}: {exc}"
        log.warning("backtest_history_unreadable", cluster=cluster, job=job_name, error=error)
        return unreadable([(cluster, job_name)], error, result_schema(options.series))
    if samples is None:
        return result_schema(options.series).empty_table()
    return backtest_tables(samples, decisions, options)


def job_files(root: Path, table: str, cluster: str, job_ids: Sequence[str]) -> list[str]:
    """The visible Parquet files of these JobIDs in ``table`` (every day), as pyarrow's discovery would
    list them: names starting with ``.`` or ``_`` (a file being written, Spark's markers) skipped."""
    files: list[str] = []
    for job_id in job_ids:
        days = sorted(job_dir(root, table, cluster, job_id).glob("day=*/*.parquet"))
        files.extend(str(path) for path in days if not path.name.startswith((".", "_")))
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
