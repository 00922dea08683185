"""A load change inside the window restarts it where the change began, and a full window waits an
interval when one may be starting (ours, metrics.load-change.threshold; evaluate/load_change.py)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest
from test_window import RUNNING, S, feed

from autoscaler.evaluate.load_change import load_changed, load_changing
from autoscaler.evaluate.window import MAX_LEVEL_RESETS, WindowStatus
from autoscaler.evaluate.window_book import WindowBook
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

    from autoscaler.evaluate.load_change import offered_records
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
