"""Driver-side bookkeeping of each job's metric window (reference §1.4); no Spark in here.

The rows themselves live in Spark; this module decides which of them count. Per job it remembers the
RUNNING timestamp and vertex set of the last sample, the first sample after stabilization and the
timestamps inside the window. A later RUNNING timestamp (restart or rescale) or a different vertex set
starts a new *epoch*: Spark keeps only rows of a job's current epoch with ``ts >= start_ms``, so the rows
of a reset, forgotten or aged-out job disappear without a separate delete. Epochs come from one counter
per book and are never reused, so a forgotten job that comes back cannot match its old rows.

A load change inside the window (ours, ``metrics.load-change.threshold``) moves the window's start to
where the change began. A window half full of the old load averages two loads: after a step up it
under-estimates the new rate (one restart too few), after a step down it over-estimates it, and the
scale-down delay then keeps the largest of those half-old recommendations, so a job steps down one
restart at a time. The detector compares the offered rate of each of the two newest intervals with the rate
over the rest of the window; the offered rate is what the sources took in plus what their backlog grew by
(``numRecordsIn + pendingRecords``), so a back-pressured job shows its real load. After a change the
window must fill again before a decision, which also lets a burst shorter than the window pass without a
restart (its backlog is caught up afterwards). Noise cannot trigger it: with the rate within +-x % of a
level the largest relative difference is 2x/(1+x), 26 % for +-15 %, under the default 30 %; and both of
the two newest intervals must show the change, so one odd interval (a late fetch) does not. So that a
load that keeps changing still gets decisions, at most :data:`MAX_LEVEL_RESETS` changes in a row may
restart a window before it has filled once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoscaler.reasons import Reason

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = [
    "MAX_LEVEL_RESETS",
    "JobWindow",
    "WindowBook",
    "WindowStatus",
    "load_changed",
    "observe",
    "offered_records",
    "window_start_ms",
]

MAX_LEVEL_RESETS = 2  # load changes that may restart a window in a row before it has filled once


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
    offered: tuple[float, ...] = ()  # the sources' offered records at each of those samples
    level_since_ms: int | None = None  # a load change began here: the window starts no earlier
    level_resets: int = 0  # load changes that restarted the window since it was last full


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
    load_change_ms: int | None = None  # this sample showed a load change that began then

    @property
    def not_ready(self) -> Reason | None:
        """Reference §1.0/§1.4: stabilizing, then window not full or fewer than 2 samples."""
        if self.stabilizing:
            return Reason.STABILIZING
        if not self.full or self.samples < 2:
            return Reason.WINDOW_NOT_FULL
        return None


def window_start_ms(window: JobWindow, now_ms: int) -> int:
    """Reference §1.4: only samples after stabilization and within the last metrics.window count;
    ours: and none from before a load change inside the window."""
    start = max(window.stable_since_ms, now_ms - window.metrics_window_ms)
    return start if window.level_since_ms is None else max(start, window.level_since_ms)


def _slide(window: JobWindow, now_ms: int) -> JobWindow:
    start = window_start_ms(window, now_ms)
    if not window.timestamps or window.timestamps[0] >= start:
        return window
    kept = [i for i, ts in enumerate(window.timestamps) if ts >= start]
    return replace(
        window,
        timestamps=tuple(window.timestamps[i] for i in kept),
        offered=tuple(window.offered[i] for i in kept),
    )


def offered_records(sample: JobSample) -> float:
    """The records the job's sources were offered so far: taken in plus still pending.

    Its rate is the offered load whether or not the job keeps up (a back-pressured source takes in
    less and its backlog grows by the rest). NaN if a source's input or backlog is unknown in this
    sample: a hole read as 0 would look like a load change. So a job whose sources report no backlog
    (``pendingRecords``) gets no load-change detection, only the reference's window.
    """
    topology = sample.topology
    total = 0.0
    for vid in topology.vertices:
        if not topology.is_source(vid):
            continue
        v = sample.vertices.get(vid)
        if v is None:
            return math.nan
        total += v.num_records_in + v.pending_records
    return total


def load_changed(points: tuple[tuple[int, float], ...], threshold: float) -> bool:
    """Whether the offered rate of each of the two newest intervals differs from the rate over the rest
    of the window by more than ``threshold`` of the larger of the two, in the same direction.

    Two intervals, not one: a single odd interval is what a late metric fetch looks like on a real
    cluster (one interval short of records, the next one long), not a new load. Needs three intervals;
    unknown or falling counts (a reset) never count as a change.
    """
    if threshold <= 0 or len(points) < 4:
        return False
    (t0, a0), (tb, ab), (tm, am), (tn, an) = points[0], points[-3], points[-2], points[-1]
    if not t0 < tb < tm < tn:
        return False
    before = (ab - a0) / (tb - t0)
    first, second = (am - ab) / (tm - tb), (an - am) / (tn - tm)
    rates = (before, first, second)
    if not all(math.isfinite(r) and r >= 0 for r in rates):
        return False

    def moved(recent: float) -> float:
        larger = max(before, recent)
        return 0.0 if larger == 0 else (recent - before) / larger

    up, down = moved(first), moved(second)
    return (up > threshold and down > threshold) or (up < -threshold and down < -threshold)


def _after_load_change(window: JobWindow, threshold: float) -> tuple[JobWindow, int | None]:
    """Restart the window where the two newest intervals began if the load changed there (module doc)."""
    if window.first_stable_ts_ms is None or window.level_resets >= MAX_LEVEL_RESETS:
        return window, None
    if not load_changed(tuple(zip(window.timestamps, window.offered, strict=True)), threshold):
        return window, None
    since = window.timestamps[-3]
    return (
        replace(
            window,
            level_since_ms=since,
            first_stable_ts_ms=since,
            timestamps=window.timestamps[-3:],
            offered=window.offered[-3:],
            level_resets=window.level_resets + 1,
        ),
        since,
    )


def _status(
    window: JobWindow, now_ms: int, *, reset: bool, kept: bool, load_change_ms: int | None = None
) -> WindowStatus:
    first = window.first_stable_ts_ms
    return WindowStatus(
        epoch=window.epoch,
        start_ms=window_start_ms(window, now_ms),
        samples=len(window.timestamps),
        stabilizing=first is None,
        full=_full(window, now_ms),
        reset=reset,
        kept=kept,
        load_change_ms=load_change_ms,
    )


def _full(window: JobWindow, now_ms: int) -> bool:
    first = window.first_stable_ts_ms
    return first is not None and now_ms >= first + window.metrics_window_ms


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
    offered: float = math.nan,
    load_change_threshold: float = 0.0,
) -> tuple[JobWindow, WindowStatus]:
    """Fold one sample into a job's window; ``new_epoch`` is used if the window (re)starts.

    ``offered`` is the sample's :func:`offered_records`; with ``load_change_threshold`` > 0 a load
    change restarts the window where it began (module doc).
    """
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
        window = replace(window, timestamps=(*window.timestamps, ts_ms), offered=(*window.offered, offered))
    window = _slide(window, now_ms)
    change_ms = None
    if kept:
        window, change_ms = _after_load_change(window, load_change_threshold)
    if change_ms is None and _full(window, now_ms):
        window = replace(window, level_resets=0)  # it filled and decides: changes may restart it again
    return window, _status(window, now_ms, reset=restarted, kept=kept, load_change_ms=change_ms)


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
        offered: float = math.nan,
        load_change_threshold: float = 0.0,
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
            offered=offered_records(sample),
            load_change_threshold=options.load_change_threshold,
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
