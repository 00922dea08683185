from __future__ import annotations

from autoscaler.state import (
    DelayedScaleDown,
    JobState,
    MemoryStateStore,
    PendingRescale,
    Recommendation,
    ScalingRecord,
)


def test_delayed_scale_down_keeps_a_decreasing_window_maximum():
    d = DelayedScaleDown(0, ())
    d = d.add(0, 5, 600_000, outside_band=True).add(60_000, 8, 600_000, outside_band=False)
    d = d.add(120_000, 6, 600_000, outside_band=True)
    assert d.recommendations == (Recommendation(60_000, 8, False), Recommendation(120_000, 6, True))
    assert d.window_max() == 8 and d.peak() == Recommendation(60_000, 8, False)
    # 8 ages out of the 10-minute window
    assert d.add(700_000, 4, 600_000, outside_band=True).peak() == Recommendation(120_000, 6, True)


def test_each_recommendation_keeps_its_own_band_flag_and_an_equal_one_replaces_it():
    """Reference DelayedScaleDown#recordRecommendedParallelism: an equal parallelism is evicted, so the
    window maximum carries the newest time and flag of that parallelism."""
    d = DelayedScaleDown(0, ()).add(0, 6, 600_000, outside_band=False)
    d = d.add(60_000, 6, 600_000, outside_band=True)
    assert d.recommendations == (Recommendation(60_000, 6, True),)


def test_plain_pairs_read_as_recommendations_without_a_band_flag():
    """What state written before the flag was kept holds: the flag is unknown (None), not False."""
    d = DelayedScaleDown(0, ((0, 6), (5, 4)))
    assert d.recommendations == (Recommendation(0, 6, None), Recommendation(5, 4, None))
    assert d.peak().outside_band is None


def test_scaling_clears_delays_and_appends_to_history():
    state = JobState(delayed_scale_down={"v": DelayedScaleDown(0, ((0, 2),))})
    for ts in range(5):
        state = state.with_scaling(ScalingRecord(ts, {"v": (1, 2)}), None)
    assert state.delayed_scale_down == {}
    assert [r.ts_ms for r in state.history] == [0, 1, 2, 3, 4]  # trimming is trim_history's job
    assert state.last_rescale_ms == 4


def test_memory_store_round_trip():
    store = MemoryStateStore()
    assert store.load("c/j") == JobState()
    state = JobState(pending=PendingRescale("id", 1, {"v": 2}, {"v": 1}))
    store.save("c/j", state)
    assert store.load("c/j") == state and list(store.keys()) == ["c/j"]
    store.delete("c/j")
    assert store.load("c/j") == JobState()
