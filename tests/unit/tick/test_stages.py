"""The per-job stages (``autoscaler.tick``) in a real tick: the executor plugins approve, modify or veto;
the gates that hold a rescale back say so; realizing is idempotent, confirmed, and given up when stuck.
"""

from __future__ import annotations

import importlib.metadata as metadata
import math
from dataclasses import replace
from datetime import timedelta

import httpx
from daemon_world import OPTIONS, World
from told import told

from autoscaler.cluster import Collected
from autoscaler.evaluate.stage import Evaluated
from autoscaler.explain import explain, record_from_outcome
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef, JobSample, TaskManagerSample
from autoscaler.plugins import ScalingExecutorPlugin
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.loader import ENTRY_POINT_GROUP, DiscoveredPlugin, PluginRegistry
from autoscaler.reasons import Reason
from autoscaler.state import JobState
from autoscaler.state.tick import Loaded
from autoscaler.testing import StubEvaluator, make_evaluation, make_sample, make_topology, vertex_eval
from autoscaler.tick.decide import decide_jobs
from autoscaler.tick.slots import claim_slots
from autoscaler.tick.steps import JobStep


async def test_a_raising_plugin_vetoes_and_nothing_is_put():
    class Broken(ScalingExecutorPlugin):
        name = "broken"

        def apply(self, context, changes):
            raise KeyError("bug in plugin")

    w = World(StubEvaluator({"Work": 3}), plugins=(Broken(),))
    report = await w.tick()
    # A broken plugin, not a deliberate veto: the job's outcome says so (an alert on it fires).
    assert {o.outcome for o in report.outcomes} == {Reason.PLUGIN_FAILED}
    assert w.puts("a") == w.puts("b") == []
    vetoes = [e for e in w.events.events("a/job-a") if e.reason is Reason.SCALING_VETOED]
    assert vetoes and "broken" in vetoes[0].message


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
    assert {o.outcome for o in report.outcomes} == {Reason.PLUGIN_FAILED}
    assert w.puts("a") == w.puts("b") == []
    failed = [e for e in w.events.events("a/job-a") if e.reason is Reason.PLUGIN_FAILED]
    assert failed and "no executor plugin 'no.such.Plugin' is installed" in failed[0].message


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


async def test_a_rejected_put_is_reported_leaves_no_pending_rescale_and_backs_off():
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
    # Flink's refusal, not our bug (an alert on AutoscalerError stays quiet): RescaleRejected, its words
    refused = outcomes["job-a"]
    assert refused.outcome is Reason.RESCALE_REJECTED
    assert "HTTP 400" in refused.detail and "Job vertex [x] was not found" in refused.detail
    state = w.state.load("a/job-a")
    assert state.pending is None and state.history == () and state.refused_rescales == 1
    assert outcomes["job-b"].outcome is Reason.SCALING
    (event,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.RESCALE_REJECTED]
    assert str(event.type) == "Warning" and "the next rescale not before 5 s from now" in event.message
    labels = {"cluster": "a", "job": "job-a"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_rescales_rejected_total", labels) == 1
    # The next tick asks again (a refusal may pass); then each refusal in a row doubles the wait, in
    # control intervals (10 s): not a refused PUT every tick.
    puts_per_tick = []
    for _ in range(8):
        before = len(w.puts("a"))
        report = await w.tick()
        puts_per_tick.append(len(w.puts("a")) - before)
    assert puts_per_tick == [1, 0, 1, 0, 0, 0, 1, 0]
    assert w.state.load("a/job-a").refused_rescales == 4
    waiting = report.for_job("job-a")
    assert waiting.outcome is Reason.RESCALE_REJECTED and "refused the last 4 rescale(s)" in waiting.detail
    gates = {g.gate: g.verdict for g in record_from_outcome(waiting).gates}
    assert gates["refused rescale"] == "blocked"


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
    report = await w.tick(seconds=20)
    assert Reason.RESCALE_STUCK in w.events.reasons("a/job-a")
    # Issue 12: not a PUT every confirm_timeout for ever. The next waits confirm_timeout (60 s), then
    # twice that after a second stuck one; the state counts them and a counter says so.
    assert report.for_job("job-a").outcome is Reason.RESCALE_STUCK and len(w.puts("a")) == 1
    assert w.state.load("a/job-a").stuck_rescales == 1
    await w.tick(seconds=40)
    assert report.for_job("job-a").outcome is Reason.RESCALE_STUCK and len(w.puts("a")) == 1
    await w.tick(seconds=25)
    assert len(w.puts("a")) == 2  # decided again once the backoff has run
    for _ in range(7):
        await w.tick(seconds=10)
    assert w.state.load("a/job-a").stuck_rescales == 2
    for _ in range(10):
        await w.tick(seconds=10)
    assert len(w.puts("a")) == 2  # 100 s into a 120 s backoff
    await w.tick(seconds=30)
    assert len(w.puts("a")) == 3


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


async def test_a_job_that_fails_in_a_stage_ends_there_and_the_others_go_on():
    ok = make_evaluation([vertex_eval("w", 1)], job=JobRef("c", "1" * 32, "ok"))
    broken = make_sample(make_topology({"w": 1}), job=JobRef("c", "2" * 32, "broken"))
    loaded = Loaded(states={ok.job.key: JobState()})  # no state for "broken": its stage raises
    steps = await decide_jobs(
        [ok.sample, broken],
        loaded,
        Evaluated({ok.job.key: ok}),
        0,
        flink_cooldown_ms={"c": 0},
        confirm_timeout=timedelta(minutes=5),
    )
    rec = told(steps)
    assert [s.outcome.outcome for s in steps] == [Reason.IN_BAND, Reason.AUTOSCALER_ERROR]
    assert [e.reason for e, _ in rec.events] == [Reason.AUTOSCALER_ERROR]
    assert set(rec.states) == {ok.job.key}


async def test_without_an_evaluation_a_job_is_an_error_with_the_evaluators_reason_and_keeps_its_state():
    sample = make_sample(make_topology({"w": 1}))
    (step,) = await decide_jobs(
        [sample],
        Loaded(states={sample.job.key: JobState(last_rescale_ms=7)}),
        Evaluated(error="evaluation failed: Py4JError: the JVM is gone"),
        0,
        flink_cooldown_ms={sample.job.cluster: 0},
        confirm_timeout=timedelta(minutes=5),
    )
    rec = told([step])
    assert step.outcome.outcome is Reason.AUTOSCALER_ERROR and "JVM is gone" in step.outcome.detail
    # Kept, but for the JobID now known (a later JobID is a resubmission).
    assert rec.states == {sample.job.key: JobState(last_rescale_ms=7, job_id=sample.job.job_id)}


async def test_a_rescale_beyond_the_free_slots_is_capped_to_what_fits_with_a_scaling_limited_event():
    # 8 slots per simulated cluster, one slot-sharing group; Work 1 -> 12 needs 12.
    w = World(StubEvaluator({"Work": 12}))
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.SCALING}
    outcome = next(o for o in report.outcomes if o.job.key == "a/job-a")
    assert outcome.realized is not None and max(b.upper for b in outcome.realized.requirements.values()) == 8
    assert outcome.detail.startswith("Work 1->8; needs 12 slots")
    assert "Work 8 (wanted 12)" in outcome.detail  # status and explain show it
    gates = {g.gate: (g.verdict, g.detail) for g in record_from_outcome(outcome).gates}
    assert gates["free slots"] == ("passed", "capped to what fits the free slots and the job's own")
    (event,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.SCALING_LIMITED]
    assert "needs 12 slots, the job holds 1 and 7 are free (4 short)" in event.message
    assert "Work 8 (wanted 12)" in event.message and str(event.type) == "Warning"
    labels = {"cluster": "a", "job": "job-a", "action": "capped", "why": "short"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_slot_limited_rescales_total", labels) == 1
    gauge = w.metrics.registry.get_sample_value
    assert gauge("flink_autoscaler_cluster_slots", {"cluster": "a", "state": "total"}) == 8
    assert gauge("flink_autoscaler_cluster_slots", {"cluster": "a", "state": "free"}) == 7
    assert gauge("flink_autoscaler_job_slots", {"cluster": "a", "job": "job-a"}) == 1


def test_unknown_slots_read_nan_on_the_cluster_gauges_not_the_last_figure():
    metrics = MetricsReporter()
    sample = make_sample(make_topology({"w": 2}), job=JobRef("c", "1" * 32, "job"))
    known = replace(sample, taskmanagers=TaskManagerSample(slots_total=8, slots_free=3))
    gauge = metrics.registry.get_sample_value

    def tick(s: JobSample) -> None:
        claimed = claim_slots([JobStep(s)], 0)
        told(claimed.steps, collected=Collected(samples=(s,)), slots=claimed.slots, metrics=metrics)

    tick(known)
    assert gauge("flink_autoscaler_cluster_slots", {"cluster": "c", "state": "free"}) == 3
    tick(sample)  # the next tick could not list the TaskManagers
    assert math.isnan(gauge("flink_autoscaler_cluster_slots", {"cluster": "c", "state": "free"}))
    assert math.isnan(gauge("flink_autoscaler_cluster_slots", {"cluster": "c", "state": "total"}))
    assert gauge("flink_autoscaler_job_slots", {"cluster": "c", "job": "job"}) == 2


async def test_with_wait_a_rescale_beyond_the_free_slots_is_not_asked_for():
    options = {**OPTIONS, "job.autoscaler.scaling.insufficient-slots": "wait"}
    w = World(StubEvaluator({"Work": 12}), options=options)
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.WAITING_FOR_SLOTS}
    assert w.puts("a") == w.puts("b") == []
    assert any(e.reason is Reason.SCALING_LIMITED for e in w.events.events("a/job-a"))
    labels = {"cluster": "a", "job": "job-a", "action": "waited", "why": "short"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_slot_limited_rescales_total", labels) == 1
    assert (await w.tick()).outcomes[0].outcome is Reason.WAITING_FOR_SLOTS  # and again, until it fits


async def test_with_ignore_the_whole_rescale_is_asked_for_and_flink_runs_what_fits():
    options = {**OPTIONS, "job.autoscaler.scaling.insufficient-slots": "IGNORE"}
    w = World(StubEvaluator({"Work": 12}), options=options)
    report = await w.tick()
    assert {o.outcome for o in report.outcomes} == {Reason.SCALING}
    outcome = next(o for o in report.outcomes if o.job.key == "a/job-a")
    assert outcome.realized is not None and max(b.upper for b in outcome.realized.requirements.values()) == 12
    assert any(e.reason is Reason.SCALING_LIMITED for e in w.events.events("a/job-a"))


async def test_a_job_flink_runs_below_its_request_keeps_the_request_and_is_not_asked_again():
    # IGNORE asks for Work 12 on 8 slots; Flink (the simulator) runs it at 8 and keeps the request.
    options = {**OPTIONS, "job.autoscaler.scaling.insufficient-slots": "IGNORE"}
    w = World(StubEvaluator({"Work": 12}), options=options)
    await w.tick()
    assert len(w.puts("a")) == 1
    outcomes = [o for _ in range(8) for o in (await w.tick()).outcomes if o.job.key == "a/job-a"]
    assert w.sims["a"].parallelism(w.jobs["a"])["Work"] == 8
    assert len(w.puts("a")) == 1  # the request stands: not sent again
    waiting = [o for o in outcomes if o.outcome is Reason.WAITING_FOR_SLOTS]
    assert waiting and "Work at 8 of the 12 asked" in waiting[-1].detail
    gates = {g.gate: g for g in record_from_outcome(waiting[-1]).gates}
    standing = gates["standing request"]
    assert standing.verdict == "blocked" and "8 of the 12" in standing.detail
    assert gates["free slots"].verdict == "not reached"
    text = explain(record_from_outcome(waiting[-1]))
    assert "waiting: too few free slots" in text and "standing request" in text
    assert Reason.RESCALE_STUCK not in {o.outcome for o in outcomes}
    state = w.state.load("a/job-a")
    assert len(state.history) == 1 and state.pending is None  # one rescale on record, none pending
    (limited,) = [e for e in w.events.events("a/job-a") if e.key == "below-request"]  # once
    assert "Work at 8 of the 12 asked" in limited.message
    short = {"cluster": "a", "job": "job-a"}
    assert w.metrics.registry.get_sample_value("flink_autoscaler_job_slots_short_of_request", short) == 4


async def test_a_rescale_comes_with_the_taskmanager_memory_advice():
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()
    (advice,) = [e for e in w.events.events("a/job-a") if e.reason is Reason.CONFIGURATION_RECOMMENDATION]
    assert advice.key == "MemoryTuning" and str(advice.type) == "Normal"
    assert "taskmanager.memory.process.size: " in advice.message
    assert "taskmanager.memory.jvm-metaspace.size: " in advice.message
    assert "a standalone daemon cannot redeploy TaskManagers" in advice.message
    assert "taskmanager.memory.managed.fraction: 0.0\n" in advice.message  # the simulated job uses none


async def test_no_rescale_no_memory_advice():
    w = World(StubEvaluator({}))
    await w.tick()
    assert Reason.CONFIGURATION_RECOMMENDATION not in w.events.reasons("a/job-a")
