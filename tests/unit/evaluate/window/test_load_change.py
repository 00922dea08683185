"""A load change inside the window restarts it where the change began, and a full window waits an
interval when one may be starting (ours, metrics.load-change.threshold; evaluate/window/load_change.py)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest
from window_feed import RUNNING, S, feed

from autoscaler.evaluate.window.book import WindowBook
from autoscaler.evaluate.window.job_window import MAX_LEVEL_RESETS, WindowStatus
from autoscaler.evaluate.window.load_change import load_changed, load_changing
from autoscaler.reasons import Reason

TICK = 5 * S
WINDOW = 30 * S
FIRST = RUNNING + 30 * S  # the first sample after a 30 s stabilization


def run(book: WindowBook, rates: Iterator[float], ticks: int, threshold: float = 0.3) -> list[WindowStatus]:
    """Feed `ticks` samples, 5 s apart from FIRST, whose offered records grow at the given rates."""
    out, offered = [], 0.0
    for i in range(ticks):
        if i:
            offered += next(rates) * TICK / S
        out.append(
            feed(
                book,
                FIRST + i * TICK,
                metrics_window_ms=WINDOW,
                stabilization_ms=30 * S,
                offered=offered,
                load_change_threshold=threshold,
            )
        )
    return out


def steady_then(after: float, before: float = 1000.0, steady_ticks: int = 10) -> Iterator[float]:
    return itertools.chain(itertools.repeat(before, steady_ticks), itertools.repeat(after))


@pytest.mark.parametrize(
    ("points", "changed"),
    [
        (((0, 0.0), (5, 5000.0), (10, 10000.0), (15, 15000.0)), False),  # steady
        (((0, 0.0), (5, 5000.0), (10, 15000.0), (15, 25000.0)), True),  # doubled: |2000-1000| / 2000 = 0.5
        (((0, 0.0), (5, 5000.0), (10, 6250.0), (15, 7500.0)), True),  # a quarter: 0.75
        (((0, 0.0), (5, 5000.0), (10, 15000.0), (15, 20000.0)), False),  # one odd interval (a late fetch)
        (((0, 0.0), (5, 5000.0), (10, 7000.0), (15, 15000.0)), False),  # short then long: not one way
        (((0, 0.0), (5, 5750.0), (10, 10000.0), (15, 15750.0)), False),  # +15 % / -15 %: 0.26 of the larger
        (((0, 0.0), (5, 5000.0), (10, 10000.0)), False),  # two intervals: nothing to confirm with
        (((0, 0.0), (5, math.nan), (10, 9.0), (15, 20.0)), False),  # unknown
        (((0, 100.0), (5, 50.0), (10, 900.0), (15, 2000.0)), False),  # a counter that fell (a reset)
        (((0, 0.0), (5, 0.0), (10, 500.0), (15, 1000.0)), True),  # idle, then load
    ],
)
def test_load_changed(points: tuple[tuple[int, float], ...], changed: bool) -> None:
    assert load_changed(points, 0.3) is changed


def test_a_step_restarts_the_window_at_the_step_and_it_must_fill_again() -> None:
    book = WindowBook()
    statuses = run(book, steady_then(2000.0), 20)
    step = FIRST + 10 * TICK  # the load doubled right after this sample
    first_new = step + TICK  # the first sample of the new load (its interval holds the step itself)
    # One interval: maybe a change, maybe a blip; no decision on a window that straddles it.
    assert statuses[11].load_change_ms is None and statuses[11].not_ready is Reason.LOAD_CHANGING
    assert all(s.not_ready is None for s in statuses[6:11])  # full (30 s) and steady before it
    changed = statuses[12]  # the second interval confirms it
    assert changed.load_change_ms == first_new
    assert changed.start_ms == first_new and changed.samples == 2  # the interval of the step is out
    assert changed.not_ready is Reason.WINDOW_NOT_FULL
    assert all(s.not_ready is Reason.WINDOW_NOT_FULL for s in statuses[12:16])
    full = statuses[16]  # 30 s after the step: the new load only, 25 s of it (rates are exact)
    assert full.not_ready is None and full.start_ms == first_new and full.samples == 6
    assert full.level_since_ms == first_new  # since when the new load is known, on the first decision
    assert all(s.level_since_ms is None for s in statuses[17:])  # not on later ones
    assert all(s.load_change_ms is None for s in statuses[13:])


def test_noise_within_15_percent_never_restarts_the_window() -> None:
    noise = itertools.cycle([1150.0, 850.0, 850.0, 1150.0, 1000.0, 1150.0, 850.0])
    statuses = run(WindowBook(), noise, 200)
    assert all(s.load_change_ms is None for s in statuses)
    assert statuses[-1].not_ready is None


def test_threshold_zero_is_the_reference_window() -> None:
    statuses = run(WindowBook(), steady_then(4000.0), 20, threshold=0.0)
    assert all(s.load_change_ms is None for s in statuses)
    assert statuses[12].not_ready is None  # the reference averages across the step


def test_a_load_that_keeps_changing_still_gets_a_full_window() -> None:
    """Only MAX_LEVEL_RESETS changes in a row may restart a window that has not filled since."""
    up_then_down = itertools.cycle([3000.0, 3000.0, 1000.0, 1000.0])
    flapping = itertools.chain(itertools.repeat(1000.0, 10), up_then_down)
    statuses = run(WindowBook(), flapping, 40)
    changes = [i for i, s in enumerate(statuses) if s.load_change_ms is not None]
    assert changes[:MAX_LEVEL_RESETS] == [12, 14]  # up, then down: two in a row, then it must fill
    full = [i for i, s in enumerate(statuses) if i > 13 and s.not_ready is None]
    assert full and full[0] == 18  # 30 s after where the second change began (tick 12), whatever comes
    assert changes[MAX_LEVEL_RESETS] > full[0]  # and only after a decision may it restart again


def test_a_restart_of_the_job_keeps_its_own_epoch_rules() -> None:
    book = WindowBook()
    run(book, steady_then(2000.0), 13)
    window = book.get("j")
    assert window is not None and window.level_since_ms is not None
    st = feed(
        book, FIRST + 14 * TICK, running_since_ms=FIRST + 13 * TICK, metrics_window_ms=WINDOW, offered=0.0
    )
    assert st.reset and st.stabilizing and book.get("j").level_since_ms is None  # type: ignore[union-attr]


def test_offered_records_are_what_the_sources_took_in_plus_their_backlog() -> None:
    from dataclasses import replace

    from formula_builders import job_sample, topology

    from autoscaler.evaluate.window.load_change import offered_records
    from autoscaler.model import VertexSample

    sample = job_sample(topology({"a": 1, "b": 1, "w": 1}, [("a", "w"), ("b", "w")]))
    vertices = {
        "a": VertexSample(num_records_in=100.0, pending_records=20.0),
        "b": VertexSample(num_records_in=50.0, pending_records=5.0),
        "w": VertexSample(num_records_in=999.0, pending_records=math.nan),  # not a source: not counted
    }
    assert offered_records(replace(sample, vertices=vertices)) == 175.0
    hole = {**vertices, "b": VertexSample(num_records_in=50.0, pending_records=math.nan)}
    assert math.isnan(offered_records(replace(sample, vertices=hole)))  # a hole is not a load change


def test_a_blip_holds_the_decision_one_interval_then_the_window_decides_as_it_is() -> None:
    """One interval at twice the load, then the old load again: not a change (the window keeps its
    samples), but no decision on the tick that could not tell yet."""
    blip = itertools.chain(itertools.repeat(1000.0, 10), [2000.0], itertools.repeat(1000.0))
    statuses = run(WindowBook(), blip, 14)
    assert statuses[11].not_ready is Reason.LOAD_CHANGING
    assert all(s.load_change_ms is None for s in statuses)
    assert statuses[12].not_ready is None and statuses[12].samples == 7


def test_a_tick_without_a_new_sample_keeps_holding() -> None:
    """A stale tick (Flink served its last fetch again) adds nothing that could tell: still waiting."""
    book = WindowBook()
    statuses = run(book, steady_then(2000.0), 12)
    assert statuses[11].not_ready is Reason.LOAD_CHANGING
    last = FIRST + 11 * TICK
    again = feed(
        book,
        last,
        now_ms=last + TICK,
        metrics_window_ms=WINDOW,
        stabilization_ms=30 * S,
        load_change_threshold=0.3,
    )
    assert not again.kept and again.not_ready is Reason.LOAD_CHANGING


@pytest.mark.parametrize(
    ("points", "changing"),
    [
        (((0, 0.0), (5, 5000.0), (10, 10000.0)), False),  # steady
        (((0, 0.0), (5, 5000.0), (10, 15000.0)), True),  # the newest interval doubled
        (((0, 0.0), (5, 5000.0), (10, 6000.0)), True),  # fell to a fifth
        (((0, 0.0), (5, 5000.0), (10, 11250.0)), False),  # +25 %: 0.2 of the larger
        (((0, 0.0), (5, 5000.0)), False),  # one interval: nothing to compare with
        (((0, 0.0), (5, math.nan), (10, 9.0)), False),  # unknown
    ],
)
def test_load_changing(points: tuple[tuple[int, float], ...], changing: bool) -> None:
    assert load_changing(points, 0.3) is changing
    assert load_changing(points, 0.0) is False  # off


# -- ticks that add no sample (PartialMetrics, StaleMetrics) around a load step (issue 36) --------------
GAP_TICK = 10 * S  # a new fetch every other 5 s tick, as with Flink's 5 s fetch interval on a 5 s loop


STALE = -1.0  # a tick that read the last fetch again: the same sample, observed later


def gapped(book: WindowBook, plan: list[tuple[int, float | None]]) -> list[WindowStatus | None]:
    """Ticks at FIRST + t (t ascending): a rate adds a sample whose offered records grew at it since the
    last sample; None is a faulty tick that adds none (the job is absent: its window slides by the clock);
    STALE observes the last sample again."""
    out: list[WindowStatus | None] = []
    offered, last_t = 0.0, 0
    opts = {"metrics_window_ms": WINDOW, "stabilization_ms": 30 * S, "load_change_threshold": 0.3}
    for t, rate in plan:
        now = FIRST + t
        if rate is None:
            book.retain(now, present=())
            out.append(None)
            continue
        if rate != STALE:
            offered += rate * (t - last_t) / S
            last_t = t
        out.append(feed(book, FIRST + last_t, now_ms=now, offered=offered, **opts))
        book.retain(now, present=("j",))
    return out


def steady(until_s: int, rate: float = 800.0) -> list[tuple[int, float | None]]:
    return [(t * S, rate) for t in range(0, until_s + 1, GAP_TICK // S)]


def test_faulty_ticks_after_load_changing_still_tell_the_change_and_the_window_restarts_at_the_new_load() -> (
    None
):
    """800 -> 3000 rec/s 3 s into the interval that ends at 60 s; then three ticks without a sample.
    The window at 80 s holds 50, 60, 80: none of the old load before the suspect interval. It used to
    decide from that mix ("must process 2,705" of 3,000 on a real cluster); now the point it began at
    when it waited tells the change, as it would have without the faults."""
    mixed = (3 * 800.0 + 7 * 3000.0) / 10
    plan = [*steady(50), (60 * S, mixed), (65 * S, None), (70 * S, None), (75 * S, None), (80 * S, 3000.0)]
    statuses = gapped(WindowBook(), plan)
    waiting, after = statuses[-5], statuses[-1]
    assert waiting is not None and waiting.not_ready is Reason.LOAD_CHANGING
    assert after is not None
    assert after.load_change_ms == FIRST + 60 * S  # the first sample of the new load
    assert after.start_ms == FIRST + 60 * S and after.samples == 2  # the new load only
    # Full one metrics.window after the change began (50 s), like the clean run's window: it decides
    # from the new load at once, here as there.
    assert after.not_ready is None


def test_a_gap_over_the_step_waits_an_interval_then_restarts_at_the_new_load() -> None:
    """No sample from 60 s to 90 s while the load steps up at 66 s: the window at 90 s holds 60 and 90,
    one interval with the step inside it. It used to decide from it; now it is compared with the point
    the window began at before (LoadChanging), and the next interval tells the change."""
    inside = (6 * 800.0 + 24 * 3000.0) / 30
    gap = [(t * S, None) for t in (65, 70, 75, 80, 85)]
    plan = [*steady(60), *gap, (90 * S, inside), (95 * S, STALE), (100 * S, 3000.0)]
    statuses = gapped(WindowBook(), plan)
    first_after, stale = statuses[-3], statuses[-2]
    assert first_after is not None and first_after.samples == 2
    assert first_after.not_ready is Reason.LOAD_CHANGING
    # A stale tick in between (the same reading again) adds nothing that could tell: still waiting.
    assert stale is not None and not stale.kept and stale.not_ready is Reason.LOAD_CHANGING
    told = statuses[-1]
    assert told is not None and told.load_change_ms == FIRST + 90 * S
    assert told.start_ms == FIRST + 90 * S and told.not_ready is None  # 60 s + 30 s: full, the new load only


def test_a_faulty_tick_after_a_blip_leaves_the_window_as_it_was() -> None:
    """One interval at twice the load, a faulty tick, then the old load: no change, and the window decides
    over its own samples again (the remembered point changes nothing without a change)."""
    plan = [*steady(50), (60 * S, 1600.0), (65 * S, None), (70 * S, None), (75 * S, None), (80 * S, 800.0)]
    statuses = gapped(WindowBook(), plan)
    after = statuses[-1]
    assert after is not None and after.load_change_ms is None
    assert after.not_ready is None and after.start_ms == FIRST + 50 * S
