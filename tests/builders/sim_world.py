"""The real daemon, in process, against a simulated cluster on a fake clock: what the integration tests
that drive it tick by tick share (the Python evaluator, memory state, events and metrics to read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from autoscaler.archive import TickArchive
from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.plugins.configured import PluginInstances
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.spec import SimClusterSpec
from autoscaler.state import MemoryStateStore, StateStore
from autoscaler.state.events import EventLog, EventStore
from autoscaler.tick.steps import JobOutcome

TICK_S = 10
# Fast enough for a test to reach a decision in a dozen ticks.
QUICK = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "60 s",
    "job.autoscaler.stabilization.interval": "30 s",
}


@dataclass
class SimWorld:
    clock: FakeClock
    sim: SimCluster
    daemon: Daemon
    events: EventStore
    metrics: MetricsReporter
    outcomes: list[JobOutcome] = field(default_factory=list)

    async def tick(self) -> None:
        self.clock.advance(TICK_S)
        await self.daemon.run_tick()


def sim_world(
    slots: int,
    autoscaler: Mapping[str, str] = QUICK,
    *,
    metrics: MetricsReporter | None = None,
    plugins: PluginInstances | None = None,
    archive: TickArchive | None = None,
    events: EventStore | None = None,
    fetch_interval_s: float = TICK_S / 2,
    fetch_wait_s: float | None = None,
    state: StateStore | None = None,
) -> SimWorld:
    """A cluster of ``slots`` slots (Flink's metric fetch every half tick unless told) and a daemon watching
    it as ``sim``; ``fetch_wait_s`` is its ``metric_fetch_wait`` (the default's 1.5 s unless told), its
    state in memory unless ``state`` is given."""
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=slots, metric_fetch_interval_s=fetch_interval_s), clock)
    events, outcomes = events if events is not None else EventLog(), []
    metrics = metrics or MetricsReporter()
    daemon = Daemon(
        Settings(
            clusters=[
                ClusterSettings(
                    name="sim",
                    rest_url="http://sim.invalid:8081",
                    **(
                        {} if fetch_wait_s is None else {"metric_fetch_wait": timedelta(seconds=fetch_wait_s)}
                    ),
                )
            ],
            control_loop_interval=timedelta(seconds=TICK_S),
            metrics_address="",
            autoscaler=dict(autoscaler),
        ),
        evaluator=PythonEvaluator(),
        clock=clock,
        state=state or MemoryStateStore(),
        events=events,
        metrics=metrics,
        transports={"sim": transport(sim)},
        on_outcome=outcomes.append,
        plugins=plugins or PluginInstances(),
        archive=archive,
    )
    return SimWorld(clock, sim, daemon, events, metrics, outcomes)
