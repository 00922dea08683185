"""The archive's buffer: each tick's samples and decisions become rows, written a batch at a time.

Flush policy: rows are kept in memory (as Arrow, ``autoscaler.archive.buffer``) and written as one part
file per table, cluster, JobID and UTC day when ``flush_interval_ms`` has passed since the last flush
(the daemon's clock, so tests use plain values), when the buffer holds more than ``max_buffered_bytes``
(a bound on memory: 256 MB, about 8 minutes of a 1,000-job, 10-vertex fleet at 10 s ticks), and on
close. A 1,000-job fleet thus writes about 2,000 files per flush instead of 2,000 every tick. At most
once an hour, at a flush, day partitions older than ``retention_days`` full UTC days before today are
deleted (0 keeps everything), and each finished day's files are merged into one.

Nothing here raises: a failed conversion or write is logged, counted
(``flink_autoscaler_archive_failures_total{operation}``, the rows lost in
``flink_autoscaler_archive_rows_dropped_total{table}``) and the rows of that partition are dropped,
so a full or read-only disk costs the archive its rows, never the control loop a tick.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from autoscaler.archive.buffer import Partition, Rows, TableBuffer
from autoscaler.archive.compact import compact_days
from autoscaler.archive.layout import partition_dir, prune_days, write_part
from autoscaler.archive.schema import DECISIONS, SAMPLES, TABLES, day_of, decision_rows, sample_rows
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobSample
from autoscaler.tick.steps import JobOutcome

__all__ = ["DEFAULT_FLUSH_INTERVAL_MS", "MAX_BUFFERED_BYTES", "ArchiveWriter"]

log = structlog.get_logger(__name__)

DEFAULT_FLUSH_INTERVAL_MS = 15 * 60_000
MAX_BUFFERED_BYTES = 256 * 2**20
_PRUNE_EVERY_MS = 3_600_000


class ArchiveWriter:
    """Buffers rows and writes them under ``root``. A lock guards the buffer, so :meth:`flush` from
    another thread (the shutdown) waits for an :meth:`add` in progress."""

    def __init__(
        self,
        root: str | Path,
        *,
        flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
        retention_days: int = 0,
        metrics: MetricsReporter | None = None,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
    ) -> None:
        if flush_interval_ms <= 0 or retention_days < 0 or max_buffered_bytes < 1:
            raise ValueError("flush interval and max buffered bytes must be > 0, retention >= 0")
        self.root = Path(root)
        self.flush_interval_ms = flush_interval_ms
        self.retention_days = retention_days
        self.metrics = metrics or MetricsReporter()
        self.max_buffered_bytes = max_buffered_bytes
        self._buffers = self._empty()
        self._last_flush_ms: int | None = None
        self._last_prune_ms: int | None = None
        self._written: dict[Path, str] = {}  # day partitions flushed since their last compaction -> day
        self._lock = threading.Lock()

    @staticmethod
    def _empty() -> dict[str, TableBuffer]:
        return {table: TableBuffer(schema) for table, schema in TABLES.items()}

    @property
    def buffered_rows(self) -> int:
        return sum(b.rows for b in self._buffers.values())

    @property
    def buffered_bytes(self) -> int:
        return sum(b.nbytes for b in self._buffers.values())

    def add(self, now_ms: int, samples: Sequence[JobSample], outcomes: Sequence[JobOutcome]) -> None:
        """Take one tick's samples and outcomes; flush (and prune) if that is due."""
        with self._lock:
            if self._last_flush_ms is None:
                self._last_flush_ms = now_ms
            for table, values, rows_of in (
                (SAMPLES, samples, functools.partial(sample_rows, tick_ms=now_ms)),
                (DECISIONS, outcomes, decision_rows),
            ):
                parts = [p for value in values if (p := self._convert(table, value, rows_of)) is not None]
                self._buffers[table].add_tick(parts, self._bad(table))
            due = now_ms - self._last_flush_ms >= self.flush_interval_ms
        if due or self.buffered_bytes > self.max_buffered_bytes:
            self.flush(now_ms)

    def _convert(
        self, table: str, value: Any, rows_of: Callable[[Any], Rows]
    ) -> tuple[Partition, Rows] | None:
        job = value.job
        try:
            rows = rows_of(value)  # all of one sample's (one outcome's) rows share its ts_ms
            return ((job.cluster, job.job_id, day_of(rows[0]["ts_ms"])), rows) if rows else None
        except Exception as exc:  # a value the rows cannot be made of is a bug: it must not stop the tick
            self._bad(table)((job.cluster, job.job_id, ""), exc)
            return None

    def _bad(self, table: str) -> Callable[[Partition, Exception], None]:
        def count(part: Partition, exc: Exception) -> None:
            cluster, job_id, _ = part
            log.error("archive_convert_failed", table=table, cluster=cluster, job_id=job_id, error=str(exc))
            self.metrics.archive_failures.labels("convert").inc()

        return count

    def flush(self, now_ms: int) -> int:
        """Write every buffered partition as one part file; return the files written. Never raises."""
        with self._lock:
            buffers, self._buffers = self._buffers, self._empty()
            self._last_flush_ms = now_ms
        written = 0
        for table, buffer in buffers.items():
            for (cluster, job_id, day), rows in buffer.partitions():
                directory = partition_dir(self.root, table, cluster, job_id, day)
                try:
                    write_part(directory, rows, now_ms)
                except Exception as exc:  # OSError (disk full, permissions), an Arrow error
                    log.error(
                        "archive_write_failed",
                        table=table,
                        directory=str(directory),
                        rows_lost=rows.num_rows,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                    self.metrics.archive_failures.labels("write").inc()
                    self.metrics.archive_rows_dropped.labels(table).inc(rows.num_rows)
                    continue
                self.metrics.archive_rows.labels(table).inc(rows.num_rows)
                self._written[directory] = day
                written += 1
        if written:
            log.info("archive_flushed", files=written, root=str(self.root))
        if self._last_prune_ms is None or now_ms - self._last_prune_ms >= _PRUNE_EVERY_MS:
            self._last_prune_ms = now_ms
            self.prune(now_ms)
            self.compact(now_ms)
        return written

    def compact(self, now_ms: int) -> int:
        """Merge the part files of each finished day this writer wrote to into one
        (``autoscaler.archive.compact``); return the day partitions merged. Never raises: a partition
        that fails is logged, counted and left."""
        today = datetime.fromtimestamp(now_ms / 1000, UTC).date().isoformat()

        def failed(directory: Path, exc: Exception) -> None:
            log.error(
                "archive_compact_failed", directory=str(directory), error=f"{type(exc).__name__}: {exc}"
            )
            self.metrics.archive_failures.labels("compact").inc()

        finished = [directory for directory, day in self._written.items() if day < today]
        for directory in finished:
            del self._written[directory]
        merged = compact_days(finished, now_ms, failed)
        if merged:
            log.info("archive_compacted", day_partitions=merged, before=today)
        return merged

    def prune(self, now_ms: int) -> int:
        """Delete the day partitions retention no longer keeps; return how many. Never raises."""
        if not self.retention_days:
            return 0
        today = datetime.fromtimestamp(now_ms / 1000, UTC).date()
        oldest_kept = (today - timedelta(days=self.retention_days)).isoformat()
        deleted = 0
        for table in TABLES:
            try:
                deleted += prune_days(self.root, table, oldest_kept)
            except OSError as exc:
                log.error("archive_prune_failed", table=table, root=str(self.root), error=str(exc))
                self.metrics.archive_failures.labels("prune").inc()
        if deleted:
            log.info("archive_pruned", day_partitions=deleted, kept_from=oldest_kept)
        return deleted
