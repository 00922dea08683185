"""What the collect tests (tests/unit/collect, and the metric plugins') share: a fake Flink over the
recorded answers (and its ``fake`` and ``client`` fixtures), a recording sleep, and one collect() call
that expects a sample or an Unavailable."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from flink_samples import load_fixture

from autoscaler.collect import MetricNameCache, collect
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobRef, JobSample, JobTarget, TaskManagerSample, Unavailable
from autoscaler.settings import AutoscalerOptions

BASE = "http://jm:8081"
JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
SRC = "e5a72f353fc1e6bbf3bd96a41384998c"
WORK = "674df9b0384c0348e0b9d1034a44c46c"
AGG = "96eed58e350a66c179f06330f5425345"
NOW_MS = 1795246671050
TARGET = JobTarget(JobRef("prod", JID, "autoscaler-load-job"), AutoscalerOptions(enabled=True))


def _names(fixture_name: str) -> list[str]:
    return [m["id"] for m in load_fixture(fixture_name)]


def _values(fixture_name: str) -> dict[str, dict[str, Any]]:
    return {m["id"]: {k: v for k, v in m.items() if k != "id"} for m in load_fixture(fixture_name)}


class FakeFlink:
    """Flink's REST semantics over the recorded answers: ``[]`` as soon as one requested name is unknown.

    Values are the recorded ones (src_subtasks_metrics.json, work_subtasks_metrics.json). Wired on top,
    because the recording did not query them: the source operator's numRecordsInPerSecond = 1203.2 (its
    recorded numRecordsOutPerSecond: a source emits what it reads), numRecordsIn/Out = 123362 (the source's
    write-records in job.json), accumulateBusyTimeMs = each vertex's accumulated-busy-time in job.json
    (one subtask each, so min = max = avg = sum; flink-rest.md §4 shows the counter aggregating like any
    other), and an Aggregate vertex that lists Work's task-level names (its busy counter's min, max and
    avg differ, so the aggregator's choice shows; its sum is job.json's, as one fetch gives).
    """

    def __init__(self) -> None:
        self.job = load_fixture("job.json")
        work_names = _names("work_subtask_metric_names.json")
        self.listings: dict[str, list[str]] = {
            SRC: _names("src_subtask_metric_names.json"),
            WORK: work_names,
            AGG: [n for n in work_names if not n.startswith("Work.")],
        }
        self.values: dict[str, dict[str, dict[str, Any]]] = {
            SRC: {
                **_values("src_subtasks_metrics.json"),
                "Source__BacklogSource.numRecordsInPerSecond": {"max": 1203.2, "avg": 1203.2, "sum": 1203.2},
                "Source__BacklogSource.numRecordsIn": {"max": 123362.0, "avg": 123362.0, "sum": 123362.0},
                "Source__BacklogSource.numRecordsOut": {"max": 123361.0, "avg": 123361.0, "sum": 123361.0},
                "accumulateBusyTimeMs": {"min": 641.0, "max": 641.0, "avg": 641.0, "sum": 641.0},
            },
            WORK: {
                **_values("work_subtasks_metrics.json"),
                "accumulateBusyTimeMs": {"min": 89002.0, "max": 89002.0, "avg": 89002.0, "sum": 89002.0},
            },
            AGG: {
                "busyTimeMsPerSecond": {"min": 2.0, "max": 4.0, "avg": 3.0, "sum": 3.0},
                "backPressuredTimeMsPerSecond": {"max": 0.0, "avg": 0.0, "sum": 0.0},
                "numRecordsInPerSecond": {"max": 1247.6, "avg": 1247.6, "sum": 1247.6},
                "accumulateBusyTimeMs": {"min": 20.0, "max": 40.0, "avg": 30.0, "sum": 317.0},
            },
        }
        self.tm_listing = _names("tm_metrics_names.json")
        # The recorded answer asked for no metaspace; the listing has it, so the test wires a value.
        metaspace = {"max": 58_000_000.0, "avg": 56_000_000.0, "sum": 112_000_000.0}
        self.tm_values = {**_values("tm_metrics.json"), "Status.JVM.Memory.Metaspace.Used": metaspace}
        self.listed: Counter[str] = Counter()  # name listings per vertex id ("tm" for TaskManagers)
        self.queried: list[tuple[str, list[str]]] = []
        self.details_reads = 0  # GET /jobs/:id
        self.empty_answers: Counter[str] = Counter()  # how many next queries answer [] (lazy fetcher)
        self.fetch_lands: Callable[[], None] | None = None  # run once, after the next answer ...
        self.requests_before_landing = 0  # ... or after this many more

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = self._answer(request)
        if self.fetch_lands is not None:  # Flink's lazy fetch lands between two requests
            if self.requests_before_landing > 0:
                self.requests_before_landing -= 1
            else:
                land, self.fetch_lands = self.fetch_lands, None
                land()
        return response

    def _answer(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        get = request.url.params.get("get")
        if parts == ["jobs", JID]:
            self.details_reads += 1
            return httpx.Response(200, json=self.job)
        if parts[:3] == ["jobs", JID, "vertices"] and parts[4:] == ["subtasks", "metrics"]:
            return self._metrics(parts[3], self.listings[parts[3]], self.values[parts[3]], get)
        if parts == ["taskmanagers", "metrics"]:
            return self._metrics("tm", self.tm_listing, self.tm_values, get)
        return httpx.Response(404, json={"errors": ["Not found: " + request.url.path]})

    def _metrics(
        self, key: str, listing: list[str], values: dict[str, dict[str, Any]], get: str | None
    ) -> httpx.Response:
        if get is None:
            self.listed[key] += 1
            return httpx.Response(200, json=[{"id": n} for n in listing])
        names = get.split(",")
        self.queried.append((key, names))
        if self.empty_answers[key] > 0:
            self.empty_answers[key] -= 1
            return httpx.Response(200, json=[])
        if any(n not in listing for n in names):
            return httpx.Response(200, json=[])
        missing = [n for n in names if n not in values]
        assert not missing, f"the test wires no value for {missing}"
        return httpx.Response(200, json=[{"id": n, **values[n]} for n in names])

    def set_vertex(self, vid: str, **changes: Any) -> None:
        for vertex in self.job["vertices"]:
            if vertex["id"] == vid:
                vertex.update(changes)


class RecordingSleep:
    """Stands in for asyncio.sleep: records the pauses, waits for nothing."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def sample_job(
    client: FlinkClient,
    cache: MetricNameCache,
    target: JobTarget = TARGET,
    sleep: RecordingSleep | None = None,
) -> JobSample:
    result = await collect(
        client, target, NOW_MS, cache, TaskManagerSample(), sleep=sleep or RecordingSleep()
    )
    assert isinstance(result, JobSample), result
    return result


async def unavailable_job(
    client: FlinkClient, cache: MetricNameCache | None = None, sleep: RecordingSleep | None = None
) -> Unavailable:
    result = await collect(
        client,
        TARGET,
        NOW_MS,
        cache or MetricNameCache(),
        TaskManagerSample(),
        sleep=sleep or RecordingSleep(),
    )
    assert isinstance(result, Unavailable), result
    return result


@pytest.fixture
def fake() -> Iterator[FakeFlink]:
    fake = FakeFlink()
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.route().mock(side_effect=fake.handle)
        yield fake


@pytest.fixture
async def client() -> AsyncIterator[FlinkClient]:
    async with FlinkClient(BASE, cluster="prod", http_transport="httpx") as c:
        yield c
