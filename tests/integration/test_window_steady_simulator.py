"""A steady load keeps one metric window for half an hour: the simulator's ticks wait for their fetches
as real ones do, and the window does not restart by itself (issue 36, item 2).

What real Flink showed (the lab: a 5 s loop on Flink's 5 s ``metrics.fetcher.update-interval``): Flink
starts a fetch only for a query *more* than an interval after the last one started, so a tick's first
query, exactly one interval after the last tick's fetch started, finds none due; its poll starts one
~100 ms later, and the next tick's a poll later again, until one would start after the tick's 1.5 s
wait (that tick reads the last fetch again, and the next one starts afresh). The fetches were stamped
by their task clock from the first tick's time, and a stamp later than its own tick moved every stamp
"back" to it: ~100 ms per tick, which added up past 1 % of the window every 15-60 s and restarted it
(``metric_window_restamped``); half the ticks of a run ended ``WindowNotFull``. The simulator's lazy
fetcher compares as strictly as Flink's; what it lacked was ticks that take time, so here the fake
clock moves while the daemon waits for its fetch and the ticks fire at fixed times, as APScheduler's.
"""

from __future__ import annotations

from datetime import timedelta

from structlog.testing import capture_logs

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

TICK_S = 5.0
MINUTES = 30
OPTIONS = {  # the run: the recommended profile (the default), 30 s window and stabilization
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.scale-down.interval": "1 min",
}
RESTARTS = ("metric_window_restamped", "metric_counters_fell")


async def test_a_steady_load_keeps_its_window_for_half_an_hour_on_a_fetcher_as_fast_as_the_loop() -> None:
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=8, metric_fetch_interval_s=TICK_S), clock)
    job_id = sim.submit(work_job(name="steady", input_rate=Constant(rate=800.0), work_parallelism=1))
    metrics = MetricsReporter()
    daemon = Daemon(
        Settings(
            clusters=[ClusterSettings(name="sim", rest_url="http://sim.invalid:8081")],
            control_loop_interval=timedelta(seconds=TICK_S),
            metrics_address="",
            autoscaler=OPTIONS,
        ),
        evaluator=PythonEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=metrics,
        transports={"sim": transport(sim)},
    )
    start_ms, outcomes, late_ms = clock.now_ms(), [], []
    with capture_logs() as logs:
        for tick in range(1, round(MINUTES * 60 / TICK_S) + 1):
            tick_ms = clock.advance_to(start_ms + round(tick * TICK_S * 1000))
            report = await daemon.run_tick()
            late_ms.append(clock.now_ms() - tick_ms)  # how long the tick waited for its fetch
            outcome = report.for_job("steady")
            assert outcome is not None
            outcomes.append(outcome.outcome)
    await daemon.aclose()

    # The run met what real Flink does: fetches landing later in each tick, and now and then none.
    assert max(late_ms) >= 1000 and len(set(late_ms)) > 5
    stale = metrics.registry.get_sample_value(
        "flink_autoscaler_stale_samples_total", {"cluster": "sim", "job": "steady"}
    )
    assert stale is not None and stale >= 5
    restarts = [e for e in logs if e["event"] in RESTARTS]
    assert len(restarts) <= 1, restarts  # at most one, early in the run
    first_full = next(
        i for i, o in enumerate(outcomes) if o not in (Reason.STABILIZING, Reason.WINDOW_NOT_FULL)
    )
    after = outcomes[first_full:]
    assert after.count(Reason.WINDOW_NOT_FULL) < 0.2 * len(after), after
    assert first_full * TICK_S <= 70  # the first decision about a window after stabilization, not minutes
    assert sim.rescale_count(job_id) == 0  # 800 rec/s fits Work at 1 (1,250 rec/s)
