"""Window bookkeeping (flink-autoscaler.md §1.4): stabilization, sliding, resets, full-window timing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from window_feed import RUNNING, M, S, V, feed

from autoscaler.evaluate.window.book import WindowBook
from autoscaler.evaluate.window.job_window import (
    BOUNDARY_REACH,
    RESTAMP_REACH,
    JobWindow,
    slide,
    window_start_ms,
)
from autoscaler.reasons import Reason


def test_samples_during_stabilization_do_not_count() -> None:
    book = WindowBook()
    st = feed(book, RUNNING + 1 * M)
    assert (st.stabilizing, st.kept, st.samples, st.not_ready) == (True, False, 0, Reason.STABILIZING)
    st = feed(book, RUNNING + 5 * M - 1)
    assert st.stabilizing and not st.kept
    st = feed(book, RUNNING + 5 * M)  # at stableTime: counts (first sample at/after it)
    assert (st.stabilizing, st.kept, st.samples, st.not_ready) == (False, True, 1, Reason.WINDOW_NOT_FULL)
    assert st.start_ms == RUNNING + 5 * M


def test_full_window_timing() -> None:
    """windowFullTime = first sample after stabilization + metrics.window (here 5m30s + 15m)."""
    book = WindowBook()
    first = RUNNING + 5 * M + 30 * S
    feed(book, first)
    st = None
    for t in range(first + 10 * S, first + 15 * M, 10 * S):
        st = feed(book, t)
        assert not st.full and st.not_ready is Reason.WINDOW_NOT_FULL
    st = feed(book, first + 15 * M)
    assert st.full and st.not_ready is None
    assert st.samples == 91  # 15 min of 10 s samples, both ends included
    assert st.start_ms == first  # now - window = first: still kept (>=)


def test_sliding_window_drops_old_samples() -> None:
    book = WindowBook()
    first = RUNNING + 5 * M
    for t in range(first, first + 20 * M + 1, M):
        st = feed(book, t)
    assert st.start_ms == first + 5 * M  # now - 15m
    window = book.get("j")
    assert window is not None and window.timestamps[0] == first + 5 * M and st.samples == 16


def test_full_but_too_few_samples_is_not_ready() -> None:
    """At least 2 samples are needed even when the window's time span is full."""
    book = WindowBook()
    first = RUNNING + 5 * M
    feed(book, first)
    # The first one aged out: more than half a window before the window's start (BOUNDARY_REACH).
    st = feed(book, first + 23 * M)
    assert st.full and st.samples == 1 and st.not_ready is Reason.WINDOW_NOT_FULL


def test_restart_resets_the_window() -> None:
    """A later RUNNING timestamp (restart or rescale) clears the history and stabilizes again."""
    book = WindowBook()
    first = RUNNING + 5 * M
    for t in range(first, first + 16 * M, M):
        before = feed(book, t)
    assert before.full
    restarted = RUNNING + 30 * M
    st = feed(book, restarted + 10 * S, running_since_ms=restarted)
    assert st.reset and st.epoch != before.epoch
    assert (st.stabilizing, st.samples, st.full) == (True, 0, False)
    st = feed(book, restarted + 5 * M, running_since_ms=restarted)
    assert not st.reset and st.samples == 1 and st.start_ms == restarted + 5 * M


def test_stamps_that_moved_by_more_than_the_reach_restart_the_window_at_the_sample() -> None:
    """The moves of the fetch stamps (collect/freshness.py) add up while the window holds samples
    stamped before them; past RESTAMP_REACH of the window (9 s of 15 min), the window starts over at
    the sample that showed the last one, keeping the stabilization interval."""
    book = WindowBook()
    first = RUNNING + 5 * M
    assert RESTAMP_REACH * 15 * M == 9 * S
    feed(book, first)
    st = feed(book, first + M, restamped_ms=5 * S)  # 5 s: within the reach
    assert not st.reset and st.samples == 2
    st = feed(book, first + 2 * M, restamped_ms=5 * S)  # 10 s since the window's first sample: past it
    assert st.reset and st.restamped and (st.samples, st.stabilizing) == (1, False)
    assert st.start_ms == first + 2 * M and not feed(book, first + 3 * M).reset
    # Moves before the window's first sample are behind all of it: they no longer count.
    for t in range(first + 4 * M, first + 30 * M, M):
        st = feed(book, t, restamped_ms=5 * S if t == first + 4 * M else 0)
    assert not st.reset and not feed(book, first + 31 * M, restamped_ms=5 * S).reset
    # Samples not newer than the last one carry no move; during stabilization nothing counts.
    restarted = RUNNING + 60 * M
    feed(book, restarted + M, running_since_ms=restarted)
    st = feed(book, restarted + 2 * M, running_since_ms=restarted, restamped_ms=M)
    assert not st.reset and st.stabilizing


def test_moves_long_apart_do_not_add_up_to_a_restart() -> None:
    """Only the moves after the window's first sample span its rates. A move whose sample has left the
    window no longer counts, even while a newer move is inside it (issue 36: each new move used to
    carry every earlier one, so moves of a few ms, minutes apart, restarted the window)."""
    book = WindowBook()
    first = RUNNING + 5 * M
    feed(book, first)
    restarts = 0
    for k in range(1, 61):  # a sample a minute, a 3 s move every 10 minutes: at most two in a window
        restarts += feed(book, first + k * M, restamped_ms=3 * S if k % 10 == 0 else 0).reset
    assert restarts == 0
    # Moves inside one window still add up past the reach (3 + 3 + 4 > 9 s).
    st = feed(book, first + 60 * M + 30 * S, restamped_ms=4 * S)
    assert st.reset and st.restamped


def test_earlier_running_timestamp_does_not_reset() -> None:
    book = WindowBook()
    feed(book, RUNNING + 5 * M)
    st = feed(book, RUNNING + 6 * M, running_since_ms=RUNNING - M)
    assert not st.reset and st.samples == 2


def test_topology_change_resets_the_window() -> None:
    book = WindowBook()
    feed(book, RUNNING + 5 * M)
    st = feed(book, RUNNING + 6 * M, vertex_ids=("src", "mid", "sink"))
    assert st.reset and st.samples == 1  # same RUNNING time, already stable: counts at once
    assert not feed(book, RUNNING + 7 * M, vertex_ids=("sink", "mid", "src")).reset  # order is irrelevant


def test_duplicate_or_reordered_samples_are_not_kept() -> None:
    book = WindowBook()
    feed(book, RUNNING + 6 * M)
    assert not feed(book, RUNNING + 6 * M).kept
    st = feed(book, RUNNING + 5 * M + 30 * S, now_ms=RUNNING + 6 * M)
    assert not st.kept and st.samples == 1


def test_option_changes_apply_to_the_running_window() -> None:
    book = WindowBook()
    first = RUNNING + 5 * M
    for t in range(first, first + 10 * M + 1, M):
        feed(book, t)
    st = feed(book, first + 11 * M, metrics_window_ms=5 * M)
    assert st.full and st.samples == 6 and st.start_ms == first + 6 * M


def test_retain_keeps_absent_jobs_until_their_rows_age_out() -> None:
    book = WindowBook()
    first = RUNNING + 5 * M
    feed(book, first, key="a")
    feed(book, first, key="b")
    feed(book, RUNNING, key="c")  # stabilizing: no rows yet
    keep = book.retain(first + M, present=["a", "c"])
    assert set(keep) == {"a", "b", "c"}  # b is absent but still holds a row
    assert keep["a"] == (book.get("a").epoch, first)  # type: ignore[union-attr]
    keep = book.retain(first + 16 * M, present=["a", "c"])
    assert set(keep) == {"a", "c"} and "b" not in book  # b's last row aged out: forgotten


def test_forget_and_epochs_are_never_reused() -> None:
    book = WindowBook()
    e1 = feed(book, RUNNING + 5 * M).epoch
    book.forget(["j", "unknown"])
    assert "j" not in book and len(book) == 0
    e2 = feed(book, RUNNING + 6 * M).epoch
    assert e2 != e1  # rows of the forgotten epoch can never match again


def test_copy_is_an_independent_snapshot() -> None:
    book = WindowBook()
    feed(book, RUNNING + 5 * M)
    snapshot = book.copy()
    feed(book, RUNNING + 6 * M)
    feed(book, RUNNING + 6 * M, key="other")
    assert snapshot.get("j").timestamps == (RUNNING + 5 * M,)  # type: ignore[union-attr]
    assert "other" not in snapshot
    other = book.get("other")
    assert other is not None
    assert feed(snapshot, RUNNING + 7 * M, key="other").epoch == other.epoch  # the counter rolled back too


def test_the_window_ends_at_its_newest_sample_and_begins_at_the_last_one_before_its_start() -> None:
    """A point every 10 s (every other tick found no new fetch), stamped a few ms off the ticks' grid:
    the window spans at least its whole 30 s on every tick (4 or 5 points), where "samples within 30 s
    of the tick" would hold 3 points spanning 20 s on every tick without a new fetch, and on some with
    one."""
    book = WindowBook()
    start = RUNNING + 5 * M
    stamps = [start + i * 10 * S + (7 if i % 2 else 0) for i in range(8)]  # 7 ms of jitter, every other
    spans = []
    for ts in stamps:
        for now_ms in (ts + 15, ts + 5 * S):  # the tick 5 s later reads the same fetch again
            status = feed(book, ts, now_ms=now_ms, metrics_window_ms=30 * S)
            window = book.get("j")
            assert window is not None and status.start_ms == window.timestamps[0]
            if status.full:
                spans.append(window.timestamps[-1] - window.timestamps[0])
    assert len(spans) >= 8 and all(30 * S <= span <= 40 * S for span in spans)
    # Never more than half a window before the start: a gap in collection leaves what is left.
    late = feed(book, stamps[-1] + 55 * S, metrics_window_ms=30 * S)
    assert late.samples == 1


# ---------------------------------------------------------------------------------------------- bisection
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 10**6), unique=True, max_size=20).map(sorted),
    st.integers(0, 2 * 10**6),
    st.integers(0, 10**6),
    st.sampled_from([0, 1, 10 * S, 30 * S, 15 * M]),
    st.one_of(st.none(), st.integers(0, 10**6)),
    st.booleans(),
)
def test_the_window_start_and_slide_by_bisection_equal_a_scan_of_every_sample(
    timestamps: list[int], now_ms: int, stable_since_ms: int, span_ms: int, level: int | None, present: bool
) -> None:
    """The book bisects the window's ascending timestamps; this is the rule read sample by sample."""
    window = JobWindow(
        epoch=0,
        running_since_ms=0,
        vertex_ids=frozenset(V),
        stable_since_ms=stable_since_ms,
        metrics_window_ms=span_ms,
        first_stable_ts_ms=timestamps[0] if timestamps else None,
        last_ts_ms=timestamps[-1] if timestamps else 0,
        timestamps=tuple(timestamps),
        offered=tuple(float(t) for t in timestamps),
        known=tuple(range(len(timestamps))),
        level_since_ms=level,
    )
    edge = min(now_ms, window.last_ts_ms) if present else now_ms
    floor = stable_since_ms if level is None else max(stable_since_ms, level)
    soft = edge - span_ms
    reach = soft - BOUNDARY_REACH * span_ms
    before = [ts for ts in timestamps if reach < ts <= soft] if present else []
    start = max(floor, before[-1] if before else soft)
    assert window_start_ms(window, now_ms, present=present) == start
    slid = slide(window, now_ms, present=present)
    kept = [i for i, ts in enumerate(timestamps) if ts >= start]
    assert slid.timestamps == tuple(timestamps[i] for i in kept)
    assert slid.offered == tuple(window.offered[i] for i in kept)
    assert slid.known == tuple(window.known[i] for i in kept)


def test_a_counter_reset_inside_stabilization_does_not_start_the_window_before_stabilization_ends() -> None:
    """A rescale's first readings: one from the old run's last fetch (higher counters), then the new
    run's (lower): the counters fell 11 s after the restart. The window then restarted at that sample,
    stabilization applied again from the next sample on, but the window's origin stayed at 11 s: it was
    full by the clock at 41 s from 3 samples spanning 10 s, and a ScalingVerified judged the rescale
    from them (issue 36). Its origin is the first sample after stabilization, as for any restart."""
    book = WindowBook()
    opts = {"metrics_window_ms": 30 * S, "stabilization_ms": 30 * S}
    feed(book, RUNNING + 6 * S, counters=(900.0,), **opts)  # the old run's fetch, served again
    fell = feed(book, RUNNING + 11 * S, counters=(10.0,), **opts)
    assert fell.counters_fell
    statuses = {t: feed(book, RUNNING + t * S, counters=(10.0 * t,), **opts) for t in range(16, 80, 5)}
    assert all(statuses[t].not_ready is Reason.STABILIZING for t in (16, 21, 26))
    assert all(statuses[t].not_ready is Reason.WINDOW_NOT_FULL for t in (31, 36, 41, 46, 51, 56))
    full = statuses[61]  # one metrics.window after the first sample after stabilization (31 s)
    assert full.not_ready is None and full.samples == 7 and full.start_ms == RUNNING + 31 * S
