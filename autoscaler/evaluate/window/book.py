"""Every job's metric window between ticks: the driver's book of :mod:`autoscaler.evaluate.window.job_window`.

The window's rules are plain functions of one job's :class:`~autoscaler.evaluate.window.job_window.JobWindow`;
this book keeps one per job, hands out epochs that are never reused, and turns a collected sample into
the inputs those rules take (its offered load, cumulative counters and which metrics it knows).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import structlog

from autoscaler.durations import utc_text
from autoscaler.evaluate.window.job_window import (
    RESTAMP_REACH,
    JobWindow,
    WindowStatus,
    observe,
    slide,
    window_start_ms,
)
from autoscaler.evaluate.window.load_change import offered_records
from autoscaler.evaluate.window.readings import known_metrics, sample_counters

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = ["WindowBook"]

log = structlog.get_logger(__name__)


class WindowBook:
    """Every job's :class:`JobWindow` between ticks; one thread at a time."""

    def __init__(self) -> None:
        self._windows: dict[str, JobWindow] = {}
        self._next_epoch = 0
        # Each job's parallelism at its last sample, and what its last restart changed, in words: when
        # its counters start over a fetch later, the log says which restart it was (a rescale or not).
        self._parallelism: dict[str, Mapping[str, int]] = {}
        self._restarts: dict[str, str] = {}

    def observe(
        self,
        job_key: str,
        *,
        ts_ms: int,
        running_since_ms: int,
        vertex_ids: Iterable[str],
        metrics_window_ms: int,
        stabilization_ms: int,
        now_ms: int,
        offered: float = math.nan,
        load_change_threshold: float = 0.0,
        counters: tuple[float, ...] = (),
        known: int = 0,
        restamped_ms: int = 0,
    ) -> WindowStatus:
        window, status = observe(
            self._windows.get(job_key),
            ts_ms=ts_ms,
            running_since_ms=running_since_ms,
            vertex_ids=frozenset(vertex_ids),
            metrics_window_ms=metrics_window_ms,
            stabilization_ms=stabilization_ms,
            now_ms=now_ms,
            new_epoch=self._next_epoch,
            offered=offered,
            load_change_threshold=load_change_threshold,
            counters=counters,
            known=known,
            restamped_ms=restamped_ms,
        )
        if window.epoch == self._next_epoch:
            self._next_epoch += 1
        self._windows[job_key] = window
        return status

    def observe_sample(self, sample: JobSample, now_ms: int) -> WindowStatus:
        """``observe`` with the window settings taken from the sample's own job options."""
        options = sample.target.options
        key = sample.job.key
        prior = self._windows.get(key)
        status = self.observe(
            sample.job.key,
            ts_ms=sample.ts_ms,
            running_since_ms=sample.running_since_ms,
            vertex_ids=sample.topology.vertices,
            metrics_window_ms=round(options.metrics_window.total_seconds() * 1000),
            stabilization_ms=round(options.stabilization_interval.total_seconds() * 1000),
            now_ms=now_ms,
            offered=offered_records(sample),
            load_change_threshold=options.load_change_threshold,
            counters=sample_counters(sample),
            known=known_metrics(sample),
            restamped_ms=sample.restamped_ms,
        )
        if status.restamped:
            log.info(
                "metric_window_restamped",
                cluster=sample.job.cluster,
                job=sample.job.name,
                moved_ms=sample.restamped_ms,
                detail=f"the metric fetches' time stamps moved by more than {RESTAMP_REACH:.0%} of the "
                "window since its first sample (an early reading was older than the tick it was read in): "
                "the window starts over here, so no rate spans two stampings",
            )
        before, now = self._parallelism.get(key), sample.topology.parallelisms
        if prior is not None and sample.running_since_ms > prior.running_since_ms:
            self._restarts[key] = _restart_words(sample, before, now)
        self._parallelism[key] = now
        if status.counters_restarted:
            log.info(
                "metric_counters_restarted",
                cluster=sample.job.cluster,
                job=sample.job.name,
                running_since=utc_text(sample.running_since_ms),
                detail=f"the job restarted at {utc_text(sample.running_since_ms)} "
                f"({self._restarts.get(key, 'a restart')}) and its record counters started over; Flink "
                "showed the previous run's counters until its first metric fetch after the restart. The "
                "metric window starts as after the restart (stabilization.interval, then metrics.window)",
            )
        if status.counters_fell:
            log.warning(
                "metric_counters_fell",
                cluster=sample.job.cluster,
                job=sample.job.name,
                detail="a cumulative counter fell since the last sample of this job run (a reset without "
                "a restart, or a fault between Flink and the daemon): the metric window starts over here, "
                "so no rate spans it",
            )
        return status

    def retain(self, now_ms: int, present: Iterable[str] = ()) -> dict[str, tuple[int, int]]:
        """Slide every window to ``now_ms``; return ``{job_key: (epoch, start_ms)}`` of rows to keep.

        A job absent from this tick keeps its rows until they age out (a collection hiccup must not
        restart a 15-minute window); once it holds none it is forgotten.
        """
        here = set(present)
        keep: dict[str, tuple[int, int]] = {}
        for key, window in list(self._windows.items()):
            present = key in here
            window = slide(window, now_ms, present=present)
            if not present and not window.timestamps:
                del self._windows[key]
                continue
            self._windows[key] = window
            keep[key] = (window.epoch, window_start_ms(window, now_ms, present=present))
        return keep

    def forget(self, job_keys: Iterable[str]) -> None:
        for key in job_keys:
            self._windows.pop(key, None)
            self._parallelism.pop(key, None)
            self._restarts.pop(key, None)

    def copy(self) -> WindowBook:
        """A snapshot (windows are frozen, so a shallow copy is enough) to roll back a failed tick."""
        book = WindowBook()
        book._windows = dict(self._windows)
        book._next_epoch = self._next_epoch
        book._parallelism = dict(self._parallelism)
        book._restarts = dict(self._restarts)
        return book

    def get(self, job_key: str) -> JobWindow | None:
        return self._windows.get(job_key)

    def __contains__(self, job_key: object) -> bool:
        return job_key in self._windows

    def __len__(self) -> int:
        return len(self._windows)


def _restart_words(sample: JobSample, before: Mapping[str, int] | None, now: Mapping[str, int]) -> str:
    """What a restart changed: ``a rescale: Work 1 -> 3``, or a restart at the same parallelism."""
    if before is None:
        return "a restart"
    names = {v.id: v.name for v in sample.topology}
    changed = [
        f"{names.get(vid, vid)} {before[vid]} -> {p}" for vid, p in now.items() if before.get(vid, p) != p
    ]
    return f"a rescale: {', '.join(changed)}" if changed else "a restart at the same parallelism"
