"""The whole tick through the daemon: an evaluation that fails scales nothing, the scaling history
reaches the evaluator, and a daemon restarted on the same database resumes its windows, history and
cooldowns without rescaling twice.
"""

from __future__ import annotations

from typing import Any

from daemon_world import OPTIONS, World

from autoscaler.daemon import Daemon
from autoscaler.metrics import MetricsReporter
from autoscaler.model import HEAP_USAGE_RATIO
from autoscaler.reasons import Reason
from autoscaler.state import open_stores
from autoscaler.testing import StubEvaluator


async def test_evaluator_failure_scales_nothing_and_reports_an_error_event():
    w = World(StubEvaluator({"Work": 3}, fail=True))
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.AUTOSCALER_ERROR}
    assert w.puts("a") == w.puts("b") == []
    assert Reason.AUTOSCALER_ERROR in w.events.reasons("a/job-a")
    # The stage returns why it failed; the daemon reports it: Spark down, an error on each sampled cluster.
    assert w.metrics.registry.get_sample_value("flink_autoscaler_spark_up") == 0
    assert w.error_count("a", Reason.AUTOSCALER_ERROR) == w.error_count("b", Reason.AUTOSCALER_ERROR) == 1


async def test_a_working_evaluation_is_reported_with_its_duration():
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()
    assert w.metrics.registry.get_sample_value("flink_autoscaler_spark_up") == 1
    assert w.metrics.registry.get_sample_value("flink_autoscaler_evaluation_duration_seconds_count") == 1


async def test_scaling_history_with_metrics_and_restart_duration_reaches_the_evaluator():
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()  # scales Work 1 -> 3 on both clusters
    for _ in range(3):
        await w.tick()
    work = w.sims["a"].vertex_ids(w.jobs["a"])["Work"]
    (record,) = w.evaluator.histories[-1]["a/job-a"]
    assert record.changes[work] == (1, 3)
    assert record.metrics[work] == (1000.0, 3000.0)  # TPR then, and TPR / 1 * 3 expected
    assert record.restart_duration_ms is not None and record.restart_duration_ms >= 0


def _restarted(w: World, stores: Any) -> Daemon:
    """A new daemon process, as after a crash: same clusters and database, nothing else carried over."""
    return Daemon(
        w.daemon.settings,
        evaluator=StubEvaluator({"Work": 3}),
        clock=w.clock,
        state=stores.state,
        events=stores.events,
        metrics=MetricsReporter(),
        transports=w.transports,
    )


async def test_windows_spark_lost_are_reloaded_from_the_state_database(tmp_path):
    w = World(StubEvaluator({"Work": 3}), stores=open_stores(f"sqlite:///{tmp_path / 'state.db'}"))
    ticks = [await w.tick() for _ in range(3)]
    reload = w.daemon.evaluator.reload
    assert reload is not None  # handed to the evaluator at every tick, for it to call if Spark loses the rows
    current = w.daemon.evaluator.samples
    stored = reload(current)
    assert set(stored) == {s.job.key for s in current}
    for sample in current:  # every tick stored before this one, this tick's sample not included
        past = stored[sample.job.key]
        assert [p.ts_ms for p in past] == [t.now_ms for t in ticks[:-1]]
        assert all(set(p.vertices) == set(sample.topology.vertices) for p in past)


async def test_a_restarted_daemon_replays_the_stored_custom_metrics_with_the_window(tmp_path):
    """The heap-usage ratio (windowed for the memory-pressure gate) is a custom metric like a plugin's."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    options = {**OPTIONS, "job.autoscaler.memory.heap-usage.threshold": "0.9"}
    w = World(StubEvaluator(), options=options, stores=open_stores(url))
    ticks = [await w.tick() for _ in range(3)]
    measured = {
        s.ts_ms: s.custom_job_metrics[HEAP_USAGE_RATIO]
        for s in w.daemon.evaluator.samples
        if s.job.key == "a/job-a"
    }
    assert measured and all(0 < v < 1 for v in measured.values())
    w.daemon = _restarted(w, open_stores(url))
    await w.tick()
    past = w.daemon.evaluator.replayed[0]["a/job-a"]
    # The samples of the three ticks, timed by their fetches: within a fetch wait of each tick's start.
    assert len(past) == len(ticks) == 3
    assert all(abs(p.ts_ms - t.now_ms) <= 1500 for p, t in zip(past, ticks, strict=True))
    assert all(0 < p.custom_job_metrics[HEAP_USAGE_RATIO] < 1 for p in past)
    assert past[-1].custom_job_metrics[HEAP_USAGE_RATIO] == measured[past[-1].ts_ms]


async def test_without_a_persisted_window_there_is_nothing_to_reload():
    w = World(StubEvaluator({"Work": 3}), persist_window=False)
    await w.tick()
    assert w.daemon.evaluator.reload is None


async def test_a_daemon_restarted_on_the_same_database_keeps_history_and_cooldown_and_never_rescales_twice(
    tmp_path,
):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    options = {**OPTIONS, "job.autoscaler.scaling-interval.min": "10 min"}
    w = World(StubEvaluator({"Work": 3}), options=options, stores=open_stores(url))
    w.clock.advance(11 * 60)  # past the cooldown that counts from the job's start
    first = await w.tick()
    assert first.for_job("job-a").outcome is Reason.SCALING and len(w.puts("a")) == 1
    # The process dies right after the PUT, before Flink applied it; a new one starts on the same file.
    w.daemon = _restarted(w, open_stores(url))
    outcomes = [(await w.tick()).for_job("job-a").outcome for _ in range(4)]
    assert w.daemon.evaluator.restored[0].get("a/job-a", 0) >= 1  # the stored window was replayed once
    assert all(not r for r in w.daemon.evaluator.restored[1:])
    assert Reason.SCALING not in outcomes and len(w.puts("a")) == 1  # pending found again, not re-sent
    state = w.daemon.state.load("a/job-a")
    assert state.pending is None and state.history[-1].confirmed_ms is not None
    assert state.last_rescale_ms == first.now_ms

    # Later the evaluator wants more: the cooldown still counts from the rescale before the restart.
    w.daemon = _restarted(w, open_stores(url))
    w.daemon.evaluator = StubEvaluator({"Work": 5})
    deferred = (await w.tick()).for_job("job-a")
    assert deferred.outcome is Reason.COOLDOWN_DEFERRED
    assert w.daemon.retries["a/job-a"] == first.now_ms + 10 * 60_000
