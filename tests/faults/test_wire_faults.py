"""Faults of the wire itself (issue 35): an answer that trickles in a byte at a time, one inflated to
hundreds of MB, and JSON nested deeper than any parser recurses.

First the REST client alone, on both wires (aiohttp, the default, and httpx), against the simulator
behind the fault proxy: a request has one deadline for its whole answer and is not asked again after
it; an answer above the size limit is dropped without being read whole, whether its ``Content-Length``
says so or only reading does; deeply nested JSON is a bad payload. A second or two each, no daemon.

Then the daemon process: cluster ``hit`` (behind the proxy, ``request_timeout`` 1 s, a 1 MB answer
limit) runs ``hit-job``, whose answers get the faults, and ``bystander``; cluster ``steady`` runs one
more job, untouched. The trickle is on from the daemon's start, as in the issue, where the first tick
never ended (``/readyz`` stuck at "starting"); each test then checks that the fault is named (a log line
and a metric), that the other jobs, of the same cluster and of the other, still get their decisions,
and that ``hit-job`` is read again once it heals.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from autoscaler.flink import FlinkBadPayload, FlinkClient, FlinkHTTPError, FlinkUnreachable
from autoscaler.simulator.server import SimulatorServer

from .harness import WAIT_S, Contains, Daemon, SimJob, daemon_config, free_port, sim_cluster
from .proxy import (
    SUBTASK_METRICS,
    Answer,
    Exchange,
    FaultProxy,
    Inflate,
    Rule,
    Trickle,
    deeply_nested_json,
    job_path,
)

pytestmark = [pytest.mark.faults, pytest.mark.spark]

Kind = Literal["aiohttp", "httpx"]
WIRES: tuple[Kind, ...] = ("aiohttp", "httpx")
NAMES = ["busyTimeMsPerSecond", "numRecordsInPerSecond"]
GUARD_S = 15.0
"""Around each client call: far above its deadline, far below a trickled answer's whole length, so
the code this fixes fails here instead of reading for minutes."""
SUBTASKS_TAIL = "/vertices/[0-9a-f]{32}/subtasks/metrics$"
HIT_TIMEOUT_S = 1.0
HIT_LIMIT = "1 mb"
ERRORS_BY_ENDPOINT = "flink_autoscaler_rest_errors_total"


def _sent(proxy: FaultProxy, since: int, path: str) -> list[Exchange]:
    """The faulty exchanges of ``path`` from ``since`` on, once the proxy knows how much of each answer
    went out (it learns that the client hung up at its next write)."""
    deadline = time.monotonic() + 10
    while True:
        seen = [e for e in proxy.exchanges(since=since, path=path) if e.fault is not None]
        if seen and all(e.sent is not None for e in seen):
            return seen
        assert time.monotonic() < deadline, f"the proxy never finished its answers: {seen}"
        time.sleep(0.02)


# ------------------------------------------------------------------------------------ the client alone
@dataclass
class Flink:
    proxy: FaultProxy
    job: SimJob

    @property
    def work(self) -> str:
        return self.job.sim.vertex_ids(self.job.job_id)["Work"]

    def client(self, kind: Kind, calls: list[int | str], **kwargs: Any) -> FlinkClient:
        return FlinkClient(
            self.proxy.url,
            cluster="sim",
            http_transport=kind,
            on_request=lambda _c, _m, _e, status: calls.append(status),
            **kwargs,
        )


@pytest.fixture
def flink() -> Iterator[Flink]:
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "wire-job")
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        yield Flink(proxy, job)


@pytest.mark.parametrize("kind", WIRES)
async def test_a_trickling_answer_ends_at_one_deadline_and_is_not_asked_again(
    flink: Flink, kind: Kind
) -> None:
    """Ten bytes a second: every read gets a byte within the timeout, so a timeout per read never fires
    and the answer took a minute; the deadline ends the request whole, once, with no retry."""
    calls: list[int | str] = []
    mark = flink.proxy.mark()
    with flink.proxy.fault(Trickle(bytes_per_s=10), SUBTASK_METRICS):
        async with flink.client(kind, calls, timeout_s=1.0) as client:
            started = time.monotonic()
            with pytest.raises(FlinkUnreachable, match=r"timed out after 1s"):
                await asyncio.wait_for(client.vertex_metrics(flink.job.job_id, flink.work, NAMES), GUARD_S)
            took = time.monotonic() - started
    assert took < 5, f"the request took {took:.1f} s"  # 1 s, with room for a loaded machine
    (asked,) = _sent(flink.proxy, mark, SUBTASK_METRICS)  # asked once: a timeout is not retried
    assert asked.complete is False and asked.sent is not None and asked.sent < 60
    assert calls == ["FlinkUnreachable"]


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("kind", WIRES)
async def test_an_answer_above_the_size_limit_is_dropped_unread(
    flink: Flink, kind: Kind, declare_length: bool
) -> None:
    """64 MB of ``/jobs/:id`` (valid JSON: the real answer and whitespace) against a 1 MB limit: refused
    at its ``Content-Length``, or a chunked one given up once past the limit; counted as bad_payload."""
    calls: list[int | str] = []
    job_id = flink.job.job_id
    mark = flink.proxy.mark()
    async with flink.client(kind, calls, max_answer_bytes=1 << 20) as client:
        with (
            flink.proxy.fault(Inflate(64 << 20, declare_length), job_path(job_id)),
            pytest.raises(FlinkBadPayload, match="larger than the 1048576-byte limit"),
        ):
            await asyncio.wait_for(client.job_details(job_id), GUARD_S)
        assert (await client.job_details(job_id)).jid == job_id  # healed: the same client reads it
    (refused,) = _sent(flink.proxy, mark, job_path(job_id))
    assert refused.complete is False and refused.sent is not None and refused.sent < 16 << 20
    assert calls == ["FlinkBadPayload", 200]


@pytest.mark.parametrize("kind", WIRES)
async def test_deeply_nested_json_is_a_bad_payload(flink: Flink, kind: Kind) -> None:
    """``[[[…]]]`` 100,000 deep, as a 200 and as a 500's error body: a bad payload and an HTTP error,
    never a RecursionError (that became an AutoscalerError with a traceback)."""
    calls: list[int | str] = []
    deep = deeply_nested_json(100_000)
    async with flink.client(kind, calls) as client:
        with (
            flink.proxy.fault(deep, SUBTASK_METRICS),
            pytest.raises(FlinkBadPayload, match="nested too deeply"),
        ):
            await client.vertex_metrics(flink.job.job_id, flink.work, NAMES)
        with (
            flink.proxy.fault(Answer(500, deep.body), SUBTASK_METRICS),
            pytest.raises(FlinkHTTPError) as err,
        ):
            await client.vertex_metrics(flink.job.job_id, flink.work, NAMES)
    assert err.value.status == 500 and err.value.messages[0].startswith("[[[[")
    assert calls == ["FlinkBadPayload", 500]


# ------------------------------------------------------------------------------------ the daemon
@dataclass
class World:
    daemon: Daemon
    proxy: FaultProxy
    hit: SimJob
    bystander: SimJob
    steady: SimJob
    trickle: Rule
    trickle_ended: bool = False

    def end_trickle(self) -> None:
        """Heal the trickle the daemon started with (once); the test of it does, or whichever runs first."""
        if not self.trickle_ended:
            self.proxy.heal(self.trickle)
            self.trickle_ended = True
            self.wait_read_again(self.daemon.mark())

    def others(self) -> tuple[SimJob, SimJob]:
        return self.bystander, self.steady

    def rest_errors(self, endpoint: str, error: str) -> float:
        labels = {"cluster": "hit", "method": "GET", "endpoint": endpoint, "error": error}
        return self.daemon.metric(ERRORS_BY_ENDPOINT, **labels)

    def wait_decisions(self, job: SimJob, n: int, since: int) -> None:
        """``n`` decisions of ``job`` from log line ``since`` on (one per tick it was in)."""
        deadline = time.monotonic() + WAIT_S
        while len(self.daemon.decisions(job, since=since)) < n:
            self.daemon.assert_running()
            assert time.monotonic() < deadline, f"{job.key}: fewer than {n} decisions:\n{self.daemon.tail()}"
            time.sleep(0.2)

    def wait_read_again(self, since: int) -> None:
        """``hit-job`` decided from a reading again (its fault healed)."""
        unread = {"ClusterUnreachable", "PartialMetrics", "AutoscalerError"}
        self.daemon.wait_for(
            lambda line: (
                line.get("event") == "decision"
                and line.get("cluster") == "hit"
                and line.get("job") == self.hit.name
                and line.get("outcome") not in unread
            ),
            "a decision of hit-job from a reading",
            since=since,
        )


def _peak_rss_bytes(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("wire-faults")
    port = free_port()
    with ExitStack() as stack:
        steady_sim, hit_sim = sim_cluster(), sim_cluster()
        steady = SimJob.submit("steady", steady_sim, "steady-job")
        hit = SimJob.submit("hit", hit_sim, "hit-job")
        bystander = SimJob.submit("hit", hit_sim, "bystander")
        steady_url = stack.enter_context(SimulatorServer(steady_sim)).url
        proxy = stack.enter_context(FaultProxy(stack.enter_context(SimulatorServer(hit_sim)).url))
        config = daemon_config(
            {"steady": steady_url, "hit": proxy.url},
            state_url=f"sqlite:///{workdir / 'state.db'}",
            metrics_port=port,
        )
        hit_url = f"    rest_url: {proxy.url}\n"
        config = config.replace(
            hit_url,
            f"{hit_url}    request_timeout: {HIT_TIMEOUT_S:g} s\n    autoscaler:\n"
            f"      job.autoscaler.flink.rest-client.max-answer-size: {HIT_LIMIT}\n",
        )
        assert "max-answer-size" in config
        # A vertex-metrics answer of hit-job trickling at 2 bytes/s (a byte per 0.5 s, within the
        # 1 s timeout of each read), from the daemon's first tick on: hundreds of seconds per answer.
        trickle = proxy.inject(Trickle(bytes_per_s=2), job_path(hit.job_id, SUBTASKS_TAIL))
        daemon = stack.enter_context(Daemon(workdir, config, port))
        yield World(daemon, proxy, hit, bystander, steady, trickle)


def test_a_trickling_answer_costs_its_job_one_deadline_and_the_other_jobs_nothing(world: World) -> None:
    """The issue's fault: ``hit-job``'s vertex metrics trickle from the start. Its reads end at the
    deadline (``ClusterUnreachable``, "timed out after 1s", ``rest_errors_total{error="unreachable"}``),
    once per tick and query, while ``bystander`` (same cluster) and ``steady`` (the other) get a
    decision in every tick, ticks complete (``/readyz`` ready) and none takes long."""
    daemon, hit = world.daemon, world.hit
    line = daemon.wait_decision(hit, "ClusterUnreachable")
    assert f"timed out after {HIT_TIMEOUT_S:g}s" in line["detail"]
    for job in world.others():
        world.wait_decisions(job, 5, since=0)
    ready = httpx.get(daemon.metrics_url.replace("/metrics", "/readyz"), timeout=10)
    assert ready.status_code == 200, ready.text
    assert world.rest_errors("/jobs/:jobid/vertices/:vertexid/subtasks/metrics", "unreachable") > 0
    # Every tick was short: the slowest job waits one deadline, not an answer's whole length.
    ticks = daemon.metric("flink_autoscaler_tick_duration_seconds_count")
    assert daemon.metric("flink_autoscaler_tick_duration_seconds_bucket", le="60.0") == ticks
    # The others were decided in the ticks hit-job timed out in (one decision per job and tick; the
    # log may end within a tick, between its decision lines).
    timed_out = [d for d in daemon.decisions(hit) if d["outcome"] == "ClusterUnreachable"]
    assert len(timed_out) >= 3
    for job in world.others():
        assert len(daemon.decisions(job)) >= len(timed_out) - 1
    # Each tick asked each of hit-job's vertices once: a timed-out request is not asked again.
    asked = world.proxy.exchanges(path=job_path(hit.job_id, SUBTASKS_TAIL))
    vertices = len(hit.sim.vertex_ids(hit.job_id))
    assert len(asked) <= vertices * (len(daemon.decisions(hit)) + 1)
    world.end_trickle()  # and hit-job is read again


def test_an_answer_above_the_size_limit_is_dropped_unread_and_the_memory_stays(world: World) -> None:
    """``hit-job``'s ``/jobs/:id`` inflated to 150 MB (the issue's took the daemon from 199 MB to 1 GB),
    chunked and then with its ``Content-Length``: given up at the cluster's 1 MB limit, a
    ``flink_answer_too_large`` warning and ``metrics_failed``, bad_payload; the peak memory stays."""
    world.end_trickle()
    daemon, hit, proxy = world.daemon, world.hit, world.proxy
    peak = _peak_rss_bytes(daemon.pid)
    for declare_length in (False, True):
        logged, seq = daemon.mark(), proxy.mark()
        with proxy.fault(Inflate(150 << 20, declare_length), job_path(hit.job_id)):
            daemon.wait_job_log("metrics_failed", hit, since=logged, error=Contains("larger than"))
            daemon.wait_log("flink_answer_too_large", since=logged, cluster="hit", path=f"/jobs/{hit.job_id}")
            for job in world.others():
                world.wait_decisions(job, 2, since=logged)
        for answer in _sent(proxy, seq, job_path(hit.job_id)):
            assert answer.complete is False and answer.sent is not None and answer.sent < 32 << 20
        world.wait_read_again(daemon.mark())
    assert world.rest_errors("/jobs/:jobid", "bad_payload") >= 2
    grew = _peak_rss_bytes(daemon.pid) - peak
    assert grew < 100 << 20, f"the daemon's peak memory grew by {grew >> 20} MB"


def test_deeply_nested_json_is_a_bad_payload_not_a_traceback(world: World) -> None:
    """``hit-job``'s vertex metrics ``[[[…]]]`` 100,000 deep: ``metrics_failed`` saying so, bad_payload,
    ``PartialMetrics``; no ``collect_failed`` traceback and no ``AutoscalerError``."""
    world.end_trickle()
    daemon, hit = world.daemon, world.hit
    logged = daemon.mark()
    with world.proxy.fault(deeply_nested_json(100_000), job_path(hit.job_id, SUBTASKS_TAIL)):
        daemon.wait_job_log("metrics_failed", hit, since=logged, error=Contains("nested too deeply"))
        line = daemon.wait_decision(hit, "PartialMetrics", since=logged)
        assert "nested too deeply" in line["detail"]
        for job in world.others():
            world.wait_decisions(job, 2, since=logged)
    assert world.rest_errors("/jobs/:jobid/vertices/:vertexid/subtasks/metrics", "bad_payload") > 0
    assert not daemon.find("collect_failed", since=logged)
    assert "AutoscalerError" not in daemon.outcomes(hit, since=logged)
    world.wait_read_again(daemon.mark())
