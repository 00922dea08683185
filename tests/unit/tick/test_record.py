"""The record stage (``autoscaler.tick.record``): which events a tick emits, deduplicated, off the event loop,
and only once the state behind them is stored.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from daemon_world import OPTIONS, World
from told import told

from autoscaler.cluster import Collected
from autoscaler.model import JobRef, Unavailable, VertexChange
from autoscaler.reasons import Reason
from autoscaler.state import JobState, MemoryStateStore
from autoscaler.state.events import Event, EventLog, EventType
from autoscaler.testing import StubEvaluator, make_evaluation, vertex_eval
from autoscaler.tick.delivery import OutcomeDelivery
from autoscaler.tick.record import publish
from autoscaler.tick.steps import Decision, JobOutcome
from autoscaler.tick.texts import changes_key, report_text


async def test_an_ineffective_scale_up_is_reported_once_per_interval():
    w = World(StubEvaluator(ineffective={"Work": (900.0, 12.5)}))
    await w.tick()
    await w.tick()
    events = [e for e in w.events.events("a/job-a") if e.reason is Reason.INEFFECTIVE_SCALING]
    assert len(events) == 1 and events[0].count == 2  # the second is deduplicated within 30 min
    assert "(expected increase: 900.0, actual increase 12.5)" in events[0].message


class ThreadRecordingLog(EventLog):
    """Notes the thread of every emit; a database sink there must not hold up the event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def emit(self, event: Any, interval_ms: int = 0) -> bool:
        self.threads.add(threading.get_ident())
        return super().emit(event, interval_ms)


class FailingLog(EventLog):
    def emit(self, event: Any, interval_ms: int = 0) -> bool:
        raise OSError("events table is gone")


async def test_events_are_recorded_off_the_event_loop_and_a_failing_sink_loses_no_state():
    w = World(StubEvaluator({"Work": 3}))
    w.daemon.events = w.events = ThreadRecordingLog()
    await w.tick()
    assert Reason.SCALING in w.events.reasons("a/job-a")
    assert w.events.threads and threading.get_ident() not in w.events.threads
    w2 = World(StubEvaluator({"Work": 3}))
    w2.daemon.events = FailingLog()
    await w2.tick()  # every emit raises: logged, and the tick's state is still written
    assert w2.state.load("a/job-a").pending is not None and len(w2.puts("a")) == 1


async def test_a_target_the_legacy_alignment_could_not_keep_is_a_scaling_limited_warning():
    legacy = {**OPTIONS, "job.autoscaler.scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD"}
    w = World(StubEvaluator(limited={"Work": 6}), options=legacy)
    await w.tick()
    await w.tick()
    (event,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.SCALING_LIMITED]
    assert event.type is EventType.WARNING and event.count == 2  # deduplicated within the interval
    assert "(expected parallelism: 6, actual parallelism 1)" in event.message
    # Work: p=1, max parallelism from the simulator, default limits [1, 200], no partitions.
    sample = next(s for s in w.evaluator.samples if s.job.key == "a/job-a")
    work = next(v for v in sample.topology if v.name == "Work")
    bounds = f"numKeyGroupsOrPartitions : {work.max_parallelism}\uff0c"
    assert bounds in event.message and "parallelismLowerLimit: 1." in event.message


async def test_the_scaling_event_is_recorded_only_once_the_pending_rescale_is_stored():
    """A process killed the moment its Scaling event shows must not lose the rescale behind it."""
    state = MemoryStateStore()
    seen: dict[str, Any] = {}

    class Watching(EventLog):
        def emit(self, event: Any, interval_ms: int = 0) -> bool:
            if event.reason == "Scaling":
                seen[event.job_key] = state.load(event.job_key).pending
            return super().emit(event, interval_ms)

    w = World(StubEvaluator({"Work": 3}), stores=SimpleNamespace(state=state, events=Watching()))
    await w.tick()
    assert set(seen) == {"a/job-a", "b/job-b"}
    assert all(pending is not None for pending in seen.values()), seen


def _decision(changes: dict[str, tuple[int, int]]) -> Decision:
    evaluation = make_evaluation([vertex_eval(vid, cur, tgt) for vid, (cur, tgt) in changes.items()])
    vertex_changes = {vid: VertexChange(vid, cur, tgt) for vid, (cur, tgt) in changes.items()}
    return Decision(evaluation.job, Reason.SCALING, "", vertex_changes, JobState(), evaluation)


def test_the_scaling_report_has_one_block_per_changed_vertex_with_its_expected_capacity():
    text = report_text(_decision({"w": (2, 4)}), enabled=True)
    assert text == (
        "Scaling execution enabled, begin scaling vertices:"
        "{ Vertex ID w | Parallelism 2 -> 4 | Processing capacity 1000.00 -> 2000.00 | "
        "Target data rate 1000.00}"
    )
    assert report_text(_decision({"w": (2, 4)}), enabled=False).startswith("Scaling execution disabled")


def test_the_same_recommendation_has_the_same_dedup_key_and_another_one_does_not():
    one = changes_key(_decision({"a": (1, 2), "b": (3, 1)}))
    assert one == changes_key(_decision({"b": (3, 1), "a": (1, 2)}))  # vertex order does not matter
    assert one != changes_key(_decision({"a": (1, 3), "b": (3, 1)}))


async def test_publish_emits_events_before_outcomes_and_a_failing_callback_loses_nothing_else():
    order: list[str] = []

    class Log(EventLog):
        def emit(self, event: Any, interval_ms: int = 0) -> bool:
            order.append(f"event:{event.reason}")
            return super().emit(event, interval_ms)

    def callback(outcome: JobOutcome) -> None:
        order.append(f"outcome:{outcome.job.name}")
        raise OSError("decision directory is read-only")

    job = JobRef(cluster="c", job_id="0" * 32, name="j")
    events = [(Event(job.key, Reason.SCALING, EventType.NORMAL, "scaled", 1_000), 0)]
    done = [JobOutcome(job, 1_000, Reason.SCALING, "scaled"), JobOutcome(job, 1_000, Reason.IN_BAND, "again")]
    delivery = OutcomeDelivery(callback)
    await publish(events, Log(), delivery, done)
    await delivery.drain()
    assert order == ["event:Scaling", "outcome:j", "outcome:j"]  # each outcome tried despite the error


async def test_a_job_whose_rates_are_all_unknown_ends_metrics_unknown_with_a_warning_and_a_counter():
    """Issue 11 item 6, through the daemon: NaN everywhere is not InBand, and nothing is scaled."""
    w = World(
        StubEvaluator({"Work": 3}, unknown=["Source: BacklogSource", "Work", "Aggregate -> Sink: Writer"])
    )
    report = await w.tick()
    await w.tick()
    outcome = next(o for o in report.outcomes if o.job.key == "a/job-a")
    assert outcome.outcome is Reason.METRICS_UNKNOWN and outcome.realized is None
    (event,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.METRICS_UNKNOWN]
    assert event.type is EventType.WARNING and event.count == 2  # once per scaling.event.interval
    assert w.puts("a") == [] and w.state.load("a/job-a").pending is None
    labels = {"cluster": "a", "job": "job-a"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_metrics_unknown_total", labels) == 2.0
    decisions = {**labels, "outcome": "MetricsUnknown"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_decisions_total", decisions) == 2.0


def test_a_job_that_could_not_be_evaluated_is_counted_among_its_decisions_but_not_as_balanced():
    target = make_evaluation([vertex_eval("w", 1)]).sample.target
    unavailable = (
        Unavailable(target, Reason.PARTIAL_METRICS, "vertex Work: no busyTimeMsPerSecond yet"),
        Unavailable(target, Reason.NOT_RUNNING, "FINISHED"),  # a job that ended: not counted
    )
    rec = told(collected=Collected(unavailable=unavailable))
    get, labels = (
        rec.metrics.registry.get_sample_value,
        {"cluster": target.job.cluster, "job": target.job.name},
    )
    assert get("flink_autoscaler_decisions_total", {**labels, "outcome": "PartialMetrics"}) == 1
    assert get("flink_autoscaler_decisions_total", {**labels, "outcome": "NotRunning"}) is None
    assert get("flink_autoscaler_balanced_total", labels) is None
