"""The daemon's tick under bad input: every failure stays with its cluster or job, nothing scales on
partial data, and state is never lost. The simulator answers in-process; a stub evaluator stands in
for Spark so each case states only the recommendation it needs.
"""

from __future__ import annotations

import asyncio
import importlib.metadata as metadata
import threading
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.events import EventLog, EventType
from autoscaler.metrics import MetricsReporter
from autoscaler.model import HEAP_USAGE_RATIO
from autoscaler.plugins import ScalingExecutorPlugin
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.loader import ENTRY_POINT_GROUP, DiscoveredPlugin, PluginRegistry
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore, open_stores
from autoscaler.testing import FaultyTransport, StubEvaluator

OPTIONS = {"job.autoscaler.enabled": "true"}


class World:
    """Two simulated clusters ("a", "b") with one job each, a daemon, and the recorders."""

    def __init__(
        self,
        evaluator: StubEvaluator,
        faults: dict[str, dict[tuple[str, str], Any]] | None = None,
        plugins: Any = (),
        confirm_timeout_s: float = 300,
        options: dict[str, str] | None = None,
        flink_cooldown_s: float = 0,
        stores: Any = None,
        persist_window: bool = True,
    ) -> None:
        self.clock = FakeClock()
        self.sims = {
            name: SimCluster(SimClusterSpec(cooldown_after_rescaling_s=flink_cooldown_s), self.clock)
            for name in "ab"
        }
        self.jobs = {
            name: sim.submit(work_job(name=f"job-{name}", input_rate=Constant(rate=2000.0)))
            for name, sim in self.sims.items()
        }
        self.transports = {
            name: FaultyTransport(transport(sim), (faults or {}).get(name)) for name, sim in self.sims.items()
        }
        self.events, self.state = (
            (stores.events, stores.state) if stores else (EventLog(), MemoryStateStore())
        )
        self.metrics = MetricsReporter()
        self.evaluator = evaluator
        settings = Settings(
            clusters=[ClusterSettings(name=n, rest_url=f"http://{n}.invalid:8081") for n in self.sims],
            autoscaler=options or OPTIONS,
            metrics_address="",
            confirm_timeout=timedelta(seconds=confirm_timeout_s),
            persist_window=persist_window,
        )
        self.daemon = Daemon(
            settings,
            evaluator=evaluator,
            clock=self.clock,
            state=self.state,
            events=self.events,
            metrics=self.metrics,
            plugins=plugins,
            transports=self.transports,
        )

    async def tick(self, seconds: float = 10) -> Any:
        self.clock.advance(seconds)
        return await self.daemon.run_tick()

    def puts(self, cluster: str) -> list[str]:
        return [p for m, p in self.transports[cluster].requests if m == "PUT"]

    def error_count(self, cluster: str, reason: Reason) -> float | None:
        return self.metrics.registry.get_sample_value(
            "flink_autoscaler_errors_total", {"cluster": cluster, "reason": str(reason)}
        )


def _flink_500() -> httpx.Response:
    return httpx.Response(500, json={"errors": ["java.lang.IllegalStateException: boom\n\tat x.y(Z.java:1)"]})


async def test_a_cluster_answering_500_is_counted_and_the_other_cluster_scales():
    w = World(StubEvaluator({"Work": 3}), faults={"a": {("GET", "/jobs/overview"): _flink_500()}})
    report = await w.tick()
    assert "HTTP 500" in report.cluster_errors["a"] and "boom" in report.cluster_errors["a"]
    assert w.error_count("a", Reason.AUTOSCALER_ERROR) == 1
    assert [o.job.name for o in report.outcomes] == ["job-b"] and report.outcomes[0].outcome is Reason.SCALING
    assert w.puts("a") == [] and len(w.puts("b")) == 1


async def test_unreachable_cluster_keeps_its_jobs_state():
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()
    state_before = w.state.load("a/job-a")
    assert state_before.pending is not None
    w.transports["a"].faults[("GET", ".*")] = httpx.ConnectError("connection refused")
    report = await w.tick()
    assert "a" in report.cluster_errors
    assert w.state.load("a/job-a") == state_before
    assert "a/job-a" not in w.evaluator.forgotten


@pytest.mark.parametrize(
    "fault",
    [
        httpx.Response(200, content=b"{not json"),
        httpx.Response(200, json={"unexpected": True}),
        httpx.ReadTimeout("slow"),
    ],
)
async def test_malformed_or_missing_metrics_mean_no_scaling_for_that_job_only(fault):
    w = World(
        StubEvaluator({"Work": 3}),
        faults={"a": {("GET", r"/jobs/[0-9a-f]+/vertices/.*/subtasks/metrics"): fault}},
    )
    report = await w.tick()
    outcomes = {o.job.name: o.outcome for o in report.outcomes}
    assert outcomes["job-a"] in (Reason.PARTIAL_METRICS, Reason.CLUSTER_UNREACHABLE)
    assert outcomes["job-b"] is Reason.SCALING
    assert w.puts("a") == []
    assert w.evaluator.calls == [["b/job-b"]]  # partial data never reaches the evaluator


async def test_evaluator_failure_scales_nothing_and_reports_an_error_event():
    w = World(StubEvaluator({"Work": 3}, fail=True))
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.AUTOSCALER_ERROR}
    assert w.puts("a") == w.puts("b") == []
    assert Reason.AUTOSCALER_ERROR in w.events.reasons("a/job-a")


async def test_a_raising_plugin_vetoes_and_nothing_is_put():
    class Broken(ScalingExecutorPlugin):
        name = "broken"

        def apply(self, context, changes):
            raise KeyError("bug in plugin")

    w = World(StubEvaluator({"Work": 3}), plugins=(Broken(),))
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.SCALING_VETOED}
    assert w.puts("a") == w.puts("b") == []
    vetoes = [e for e in w.events.events("a/job-a") if e.reason is Reason.SCALING_VETOED]
    assert vetoes and "broken" in vetoes[0].message


async def test_a_rejected_put_is_an_error_and_leaves_no_pending_rescale():
    rejected = httpx.Response(
        400,
        json={
            "errors": [
                "org.apache.flink.runtime.rest.handler.RestHandlerException: "
                "Job vertex [x] was not found in the JobGraph."
            ]
        },
    )
    w = World(StubEvaluator({"Work": 3}), faults={"a": {("PUT", r".*/resource-requirements"): rejected}})
    report = await w.tick()
    outcomes = {o.job.name: o for o in report.outcomes}
    assert outcomes["job-a"].outcome is Reason.AUTOSCALER_ERROR and "HTTP 400" in outcomes["job-a"].detail
    assert w.state.load("a/job-a").pending is None and w.state.load("a/job-a").history == ()
    assert outcomes["job-b"].outcome is Reason.SCALING


async def test_a_rescale_flink_never_applies_is_reported_stuck_then_decided_again():
    swallowed = httpx.Response(200, json={})  # Flink accepted the PUT but the job never restarts
    w = World(
        StubEvaluator({"Work": 3}),
        faults={"a": {("PUT", r".*/resource-requirements"): swallowed}},
        confirm_timeout_s=60,
    )
    await w.tick()
    assert w.state.load("a/job-a").pending is not None
    for _ in range(5):
        report = await w.tick()
        assert report.for_job("job-a").outcome is Reason.RESCALE_IN_FLIGHT
    await w.tick(seconds=20)
    assert Reason.RESCALE_STUCK in w.events.reasons("a/job-a")
    assert len(w.puts("a")) == 2  # decided again once the stuck rescale was given up


async def test_confirmation_records_the_restart_and_the_realizer_is_idempotent():
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()
    for _ in range(3):
        await w.tick()
    state = w.state.load("b/job-b")
    assert state.pending is None and state.history[-1].confirmed_ms is not None
    assert Reason.SCALING_CONFIRMED in w.events.reasons("b/job-b")
    assert w.sims["b"].parallelism(w.jobs["b"])["Work"] == 3
    assert len(w.puts("b")) == 1  # the recommendation is met: nothing is sent again


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


def _registry() -> PluginInstances:
    ep = metadata.EntryPoint("cpu-gate", "flink_autoscaler_cpu_gate:CpuGatePlugin", ENTRY_POINT_GROUP)
    return PluginInstances(PluginRegistry([DiscoveredPlugin("cpu-gate", ep.value, "test", ep)]))


def _gate(threshold: str) -> dict[str, str]:
    return {
        **OPTIONS,
        "job.autoscaler.scaling.custom-executors": "gate",
        "job.autoscaler.scaling.custom-executor.gate.class": "cpu-gate",
        "job.autoscaler.scaling.custom-executor.gate.threshold": threshold,
    }


async def test_configured_cpu_gate_vetoes_with_an_event_and_a_counter():
    w = World(StubEvaluator({"Source: BacklogSource": 2}), plugins=_registry(), options=_gate("1.01"))
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.SCALING_VETOED}
    assert w.puts("a") == []
    vetoes = [e for e in w.events.events("a/job-a") if e.reason is Reason.SCALING_VETOED]
    assert [e.key for e in vetoes] == ["ScalingVetoed:gate"]
    assert (
        w.metrics.registry.get_sample_value(
            "flink_autoscaler_plugin_outcomes_total",
            {"cluster": "a", "job": "job-a", "plugin": "gate", "outcome": "ScalingVetoed"},
        )
        == 1
    )


async def test_configured_cpu_gate_approves_and_aligns_every_vertex_to_the_source():
    w = World(StubEvaluator({"Source: BacklogSource": 2}), plugins=_registry(), options=_gate("0"))
    await w.tick()
    for _ in range(3):
        await w.tick()
    assert set(w.sims["a"].parallelism(w.jobs["a"]).values()) == {2}
    assert Reason.SCALING_MODIFIED in w.events.reasons("a/job-a")


async def test_a_configured_plugin_that_is_not_installed_vetoes():
    options = {**_gate("0"), "job.autoscaler.scaling.custom-executor.gate.class": "no.such.Plugin"}
    w = World(StubEvaluator({"Work": 3}), plugins=_registry(), options=options)
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.SCALING_VETOED}
    assert w.puts("a") == w.puts("b") == []
    failed = [e for e in w.events.events("a/job-a") if e.reason is Reason.PLUGIN_FAILED]
    assert failed and "no executor plugin 'no.such.Plugin' is installed" in failed[0].message


async def test_cpu_quota_from_taskmanager_resources_blocks_with_a_warning():
    # The simulated TaskManager has 8 slots; Work at 9 needs a second TaskManager, over quota.cpu.
    options = {**OPTIONS, "job.autoscaler.quota.cpu": "1"}
    w = World(StubEvaluator({"Work": 9}), options=options)
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.RESOURCE_QUOTA_REACHED}
    assert w.puts("a") == w.puts("b") == []
    (event,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.RESOURCE_QUOTA_REACHED]
    assert "quota.cpu" in event.message and str(event.type) == "Warning"


async def test_excluded_period_reports_the_recommendation_and_applies_nothing():
    options = {**OPTIONS, "job.autoscaler.excluded.periods": "* * * * * ?"}  # every second of every day
    w = World(StubEvaluator({"Work": 3}), options=options)
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.EXCLUDED_PERIOD}
    assert w.puts("a") == []
    assert Reason.SCALING_REPORT in w.events.reasons("a/job-a")


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


async def test_an_ineffective_scale_up_is_reported_once_per_interval():
    w = World(StubEvaluator(ineffective=["Work"]))
    await w.tick()
    await w.tick()
    events = [e for e in w.events.events("a/job-a") if e.reason is Reason.INEFFECTIVE_SCALING]
    assert len(events) == 1 and "Work" in events[0].message  # the second is deduplicated within 30 min


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
    assert "expected parallelism: 6, actual parallelism 1" in event.message
    assert "adjust.mode=EVENLY_SPREAD" in event.message


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
    early = await w.daemon.run_tick(only_job="a/job-a")
    assert [o.outcome for o in early.outcomes] == [Reason.COOLDOWN_DEFERRED]
    w.clock.advance(1)
    on_time = await w.daemon.run_tick(only_job="a/job-a")
    assert [(o.job.name, o.outcome) for o in on_time.outcomes] == [("job-a", Reason.SCALING)]
    assert len(w.puts("a")) == 1 and w.puts("b") == []  # the one-job tick touched only its job


async def test_flinks_own_cooldown_from_jobmanager_config_defers_decisions():
    w = World(StubEvaluator({"Work": 3}), flink_cooldown_s=30)
    outcome = (await w.tick()).for_job("job-a")
    assert (
        outcome.outcome is Reason.COOLDOWN_DEFERRED
        and "Flink's adaptive-scheduler cooldown" in outcome.detail
    )
    assert w.daemon.retries["a/job-a"] == outcome.decision.evaluation.sample.running_since_ms + 30_000
    assert w.puts("a") == []


async def test_serve_schedules_the_retry_as_a_date_trigger():
    from apscheduler.triggers.date import DateTrigger

    w = World(StubEvaluator({"Work": 3}), options={**OPTIONS, "job.autoscaler.scaling-interval.min": "1 h"})
    w.daemon.settings = w.daemon.settings.model_copy(update={"control_loop_interval": timedelta(hours=1)})
    stop = asyncio.Event()
    served = asyncio.create_task(w.daemon.serve(stop))
    while "a/job-a" not in w.daemon.retries:
        await asyncio.sleep(0.01)
    job = w.daemon._scheduler.get_job("retry:a/job-a")
    assert job is not None and isinstance(job.trigger, DateTrigger)
    stop.set()
    await asyncio.wait_for(served, timeout=10)
    await w.daemon.aclose()


async def test_plugins_receive_the_jobs_context_and_their_own_prefix_stripped_config():
    seen = []

    class Recorder(ScalingExecutorPlugin):
        def apply(self, context, changes):
            seen.append((self.name, context, dict(changes)))
            return changes

    class InProcess:  # stands in for an entry point: the plugin class is defined right here
        @staticmethod
        def load():
            return Recorder

    plugin = DiscoveredPlugin("recorder", "tests:Recorder", "test", InProcess())
    options = {
        **OPTIONS,
        "job.autoscaler.scaling.custom-executors": "rec",
        "job.autoscaler.scaling.custom-executor.rec.class": "recorder",
        "job.autoscaler.scaling.custom-executor.rec.budget": "7",
    }
    w = World(StubEvaluator({"Work": 3}), plugins=PluginInstances(PluginRegistry([plugin])), options=options)
    await w.tick()
    by_job = {ctx.job.name: (name, ctx, changes) for name, ctx, changes in seen}
    name, ctx, changes = by_job["job-a"]
    work = w.sims["a"].vertex_ids(w.jobs["a"])["Work"]
    assert name == "rec" and ctx.config == {"budget": "7"}
    assert ctx.job.key == "a/job-a" and ctx.options.custom_executors == ("rec",)
    assert set(ctx.evaluation.vertices) == set(w.sims["a"].vertex_ids(w.jobs["a"]).values())
    assert [(c.current, c.target) for c in changes.values()] == [(1, 3)] and work in changes
    assert ctx.client is not None and await ctx.client.overview()  # a live client for the job's cluster


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
    assert [p.ts_ms for p in past] == [t.now_ms for t in ticks]
    assert all(0 < p.custom_job_metrics[HEAP_USAGE_RATIO] < 1 for p in past)
    assert past[-1].custom_job_metrics[HEAP_USAGE_RATIO] == measured[ticks[-1].now_ms]


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
