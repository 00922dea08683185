"""The Flink client's on_request hook: one call per request, an endpoint template, never in the way."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkBadPayload, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.rest import endpoint_template
from autoscaler.metrics import MetricsReporter

BASE = "http://jm:8081"


@respx.mock
async def test_each_request_is_reported_once_with_its_status_or_error():
    calls: list[tuple[str, str, str, int | str]] = []
    respx.get(f"{BASE}/jobs/overview").respond(json={"jobs": []})
    respx.get(f"{BASE}/jobs/ab12/config").respond(404, json={"errors": ["Job not found"]})
    respx.get(f"{BASE}/overview").mock(side_effect=httpx.ConnectError("refused"))
    async with FlinkClient(
        BASE, cluster="prod", http_transport="httpx", on_request=lambda *a: calls.append(a)
    ) as client:
        await client.jobs_overview()
        with pytest.raises(FlinkHTTPError):
            await client.job_execution_config("ab12")
        with pytest.raises(FlinkUnreachable):
            await client.overview()  # retried once inside, reported once
    assert calls == [
        ("prod", "GET", "/jobs/overview", 200),
        ("prod", "GET", "/jobs/:jobid/config", 404),
        ("prod", "GET", "/overview", "FlinkUnreachable"),
    ]


@respx.mock
async def test_a_failing_hook_changes_nothing():
    respx.get(f"{BASE}/jobs/overview").respond(json={"jobs": []})

    def broken(*_: object) -> None:
        raise RuntimeError("observer bug")

    async with FlinkClient(BASE, cluster="prod", http_transport="httpx", on_request=broken) as client:
        assert await client.jobs_overview() == []


JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"


@pytest.mark.parametrize(
    ("path", "body", "call"),
    [
        # Valid JSON a proxy cut short between two whole entries, or of another shape altogether.
        ("/jobs/overview", {"jobs": [{"jid": JID}]}, lambda c: c.jobs_overview()),
        ("/jobs/overview", [], lambda c: c.jobs_overview()),
        (f"/jobs/{JID}/jobmanager/config", [{"value": "x"}], lambda c: c.job_configuration(JID)),
        (f"/jobs/{JID}/metrics", {"id": "numRescales"}, lambda c: c.job_metrics(JID, ["numRescales"])),
        (  # each vertex's bounds parse, but lower > upper: checked after the schema
            f"/jobs/{JID}/resource-requirements",
            {"v": {"parallelism": {"lowerBound": 2, "upperBound": 1}}},
            lambda c: c.resource_requirements(JID),
        ),
    ],
)
@respx.mock
async def test_json_of_the_wrong_shape_is_counted_once_as_bad_payload_never_as_200(path, body, call):
    """Fault probe (issue 12): a 200 whose JSON parsed but did not validate was first counted as a 200,
    then failed; the request metric showed a healthy endpoint while every tick of the job failed."""
    calls: list[tuple[str, str, str, int | str]] = []
    metrics = MetricsReporter()

    def hook(*args: Any) -> None:
        calls.append(args)
        metrics.report_request(*args)

    respx.get(f"{BASE}{path}").respond(200, json=body)
    async with FlinkClient(BASE, cluster="prod", http_transport="httpx", on_request=hook) as client:
        with pytest.raises(FlinkBadPayload, match=r"unexpected payload|lower <= upper|config entry without"):
            await call(client)
    endpoint = endpoint_template(path)
    assert calls == [("prod", "GET", endpoint, "FlinkBadPayload")]

    def count(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"cluster": "prod", "method": "GET", **labels})

    assert count("flink_autoscaler_rest_requests_total", endpoint=endpoint, status="bad_payload") == 1
    assert count("flink_autoscaler_rest_requests_total", endpoint=endpoint, status="200") is None
    assert count("flink_autoscaler_rest_errors_total", endpoint=endpoint, error="bad_payload") == 1
