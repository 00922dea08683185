"""A source's observed TPR counts only once it has caught up for Flink's whole 60 s meter span."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.collect.catch_up import CatchUpBook
from autoscaler.model import VertexSample

SRC, WORK = "src", "work"
SETTLE_MS = 60_000
RUN_MS = 1_000_000  # the job run's RUNNING timestamp


def vertices(observed: float) -> dict[str, VertexSample]:
    return {SRC: VertexSample(busy_time_ms_per_s=10.0, observed_tpr=observed), WORK: VertexSample(500.0)}


def settled_at(book: CatchUpBook, ts_ms: int, observed: float, *, run_ms: int = RUN_MS) -> float:
    out = book.settle(
        "c/j", running_since_ms=run_ms, ts_ms=ts_ms, vertices=vertices(observed), settle_ms=SETTLE_MS
    )
    return out[SRC].observed_tpr


def test_a_source_counts_once_it_has_caught_up_for_the_settle_time() -> None:
    book, start = CatchUpBook(), RUN_MS + 300_000
    seen = [settled_at(book, start + k * 10_000, 700.0 + k) for k in range(8)]
    assert all(math.isnan(v) for v in seen[:6])  # 0 .. 50 s into the catching up: the meter straddles
    assert seen[6:] == [706.0, 707.0]  # 60 s and later: the meter holds only catching-up time


def test_a_break_in_the_catching_up_starts_the_wait_over() -> None:
    book, start = CatchUpBook(), RUN_MS + 300_000
    for k in range(7):
        settled_at(book, start + k * 10_000, 900.0)
    assert settled_at(book, start + 70_000, 900.0) == 900.0
    assert math.isnan(settled_at(book, start + 80_000, math.nan))  # caught up: not measured
    assert math.isnan(settled_at(book, start + 90_000, 900.0))  # catching up again: a new minute
    assert settled_at(book, start + 150_000, 900.0) == 900.0


def test_a_new_job_run_waits_for_its_meters_to_fill() -> None:
    book = CatchUpBook()
    restarted = RUN_MS + 500_000
    for k in range(7):
        settled_at(book, RUN_MS + 200_000 + k * 10_000, 800.0)
    assert settled_at(book, RUN_MS + 270_000, 800.0) == 800.0
    # The rescale: a new RUNNING timestamp. The meters ramp from zero, even a reading of no input.
    assert math.isnan(settled_at(book, restarted + 10_000, math.inf, run_ms=restarted))
    assert math.isnan(settled_at(book, restarted + 30_000, 800.0, run_ms=restarted))
    assert settled_at(book, restarted + 60_000, math.inf, run_ms=restarted) == math.inf
    assert math.isnan(settled_at(book, restarted + 70_000, 800.0, run_ms=restarted))  # catching up anew
    assert math.isnan(settled_at(book, restarted + 120_000, 800.0, run_ms=restarted))
    assert settled_at(book, restarted + 130_000, 800.0, run_ms=restarted) == 800.0


def test_zero_settle_time_is_the_reference_and_other_vertices_are_untouched() -> None:
    book = CatchUpBook()
    given_vertices = vertices(650.0)
    out = book.settle("c/j", running_since_ms=RUN_MS, ts_ms=RUN_MS + 1, vertices=given_vertices, settle_ms=0)
    assert out is given_vertices
    masked = book.settle(
        "c/j", running_since_ms=RUN_MS, ts_ms=RUN_MS + 1, vertices=given_vertices, settle_ms=SETTLE_MS
    )
    assert math.isnan(masked[SRC].observed_tpr) and masked[WORK] is given_vertices[WORK]
    assert masked[SRC].busy_time_ms_per_s == 10.0  # only the observed TPR is left out


def test_forget_drops_the_job_and_jobs_are_apart() -> None:
    book, start = CatchUpBook(), RUN_MS + 300_000
    for k in range(7):
        settled_at(book, start + k * 10_000, 900.0)
    other = book.settle(
        "c/other",
        running_since_ms=RUN_MS,
        ts_ms=start + 60_000,
        vertices=vertices(900.0),
        settle_ms=SETTLE_MS,
    )
    assert math.isnan(other[SRC].observed_tpr)  # another job's source has its own minute
    book.forget(["c/j"])
    assert math.isnan(settled_at(book, start + 70_000, 900.0))


@given(st.lists(st.sampled_from([math.nan, math.inf, 500.0]), min_size=1, max_size=40))
def test_a_counted_sample_always_ends_a_full_minute_of_catching_up(kinds: list[float]) -> None:
    book, start = CatchUpBook(), RUN_MS + 120_000
    for k, observed in enumerate(kinds):
        ts = start + k * 10_000
        out = settled_at(book, ts, observed)
        if observed == 500.0 and out == 500.0:
            window = kinds[max(0, k - 6) : k + 1]  # the samples of the last 60 s, this one included
            assert k >= 6 and all(v == 500.0 for v in window)
        elif not math.isnan(observed) and math.isinf(observed):
            assert out == math.inf  # the job has run longer than the settle time
        else:
            assert math.isnan(out) or out == observed
