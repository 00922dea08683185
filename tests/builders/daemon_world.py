"""The world the daemon-level tests run in: two simulated clusters ("a", "b") with one job each, a
daemon on a fake clock, and the recorders. The simulator answers in-process; a stub evaluator stands in
for Spark so each case states only the recommendation it needs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.testing import FaultyTransport, StubEvaluator

OPTIONS = {"job.autoscaler.enabled": "true"}


class World:
    """Two simulated clusters ("a", "b") with one job each, a daemon, and the recorders."""

    def __init__(
        self,
        evaluator: StubEvaluator,
        faults: dict[str, dict[tuple[str, str], Any]] | None = None,
        plugins: Any = (),
        confirm_timeout_s: float = 300,
        options: dict[str, str] | None = None,
        flink_cooldown_s: float = 0,
        stores: Any = None,
        persist_window: bool = True,
        archive_dir: Any = None,
    ) -> None:
        self.clock = FakeClock()
        self.sims = {
            name: SimCluster(SimClusterSpec(cooldown_after_rescaling_s=flink_cooldown_s), self.clock)
            for name in "ab"
        }
        self.jobs = {
            name: sim.submit(work_job(name=f"job-{name}", input_rate=Constant(rate=2000.0)))
            for name, sim in self.sims.items()
        }
        self.transports = {
            name: FaultyTransport(transport(sim), (faults or {}).get(name)) for name, sim in self.sims.items()
        }
        self.events, self.state = (
            (stores.events, stores.state) if stores else (EventLog(), MemoryStateStore())
        )
        self.metrics = MetricsReporter()
        self.evaluator = evaluator
        settings = Settings(
            clusters=[ClusterSettings(name=n, rest_url=f"http://{n}.invalid:8081") for n in self.sims],
            autoscaler=options or OPTIONS,
            metrics_address="",
            confirm_timeout=timedelta(seconds=confirm_timeout_s),
            persist_window=persist_window,
            archive_dir=archive_dir,
        )
        self.daemon = Daemon(
            settings,
            evaluator=evaluator,
            clock=self.clock,
            state=self.state,
            events=self.events,
            metrics=self.metrics,
            plugins=plugins,
            transports=self.transports,
        )

    async def tick(self, seconds: float = 10) -> Any:
        self.clock.advance(seconds)
        return await self.daemon.run_tick()

    def puts(self, cluster: str) -> list[str]:
        return [p for m, p in self.transports[cluster].requests if m == "PUT"]

    def error_count(self, cluster: str, reason: Reason) -> float | None:
        return self.metrics.registry.get_sample_value(
            "flink_autoscaler_errors_total", {"cluster": cluster, "reason": str(reason)}
        )
