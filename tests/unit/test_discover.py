"""discover(): which jobs to autoscale, with which options; and, in a daemon tick, how a job whose
configuration cannot be read is reported (unavailable this tick, not invalid options)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
from collect_flink import BASE
from daemon_world import World
from flink_samples import load_fixture

from autoscaler.discover import Discovery, discover
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError, FlinkUnreachable
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions, ClusterSettings
from autoscaler.testing import StubEvaluator
from autoscaler.tick.steps import JobOutcome

pytest_plugins = ("collect_flink",)  # its client fixture, on BASE

JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
CLUSTER = ClusterSettings(name="prod", rest_url=BASE)
ENABLED = AutoscalerOptions(enabled=True)


@pytest.fixture
def flink() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        # Every job's global job parameters (/jobs/:id/config): none, as recorded, unless a test says.
        router.get(url__regex=r".*/jobs/[0-9a-f]{32}/config$", name="execution_config").respond(
            json=load_fixture("job_config.json")
        )
        yield router


def overview_job(jid: str, name: str, **changes: Any) -> dict[str, Any]:
    """The recorded /jobs/overview entry, as another job."""
    job = copy.deepcopy(load_fixture("jobs_overview.json")["jobs"][0])
    job.update(jid=jid, name=name, **changes)
    return job


def job_conf(extra: dict[str, str]) -> list[dict[str, str]]:
    """The recorded configuration plus the job's own keys, as /jobs/:id/jobmanager/config lists them."""
    return load_fixture("jobmanager_config.json") + [{"key": k, "value": v} for k, v in extra.items()]


def ref(jid: str, name: str) -> JobRef:
    return JobRef(cluster="prod", job_id=jid, name=name)


async def test_a_jobs_configuration_is_read_once_per_jobid_and_dropped_when_it_stops(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    """Issue 13: discovery read every job's configuration on every tick; a running job's cannot change."""
    other = "c" * 32
    overview = flink.get("/jobs/overview").respond(
        json={"jobs": [overview_job(JID, "a"), overview_job(other, "b")]}
    )
    conf_a = flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=job_conf({}))
    conf_b = flink.get(f"/jobs/{other}/jobmanager/config").respond(json=job_conf({}))
    configs: dict[str, Any] = {}
    for _ in range(3):
        found = await discover(client, CLUSTER, ENABLED, configs)
        assert [t.job.name for t in found.targets] == ["a", "b"]
    assert (conf_a.call_count, conf_b.call_count) == (1, 1)
    overview.respond(json={"jobs": [overview_job(JID, "a")]})  # b stopped: its configuration goes
    await discover(client, CLUSTER, ENABLED, configs)
    assert set(configs) == {JID}


async def test_the_recorded_job_is_a_target(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/jobs/overview").respond(json=load_fixture("jobs_overview.json"))
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=load_fixture("jobmanager_config.json"))
    found = await discover(client, CLUSTER, ENABLED)
    assert isinstance(found, Discovery)
    assert (found.cluster, found.not_running, found.disabled, found.invalid) == ("prod", (), (), ())
    [target] = found.targets
    assert target.job == ref(JID, "autoscaler-load-job")
    assert target.job.key == "prod/autoscaler-load-job"
    assert target.state == "RUNNING"
    assert target.options == ENABLED  # the recorded configuration holds no job.autoscaler.* keys


async def test_sorts_jobs_into_targets_disabled_invalid_and_not_running(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    deploying = {"running": 2, "deploying": 1, "total": 3}
    jobs = [
        overview_job("a" * 32, "tuned"),
        overview_job("b" * 32, "broken"),
        overview_job("c" * 32, "off"),
        overview_job(
            "d" * 32,
            "deploying",
            tasks={**load_fixture("jobs_overview.json")["jobs"][0]["tasks"], **deploying},
        ),
        overview_job("e" * 32, "batch", jobType="BATCH"),
        overview_job("f" * 32, "restarting", state="RESTARTING"),
        overview_job("0" * 32, "finished", state="FINISHED"),
    ]
    flink.get("/jobs/overview").respond(json={"jobs": jobs})
    flink.get(f"/jobs/{'a' * 32}/jobmanager/config").respond(
        json=job_conf({"job.autoscaler.utilization.target": "0.5", "job.autoscaler.metrics.window": "5m"})
    )
    flink.get(f"/jobs/{'b' * 32}/jobmanager/config").respond(
        json=job_conf({"job.autoscaler.utilization.target": "7"})
    )
    flink.get(f"/jobs/{'c' * 32}/jobmanager/config").respond(
        json=job_conf({"job.autoscaler.enabled": "false"})
    )
    other = flink.get(url__regex=r".*/jobs/[d-f0]{32}/jobmanager/config").respond(json=[])

    found = await discover(client, CLUSTER, ENABLED)

    [tuned] = found.targets
    assert tuned.job == ref("a" * 32, "tuned")
    assert tuned.options.utilization_target == 0.5
    assert tuned.options.metrics_window.total_seconds() == 300
    assert tuned.options.enabled
    [(broken, message)] = found.invalid
    assert broken == ref("b" * 32, "broken")
    assert "job.autoscaler.utilization.target" in message
    assert "job broken" in message
    assert found.disabled == (ref("c" * 32, "off"),)
    # there, not measurable: a restarting job (same JobID after) and a half-deployed one; not finished
    assert found.not_running == (ref("f" * 32, "restarting"), ref("d" * 32, "deploying"))
    assert not other.called  # batch, restarting, finished and not-yet-running jobs need no configuration


async def test_a_restarting_job_keeps_its_configuration_and_a_running_namesake_its_key(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    overview = flink.get("/jobs/overview").respond(json={"jobs": [overview_job(JID, "a")]})
    conf = flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=job_conf({}))
    configs: dict[str, Any] = {}
    await discover(client, CLUSTER, ENABLED, configs)
    overview.respond(json={"jobs": [overview_job(JID, "a", state="RESTARTING")]})
    found = await discover(client, CLUSTER, ENABLED, configs)
    assert found.not_running == (ref(JID, "a"),) and set(configs) == {JID}
    overview.respond(json={"jobs": [overview_job(JID, "a")]})
    assert [t.job for t in (await discover(client, CLUSTER, ENABLED, configs)).targets] == [ref(JID, "a")]
    assert conf.call_count == 1  # not read again after the restart

    # A redeploy: the old run fails over while the new one (another JobID, the same name) runs.
    new = "e" * 32
    flink.get(f"/jobs/{new}/jobmanager/config").respond(json=job_conf({}))
    overview.respond(json={"jobs": [overview_job(JID, "a", state="FAILING"), overview_job(new, "a")]})
    found = await discover(client, CLUSTER, ENABLED, configs)
    assert [t.job for t in found.targets] == [ref(new, "a")] and found.not_running == ()
    assert found.invalid == ()


async def test_cluster_options_apply_under_the_job_configuration(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    cluster = ClusterSettings(
        name="prod",
        rest_url=BASE,
        autoscaler={"job.autoscaler.enabled": "true", "job.autoscaler.utilization.target": "0.6"},
    )
    flink.get("/jobs/overview").respond(
        json={"jobs": [overview_job("a" * 32, "x"), overview_job("b" * 32, "y")]}
    )
    flink.get(f"/jobs/{'a' * 32}/jobmanager/config").respond(json=[])
    flink.get(f"/jobs/{'b' * 32}/jobmanager/config").respond(
        json=[{"key": "job.autoscaler.utilization.target", "value": "0.8"}]
    )
    found = await discover(client, cluster, AutoscalerOptions())
    assert [(t.job.name, t.options.utilization_target) for t in found.targets] == [("x", 0.6), ("y", 0.8)]


async def test_disabled_job_with_otherwise_invalid_keys_is_just_disabled(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    flink.get("/jobs/overview").respond(json=load_fixture("jobs_overview.json"))
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(
        json=job_conf({"job.autoscaler.enabled": "false", "job.autoscaler.utilization.target": "7"})
    )
    found = await discover(client, CLUSTER, ENABLED)
    assert found.disabled == (ref(JID, "autoscaler-load-job"),)
    assert found.invalid == () and found.targets == ()


async def test_default_options_leave_jobs_disabled(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/jobs/overview").respond(json=load_fixture("jobs_overview.json"))
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=load_fixture("jobmanager_config.json"))
    found = await discover(client, CLUSTER, AutoscalerOptions())
    assert found.disabled == (ref(JID, "autoscaler-load-job"),)


async def test_job_configuration_404_means_cluster_options(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    flink.get("/jobs/overview").respond(json=load_fixture("jobs_overview.json"))
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(404, json={"errors": ["Not found"]})
    found = await discover(client, CLUSTER, ENABLED)
    assert [t.options for t in found.targets] == [ENABLED]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (httpx.Response(500, json={"errors": ["Internal server error."]}), Reason.CLUSTER_ERROR),
        (httpx.Response(200, json={"key": "not a list"}), Reason.CLUSTER_ERROR),  # bad payload
        (httpx.ConnectError("refused"), Reason.CLUSTER_UNREACHABLE),
    ],
)
async def test_failed_job_configuration_fetch_skips_only_that_job_as_unreadable_not_invalid(
    flink: respx.MockRouter, client: FlinkClient, fault: httpx.Response | Exception, reason: Reason
) -> None:
    """Fault probe (issue 12): a 500 on the job's configuration was reported as invalid options."""
    flink.get("/jobs/overview").respond(
        json={"jobs": [overview_job("a" * 32, "ok"), overview_job("b" * 32, "bad")]}
    )
    flink.get(f"/jobs/{'a' * 32}/jobmanager/config").respond(json=[])
    route = flink.get(f"/jobs/{'b' * 32}/jobmanager/config")
    if isinstance(fault, Exception):
        route.mock(side_effect=fault)
    else:
        route.mock(return_value=fault)
    found = await discover(client, CLUSTER, ENABLED)
    assert [t.job.name for t in found.targets] == ["ok"]
    assert found.invalid == ()  # not an options problem
    [bad] = found.unreadable
    assert bad.job.name == "bad" and bad.reason is reason
    assert bad.detail.startswith("cannot read the job's configuration this tick, not scaling it: cluster")


async def test_jobs_sharing_a_name_are_invalid(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/jobs/overview").respond(
        json={"jobs": [overview_job("a" * 32, "twin"), overview_job("b" * 32, "twin")]}
    )
    found = await discover(client, CLUSTER, ENABLED)
    assert found.targets == ()
    assert [j.job_id for j, _ in found.invalid] == ["a" * 32, "b" * 32]
    assert "2 running jobs are named 'twin'" in found.invalid[0][1]


async def test_job_type_missing_counts_as_streaming(flink: respx.MockRouter, client: FlinkClient) -> None:
    job = overview_job(JID, "old-flink")
    del job["jobType"]
    flink.get("/jobs/overview").respond(json={"jobs": [job]})
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=[])
    assert [t.job.name for t in (await discover(client, CLUSTER, ENABLED)).targets] == ["old-flink"]


async def test_failing_overview_raises(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/jobs/overview").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(FlinkUnreachable):
        await discover(client, CLUSTER, ENABLED)
    flink.get("/jobs/overview").respond(503, json={"errors": ["Service temporarily unavailable"]})
    with pytest.raises(FlinkHTTPError):
        await discover(client, CLUSTER, ENABLED)


# ------------------------------------------------------------------------------ in a daemon tick
async def test_a_tick_that_sees_a_job_restarting_keeps_its_stored_window_series_and_state():
    """A CI failure (2026-11-27): a daemon restarted after a rescale restored no stored window. The
    tick before the kill had seen the job RESTARTING (the rescale itself), taken it as gone, and
    deleted its stored window rows, its evaluator window and its series. Restarting is not leaving."""
    w = World(StubEvaluator({"Work": 3}))
    await w.tick()  # Work 1 -> 3: the PUT; the simulator restarts the job (2 s)
    stored = w.state.load_window("a/job-a")
    assert stored and w.transports["a"].requests
    w.clock.advance(0.5)
    await w.daemon.run_tick()  # the job is RESTARTING in /jobs/overview
    assert w.state.load_window("a/job-a") == stored  # nothing trimmed, nothing added
    assert "a/job-a" not in w.evaluator.forgotten
    assert w.metrics.known_jobs() >= {"a/job-a", "b/job-b"}
    await w.tick()  # running again at the new parallelism
    assert len({r.ts_ms for r in w.state.load_window("a/job-a")}) == len({r.ts_ms for r in stored}) + 1
    assert "a/job-a" not in w.evaluator.forgotten


async def test_a_500_on_a_jobs_configuration_is_the_job_unread_this_tick_not_invalid_options():
    """Fault probe (issue 12): a 500 on ``/jobs/:id/jobmanager/config`` was reported as an AutoScaler
    Options Validation event. It is the job not read this tick: a ClusterError outcome and counter, the
    REST error metric, no options event, no scaling; the job keeps its state and is not forgotten."""
    w = World(StubEvaluator({"Work": 3}))
    outcomes: list[JobOutcome] = []
    w.daemon.on_outcome = outcomes.append
    await w.tick()  # both jobs scale Work 1 -> 3
    before = w.state.load("a/job-a")
    w.transports["a"].faults[("GET", r"/jobs/[0-9a-f]+/jobmanager/config")] = httpx.Response(
        500, json={"errors": ["java.lang.IllegalStateException: boom\n\tat x.y(Z.java:1)"]}
    )
    w.daemon.clusters["a"].job_configs.clear()  # as after a restart: a configuration is read once per JobID
    outcomes.clear()

    report = await w.tick()

    [unread] = [o for o in outcomes if o.job.name == "job-a"]
    assert unread.outcome is Reason.CLUSTER_ERROR
    assert unread.detail.startswith("cannot read the job's configuration this tick, not scaling it:")
    assert "HTTP 500" in unread.detail and "/jobmanager/config" in unread.detail
    assert Reason.OPTIONS_VALIDATION not in w.events.reasons("a/job-a")
    assert w.error_count("a", Reason.OPTIONS_VALIDATION) is None
    assert w.error_count("a", Reason.CLUSTER_ERROR) == 1
    rest_errors = w.metrics.registry.get_sample_value(
        "flink_autoscaler_rest_errors_total",
        {"cluster": "a", "method": "GET", "endpoint": "/jobs/:jobid/jobmanager/config", "error": "500"},
    )
    assert rest_errors == 1
    assert len(w.puts("a")) == 1  # the first tick's rescale only
    assert w.state.load("a/job-a") == before and "a/job-a" not in w.evaluator.forgotten
    assert report.cluster_errors == {} and report.for_job("job-b") is not None  # the other job goes on


def execution_config(user_config: dict[str, str]) -> dict[str, Any]:
    """The recorded /jobs/:id/config with these global job parameters."""
    answer = copy.deepcopy(load_fixture("job_config.json"))
    answer["execution-config"]["user-config"] = user_config
    return answer


async def test_a_session_clusters_job_carries_its_options_in_its_global_job_parameters(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    """In a session cluster /jobs/:id/jobmanager/config is the cluster's configuration (the e2e cluster
    shows none of a job's submitted options there); the job's global job parameters are its own."""
    flink.get("/jobs/overview").respond(json={"jobs": [overview_job(JID, "a")]})
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(
        json=job_conf({"job.autoscaler.enabled": "false", "job.autoscaler.scaling.slot-priority": "1"})
    )
    flink.routes["execution_config"].respond(
        json=execution_config(
            {
                "job.autoscaler.enabled": "true",
                "job.autoscaler.scaling.slot-priority": "10",
                "some.user.parameter": "x",  # not ours: ignored
            }
        )
    )
    found = await discover(client, CLUSTER, AutoscalerOptions(), {})
    (target,) = found.targets
    assert target.options.enabled and target.options.slot_priority == 10


async def test_a_job_without_an_execution_config_keeps_its_jobmanager_configuration(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    flink.get("/jobs/overview").respond(json={"jobs": [overview_job(JID, "a")]})
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(json=job_conf({"job.autoscaler.enabled": "true"}))
    flink.routes["execution_config"].respond(404, json={"errors": ["Not found"]})
    (target,) = (await discover(client, CLUSTER, AutoscalerOptions(), {})).targets
    assert target.options.enabled and target.options.slot_priority == 0
