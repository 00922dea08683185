"""The archive's buffer: each tick's samples and decisions become rows, written a batch at a time.

Flush policy: rows are kept in memory per table, cluster, JobID and UTC day, and written as one part
file per such partition when ``flush_interval_ms`` has passed since the last flush (the daemon's clock,
so tests use plain values), when more than ``max_buffered_rows`` are held (a bound on memory), and on
close. With the default 15 min a 1,000-job fleet writes about 2,000 files every 15 min instead of 2,000
every tick. Retention runs at most once an hour, at a flush: day partitions older than
``retention_days`` full UTC days before today are deleted (0 keeps everything).

Nothing here raises: a failed conversion or write is logged, counted
(``flink_autoscaler_archive_failures_total{operation}``, the rows lost in
``flink_autoscaler_archive_rows_dropped_total{table}``) and the rows of that partition are dropped,
so a full or read-only disk costs the archive its rows, never the control loop a tick.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog

from autoscaler.archive.layout import partition_dir, prune_days, write_part
from autoscaler.archive.schema import DECISIONS, SAMPLES, TABLES, day_of, decision_rows, sample_rows
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobSample
from autoscaler.outcome import JobOutcome

__all__ = ["DEFAULT_FLUSH_INTERVAL_MS", "MAX_BUFFERED_ROWS", "ArchiveWriter"]

log = structlog.get_logger(__name__)

DEFAULT_FLUSH_INTERVAL_MS = 15 * 60_000
MAX_BUFFERED_ROWS = 500_000  # some 500 MB of Python rows at most; a 1,000-job fleet's 15 min hold ~450k
_PRUNE_EVERY_MS = 3_600_000

_Key = tuple[str, str, str, str]  # table, cluster, job id, day


class ArchiveWriter:
    """Buffers rows and writes them under ``root``; safe to call from one thread at a time (a lock
    guards the buffer, so :meth:`flush` from another thread waits for an :meth:`add` in progress)."""

    def __init__(
        self,
        root: str | Path,
        *,
        flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
        retention_days: int = 0,
        metrics: MetricsReporter | None = None,
        max_buffered_rows: int = MAX_BUFFERED_ROWS,
    ) -> None:
        if flush_interval_ms <= 0 or retention_days < 0 or max_buffered_rows < 1:
            raise ValueError("flush interval and max buffered rows must be > 0, retention >= 0")
        self.root = Path(root)
        self.flush_interval_ms = flush_interval_ms
        self.retention_days = retention_days
        self.metrics = metrics or MetricsReporter()
        self.max_buffered_rows = max_buffered_rows
        self._buffer: dict[_Key, list[dict[str, Any]]] = defaultdict(list)
        self._rows = 0
        self._last_flush_ms: int | None = None
        self._last_prune_ms: int | None = None
        self._lock = threading.Lock()

    @property
    def buffered_rows(self) -> int:
        return self._rows

    def add(self, now_ms: int, samples: Sequence[JobSample], outcomes: Sequence[JobOutcome]) -> None:
        """Take one tick's samples and outcomes; flush (and prune) if that is due."""
        with self._lock:
            if self._last_flush_ms is None:
                self._last_flush_ms = now_ms
            for sample in samples:
                self._convert(SAMPLES, sample.job.cluster, sample.job.job_id, sample, sample_rows)
            for outcome in outcomes:
                self._convert(DECISIONS, outcome.job.cluster, outcome.job.job_id, outcome, decision_rows)
            due = now_ms - self._last_flush_ms >= self.flush_interval_ms
        if due or self._rows > self.max_buffered_rows:
            self.flush(now_ms)

    def _convert(self, table: str, cluster: str, job_id: str, value: Any, rows_of: Any) -> None:
        try:
            keyed = [((table, cluster, job_id, day_of(row["ts_ms"])), row) for row in rows_of(value)]
        except Exception as exc:  # a value the rows cannot be made of is a bug: it must not stop the tick
            log.error("archive_convert_failed", table=table, cluster=cluster, job_id=job_id, error=str(exc))
            self.metrics.archive_failures.labels("convert").inc()
            return
        for key, row in keyed:
            self._buffer[key].append(row)
        self._rows += len(keyed)

    def flush(self, now_ms: int) -> int:
        """Write every buffered partition as one part file; return the files written. Never raises."""
        with self._lock:
            buffer, self._buffer, self._rows = self._buffer, defaultdict(list), 0
            self._last_flush_ms = now_ms
        written = 0
        for (table, cluster, job_id, day), rows in buffer.items():
            directory = partition_dir(self.root, table, cluster, job_id, day)
            try:
                write_part(directory, pa.Table.from_pylist(rows, schema=TABLES[table]), now_ms)
            except Exception as exc:  # OSError (disk full, permissions), ArrowInvalid (a bad value)
                log.error(
                    "archive_write_failed",
                    table=table,
                    directory=str(directory),
                    rows_lost=len(rows),
                    error=f"{type(exc).__name__}: {exc}",
                )
                self.metrics.archive_failures.labels("write").inc()
                self.metrics.archive_rows_dropped.labels(table).inc(len(rows))
                continue
            self.metrics.archive_rows.labels(table).inc(len(rows))
            written += 1
        if written:
            log.info("archive_flushed", files=written, root=str(self.root))
        if self._last_prune_ms is None or now_ms - self._last_prune_ms >= _PRUNE_EVERY_MS:
            self._last_prune_ms = now_ms
            self.prune(now_ms)
        return written

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
