"""Driver-side bookkeeping of each job's metric window (reference §1.4); no Spark in here.

The rows themselves live in Spark; this module decides which of them count. Per job it remembers the
RUNNING timestamp and vertex set of the last sample, the first sample after stabilization and the
timestamps inside the window. A later RUNNING timestamp (restart or rescale) or a different vertex set
starts a new *epoch*: Spark keeps only rows of a job's current epoch with ``ts >= start_ms``, so the rows
of a reset, forgotten or aged-out job disappear without a separate delete. Epochs come from one counter
per book and are never reused, so a forgotten job that comes back cannot match its old rows.

A load change inside the window (ours, ``metrics.load-change.threshold``) moves the window's start to
its first sample of the new load, and a full window whose newest interval may be the start of one
waits an interval (``LoadChanging``): ``evaluate/load_change.py`` says why and how a change is told.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import structlog

from autoscaler.collect.sanity import counters_fell, sample_counters
from autoscaler.evaluate.load_change import load_changed, load_changing, offered_records
from autoscaler.reasons import Reason

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = [
    "BOUNDARY_REACH",
    "MAX_LEVEL_RESETS",
    "JobWindow",
    "WindowBook",
    "WindowStatus",
    "observe",
    "window_start_ms",
]

log = structlog.get_logger(__name__)

MAX_LEVEL_RESETS = 2  # load changes that may restart a window in a row before it has filled once
BOUNDARY_REACH = 0.5  # the newest sample before the window's start counts if within this many windows


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
    level_since_ms: int | None = None  # the first sample of a new load: the window starts no earlier
    level_resets: int = 0  # load changes that restarted the window since it was last full
    level_told: bool = False  # the first decision on the new load has been offered (WindowStatus)
    last_counters: tuple[float, ...] = ()  # the newest sample's cumulative counters (counters_fell)


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
    load_changing: bool = False  # only the newest interval moved past the threshold: wait one more
    counters_fell: bool = False  # a cumulative counter fell since the last sample: the window restarted
    # Until the first tick that may decide on a new load (after a load change): its first sample, since
    # which the load is known to have been at its level (a scale-down delay may count from it; decide.py).
    level_since_ms: int | None = None

    @property
    def not_ready(self) -> Reason | None:
        """Reference §1.0/§1.4: stabilizing, then window not full or fewer than 2 samples; ours: a
        full window whose newest interval may be the start of a load change (``LoadChanging``)."""
        if self.stabilizing:
            return Reason.STABILIZING
        if not self.full or self.samples < 2:
            return Reason.WINDOW_NOT_FULL
        if self.load_changing:
            return Reason.LOAD_CHANGING
        return None


def window_start_ms(window: JobWindow, now_ms: int, *, present: bool = True) -> int:
    """Reference §1.4: only samples after stabilization and within the last metrics.window count;
    ours: and none from before a load change inside the window.

    Two refinements of "within the last metrics.window", both so that a window's rate spans the whole
    window whatever the ticks' timing:

    - It ends at the newest sample, not at the tick: a sample is stamped with its metric fetch's time
      (``collect/freshness.py``), a little before its tick, and a tick that found no new fetch adds no
      sample, so ending it at the tick would drop the oldest point on every such tick.
    - It begins at the newest sample at or before that end minus metrics.window (never before
      stabilization or a load change): with a point every 10 s (Flink fetching every 5 s, every other
      tick stale), a boundary at exactly 30 s is a coin toss between 3 points spanning 20 s and 4 spanning
      30 s, decided by milliseconds of jitter; a load change needs 4 points to be seen. That point
      counts only if it is less than half a window before the boundary (:data:`BOUNDARY_REACH`): after
      a gap in collection the window is what is left, as in the reference, not a span of the gap.

    A job not ``present`` in this tick ages out by the tick's time, sample by sample.
    """
    edge = min(now_ms, window.last_ts_ms) if present else now_ms
    floor = (
        window.stable_since_ms
        if window.level_since_ms is None
        else max(window.stable_since_ms, window.level_since_ms)
    )
    soft = edge - window.metrics_window_ms
    reach = soft - BOUNDARY_REACH * window.metrics_window_ms
    before = [ts for ts in window.timestamps if reach < ts <= soft] if present else []
    return max(floor, before[-1] if before else soft)


def _slide(window: JobWindow, now_ms: int, *, present: bool = True) -> JobWindow:
    start = window_start_ms(window, now_ms, present=present)
    if not window.timestamps or window.timestamps[0] >= start:
        return window
    kept = [i for i, ts in enumerate(window.timestamps) if ts >= start]
    return replace(
        window,
        timestamps=tuple(window.timestamps[i] for i in kept),
        offered=tuple(window.offered[i] for i in kept),
    )


def _after_load_change(window: JobWindow, threshold: float) -> tuple[JobWindow, int | None]:
    """Restart the window at the first sample of a new load if the load changed (module doc)."""
    if window.first_stable_ts_ms is None or window.level_resets >= MAX_LEVEL_RESETS:
        return window, None
    if not load_changed(_points(window), threshold):
        return window, None
    # The window restarts at the first sample of the new load: the interval before it holds the change
    # itself (part old load, part new), which would bias a whole window of the new load towards the old
    # one (on a real cluster, a drop to 800 read 842 rec/s a window later and kept the job at 2, not 1).
    # It is full one metrics.window after the change began, as if that interval were in it: its rates,
    # timed by the fetches, are exact over the shorter span, and a step up is not answered later.
    since = window.timestamps[-2]
    return (
        replace(
            window,
            level_since_ms=since,
            first_stable_ts_ms=window.timestamps[-3],
            timestamps=window.timestamps[-2:],
            offered=window.offered[-2:],
            level_resets=window.level_resets + 1,
            level_told=False,
        ),
        since,
    )


def _status(
    window: JobWindow,
    now_ms: int,
    *,
    reset: bool,
    kept: bool,
    load_change_ms: int | None = None,
    load_changing: bool = False,
    counters_fell: bool = False,
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
        load_changing=load_changing,
        counters_fell=counters_fell,
        level_since_ms=None if window.level_told else window.level_since_ms,
    )


def _told(window: JobWindow, status: WindowStatus) -> JobWindow:
    """After the first tick that may decide on a new load, its start is no longer reported.

    The change happened somewhere in the restarted window's first interval; from the sample that ends
    it on, every interval was of the new load (no change since, or the window would have restarted
    again), so the load is known to have been at its level since then. That holds for the first
    decision on the new load; a recommendation that comes later comes from a drift since, not the step.
    """
    if window.level_since_ms is None or window.level_told or status.not_ready is not None:
        return window
    return replace(window, level_told=True)


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
    counters: tuple[float, ...] = (),
) -> tuple[JobWindow, WindowStatus]:
    """Fold one sample into a job's window; ``new_epoch`` is used if the window (re)starts.

    ``offered`` is the sample's :func:`offered_records`; with ``load_change_threshold`` > 0 a load
    change restarts the window at its first sample of the new load (module doc). ``counters`` are the
    sample's cumulative counters (``collect/sanity.py``): one that fell since the last sample of the
    same job run (a reset without a restart, or a fault) starts the window over at this sample, so no
    rate spans it.
    """
    restarted = previous is not None and (
        running_since_ms > previous.running_since_ms or vertex_ids != previous.vertex_ids
    )
    fell = (
        previous is not None
        and not restarted
        and ts_ms > previous.last_ts_ms
        and counters_fell(previous.last_counters, counters)
    )
    if previous is None or restarted or fell:
        window = JobWindow(
            epoch=new_epoch,
            running_since_ms=running_since_ms,
            vertex_ids=vertex_ids,
            # After a counter reset the job did not restart: this sample is the first of the new window.
            stable_since_ms=ts_ms if fell else running_since_ms + stabilization_ms,
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
        changing = _full(window, now_ms) and load_changing(_points(window), load_change_threshold)
        status = _status(window, now_ms, reset=False, kept=False, load_changing=changing)
        return _told(window, status), status

    window = replace(window, last_ts_ms=ts_ms, last_counters=counters or window.last_counters)
    if window.first_stable_ts_ms is None and ts_ms >= window.stable_since_ms:
        window = replace(window, first_stable_ts_ms=ts_ms)
    kept = ts_ms >= window_start_ms(window, now_ms)
    if kept:
        window = replace(window, timestamps=(*window.timestamps, ts_ms), offered=(*window.offered, offered))
    window = _slide(window, now_ms)
    change_ms, changing = None, False
    if kept:
        window, change_ms = _after_load_change(window, load_change_threshold)
    if change_ms is None and _full(window, now_ms):
        # A window that filled after MAX_LEVEL_RESETS restarts in a row decides without waiting, or a
        # load that keeps changing would never get a decision.
        capped = window.level_resets >= MAX_LEVEL_RESETS
        changing = not capped and load_changing(_points(window), load_change_threshold)
        window = replace(window, level_resets=0)  # it filled and decides: changes may restart it again
    status = _status(
        window,
        now_ms,
        reset=restarted or fell,
        kept=kept,
        load_change_ms=change_ms,
        load_changing=changing,
        counters_fell=fell,
    )
    return _told(window, status), status


def _points(window: JobWindow) -> tuple[tuple[int, float], ...]:
    return tuple(zip(window.timestamps, window.offered, strict=True))


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
        counters: tuple[float, ...] = (),
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
        )
        if window.epoch == self._next_epoch:
            self._next_epoch += 1
        self._windows[job_key] = window
        return status

    def observe_sample(self, sample: JobSample, now_ms: int) -> WindowStatus:
        """``observe`` with the window settings taken from the sample's own job options."""
        options = sample.target.options
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
            window = _slide(window, now_ms, present=present)
            if not present and not window.timestamps:
                del self._windows[key]
                continue
            self._windows[key] = window
            keep[key] = (window.epoch, window_start_ms(window, now_ms, present=present))
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
