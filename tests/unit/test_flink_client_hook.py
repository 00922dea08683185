"""The Flink client's on_request hook: one call per request, an endpoint template, never in the way."""

from __future__ import annotations

import httpx
import pytest
import respx

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError, FlinkUnreachable

BASE = "http://jm:8081"


@respx.mock
async def test_each_request_is_reported_once_with_its_status_or_error():
    calls: list[tuple[str, str, str, int | str]] = []
    respx.get(f"{BASE}/jobs/overview").respond(json={"jobs": []})
    respx.get(f"{BASE}/jobs/ab12/config").respond(404, json={"errors": ["Job not found"]})
    respx.get(f"{BASE}/overview").mock(side_effect=httpx.ConnectError("refused"))
    async with FlinkClient(BASE, cluster="prod", on_request=lambda *a: calls.append(a)) as client:
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

    async with FlinkClient(BASE, cluster="prod", on_request=broken) as client:
        assert await client.jobs_overview() == []
