"""TaskManager resources from GET /taskmanagers, slots per slot-sharing group, and the quota check."""

from __future__ import annotations

import math

import httpx
import pytest
from flink_samples import load_fixture

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.models import TaskManagerInfo
from autoscaler.model import JobTopology, TaskManagerSample, VertexInfo
from autoscaler.resources import (
    TaskManagerResources,
    fetch_taskmanager_resources,
    quota_exceeded,
    required_slots,
    required_taskmanagers,
    taskmanager_resources,
    with_taskmanager_resources,
)

GIB = 1 << 30


def fixture_taskmanagers() -> list[TaskManagerInfo]:
    return [TaskManagerInfo.model_validate(tm) for tm in load_fixture("taskmanagers.json")["taskmanagers"]]


def tm(slots: int = 8, cpu: float = 8.0, memory: int | None = 2 * GIB, tm_id: str = "tm") -> TaskManagerInfo:
    return TaskManagerInfo(
        id=tm_id, slots_number=slots, free_slots=0, cpu_cores=cpu, total_process_memory=memory
    )


def topology(*vertices: tuple[str, int, str | None]) -> JobTopology:
    return JobTopology.build(
        [VertexInfo(vid, vid, p, 128, slot_sharing_group=g) for vid, p, g in vertices], []
    )


# --------------------------------------------------------------------------------------------- /taskmanagers
def test_resources_of_the_recorded_flink_answer():
    # Flink 2.3, one TaskManager: 8 slots (7 free), totalResource.cpuCores 8.0, totalProcessMemory 1.5 GiB.
    expected = TaskManagerResources(1, 8.0, 1610612736.0, 8.0, slots_total=8, slots_free=7)
    assert taskmanager_resources(fixture_taskmanagers()) == expected


def test_no_taskmanager_means_unknown():
    r = taskmanager_resources([])
    assert r.count == r.slots_total == r.slots_free == 0
    assert all(math.isnan(x) for x in (r.cpu_per_tm, r.memory_per_tm, r.slots_per_tm))


def test_uniform_taskmanagers_give_their_spec():
    r = taskmanager_resources([tm(tm_id="a"), tm(tm_id="b"), tm(tm_id="c")])
    assert r == TaskManagerResources(3, 8.0, float(2 * GIB), 8.0, slots_total=24, slots_free=0)


def test_different_taskmanagers_give_means_that_keep_the_totals():
    r = taskmanager_resources([tm(4, 4.0, 1 * GIB, "a"), tm(8, 8.0, 3 * GIB, "b")])
    assert r == TaskManagerResources(2, 6.0, float(2 * GIB), 6.0, slots_total=12, slots_free=0)


@pytest.mark.parametrize(
    ("taskmanagers", "unknown"),
    [
        ([tm(cpu=math.nan, tm_id="a"), tm(tm_id="b")], "cpu_per_tm"),
        ([tm(memory=None, tm_id="a"), tm(tm_id="b")], "memory_per_tm"),
        ([tm(slots=0)], "slots_per_tm"),
        ([tm(cpu=0.0)], "cpu_per_tm"),
    ],
)
def test_a_value_one_taskmanager_lacks_is_unknown_not_guessed(taskmanagers, unknown):
    r = taskmanager_resources(taskmanagers)
    assert math.isnan(getattr(r, unknown))
    known = {"cpu_per_tm", "memory_per_tm", "slots_per_tm"} - {unknown}
    assert not any(math.isnan(getattr(r, k)) for k in known)


def test_with_resources_keeps_the_metrics():
    metrics = TaskManagerSample(gc_time_ms_per_s=5.0, heap_used=1.0, heap_max=2.0, cpu_load_avg=0.5)
    filled = with_taskmanager_resources(metrics, fixture_taskmanagers())
    assert (filled.gc_time_ms_per_s, filled.heap_used, filled.heap_max, filled.cpu_load_avg) == (
        5.0,
        1.0,
        2.0,
        0.5,
    )
    assert (filled.count, filled.cpu_cores_per_tm, filled.memory_per_tm, filled.slots_per_tm) == (
        1,
        8.0,
        1610612736.0,
        8.0,
    )


def test_taskmanager_sample_defaults_are_unknown():
    sample = TaskManagerSample()
    assert sample.count == 0
    assert all(math.isnan(x) for x in (sample.cpu_cores_per_tm, sample.memory_per_tm, sample.slots_per_tm))


def _client(handler) -> FlinkClient:
    return FlinkClient("http://jm:8081", cluster="prod", transport=httpx.MockTransport(handler))


async def test_fetch_fills_the_sample_from_the_endpoint():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=load_fixture("taskmanagers.json"))

    async with _client(handler) as client:
        filled = await fetch_taskmanager_resources(client, TaskManagerSample(gc_time_ms_per_s=1.0))
    assert seen == ["/taskmanagers"]
    assert (filled.count, filled.slots_per_tm, filled.gc_time_ms_per_s) == (1, 8.0, 1.0)


@pytest.mark.parametrize(
    "response",
    [httpx.Response(500, json={"errors": ["boom"]}), httpx.Response(200, text="not json")],
)
async def test_fetch_failure_leaves_the_sample_unknown(response):
    async with _client(lambda request: response) as client:
        sample = TaskManagerSample(gc_time_ms_per_s=1.0)
        assert await fetch_taskmanager_resources(client, sample) == sample


# --------------------------------------------------------------------------------------------- slots
def test_slots_are_the_max_per_slot_sharing_group_summed():
    topo = topology(("src", 2, "g1"), ("work", 6, "g1"), ("sink", 3, "g2"))
    assert required_slots(topo) == 6 + 3
    assert required_slots(topo, {"src": 8}) == 8 + 3
    assert required_slots(topo, {"sink": 1, "work": 4}) == 4 + 1


def test_vertices_without_a_known_group_share_the_default_group():
    topo = topology(("src", 2, None), ("work", 6, None))
    assert required_slots(topo) == 6


@pytest.mark.parametrize(
    ("slots", "per_tm", "tms"), [(8, 8, 1), (9, 8, 2), (16, 8, 2), (1, 8, 1), (12, 6.0, 2)]
)
def test_taskmanagers_are_rounded_up(slots, per_tm, tms):
    assert required_taskmanagers(slots, per_tm) == tms


# --------------------------------------------------------------------------------------------- quota
TOPO = topology(("src", 4, "g"), ("work", 8, "g"))  # 8 slots: one 8-slot TaskManager
TM = TaskManagerSample(count=1, cpu_cores_per_tm=4.0, memory_per_tm=float(4 * GIB), slots_per_tm=8.0)


def test_growing_beyond_the_cpu_quota_is_reported_with_the_numbers():
    why = quota_exceeded(TOPO, {"work": 12}, TM, cpu_quota=6.0, memory_quota=None)
    assert why == (
        "CPU quota reached: 12 slots need 2 TaskManagers of 8 slots (now 1) = 8 cores > quota.cpu 6"
    )


def test_growing_beyond_the_memory_quota_is_reported_with_the_numbers():
    why = quota_exceeded(TOPO, {"work": 12}, TM, cpu_quota=None, memory_quota=6 * GIB)
    assert why == (
        "memory quota reached: 12 slots need 2 TaskManagers of 8 slots (now 1) = 8 gb > quota.memory 6 gb"
    )


@pytest.mark.parametrize(
    ("new", "tm_sample", "cpu", "memory"),
    [
        ({"work": 12}, TM, 8.0, None),  # exactly at the quota
        ({"work": 12}, TM, None, 8 * GIB),
        ({"work": 8, "src": 8}, TM, 1.0, 1),  # same slots: no new TaskManager
        ({"work": 4}, TM, 1.0, 1),  # shrinking is always allowed, even above the quota
        ({"work": 12}, TM, None, None),  # no quota
        ({"work": 12}, TaskManagerSample(), 1.0, 1),  # nothing known
        ({"work": 12}, TaskManagerSample(slots_per_tm=8.0), 1.0, 1),  # CPU and memory unknown
    ],
)
def test_allowed(new, tm_sample, cpu, memory):
    assert quota_exceeded(TOPO, new, tm_sample, cpu, memory) is None
