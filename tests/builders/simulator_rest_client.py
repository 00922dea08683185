"""What the simulator's REST tests (tests/unit/simulator/rest) share: a tiny client over ``handle``,
the lab job's vertex ids, and the ``cluster``, ``rest`` and ``job_id`` fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import SimCluster, SimClusterSpec, handle, work_job
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS

SOURCE_ID = LAB_VERTEX_IDS["Source: BacklogSource"]
WORK_ID = LAB_VERTEX_IDS["Work"]
SINK_ID = LAB_VERTEX_IDS["Aggregate -> Sink: Writer"]
Fixture = Callable[[str], Any]


class Rest:
    """A tiny client over ``handle``: ``rest.get(path, get=...)`` -> payload (asserts the status)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    def call(self, method: str, path: str, body: Any = None, **query: str) -> tuple[int, Any]:
        raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        status, payload = handle(self.cluster, method, path, query, raw)
        json.dumps(payload, allow_nan=False)  # every answer must be strict JSON
        return status, payload

    def get(self, path: str, **query: str) -> Any:
        status, payload = self.call("GET", path, **query)
        assert status == 200, payload
        return payload


def keys(value: dict[str, Any]) -> set[str]:
    return set(value)


def names(payload: list[dict[str, str]]) -> set[str]:
    return {entry["id"] for entry in payload}


@pytest.fixture
def cluster(clock: FakeClock) -> SimCluster:
    return SimCluster(SimClusterSpec(), clock)


@pytest.fixture
def rest(cluster: SimCluster) -> Rest:
    return Rest(cluster)


@pytest.fixture
def job_id(cluster: SimCluster, clock: FakeClock) -> str:
    job_id = cluster.submit(work_job(name="autoscaler-load-job"))
    clock.advance(90)
    return job_id
