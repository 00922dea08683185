"""discover(): which jobs to autoscale, with which options."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx
from flink_samples import load_fixture

from autoscaler.discover import Discovery, discover
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError, FlinkUnreachable
from autoscaler.model import JobRef
from autoscaler.settings import AutoscalerOptions, ClusterSettings

BASE = "http://jm:8081"
JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
CLUSTER = ClusterSettings(name="prod", rest_url=BASE)
ENABLED = AutoscalerOptions(enabled=True)


@pytest.fixture
def flink() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[FlinkClient]:
    async with FlinkClient(BASE, cluster="prod") as c:
        yield c


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
    assert found.not_running == (ref("d" * 32, "deploying"),)
    assert not other.called  # batch, restarting, finished and not-yet-running jobs need no configuration


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


async def test_failed_job_configuration_fetch_skips_only_that_job(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    flink.get("/jobs/overview").respond(
        json={"jobs": [overview_job("a" * 32, "ok"), overview_job("b" * 32, "bad")]}
    )
    flink.get(f"/jobs/{'a' * 32}/jobmanager/config").respond(json=[])
    flink.get(f"/jobs/{'b' * 32}/jobmanager/config").respond(500, json={"errors": ["Internal server error."]})
    found = await discover(client, CLUSTER, ENABLED)
    assert [t.job.name for t in found.targets] == ["ok"]
    [(bad, message)] = found.invalid
    assert bad.name == "bad"
    assert "HTTP 500: Internal server error." in message and "'prod'" in message


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
