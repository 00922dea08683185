"""The daemon's side of the archive: each tick hands its samples and outcomes over and goes on.

Like the decision files (``autoscaler.tick.delivery``), the archive is written behind the tick, in a worker
thread. Unlike them, a tick never waits for it: the decision files make the next tick wait for the
previous batch, so a slow disk slows the loop down; for the archive, which nothing in the loop reads,
losing rows is the better trade than losing ticks. So the worker owns a bounded queue; a hand-over is a
``put_nowait``, and a tick that finds the queue full is not archived (logged, counted as
``flink_autoscaler_archive_failures_total{operation="queue_full"}``). :meth:`TickArchive.close` writes
what is buffered before the daemon exits.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from autoscaler.archive.writer import ArchiveWriter
from autoscaler.durations import to_ms
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobSample
from autoscaler.settings import ConfigError, Settings
from autoscaler.tick.steps import JobOutcome

__all__ = ["TickArchive", "open_archive"]

log = structlog.get_logger(__name__)

QUEUE_TICKS = 64  # ticks waiting for the worker: minutes of a slow disk before ticks are dropped


@dataclass(frozen=True, slots=True)
class _Tick:
    now_ms: int
    samples: tuple[JobSample, ...]
    outcomes: tuple[JobOutcome, ...]


class TickArchive:
    """A worker thread that feeds an :class:`ArchiveWriter` from a bounded queue of ticks."""

    def __init__(self, writer: ArchiveWriter, *, queue_ticks: int = QUEUE_TICKS) -> None:
        self.writer = writer
        self._queue: queue.Queue[_Tick | None] = queue.Queue(maxsize=queue_ticks)
        self._thread = threading.Thread(target=self._work, name="archive-writer", daemon=True)
        self._thread.start()
        self._closed = False

    def hand_over(self, now_ms: int, samples: Sequence[JobSample], outcomes: Sequence[JobOutcome]) -> None:
        """Queue one tick for the archive; never blocks, never raises."""
        if self._closed:
            return
        try:
            self._queue.put_nowait(_Tick(now_ms, tuple(samples), tuple(outcomes)))
        except queue.Full:
            log.error("archive_tick_dropped", now_ms=now_ms, queued=self._queue.qsize())
            self.writer.metrics.archive_failures.labels("queue_full").inc()

    def _work(self) -> None:
        while True:
            tick = self._queue.get()
            try:
                if tick is None:
                    return
                self.writer.add(tick.now_ms, tick.samples, tick.outcomes)
            except Exception as exc:  # the writer counts its own failures; this is the last guard
                log.error("archive_worker_failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
            finally:
                self._queue.task_done()

    async def flush(self, now_ms: int) -> int:
        """Wait for the queued ticks, then write everything buffered (tests, the shutdown)."""
        await asyncio.to_thread(self._queue.join)
        return await asyncio.to_thread(self.writer.flush, now_ms)

    async def close(self, now_ms: int) -> None:
        """Write what is queued and buffered, then stop the worker; later hand-overs are ignored."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._queue.put, None)
        await asyncio.to_thread(self._thread.join)
        await asyncio.to_thread(self.writer.flush, now_ms)


def open_archive(settings: Settings, metrics: MetricsReporter) -> TickArchive | None:
    """The daemon's archive as its settings say (None when ``archive_dir`` is unset), its directory
    created and tried first: one the daemon cannot write stops it at start-up with a ConfigError, not a
    failure counted every flush from then on."""
    root = settings.archive_dir
    if root is None:
        return None
    probe = root / f".write-test-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"archive_dir {root}: the daemon cannot write there ({exc.strerror or exc})"
        ) from exc
    writer = ArchiveWriter(
        root,
        flush_interval_ms=to_ms(settings.archive_flush_interval),
        retention_days=settings.archive_retention_days,
        metrics=metrics,
    )
    log.info(
        "archive_opened",
        root=str(root),
        flush_interval_s=settings.archive_flush_interval.total_seconds(),
        retention_days=settings.archive_retention_days,
    )
    return TickArchive(writer)
