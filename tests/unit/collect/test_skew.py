"""The collector's skew reading (autoscaler/collect/skew.py) against a respx Flink: one request per
vertex that can have a slow subtask, none for even ones, and a failed read never fails the job."""

from __future__ import annotations

import httpx
import respx
from collect_flink import BASE

from autoscaler.collect.skew import NAMES_PER_REQUEST, read_skew
from autoscaler.collect.vertices import VertexQuery
from autoscaler.flink.models import AggregatedMetric
from autoscaler.model import Edge, JobTopology, VertexInfo
from autoscaler.settings import AutoscalerOptions

pytest_plugins = ("collect_flink",)  # its client fixture, on BASE

JID = "0" * 32
SRC, KEYED, EVEN = "a" * 32, "b" * 32, "c" * 32
BUSY, IN = "busyTimeMsPerSecond", "numRecordsInPerSecond"
OPTIONS = AutoscalerOptions()


def topology(keyed_parallelism: int = 4) -> JobTopology:
    return JobTopology.build(
        [
            VertexInfo(SRC, "Source: Clicks", 2, 128),
            VertexInfo(KEYED, "Keyed", keyed_parallelism, 128),
            VertexInfo(EVEN, "Even", 4, 128),
        ],
        [Edge(SRC, KEYED, "HASH"), Edge(KEYED, EVEN, "REBALANCE")],
    )


def reads(topo: JobTopology, keyed_busy: tuple[float, float, float]) -> dict:
    """Each non-source vertex's query and aggregated answer (min, max, avg of busy time)."""
    listed = [BUSY, IN, "backPressuredTimeMsPerSecond"]

    def answer(lo: float, hi: float, avg: float) -> dict[str, AggregatedMetric]:
        return {BUSY: AggregatedMetric(id=BUSY, min=lo, max=hi, avg=avg, sum=avg * 4)}

    return {
        KEYED: (VertexQuery.plan(topo, KEYED, listed), answer(*keyed_busy)),
        EVEN: (VertexQuery.plan(topo, EVEN, listed), answer(480.0, 520.0, 500.0)),
    }


def per_subtask(request: httpx.Request) -> httpx.Response:
    """Flink's /vertices/:vid/metrics: ``<i>.<name>`` as strings; subtask 0 is hot."""
    values = {BUSY: ["1000.0", "200.0", "200.0", "200.0"], IN: ["1000.0", "200.0", "200.0", "200.0"]}
    answer = []
    for name in request.url.params["get"].split(","):
        index, metric = name.split(".", 1)
        answer.append({"id": name, "value": values[metric][int(index) % 4]})
    return httpx.Response(200, json=answer)


async def test_only_a_vertex_that_can_have_a_slow_subtask_is_read_one_by_one(client) -> None:
    topo = topology()
    with respx.mock(base_url=BASE) as router:
        route = router.get(f"/jobs/{JID}/vertices/{KEYED}/metrics").mock(side_effect=per_subtask)
        skew = await read_skew(client, JID, topo, reads(topo, (200.0, 1000.0, 400.0)), OPTIONS)
    assert route.call_count == 1  # and no request for Even (respx fails on an unmocked one)
    names = route.calls[0].request.url.params["get"].split(",")
    assert names == [f"{i}.{BUSY}" for i in range(4)] + [f"{i}.{IN}" for i in range(4)]
    assert skew[KEYED].skew == 2.5 and skew[KEYED].slow_indices == (0,) and skew[KEYED].hot_key
    assert skew[EVEN].skew == 520 / 500 and not skew[EVEN].read and skew[EVEN].slow == ()


async def test_a_wide_vertex_is_read_in_requests_of_bounded_length(client) -> None:
    topo = topology(keyed_parallelism=100)
    with respx.mock(base_url=BASE) as router:
        route = router.get(f"/jobs/{JID}/vertices/{KEYED}/metrics").mock(side_effect=per_subtask)
        skew = await read_skew(client, JID, topo, reads(topo, (200.0, 1000.0, 232.0)), OPTIONS)
    assert route.call_count == -(-200 // NAMES_PER_REQUEST)
    assert all(len(c.request.url.params["get"].split(",")) <= NAMES_PER_REQUEST for c in route.calls)
    assert skew[KEYED].slow_indices == tuple(range(0, 100, 4))  # the fake's subtask 4k is hot


async def test_a_failed_read_keeps_the_figure_and_never_fails_the_job(client) -> None:
    topo = topology()
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}/vertices/{KEYED}/metrics").mock(return_value=httpx.Response(500))
        skew = await read_skew(client, JID, topo, reads(topo, (200.0, 1000.0, 400.0)), OPTIONS)
    assert skew[KEYED].skew == 2.5 and not skew[KEYED].read


async def test_turned_off_it_reads_nothing(client) -> None:
    topo = topology()
    off = AutoscalerOptions(slow_subtasks_enabled=False)
    with respx.mock(base_url=BASE):
        assert await read_skew(client, JID, topo, reads(topo, (200.0, 1000.0, 400.0)), off) == {}
