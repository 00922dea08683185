"""Issue 11 item 5, through the daemon: once a rescale is confirmed, the first tick whose window is full
(and whose rates are known) measures what the rescale delivered, once, and reports it: the verdict on the
rescale's record in the stored state, a ``ScalingVerified`` event, a ratio gauge and a counter.

The stub evaluator states each case's capacity as a function of the parallelism and whether the window
is ready; the simulator restarts the job on the rescale as Flink does.
"""

from __future__ import annotations

import math

import pytest
from daemon_world import World

from autoscaler.reasons import Reason
from autoscaler.state import open_stores
from autoscaler.state.events import Event, EventType
from autoscaler.testing import StubEvaluator

JOB = "a/job-a"
EVERY_VERTEX = ("Source: BacklogSource", "Work", "Aggregate -> Sink: Writer")


def linear(p: int) -> float:
    return 1000.0 * p


def sublinear(p: int) -> float:
    return 1000.0 * math.sqrt(p)  # at 3: 1732.05 rec/s, 58 % of the 3000 a linear model expects


def verified_events(w: World) -> list[Event]:
    return [e for e in w.events.events(JOB) if e.reason is Reason.SCALING_VERIFIED]


def metric(w: World, name: str, **labels: str) -> float | None:
    return w.metrics.registry.get_sample_value(name, {"cluster": "a", "job": "job-a", **labels})


async def rescale_then_wait(w: World) -> None:
    """A rescale of Work, then the ticks of its restart: stabilizing, then a window filling up."""
    before = len(verified_events(w))
    assert (await w.tick()).for_job("job-a").outcome is Reason.SCALING
    for reason in (Reason.STABILIZING, Reason.STABILIZING, Reason.WINDOW_NOT_FULL):
        w.evaluator.not_ready = reason
        assert (await w.tick()).for_job("job-a").outcome is reason
    assert w.state.load(JOB).history[-1].confirmed_ms is not None
    assert len(verified_events(w)) == before  # nothing judged on a window that is not ready
    w.evaluator.not_ready = None


async def test_the_first_full_window_after_a_confirmed_rescale_verifies_it_once():
    w = World(StubEvaluator({"Work": 3}, tpr={"Work": linear}))
    await rescale_then_wait(w)
    work = w.sims["a"].vertex_ids(w.jobs["a"])["Work"]
    verifying = await w.tick()
    for _ in range(3):
        await w.tick()

    (event,) = verified_events(w)
    assert event.type is EventType.NORMAL and event.ts_ms == verifying.now_ms
    assert "Work 1 -> 3: 3000.00 rec/s at full load, 100% of the 3000.00 expected" in event.message
    (record,) = w.state.load(JOB).history
    assert record.verification is not None and record.verification.ts_ms == verifying.now_ms
    assert record.verification.vertices[work].ratio == 1.0 and record.verification.as_expected
    labels = {"vertex": work, "vertex_name": "Work"}
    assert metric(w, "flink_autoscaler_scaling_verification_ratio", **labels) == 1.0
    assert metric(w, "flink_autoscaler_scaling_verifications_total", result="as_expected") == 1.0
    assert metric(w, "flink_autoscaler_scaling_verifications_total", result="below_expected") is None


async def test_a_rescale_well_below_its_expected_capacity_is_a_warning_with_the_numbers():
    w = World(StubEvaluator({"Work": 3}, tpr={"Work": sublinear}))
    await rescale_then_wait(w)
    await w.tick()
    (event,) = verified_events(w)
    assert event.type is EventType.WARNING
    assert "less processing capacity than expected" in event.message
    assert "Work 1 -> 3: 1732.05 rec/s at full load, 58% of the 3000.00 expected" in event.message
    assert "Below 90%" in event.message
    work = w.sims["a"].vertex_ids(w.jobs["a"])["Work"]
    ratio = metric(w, "flink_autoscaler_scaling_verification_ratio", vertex=work, vertex_name="Work")
    assert ratio == pytest.approx(math.sqrt(3) / 3)
    assert metric(w, "flink_autoscaler_scaling_verifications_total", result="below_expected") == 1.0
    assert not w.state.load(JOB).history[-1].verification.as_expected


async def test_unknown_metrics_wait_for_a_window_that_can_judge_the_rescale():
    w = World(StubEvaluator({"Work": 3}, tpr={"Work": linear}))
    await rescale_then_wait(w)
    w.evaluator.unknown = set(EVERY_VERTEX)
    assert (await w.tick()).for_job("job-a").outcome is Reason.METRICS_UNKNOWN
    assert verified_events(w) == [] and w.state.load(JOB).history[-1].verification is None
    w.evaluator.unknown = set()
    await w.tick()
    assert len(verified_events(w)) == 1


async def test_a_new_rescale_is_verified_on_its_own_record(tmp_path):
    """Each rescale is verified once, on its record; the earlier verdict stays with the earlier one, and
    both are in the stored state a restarted daemon reads."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    w = World(StubEvaluator({"Work": 3}, tpr={"Work": linear}), stores=open_stores(url))
    await rescale_then_wait(w)
    await w.tick()
    w.evaluator.targets = {"Work": 5}
    await rescale_then_wait(w)
    await w.tick()
    first, second = open_stores(url).state.load(JOB).history
    assert list(first.changes.values()) == [(1, 3)] and list(second.changes.values()) == [(3, 5)]
    assert first.verification is not None and second.verification is not None
    assert first.verification.ts_ms < second.ts_ms < second.verification.ts_ms
    assert [v.ratio for v in second.verification.vertices.values()] == [1.0]  # 5000 of 1000 / 1 * 5
    assert len(verified_events(w)) == 2
    assert metric(w, "flink_autoscaler_scaling_verifications_total", result="as_expected") == 2.0
