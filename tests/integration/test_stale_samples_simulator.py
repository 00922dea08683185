"""No stale samples: the daemon against the simulator's lazy metric fetcher, over HTTP, on a fake clock.

With Flink's ``metrics.fetcher.update-interval`` equal to ``control_loop_interval`` (as on the lab
cluster, 5 s and 5 s), a tick often finds no new metric fetch: Flink refreshes only for a query more
than an interval after the last refresh. Such a sample used to be stamped with the new tick's time and
a 30 s window's source rate came out off: by up to ~20 % with 5 s ticks a few hundred ms late or early
(stale now and then), by a third with 10 s ticks on the dot (every other one stale, at both ends of
the three-tick window in turn). Now the rate the daemon reports (the source's target data rate, as
Prometheus shows it) stays within 2 % of the offered load on every tick whose window is full.

The daemon here does not wait for its tick's fetch (``metric_fetch_wait`` 0), so stale readings come
every other tick or so; with the wait, a tick's polls start the fetch and stale readings are the odd
tick of a drift cycle (``test_window_steady_simulator.py``).
"""

from __future__ import annotations

import random
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

pytestmark = pytest.mark.spark

RATE = 1000.0
SOURCE = "Source: BacklogSource"
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.scaling.enabled": "false",  # advisor mode: a steady run, never restarted
}
NOT_EVALUATED = {Reason.STABILIZING, Reason.WINDOW_NOT_FULL}


@pytest.mark.parametrize(
    ("tick_s", "jitter_ms"), [(5.0, 400), (10.0, 0)], ids=["5s-jittered", "10s-on-the-dot"]
)
async def test_the_reported_source_rate_stays_within_2_percent_of_the_offered_load(
    spark: Any, tick_s: float, jitter_ms: int
) -> None:
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=8, metric_fetch_interval_s=tick_s), clock)
    server = SimulatorServer(sim).start()
    metrics = MetricsReporter()
    daemon = Daemon(
        Settings(
            # No wait for the tick's fetch (metric_fetch_wait 0): every tick reads what Flink has, the
            # last fetch whenever none was due, so stale readings are the rule, not the odd tick.
            clusters=[ClusterSettings(name="sim", rest_url=server.url, metric_fetch_wait=timedelta(0))],
            control_loop_interval=timedelta(seconds=tick_s),
            metrics_address="",
            autoscaler=OPTIONS,
        ),
        evaluator=SparkEvaluator(spark),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=metrics,
    )
    job_id = sim.submit(work_job(name="steady", input_rate=Constant(rate=RATE), work_parallelism=2))
    labels = {
        "cluster": "sim",
        "job": "steady",
        "vertex": sim.vertex_ids(job_id)[SOURCE],
        "vertex_name": SOURCE,
    }
    rng = random.Random(7)
    errors: list[float] = []
    start_ms = clock.now_ms()
    try:
        for tick in range(1, 41):
            # Fired at its scheduled time, a few hundred ms off; its wait for the fetch takes time too.
            clock.advance_to(start_ms + round(tick * tick_s * 1000) + rng.randint(-jitter_ms, jitter_ms))
            outcome = (await daemon.run_tick()).for_job("steady")
            assert outcome is not None
            if outcome.outcome in NOT_EVALUATED:
                continue
            rate = metrics.registry.get_sample_value("flink_autoscaler_vertex_target_data_rate", labels)
            assert rate is not None
            errors.append(rate / RATE - 1)
    finally:
        await daemon.aclose()
        server.stop()

    assert len(errors) >= 25
    assert max(abs(e) for e in errors) <= 0.02, errors
    stale = metrics.registry.get_sample_value(
        "flink_autoscaler_stale_samples_total", {"cluster": "sim", "job": "steady"}
    )
    assert stale is not None and stale >= 5  # the run did meet Flink's lazy fetcher
    assert sim.rescale_count(job_id) == 0
