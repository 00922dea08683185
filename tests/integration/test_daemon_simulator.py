"""The real daemon against the simulated Flink cluster over HTTP on 127.0.0.1, on a fake clock.

Each test moves the shared FakeClock one control-loop interval and runs one tick, so the simulated
minutes pass in a few seconds of wall time and nothing depends on timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.spark.evaluator import SparkEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.tick.steps import TickReport

pytestmark = pytest.mark.spark

TICK_S = 10
# Reference defaults for every job.autoscaler.* key, apart from shorter windows.
SHORT_WINDOWS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "2 min",
    "job.autoscaler.stabilization.interval": "1 min",
}


class Harness:
    def __init__(
        self, spark: Any, options: dict[str, str], extra_clusters: list[ClusterSettings] = ()
    ) -> None:
        self.clock = FakeClock()
        self.sim = SimCluster(SimClusterSpec(slots=8), self.clock)
        self.server = SimulatorServer(self.sim).start()
        self.events = EventLog()
        self.state = MemoryStateStore()
        self.metrics = MetricsReporter()
        settings = Settings(
            clusters=[ClusterSettings(name="sim", rest_url=self.server.url), *extra_clusters],
            control_loop_interval=timedelta(seconds=TICK_S),
            metrics_address="",
            autoscaler=options,
        )
        self.daemon = Daemon(
            settings,
            evaluator=SparkEvaluator(spark),
            clock=self.clock,
            state=self.state,
            events=self.events,
            metrics=self.metrics,
        )
        self.reports: list[TickReport] = []

    async def run(self, seconds: float) -> None:
        for _ in range(int(seconds // TICK_S)):
            self.clock.advance(TICK_S)
            self.reports.append(await self.daemon.run_tick())

    def outcomes(self, job: str) -> list[Reason]:
        return [o.outcome for r in self.reports for o in r.outcomes if o.job.name == job]

    async def close(self) -> None:
        await self.daemon.aclose()
        self.server.stop()


@pytest.fixture
def harness(spark: Any) -> Iterator[Any]:
    made: list[Harness] = []

    def make(options: dict[str, str] = SHORT_WINDOWS, **kwargs: Any) -> Harness:
        made.append(Harness(spark, options, **kwargs))
        return made[-1]

    yield make
    for h in made:
        h.server.stop()


async def test_under_provisioned_work_vertex_reaches_3_in_one_rescale_and_the_backlog_drains(harness):
    # Work handles 1,250 rec/s per subtask; 2,000 rec/s are offered; utilization target 0.7:
    # ceil(2000 / (1250 x 0.7)) = ceil(2.29) = 3.
    h = harness()
    job_id = h.sim.submit(work_job(name="load-job", work_capacity=1250.0, input_rate=Constant(rate=2000.0)))
    work = h.sim.vertex_ids(job_id)["Work"]

    await h.run(15 * 60)

    assert h.sim.rescale_count(job_id) == 1
    assert h.sim.parallelism(job_id)["Work"] == 3
    assert h.outcomes("load-job").count(Reason.SCALING) == 1
    assert h.sim.backlog(job_id) < 2000.0 * TICK_S  # drained: at most one tick's arrivals waiting
    assert {Reason.SCALING_REPORT, Reason.SCALING, Reason.SCALING_CONFIRMED} <= set(
        h.events.reasons("sim/load-job")
    )
    # The decision was recorded and confirmed with the restart it took.
    (record,) = h.state.load("sim/load-job").history
    assert record.changes[work] == (1, 3) and record.confirmed_ms is not None
    # Prometheus shows the current and recommended parallelism of the vertex.
    labels = {"cluster": "sim", "job": "load-job", "vertex": work, "vertex_name": "Work"}
    assert h.metrics.registry.get_sample_value("flink_autoscaler_vertex_parallelism", labels) == 3
    assert h.metrics.registry.get_sample_value("flink_autoscaler_vertex_recommended_parallelism", labels) == 3
    assert (
        h.metrics.registry.get_sample_value(
            "flink_autoscaler_scalings_total", {"cluster": "sim", "job": "load-job"}
        )
        == 1
    )
    await h.close()


async def test_source_reader_that_never_counts_records_in_is_still_scaled(harness):
    """Found on real Flink: a FLIP-27 reader outside SourceReaderBase leaves numRecordsIn at 0. The
    source's emitted records stand in, so the job gets the same single rescale as a counting one."""
    h = harness()
    job_id = h.sim.submit(
        work_job(name="uncounted", input_rate=Constant(rate=2000.0), source_counts_records_in=False)
    )

    await h.run(15 * 60)

    assert h.sim.rescale_count(job_id) == 1
    assert h.sim.parallelism(job_id)["Work"] == 3
    assert h.sim.backlog(job_id) < 2000.0 * TICK_S
    await h.close()


async def test_advisor_mode_reports_and_never_touches_the_job(harness):
    h = harness({**SHORT_WINDOWS, "job.autoscaler.scaling.enabled": "false"})
    job_id = h.sim.submit(work_job(name="advised", input_rate=Constant(rate=2000.0)))

    await h.run(5 * 60)

    assert h.sim.rescale_count(job_id) == 0
    assert Reason.ADVISOR_MODE in h.outcomes("advised")
    assert Reason.SCALING_REPORT in h.events.reasons("sim/advised")
    assert Reason.SCALING not in h.events.reasons("sim/advised")
    await h.close()


async def test_a_dead_cluster_and_a_disabled_job_do_not_stop_the_others(harness):
    dead = ClusterSettings(name="dead", rest_url="http://127.0.0.1:9")  # discard port: connection refused
    h = harness(extra_clusters=[dead])
    busy = h.sim.submit(work_job(name="busy", input_rate=Constant(rate=2000.0)))
    off = h.sim.submit(
        work_job(name="off", input_rate=Constant(rate=2000.0), job_config={"job.autoscaler.enabled": "false"})
    )

    await h.run(5 * 60)

    assert all("dead" in r.cluster_errors for r in h.reports)
    assert h.sim.rescale_count(busy) == 1
    assert h.sim.rescale_count(off) == 0
    assert h.metrics.registry.get_sample_value(
        "flink_autoscaler_errors_total", {"cluster": "dead", "reason": str(Reason.CLUSTER_UNREACHABLE)}
    ) == len(h.reports)
    await h.close()
