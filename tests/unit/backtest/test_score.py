"""The trace a scorer keeps when asked, and its thinning for the page."""

from __future__ import annotations

from autoscaler.backtest.score import thin_trace


def test_a_short_trace_is_kept_whole() -> None:
    trace = ((0, 1, 0.0), (10, 2, 5.0))
    assert thin_trace(trace, 2) == trace
    assert thin_trace(trace, 0) == trace  # no limit


def test_a_long_trace_keeps_each_runs_first_tick_and_its_most_slots_and_backlog() -> None:
    trace = tuple((t * 10, 1, 0.0) for t in range(10))
    spiky = (*trace[:3], (30, 4, 900.0), *trace[4:])  # a short wide restart with a burst of backlog
    thinned = thin_trace(spiky, 5)
    assert [ms for ms, _, _ in thinned] == [0, 20, 40, 60, 80]
    assert thinned[1] == (20, 4, 900.0)  # the spike survives
    assert all(p[1:] == (1, 0.0) for i, p in enumerate(thinned) if i != 1)
    assert len(thin_trace(trace, 3)) <= 3
