"""What the test_simulator_rest* files share: a tiny client over ``handle`` and the lab job's vertex ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from autoscaler.simulator import SimCluster, handle
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
