"""REST requests per job per tick, the daemon against the simulator (issue 13, must-show 2).

A platform team's fleet is a thousand jobs; what the daemon asks Flink for each of them every tick is
what it costs. The target: ``/jobs/:id`` and one query per vertex per job, and what concerns the whole
cluster (the job list, the TaskManagers, the wait for Flink's metric fetch) once per cluster and tick,
whatever the number of jobs. It was 17 to 31 requests per job per tick: every job polled ``/jobs/:id``
for the fetch, read its vertices twice, re-listed its sources' metric names and re-read its
configuration.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import httpx

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog

JOBS = 12
VERTICES = 3  # the lab job: source, Work, Aggregate -> Sink
TICK_S = 10
PER_CLUSTER = {"/jobs/overview", "/taskmanagers", "/taskmanagers/metrics"}


class Counting(httpx.AsyncBaseTransport):
    """The simulator's transport, counting each request by what it asks for: a per-job endpoint by its
    kind (``/jobs/:id``, a vertex's metric query or name listing, a configuration), others by path."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.counts[_kind(request)] += 1
        return await self.inner.handle_async_request(request)


def _kind(request: httpx.Request) -> str:
    parts = request.url.path.strip("/").split("/")
    if parts[0] != "jobs" or len(parts) < 2 or parts[1] == "overview":
        return request.url.path
    if len(parts) == 2:
        return "/jobs/:id"
    if "vertices" in parts and parts[-1] == "metrics":
        return "vertex query" if "get" in request.url.params else "vertex listing"
    return "/jobs/:id/" + "/".join(parts[2:])


async def test_a_job_costs_its_details_and_one_query_per_vertex_per_tick() -> None:
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=4 * JOBS, metric_fetch_interval_s=TICK_S / 2), clock)
    flink = Counting(transport(sim))
    outcomes: list[Reason] = []
    daemon = Daemon(
        Settings(
            clusters=[ClusterSettings(name="sim", rest_url="http://sim.invalid:8081")],
            control_loop_interval=timedelta(seconds=TICK_S),
            metrics_address="",
            autoscaler={"job.autoscaler.enabled": "true", "job.autoscaler.metrics.window": "60 s"},
        ),
        evaluator=PythonEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=MetricsReporter(),
        transports={"sim": flink},
        on_outcome=lambda o: outcomes.append(o.outcome),
    )
    for j in range(JOBS):  # each in its utilization band at parallelism 1: a steady fleet, no rescale
        sim.submit(work_job(name=f"job-{j}", input_rate=Constant(rate=800.0 + 10 * j)))
    for _ in range(6):  # start-up: first listings and configurations, stabilization
        clock.advance(TICK_S)
        await daemon.run_tick()
    flink.counts.clear()
    outcomes.clear()
    ticks = 12
    for _ in range(ticks):
        clock.advance(TICK_S)
        await daemon.run_tick()

    assert Reason.SCALING not in outcomes and len(outcomes) == JOBS * ticks
    per_job = {k: n for k, n in flink.counts.items() if k not in PER_CLUSTER}
    # Each job: /jobs/:id once and each vertex once; the cluster's wait for the fetch adds a probe
    # read of one job's /jobs/:id now and then, not per job.
    assert per_job["vertex query"] == JOBS * VERTICES * ticks
    assert JOBS * ticks <= per_job["/jobs/:id"] <= JOBS * ticks + 2 * ticks
    assert set(per_job) == {"/jobs/:id", "vertex query"}, per_job  # no listing, no configuration
    assert sum(per_job.values()) / (JOBS * ticks) <= 1 + VERTICES + 2 / JOBS
    assert {flink.counts[k] for k in PER_CLUSTER} == {ticks}
