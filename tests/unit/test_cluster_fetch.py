"""The cluster's side of stale readings (``autoscaler/cluster.py``): Flink's fetch interval read from
``/jobmanager/config``, the warning when the loop is too fast for it, and the stale samples counted and
told. The daemon runs against the in-process simulator, whose lazy fetcher compares as strictly as
Flink's, on a fake clock; a stub evaluator stands in for Spark.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from structlog.testing import capture_logs

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.flink.jobmanager_config import flink_fetch_interval_ms
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.testing import StubEvaluator

KEY = "sim/load-job"


class Lazy:
    """One simulated cluster with a lazy fetcher of ``fetch_s`` and a daemon ticking every ``tick_s``."""

    def __init__(
        self, *, fetch_s: float, tick_s: float, config: dict[str, str] | None = None, speed: float = 1.0
    ) -> None:
        self.tick_s = tick_s  # in clock seconds; the loop's wall interval is tick_s / speed
        self.clock = FakeClock()
        self.clock.speed = speed  # the demo's ScaledClock: speed clock seconds per wall second
        self.start_ms, self.ticks = self.clock.now_ms(), 0
        spec = SimClusterSpec(
            cooldown_after_rescaling_s=0, metric_fetch_interval_s=fetch_s, config=config or {}
        )
        self.sim = SimCluster(spec, self.clock)
        self.sim.submit(work_job(name="load-job", input_rate=Constant(rate=1000.0), work_parallelism=2))
        self.metrics, self.events, self.evaluator = MetricsReporter(), EventLog(), StubEvaluator()
        settings = Settings(
            clusters=[ClusterSettings(name="sim", rest_url="http://sim.invalid:8081")],
            control_loop_interval=timedelta(seconds=tick_s / speed),
            autoscaler={"job.autoscaler.enabled": "true"},
            metrics_address="",
        )
        self.daemon = Daemon(
            settings,
            evaluator=self.evaluator,
            clock=self.clock,
            state=MemoryStateStore(),
            events=self.events,
            metrics=self.metrics,
            transports={"sim": transport(self.sim)},
        )

    async def tick(self) -> None:
        """The next tick at its scheduled time, a loop interval after the last one's (as APScheduler
        fires them), however long the last one waited for its fetch."""
        self.ticks += 1
        self.clock.advance_to(self.start_ms + round(self.ticks * self.tick_s * 1000))
        await self.daemon.run_tick()

    def gauge(self, name: str) -> float | None:
        return self.metrics.registry.get_sample_value(f"flink_autoscaler_{name}", {"cluster": "sim"})

    def stale_total(self) -> float | None:
        return self.metrics.registry.get_sample_value(
            "flink_autoscaler_stale_samples_total", {"cluster": "sim", "job": "load-job"}
        )


async def test_a_loop_as_fast_as_the_fetcher_warns_once_and_is_stale_once_a_fetch_misses_the_wait() -> None:
    lazy = Lazy(fetch_s=10, tick_s=10)
    stale_at: list[int] = []
    with capture_logs() as logs:
        for tick in range(1, 21):
            await lazy.tick()
            if any(s.stale_ticks for s in lazy.evaluator.samples):
                stale_at.append(tick)
    warnings = [e for e in logs if e["event"] == "metric_fetch_interval_too_long"]
    assert len(warnings) == 1  # once per cluster, not per tick
    assert "control_loop_interval (10 s) is less than 2 x" in warnings[0]["detail"]
    assert lazy.gauge("metric_fetch_interval_seconds") == 10.0
    assert lazy.gauge("metric_fetch_interval_warning") == 1.0
    # Flink refreshes only for a query MORE than 10 s after the last fetch started: each tick's fetch
    # starts at the first poll past that, a poll later than the last one's, until it would start after
    # the tick's 1.5 s wait; that tick reads the last fetch again, and the next one starts afresh.
    assert stale_at and all(b - a >= 10 for a, b in itertools.pairwise(stale_at))
    assert lazy.stale_total() == len(stale_at)
    # Told as a Normal event once per scaling.event.interval, not on every stale tick.
    assert lazy.events.reasons(KEY).count(Reason.STALE_METRICS) == 1


async def test_a_loop_twice_the_fetch_interval_reads_a_new_fetch_every_tick_and_does_not_warn() -> None:
    lazy = Lazy(fetch_s=5, tick_s=10)
    with capture_logs() as logs:
        for _ in range(4):
            await lazy.tick()
    assert not [e for e in logs if e["event"] == "metric_fetch_interval_too_long"]
    assert lazy.gauge("metric_fetch_interval_warning") == 0.0
    assert lazy.stale_total() is None  # never incremented
    assert all(s.stale_ticks == 0 for s in lazy.evaluator.samples)


@pytest.mark.parametrize(("tick_s", "speed", "warned"), [(10, 10.0, False), (1, 1.0, True)])
async def test_the_loop_is_measured_in_the_clock_s_time_on_a_sped_up_clock(
    tick_s: float, speed: float, warned: bool
) -> None:
    """The demo's 1 s loop at 10x spans 10 simulated seconds: twice its cluster's 5 s fetcher, so no
    warning and no stale reading. A real 1 s loop on a real 5 s fetcher is still warned about."""
    lazy = Lazy(fetch_s=5, tick_s=tick_s, speed=speed)
    with capture_logs() as logs:
        for _ in range(4):
            await lazy.tick()
    warnings = [e for e in logs if e["event"] == "metric_fetch_interval_too_long"]
    assert bool(warnings) is warned
    assert lazy.gauge("metric_fetch_interval_warning") == float(warned)
    if not warned:
        assert all(s.stale_ticks == 0 for s in lazy.evaluator.samples)
    else:
        assert "control_loop_interval (1 s) is less than 2 x" in warnings[0]["detail"]


async def test_the_warning_is_logged_again_when_the_fetch_interval_changes() -> None:
    lazy = Lazy(fetch_s=10, tick_s=10)
    with capture_logs() as logs:
        await lazy.tick()
        lazy.sim.spec.config["metrics.fetcher.update-interval"] = "2 s"  # a JobManager restarted with it
        for _ in range(31):  # the config is re-read every 5 minutes
            await lazy.tick()
    events = [e["event"] for e in logs if e["event"].startswith("metric_fetch_interval")]
    assert events == ["metric_fetch_interval_too_long", "metric_fetch_interval_ok"]
    assert lazy.gauge("metric_fetch_interval_seconds") == 2.0
    assert lazy.gauge("metric_fetch_interval_warning") == 0.0


@pytest.mark.parametrize(
    ("config", "expected_ms"),
    [
        ({"metrics.fetcher.update-interval": "5000"}, 5_000),  # Flink 1.x: milliseconds
        ({"metrics.fetcher.update-interval": "10 s"}, 10_000),  # a duration
        ({"metrics.fetcher.update-interval": "PT2S"}, 2_000),
        ({"metrics.fetcher.update-interval": "0"}, 0),  # the simulator's fetcher without laziness
        ({"metrics.fetcher.update-interval": "often"}, None),
        ({"metrics.fetcher.update-interval": "-1"}, None),
        ({}, None),  # unset: Flink's default (10 s) is assumed by the session
    ],
)
def test_flinks_fetch_interval_is_read_from_its_key(config: dict[str, str], expected_ms: int | None) -> None:
    assert flink_fetch_interval_ms(config) == expected_ms
