"""The schedule (``autoscaler.schedule``): ticks on APScheduler, and the one-job retry at the exact
instant a cooldown ends.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from daemon_world import OPTIONS, World

from autoscaler.clock import FakeClock
from autoscaler.job_scope import JobScope
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.schedule import Schedule, cleanup
from autoscaler.state import JobState, MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.testing import StubEvaluator, make_evaluation, vertex_eval
from autoscaler.tick.steps import Decision, JobOutcome


async def test_serve_runs_ticks_on_the_scheduler_and_stops_cleanly():
    w = World(StubEvaluator())
    w.daemon.settings = w.daemon.settings.model_copy(
        update={"control_loop_interval": timedelta(milliseconds=20)}
    )
    stop = asyncio.Event()
    served = asyncio.create_task(w.daemon.serve(stop))
    while len(w.evaluator.calls) < 3:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(served, timeout=10)
    assert served.done() and served.exception() is None
    await w.daemon.aclose()


async def test_a_deferred_decision_is_retried_for_that_job_exactly_when_the_cooldown_ends():
    w = World(StubEvaluator({"Work": 3}), options={**OPTIONS, "job.autoscaler.scaling-interval.min": "1 min"})
    report = await w.tick()
    outcome = report.for_job("job-a")
    assert outcome.outcome is Reason.COOLDOWN_DEFERRED
    running_since = outcome.decision.evaluation.sample.running_since_ms
    assert w.daemon.retries["a/job-a"] == running_since + 60_000  # a job never rescaled: from its start
    assert Reason.COOLDOWN_DEFERRED in w.events.reasons("a/job-a")
    assert (
        w.metrics.registry.get_sample_value(
            "flink_autoscaler_deferred_decisions_total", {"cluster": "a", "job": "job-a"}
        )
        == 1
    )

    w.clock.advance(ms=w.daemon.retries["a/job-a"] - w.clock.now_ms() - 1000)
    early = await w.daemon.run_tick(JobScope("a/job-a"))
    assert [o.outcome for o in early.outcomes] == [Reason.COOLDOWN_DEFERRED]
    w.clock.advance(1)
    on_time = await w.daemon.run_tick(JobScope("a/job-a"))
    assert [(o.job.name, o.outcome) for o in on_time.outcomes] == [("job-a", Reason.SCALING)]
    assert len(w.puts("a")) == 1 and w.puts("b") == []  # the one-job tick touched only its job


async def test_serve_schedules_the_retry_as_a_date_trigger():
    from apscheduler.triggers.date import DateTrigger

    w = World(StubEvaluator({"Work": 3}), options={**OPTIONS, "job.autoscaler.scaling-interval.min": "1 h"})
    w.daemon.settings = w.daemon.settings.model_copy(update={"control_loop_interval": timedelta(hours=1)})
    stop = asyncio.Event()
    served = asyncio.create_task(w.daemon.serve(stop))
    while "a/job-a" not in w.daemon.retries:
        await asyncio.sleep(0.01)
    job = w.daemon.schedule.scheduler.get_job("retry:a/job-a")
    assert job is not None and isinstance(job.trigger, DateTrigger)
    stop.set()
    await asyncio.wait_for(served, timeout=10)
    await w.daemon.aclose()


def _outcome(reason: Reason, retry_at_ms: int | None) -> JobOutcome:
    evaluation = make_evaluation([vertex_eval("w", 1, 2)])
    decision = Decision(evaluation.job, reason, "", {}, JobState(), evaluation, retry_at_ms=retry_at_ms)
    return JobOutcome(evaluation.job, 0, reason, "", decision)


def test_only_a_deferral_to_a_known_instant_is_retried_and_forgetting_the_job_drops_it():
    schedule = Schedule(FakeClock(), MetricsReporter())
    schedule.retry_deferred(
        [
            _outcome(Reason.COOLDOWN_DEFERRED, 60_000),
            _outcome(Reason.IN_BAND, None),
            _outcome(Reason.COOLDOWN_DEFERRED, None),  # no instant: the next tick decides again
        ],
        now_ms=0,
    )
    assert schedule.retries == {"c1/job": 60_000}
    schedule.forget(["c1/job"])
    assert schedule.retries == {}


async def test_housekeeping_that_fails_is_logged_and_never_raises():
    class Broken(MemoryStateStore):
        def trim_window(self, job_key, before_ms):
            raise OSError("database is locked")

    await cleanup(EventLog(), Broken(), now_ms=10 * 86_400_000, event_retention_ms=86_400_000)
