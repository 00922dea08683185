"""Driver-side bookkeeping of each job's metric window (reference §1.4); no Spark in here.

The rows themselves live in Spark; this module decides which of them count. Per job it remembers the
RUNNING timestamp and vertex set of the last sample, the first sample after stabilization and the
timestamps inside the window. A later RUNNING timestamp (restart or rescale) or a different vertex set
starts a new *epoch*: Spark keeps only rows of a job's current epoch with ``ts >= start_ms``, so the rows
of a reset, forgotten or aged-out job disappear without a separate delete. Epochs come from one counter
per book and are never reused, so a forgotten job that comes back cannot match its old rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoscaler.reasons import Reason

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = ["JobWindow", "WindowBook", "WindowStatus", "observe", "window_start_ms"]


@dataclass(frozen=True, slots=True)
class JobWindow:
    """One job's window as of its last sample."""

    epoch: int
    running_since_ms: int
    vertex_ids: frozenset[str]
    stable_since_ms: int  # running_since + stabilization.interval
    metrics_window_ms: int
    first_stable_ts_ms: int | None  # first sample at/after stable_since_ms: the window's time origin
    last_ts_ms: int  # newest sample seen (kept or not), to reject duplicates and reordering
    timestamps: tuple[int, ...] = ()  # samples inside the window, ascending


@dataclass(frozen=True, slots=True)
class WindowStatus:
    """What one sample did to its job's window, and whether the window may drive a decision."""

    epoch: int
    start_ms: int  # rows with ts < start_ms (or another epoch) are dropped
    samples: int  # samples inside the window after this one
    stabilizing: bool  # no sample at/after running_since + stabilization yet
    full: bool  # now >= first stable sample + metrics.window
    reset: bool  # this sample started a new epoch (restart, rescale or topology change)
    kept: bool  # this sample's row belongs in the window

    @property
    def not_ready(self) -> Reason | None:
        """Reference §1.0/§1.4: stabilizing, then window not full or fewer than 2 samples."""
        if self.stabilizing:
            return Reason.STABILIZING
        if not self.full or self.samples < 2:
            return Reason.WINDOW_NOT_FULL
        return None


def window_start_ms(window: JobWindow, now_ms: int) -> int:
    """Reference §1.4: only samples after stabilization and within the last metrics.window count."""
    return max(window.stable_since_ms, now_ms - window.metrics_window_ms)


def _slide(window: JobWindow, now_ms: int) -> JobWindow:
    start = window_start_ms(window, now_ms)
    if not window.timestamps or window.timestamps[0] >= start:
        return window
    return replace(window, timestamps=tuple(ts for ts in window.timestamps if ts >= start))


def _status(window: JobWindow, now_ms: int, *, reset: bool, kept: bool) -> WindowStatus:
    first = window.first_stable_ts_ms
    return WindowStatus(
        epoch=window.epoch,
        start_ms=window_start_ms(window, now_ms),
        samples=len(window.timestamps),
        stabilizing=first is None,
        full=first is not None and now_ms >= first + window.metrics_window_ms,
        reset=reset,
        kept=kept,
    )


def observe(
    previous: JobWindow | None,
    *,
    ts_ms: int,
    running_since_ms: int,
    vertex_ids: frozenset[str],
    metrics_window_ms: int,
    stabilization_ms: int,
    now_ms: int,
    new_epoch: int,
) -> tuple[JobWindow, WindowStatus]:
    """Fold one sample into a job's window; ``new_epoch`` is used if the window (re)starts."""
    restarted = previous is not None and (
        running_since_ms > previous.running_since_ms or vertex_ids != previous.vertex_ids
    )
    if previous is None or restarted:
        window = JobWindow(
            epoch=new_epoch,
            running_since_ms=running_since_ms,
            vertex_ids=vertex_ids,
            stable_since_ms=running_since_ms + stabilization_ms,
            metrics_window_ms=metrics_window_ms,
            first_stable_ts_ms=None,
            last_ts_ms=ts_ms - 1,
        )
    else:  # options may change between ticks; the newest ones apply
        window = replace(
            previous,
            stable_since_ms=previous.running_since_ms + stabilization_ms,
            metrics_window_ms=metrics_window_ms,
        )
    if ts_ms <= window.last_ts_ms:  # duplicate or out of order: nothing new to add
        window = _slide(window, now_ms)
        return window, _status(window, now_ms, reset=False, kept=False)

    window = replace(window, last_ts_ms=ts_ms)
    if window.first_stable_ts_ms is None and ts_ms >= window.stable_since_ms:
        window = replace(window, first_stable_ts_ms=ts_ms)
    kept = ts_ms >= window_start_ms(window, now_ms)
    if kept:
        window = replace(window, timestamps=(*window.timestamps, ts_ms))
    window = _slide(window, now_ms)
    return window, _status(window, now_ms, reset=restarted, kept=kept)


class WindowBook:
    """Every job's :class:`JobWindow` between ticks; one thread at a time."""

    def __init__(self) -> None:
        self._windows: dict[str, JobWindow] = {}
        self._next_epoch = 0

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
        )
        if window.epoch == self._next_epoch:
            self._next_epoch += 1
        self._windows[job_key] = window
        return status

    def observe_sample(self, sample: JobSample, now_ms: int) -> WindowStatus:
        """``observe`` with the window settings taken from the sample's own job options."""
        options = sample.target.options
        return self.observe(
            sample.job.key,
            ts_ms=sample.ts_ms,
            running_since_ms=sample.running_since_ms,
            vertex_ids=sample.topology.vertices,
            metrics_window_ms=round(options.metrics_window.total_seconds() * 1000),
            stabilization_ms=round(options.stabilization_interval.total_seconds() * 1000),
            now_ms=now_ms,
        )

    def retain(self, now_ms: int, present: Iterable[str] = ()) -> dict[str, tuple[int, int]]:
        """Slide every window to ``now_ms``; return ``{job_key: (epoch, start_ms)}`` of rows to keep.

        A job absent from this tick keeps its rows until they age out (a collection hiccup must not
        restart a 15-minute window); once it holds none it is forgotten.
        """
        here = set(present)
        keep: dict[str, tuple[int, int]] = {}
        for key, window in list(self._windows.items()):
            window = _slide(window, now_ms)
            if key not in here and not window.timestamps:
                del self._windows[key]
                continue
            self._windows[key] = window
            keep[key] = (window.epoch, window_start_ms(window, now_ms))
        return keep

    def forget(self, job_keys: Iterable[str]) -> None:
        for key in job_keys:
            self._windows.pop(key, None)

    def copy(self) -> WindowBook:
        """A snapshot (windows are frozen, so a shallow copy is enough) to roll back a failed tick."""
        book = WindowBook()
        book._windows = dict(self._windows)
        book._next_epoch = self._next_epoch
        return book

    def get(self, job_key: str) -> JobWindow | None:
        return self._windows.get(job_key)

    def __contains__(self, job_key: object) -> bool:
        return job_key in self._windows

    def __len__(self) -> int:
        return len(self._windows)
