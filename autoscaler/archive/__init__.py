"""The history archive: each tick's samples and decisions as Parquet, for backtests (docs/backtest.md).

``schema`` holds the two tables' Arrow schemas and the rows a tick's values become; ``layout`` the Hive
partition directories and how a file is written; ``writer`` the flush and retention policy over
``buffer`` (the rows between flushes, as Arrow) and ``compact`` (a finished day's files merged);
``sink`` the worker thread the daemon hands each tick to; ``export`` what
``flink-autoscaler export-history`` writes from the state database; ``reader`` the samples read back
as the ``JobSample`` values the daemon evaluated; ``offered`` each job's recorded offered rate per
tick, which completes a forecast's history the state store holds less of.
"""

from autoscaler.archive.schema import DECISIONS, SAMPLES, SCHEMA_VERSION
from autoscaler.archive.sink import TickArchive, open_archive
from autoscaler.archive.writer import ArchiveWriter

__all__ = ["DECISIONS", "SAMPLES", "SCHEMA_VERSION", "ArchiveWriter", "TickArchive", "open_archive"]
