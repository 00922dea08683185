"""Per-cluster work (``autoscaler.cluster``): a cluster that fails stays with that cluster, a job with
bad metrics stays with that job, and Flink's own cooldown is read from the cluster.
"""

from __future__ import annotations

import httpx
import pytest
from daemon_world import World

from autoscaler.flink.jobmanager_config import FLINK_DEFAULT_COOLDOWN_MS as DEFAULT
from autoscaler.flink.jobmanager_config import flink_cooldown_ms
from autoscaler.reasons import Reason
from autoscaler.testing import StubEvaluator


async def test_a_cluster_answering_500_is_counted_and_the_other_cluster_scales():
    w = World(StubEvaluator({"Work": 3}), faults={"a": {("GET", "/jobs/overview"): _flink_500()}})
    report = await w.tick()
    assert "HTTP 500" in report.cluster_errors["a"] and "boom" in report.cluster_errors["a"]
    # The cluster's error, not ours: alerts on AutoscalerError (a bug) stay quiet.
    assert (
        w.error_count("a", Reason.CLUSTER_ERROR) == 1 and w.error_count("a", Reason.AUTOSCALER_ERROR) is None
    )
    assert [o.job.name for o in report.outcomes] == ["job-b"] and report.outcomes[0].outcome is Reason.SCALING
    assert w.puts("a") == [] and len(w.puts("b")) == 1


async def test_a_cluster_that_cannot_be_listed_reports_each_of_its_known_jobs_unavailable():
    """Fault probe (issue 12): during an outage, ``status`` showed the job's last decision as if all
    were well. Each job of the last discovery now gets the outcome, so its records say since when."""
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()
    before = w.state.load("a/job-a")
    w.transports["a"].faults[("GET", "/jobs/overview")] = _flink_500()
    report = await w.tick()
    (outage,) = [o for o in report.outcomes if o.job.cluster == "a"]
    assert outage.job.name == "job-a" and outage.outcome is Reason.CLUSTER_ERROR
    assert "could not be read this tick" in outage.detail and "HTTP 500" in outage.detail
    assert w.error_count("a", Reason.CLUSTER_ERROR) == 1  # once per job, not once more for the cluster
    assert w.state.load("a/job-a") == before and w.puts("a")[1:] == []

    w.transports["a"].faults[("GET", "/jobs/overview")] = httpx.ConnectError("connection refused")
    report = await w.tick()
    assert [o.outcome for o in report.outcomes if o.job.cluster == "a"] == [Reason.CLUSTER_UNREACHABLE]


def _flink_500() -> httpx.Response:
    return httpx.Response(500, json={"errors": ["java.lang.IllegalStateException: boom\n\tat x.y(Z.java:1)"]})


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


async def test_flinks_own_cooldown_from_jobmanager_config_defers_decisions():
    w = World(StubEvaluator({"Work": 3}), flink_cooldown_s=30)
    outcome = (await w.tick()).for_job("job-a")
    assert (
        outcome.outcome is Reason.COOLDOWN_DEFERRED
        and "Flink's adaptive-scheduler cooldown" in outcome.detail
    )
    assert w.daemon.retries["a/job-a"] == outcome.decision.evaluation.sample.running_since_ms + 30_000
    assert w.puts("a") == []


@pytest.mark.parametrize(
    ("config", "expected_ms"),
    [
        ({"jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "45 s"}, 45_000),
        ({"jobmanager.adaptive-scheduler.scaling-interval.min": "2 min"}, 120_000),  # Flink < 2.0
        (
            {
                "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "10 s",
                "jobmanager.adaptive-scheduler.scaling-interval.min": "2 min",
            },
            10_000,  # the current key wins over the deprecated one
        ),
        ({"jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "soon"}, DEFAULT),
        ({}, DEFAULT),
    ],
)
def test_flinks_cooldown_is_read_from_its_keys_and_defaults_when_unset_or_unparsable(config, expected_ms):
    assert flink_cooldown_ms(config) == expected_ms
