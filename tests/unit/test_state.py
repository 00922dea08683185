from __future__ import annotations

from autoscaler.state import DelayedScaleDown, JobState, MemoryStateStore, PendingRescale, ScalingRecord


def test_delayed_scale_down_keeps_a_decreasing_window_maximum():
    d = DelayedScaleDown(0, ())
    d = d.add(0, 5, 600_000).add(60_000, 8, 600_000).add(120_000, 6, 600_000)
    assert d.recommendations == ((60_000, 8), (120_000, 6))
    assert d.window_max() == 8
    # 8 ages out of the 10-minute window
    assert d.add(700_000, 4, 600_000).window_max() == 6


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
