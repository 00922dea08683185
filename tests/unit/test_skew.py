"""Slow subtasks and skew (autoscaler/skew.py): the figure, the cheap pre-check, the slow list, the cause."""

from __future__ import annotations

import math
import statistics

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.skew import SlowSubtaskRule, busy_skew, judge, worth_reading

RULE = SlowSubtaskRule(multiplier=1.5, floor_ms_per_s=500.0)


def test_the_skew_figure_is_the_busiest_subtask_over_the_average() -> None:
    assert busy_skew(1000.0, 400.0) == 2.5
    assert busy_skew(300.0, 300.0) == 1.0
    assert math.isnan(busy_skew(0.0, 0.0))  # idle: no figure, not "even"
    assert math.isnan(busy_skew(math.nan, 10.0))


def test_a_hot_key_is_slow_subtasks_that_also_receive_far_more_records() -> None:
    skew = judge(2.5, [1000.0, 200.0, 200.0, 200.0], [1000.0, 200.0, 200.0, 200.0], RULE)
    assert skew.slow_indices == (0,) and skew.hot_key
    assert skew.median_busy == 200.0 and skew.median_records_in == 200.0
    assert skew.load_share == 1000 / 1600
    assert skew.text("Keyed") == (
        "Keyed: subtask 0 of 4 is slow, busy 1,000 ms/s against a median of 200; it receives 1,000 rec/s "
        "against a median of 200 (62% of the vertex's records): a hot key, which more parallelism cannot "
        "spread"
    )


def test_a_slow_subtask_with_ordinary_input_is_not_a_hot_key() -> None:
    skew = judge(1.9, [900.0, 950.0, 300.0, 320.0, 310.0], [100.0, 101.0, 99.0, 100.0, 100.0], RULE)
    assert skew.slow_indices == (0, 1) and not skew.hot_key
    assert "subtasks 0, 1 of 5 are slow, busy 900, 950 ms/s" in skew.text("Enrich")
    assert skew.text("Enrich").endswith("a slow TaskManager or costlier records")


def test_below_the_floor_nothing_is_slow_however_uneven() -> None:
    assert judge(3.0, [400.0, 10.0, 10.0, 10.0], [40.0, 1.0, 1.0, 1.0], RULE).slow == ()
    # A median of 0 (one key, one busy subtask): the floor alone is the baseline.
    assert judge(4.0, [800.0, 0.0, 0.0, 0.0], [80.0, 0.0, 0.0, 0.0], RULE).slow_indices == (0,)


def test_unreported_subtasks_are_left_out_and_too_few_tell_nothing() -> None:
    skew = judge(2.0, [1000.0, math.nan, 200.0, 200.0], [], RULE)
    assert skew.slow_indices == (0,) and not skew.hot_key  # records in unknown: no claim of a hot key
    assert judge(1.0, [math.nan, 900.0], [], RULE).slow == () and not judge(1.0, [900.0], [], RULE).read


@given(
    st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=2, max_size=40),
    st.floats(min_value=1.0, max_value=4.0),
    st.floats(min_value=0, max_value=1000),
)
def test_the_pre_check_never_misses_a_vertex_with_a_slow_subtask(busy, multiplier, floor) -> None:
    rule = SlowSubtaskRule(multiplier, floor)
    slow = judge(math.nan, busy, [], rule).slow
    if slow:
        assert worth_reading(len(busy), min(busy), max(busy), rule)
        baseline = rule.baseline(statistics.median(busy))
        assert all(s.busy_ms_per_s >= baseline for s in slow)
