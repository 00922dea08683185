"""FlinkClient against the recorded Flink 2.3 answers (respx; no network, no sleeps)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from flink_samples import load_fixture

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkBadPayload, FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import Edge
from autoscaler.settings import ClusterSettings, ConfigError

BASE = "http://jm:8081"
JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
SRC = "e5a72f353fc1e6bbf3bd96a41384998c"
WORK = "674df9b0384c0348e0b9d1034a44c46c"
AGG = "96eed58e350a66c179f06330f5425345"
TM = "127.0.0.1:32853-7063d9"

Call = Callable[[FlinkClient], Awaitable[Any]]


@pytest.fixture
def flink() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[FlinkClient]:
    async with FlinkClient(BASE, cluster="prod", http_transport="httpx", timeout_s=2.5) as c:
        yield c


def serve(flink: respx.MockRouter, path: str, fixture_name: str, method: str = "GET") -> respx.Route:
    return flink.route(method=method, path=path).respond(200, json=load_fixture(fixture_name))


def assert_names_endpoint(err: FlinkError, method: str, endpoint: str) -> None:
    text = str(err)
    assert "'prod'" in text and BASE in text and f"{method} {endpoint}" in text
    assert (err.cluster, err.base_url, err.method, err.endpoint) == ("prod", BASE, method, endpoint)


# --------------------------------------------------------------------------------------------- every fixture
async def test_overview(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, "/overview", "overview.json")
    overview = await client.overview()
    assert (overview.taskmanagers, overview.slots_total, overview.slots_available) == (1, 8, 7)
    assert overview.flink_version == "2.3.0"


async def test_config(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, "/config", "config.json")
    config = await client.config()
    assert (config.refresh_interval_ms, config.flink_version) == (3000, "2.3.0")


async def test_jobs_overview(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, "/jobs/overview", "jobs_overview.json")
    [job] = await client.jobs_overview()
    assert (job.jid, job.name, job.job_type, job.state) == (
        JID,
        "autoscaler-load-job",
        "STREAMING",
        "RUNNING",
    )
    assert job.effective_running


async def test_job_details(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}", "job.json")
    details = await client.job_details(JID)
    topology = details.topology()
    assert [v.name for v in topology] == ["Source: BacklogSource", "Work", "Aggregate -> Sink: Writer"]
    assert topology.inputs(AGG) == (Edge(WORK, AGG, "HASH"),)
    assert topology.inputs(WORK) == (Edge(SRC, WORK, "REBALANCE"),)
    assert details.running_since_ms == 1795246565789
    assert details.vertex_io(AGG).read_records == 110890.0


async def test_job_plan(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/plan", "plan.json")
    plan = await client.job_plan(JID)
    assert plan.jid == JID
    assert plan.edges() == [Edge(SRC, WORK, "REBALANCE"), Edge(WORK, AGG, "HASH")]


async def test_job_execution_config(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/config", "job_config.json")
    config = await client.job_execution_config(JID)
    assert config.job_parallelism == 1
    assert config.restart_strategy == "Cluster level default restart strategy"
    assert config.user_config == {}


async def test_checkpoints(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/checkpoints", "checkpoints.json")
    stats = await client.checkpoints(JID)
    assert (stats.completed, stats.in_progress, stats.failed) == (10, 1, 0)
    assert (stats.latest_completed_id, stats.latest_completed_duration_ms) == (10, 11281)
    assert stats.latest_completed_trigger_ms == 1795246651497


@pytest.mark.parametrize(
    ("vid", "fixture_name", "name"),
    [(SRC, "vertex_src.json", "Source: BacklogSource"), (WORK, "vertex_work.json", "Work")],
)
async def test_vertex_details(
    flink: respx.MockRouter, client: FlinkClient, vid: str, fixture_name: str, name: str
) -> None:
    serve(flink, f"/jobs/{JID}/vertices/{vid}", fixture_name)
    vertex = await client.vertex_details(JID, vid)
    assert (vertex.id, vertex.name, vertex.parallelism, vertex.max_parallelism) == (vid, name, 1, 128)
    [subtask] = vertex.subtasks
    assert (subtask.subtask, subtask.status, subtask.taskmanager_id) == (0, "RUNNING", TM)


async def test_jobmanager_config(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, "/jobmanager/config", "jobmanager_config.json")
    conf = await client.jobmanager_config()
    assert conf["jobmanager.scheduler"] == "adaptive"
    assert conf["taskmanager.numberOfTaskSlots"] == "8"
    assert len(conf) == len(load_fixture("jobmanager_config.json"))


async def test_job_configuration(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/jobmanager/config", "jobmanager_config.json")
    conf = await client.job_configuration(JID)
    assert conf["jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"] == "10s"


async def test_job_configuration_404_is_empty(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get(f"/jobs/{JID}/jobmanager/config").respond(
        404, json={"errors": ["Not found: /jobs/x/jobmanager/config"]}
    )
    assert await client.job_configuration(JID) == {}


async def test_taskmanagers(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, "/taskmanagers", "taskmanagers.json")
    [tm] = await client.taskmanagers()
    assert (tm.id, tm.cpu_cores, tm.slots_number, tm.free_slots) == (TM, 8.0, 8, 7)
    assert tm.total_process_memory == 1610612736


async def test_taskmanager_detail(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = serve(flink, f"/taskmanagers/{TM}", "tm_detail.json")
    tm = await client.taskmanager(TM)
    assert (tm.id, tm.slots_number, tm.cpu_cores, tm.physical_memory) == (TM, 8, 8.0, 25276502016)
    assert route.called


@pytest.mark.parametrize(
    ("call", "path", "fixture_name", "expected_len", "expected_member"),
    [
        (
            lambda c: c.vertex_metric_names(JID, SRC),
            f"/jobs/{JID}/vertices/{SRC}/subtasks/metrics",
            "src_subtask_metric_names.json",
            133,
            "Source__BacklogSource.pendingRecords",
        ),
        (
            lambda c: c.vertex_metric_names(JID, WORK),
            f"/jobs/{JID}/vertices/{WORK}/subtasks/metrics",
            "work_subtask_metric_names.json",
            75,
            "Work.numRecordsInPerSecond",
        ),
        (
            lambda c: c.subtask_metric_names(JID, WORK),
            f"/jobs/{JID}/vertices/{WORK}/metrics",
            "vertex_metrics_names.json",
            75,
            "0.busyTimeMsPerSecond",
        ),
        (
            lambda c: c.job_metric_names(JID),
            f"/jobs/{JID}/metrics",
            "job_metrics_names.json",
            26,
            "numRescales",
        ),
        (
            lambda c: c.taskmanager_metric_names(),
            "/taskmanagers/metrics",
            "tm_metrics_names.json",
            40,
            "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
        ),
        (
            lambda c: c.taskmanager_metric_names(TM),
            f"/taskmanagers/{TM}/metrics",
            "tm_one_metrics_names.json",
            40,
            "Status.JVM.CPU.Load",
        ),
        (
            lambda c: c.jobmanager_metric_names(),
            "/jobmanager/metrics",
            "jm_metrics_names.json",
            None,
            "taskSlotsTotal",
        ),
    ],
)
async def test_metric_name_listings(
    flink: respx.MockRouter,
    client: FlinkClient,
    call: Call,
    path: str,
    fixture_name: str,
    expected_len: int | None,
    expected_member: str,
) -> None:
    route = serve(flink, path, fixture_name)
    names = await call(client)
    assert expected_member in names
    assert len(names) == (expected_len if expected_len is not None else len(load_fixture(fixture_name)))
    assert "get" not in route.calls.last.request.url.params


async def test_vertex_metrics_source(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = serve(flink, f"/jobs/{JID}/vertices/{SRC}/subtasks/metrics", "src_subtasks_metrics.json")
    names = ["Source__BacklogSource.pendingRecords", "busyTimeMsPerSecond", "backPressuredTimeMsPerSecond"]
    metrics = await client.vertex_metrics(JID, SRC, names)
    assert metrics["Source__BacklogSource.pendingRecords"].sum == 66945.0
    assert metrics["backPressuredTimeMsPerSecond"].avg == 999.0
    assert metrics["busyTimeMsPerSecond"].max == 1.0
    assert math.isnan(metrics["busyTimeMsPerSecond"].min)  # not in the recorded answer
    params = route.calls.last.request.url.params
    assert params["get"] == ",".join(names)
    assert params["agg"] == "min,max,avg,sum"


async def test_vertex_metrics_work(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/vertices/{WORK}/subtasks/metrics", "work_subtasks_metrics.json")
    metrics = await client.vertex_metrics(
        JID, WORK, ["busyTimeMsPerSecond", "numRecordsInPerSecond"], aggs=("max",)
    )
    assert metrics["busyTimeMsPerSecond"].max == 1000.0
    assert metrics["numRecordsInPerSecond"].sum == pytest.approx(1247.6333333333334)


async def test_vertex_metrics_unknown_name_is_empty(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/vertices/{WORK}/subtasks/metrics", "mixed_missing.json")
    names = ["busyTimeMsPerSecond", "Source__BacklogSource.pendingRecords"]
    assert await client.vertex_metrics(JID, WORK, names) == {}


async def test_metric_queries_without_names_send_nothing(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    # Without get=, Flink would answer with the list of names: never ask that by accident.
    assert await client.vertex_metrics(JID, WORK, []) == {}
    assert await client.taskmanager_metrics([]) == {}
    assert await client.jobmanager_metrics([]) == {}
    assert not flink.calls


async def test_nan_strings_become_nan(flink: respx.MockRouter, client: FlinkClient) -> None:
    legacy = [
        {"id": "busyTimeMsPerSecond", "min": "NaN", "max": "NaN", "avg": "NaN", "sum": "NaN", "skew": "NaN"}
    ]
    flink.get(f"/jobs/{JID}/vertices/{SRC}/subtasks/metrics").respond(json=legacy)
    busy = (await client.vertex_metrics(JID, SRC, ["busyTimeMsPerSecond"]))["busyTimeMsPerSecond"]
    assert all(math.isnan(v) for v in (busy.min, busy.max, busy.avg, busy.sum, busy.skew))


async def test_subtask_metrics_string_values(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = serve(flink, f"/jobs/{JID}/vertices/{SRC}/metrics", "vertex_metrics.json")
    names = [
        "0.busyTimeMsPerSecond",
        "0.Source__BacklogSource.pendingRecords",
        "0.numRecordsOutPerSecond",
        "0.backPressuredTimeMsPerSecond",
    ]
    values = await client.subtask_metrics(JID, SRC, names)
    assert values == {
        "0.busyTimeMsPerSecond": 1.0,
        "0.backPressuredTimeMsPerSecond": 999.0,
        "0.numRecordsOutPerSecond": 1203.2,
        "0.Source__BacklogSource.pendingRecords": 66945.0,
    }
    assert "agg" not in route.calls.last.request.url.params


async def test_job_metrics_string_values(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/metrics", "job_metrics.json")
    assert await client.job_metrics(JID, ["numRescales", "numRestarts"]) == {
        "numRestarts": 1.0,
        "numRescales": 1.0,
    }


async def test_jobmanager_metrics_string_values(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = flink.get("/jobmanager/metrics").respond(
        json=[{"id": "taskSlotsTotal", "value": "8"}, {"id": "taskSlotsAvailable", "value": "7"}]
    )
    assert await client.jobmanager_metrics(["taskSlotsTotal", "taskSlotsAvailable"]) == {
        "taskSlotsTotal": 8.0,
        "taskSlotsAvailable": 7.0,
    }
    assert route.calls.last.request.url.params["get"] == "taskSlotsTotal,taskSlotsAvailable"


async def test_taskmanager_metrics(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = serve(flink, "/taskmanagers/metrics", "tm_metrics.json")
    names = ["Status.JVM.CPU.Load", "Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Max"]
    metrics = await client.taskmanager_metrics(names, aggs=("max", "avg"))
    assert metrics["Status.JVM.Memory.Heap.Used"].max == 150132896.0
    assert metrics["Status.JVM.Memory.Heap.Max"].max == 436207616.0
    assert metrics["Status.JVM.CPU.Load"].avg == pytest.approx(0.01971557853910795)
    assert metrics["Status.JVM.GarbageCollector.All.TimeMsPerSecond"].max == 0.0
    assert route.calls.last.request.url.params["agg"] == "max,avg"


async def test_resource_requirements(flink: respx.MockRouter, client: FlinkClient) -> None:
    serve(flink, f"/jobs/{JID}/resource-requirements", "resreq.json")
    assert await client.resource_requirements(JID) == {
        SRC: ParallelismBounds(1, 1),
        WORK: ParallelismBounds(1, 1),
        AGG: ParallelismBounds(1, 1),
    }


async def test_set_resource_requirements_sends_the_full_body(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    route = flink.put(f"/jobs/{JID}/resource-requirements").respond(200, json={})
    wanted = {SRC: ParallelismBounds(1, 1), WORK: ParallelismBounds(1, 3), AGG: ParallelismBounds(1, 1)}
    await client.set_resource_requirements(JID, wanted)
    request = route.calls.last.request
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        SRC: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
        WORK: {"parallelism": {"lowerBound": 1, "upperBound": 3}},
        AGG: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
    }


# --------------------------------------------------------------------------------------------- errors
async def test_http_500_keeps_first_line_of_each_flink_error(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    body = {
        "errors": [
            "Internal server error.",
            "<Exception on server side:\njava.lang.NullPointerException\n\tat x>",
        ]
    }
    route = flink.get("/jobs/overview").respond(500, json=body)
    with pytest.raises(FlinkHTTPError) as info:
        await client.jobs_overview()
    err = info.value
    assert err.status == 500
    assert err.messages == ["Internal server error.", "<Exception on server side:"]
    assert str(err) == f"cluster 'prod' ({BASE}) GET /jobs/overview: HTTP 500: Internal server error."
    assert route.call_count == 1  # an HTTP error is an answer: no retry


@pytest.mark.parametrize(
    ("fixture_name", "expected"),
    [
        ("resreq_put_400_incomplete.json", f"missing job vertex [{AGG}] resource requirements."),
        ("resreq_put_400_bounds.json", "lower bound [3] for job vertex"),
        ("resreq_put_400_max_parallelism.json", "exceeds its maximum parallelism 128."),
        ("resreq_put_400_unknown_vertex.json", "was not found in the JobGraph."),
    ],
)
async def test_put_400_reports_flink_message(
    flink: respx.MockRouter, client: FlinkClient, fixture_name: str, expected: str
) -> None:
    path = f"/jobs/{JID}/resource-requirements"
    flink.put(path).respond(400, json=load_fixture(fixture_name))
    with pytest.raises(FlinkHTTPError) as info:
        await client.set_resource_requirements(JID, {WORK: ParallelismBounds(1, 3)})
    err = info.value
    assert err.status == 400
    [message] = err.messages
    assert expected in message and "\tat " not in message  # the stack trace is cut
    assert_names_endpoint(err, "PUT", path)
    assert f"HTTP 400: {message}" in str(err)


async def test_non_json_error_body(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/overview").respond(502, text="<html>Bad Gateway</html>\n<body/>")
    with pytest.raises(FlinkHTTPError) as info:
        await client.overview()
    assert info.value.messages == ["<html>Bad Gateway</html>"]


async def test_404_outside_job_configuration_is_an_error(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    flink.get(f"/jobs/{JID}").respond(404, json={"errors": [f"Job {JID} not found"]})
    with pytest.raises(FlinkHTTPError) as info:
        await client.job_details(JID)
    assert info.value.status == 404
    assert f"HTTP 404: Job {JID} not found" in str(info.value)


async def test_connection_refused_retried_once_then_unreachable(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    route = flink.get("/jobs/overview").mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
    with pytest.raises(FlinkUnreachable) as info:
        await client.jobs_overview()
    assert route.call_count == 2
    assert_names_endpoint(info.value, "GET", "/jobs/overview")
    assert "Connection refused" in str(info.value)
    assert not isinstance(info.value, FlinkHTTPError)


async def test_transport_error_then_success(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = flink.get("/overview").mock(
        side_effect=[
            httpx.RemoteProtocolError("Server disconnected"),
            httpx.Response(200, json=load_fixture("overview.json")),
        ]
    )
    assert (await client.overview()).slots_total == 8
    assert route.call_count == 2


async def test_timeout_is_unreachable_and_not_retried(flink: respx.MockRouter, client: FlinkClient) -> None:
    """The request had its whole deadline: a second one would cost the tick another (issue 35)."""
    route = flink.get(f"/jobs/{JID}").mock(side_effect=httpx.ReadTimeout("timed out"))
    with pytest.raises(FlinkUnreachable) as info:
        await client.job_details(JID)
    assert route.call_count == 1
    assert "timed out after 2.5s" in str(info.value)
    assert_names_endpoint(info.value, "GET", f"/jobs/{JID}")


async def test_put_is_not_retried(flink: respx.MockRouter, client: FlinkClient) -> None:
    route = flink.put(f"/jobs/{JID}/resource-requirements").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(FlinkUnreachable):
        await client.set_resource_requirements(JID, {WORK: ParallelismBounds(1, 2)})
    assert route.call_count == 1


async def test_malformed_json(flink: respx.MockRouter, client: FlinkClient) -> None:
    flink.get("/overview").respond(200, text='{"taskmanagers": 1, "slots-total"')
    with pytest.raises(FlinkBadPayload) as info:
        await client.overview()
    assert_names_endpoint(info.value, "GET", "/overview")
    assert "invalid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("path", "payload", "call"),
    [
        ("/jobs/overview", [{"jid": JID}], lambda c: c.jobs_overview()),
        ("/jobs/overview", {"jobs": [{"jid": JID, "name": "x"}]}, lambda c: c.jobs_overview()),
        (f"/jobs/{JID}", {"jid": JID, "name": "x", "state": "RUNNING"}, lambda c: c.job_details(JID)),
        ("/taskmanagers", {"taskmanagers": {"id": "x"}}, lambda c: c.taskmanagers()),
        ("/jobmanager/config", [{"value": "x"}], lambda c: c.jobmanager_config()),
        ("/jobmanager/config", {"key": "x"}, lambda c: c.jobmanager_config()),
        (
            f"/jobs/{JID}/vertices/{SRC}/subtasks/metrics",
            {"id": "busy"},
            lambda c: c.vertex_metric_names(JID, SRC),
        ),
        (
            f"/jobs/{JID}/resource-requirements",
            {SRC: {"parallelism": {"lowerBound": 1}}},
            lambda c: c.resource_requirements(JID),
        ),
        (
            f"/jobs/{JID}/resource-requirements",
            {SRC: {"parallelism": {"lowerBound": 2, "upperBound": 1}}},
            lambda c: c.resource_requirements(JID),
        ),
    ],
)
async def test_wrong_shape_is_bad_payload(
    flink: respx.MockRouter,
    client: FlinkClient,
    path: str,
    payload: object,
    call: Call,
) -> None:
    flink.get(path).respond(200, json=payload)
    with pytest.raises(FlinkBadPayload) as info:
        await call(client)
    assert_names_endpoint(info.value, "GET", path)


async def test_job_details_with_inconsistent_plan_is_bad_payload(
    flink: respx.MockRouter, client: FlinkClient
) -> None:
    payload = load_fixture("job.json")
    payload["plan"]["nodes"][2]["inputs"][0]["id"] = "0" * 32
    flink.get(f"/jobs/{JID}").respond(json=payload)
    with pytest.raises(FlinkBadPayload, match="unknown vertex"):
        await client.job_details(JID)


# --------------------------------------------------------------------------------------------- construction
class _GatedTransport(httpx.AsyncBaseTransport):
    """Holds every request until released, counting how many are in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.release = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1
        return httpx.Response(200, json=load_fixture("overview.json"))


async def test_concurrency_is_bounded() -> None:
    transport = _GatedTransport()
    async with FlinkClient(
        BASE, cluster="prod", http_transport="httpx", max_concurrency=2, transport=transport
    ) as c:
        calls = [asyncio.create_task(c.overview()) for _ in range(6)]
        for _ in range(200):  # yield to the event loop (no wall-clock wait) until the requests queue up
            await asyncio.sleep(0)
        assert transport.in_flight == 2
        transport.release.set()
        results = await asyncio.gather(*calls)
    assert transport.peak == 2
    assert all(r.slots_total == 8 for r in results)


async def test_from_settings_uses_cluster_timeout_headers_and_concurrency(flink: respx.MockRouter) -> None:
    cluster = ClusterSettings(
        name="prod",
        rest_url=f"{BASE}/",
        headers={"Authorization": "Bearer t"},
        request_timeout="3s",
        http_transport="httpx",
    )
    route = serve(flink, "/overview", "overview.json")
    async with FlinkClient.from_settings(cluster, timedelta(seconds=10)) as c:
        assert (c.cluster, c.base_url, c.timeout_s) == ("prod", BASE, 3.0)
        await c.overview()
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer t"
    assert request.extensions["timeout"]["read"] == 3.0


async def test_from_settings_falls_back_to_default_timeout() -> None:
    cluster = ClusterSettings(name="prod", rest_url=BASE)
    async with FlinkClient.from_settings(cluster, timedelta(seconds=7)) as c:
        assert c.timeout_s == 7.0


async def test_from_settings_uses_given_transport() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=load_fixture("overview.json")))
    async with FlinkClient.from_settings(
        ClusterSettings(name="sim", rest_url=BASE), timedelta(seconds=1), transport
    ) as c:
        assert (await c.overview()).taskmanagers == 1


def test_from_settings_rejects_missing_tls_files(tmp_path: Path) -> None:
    cluster = ClusterSettings(name="prod", rest_url="https://jm:8081", ca_file=tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match="cluster 'prod': cannot load TLS files"):
        FlinkClient.from_settings(cluster, timedelta(seconds=1))
    key_only = ClusterSettings(name="prod", rest_url="https://jm:8081", client_key=tmp_path / "k.pem")
    with pytest.raises(ConfigError, match="client_key needs client_cert"):
        FlinkClient.from_settings(key_only, timedelta(seconds=1))


async def test_an_answer_that_is_not_json_is_counted_as_bad_payload_not_as_200() -> None:
    """Issue 12: truncated, malformed or HTML answers were counted as status 200, never as bad_payload."""
    seen: list[object] = []
    with respx.mock(base_url="http://jm:8081") as router:
        router.get("/jobs/overview").mock(return_value=httpx.Response(200, text="<html>proxy error</html>"))
        async with FlinkClient(
            "http://jm:8081",
            cluster="c",
            http_transport="httpx",
            on_request=lambda *args: seen.append(args[-1]),
        ) as client:
            with pytest.raises(FlinkBadPayload, match="invalid JSON"):
                await client.jobs_overview()
    assert seen == ["FlinkBadPayload"]
