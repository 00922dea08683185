"""Daemons sharing one state database on one simulated cluster: the lease tests' world.

Two (or more) daemons, named by instance id, watch one simulated cluster of one job through their own
transports, on one store and one fake clock; a stub evaluator always recommends Work -> 3. Shared by the
lease tests and the SQLite-file tests, which replace the file under a daemon of this world.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import MemoryStateStore, StateStore, open_stores
from autoscaler.state.events import EventLog
from autoscaler.testing import FaultyTransport, StubEvaluator
from autoscaler.tick.steps import TickReport

TTL_S = 60
KEY = "prod/job"


# Every lease test on both in-process backends (PostgreSQL: tests/unit/state/test_store.py).
@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    if request.param == "memory":
        yield MemoryStateStore()
        return
    stores = open_stores(f"sqlite:///{tmp_path}/state.db")
    yield stores.state
    stores.close()


class Fleet:
    """Daemons named by instance id on one simulated cluster, one store and one clock."""

    def __init__(self, store: StateStore, names: Sequence[str] = ("a", "b")) -> None:
        self.clock = FakeClock()
        self.sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=0), self.clock)
        self.job_id = self.sim.submit(work_job(name="job", input_rate=Constant(rate=2000.0)))
        self.state = store
        self.transports: dict[str, FaultyTransport] = {}
        self.metrics: dict[str, MetricsReporter] = {}
        self.evaluators: dict[str, StubEvaluator] = {}
        self.daemons = {name: self.daemon(name) for name in names}

    def daemon(self, name: str, evaluator: StubEvaluator | None = None) -> Daemon:
        self.transports[name] = FaultyTransport(transport(self.sim))
        self.metrics[name] = MetricsReporter()
        self.evaluators[name] = evaluator or StubEvaluator({"Work": 3})
        settings = Settings(
            clusters=[ClusterSettings(name="prod", rest_url="http://prod.invalid:8081")],
            autoscaler={"job.autoscaler.enabled": "true"},
            metrics_address="",
            instance_id=name,
            lease_ttl=timedelta(seconds=TTL_S),
        )
        return Daemon(
            settings,
            evaluator=self.evaluators[name],
            clock=self.clock,
            state=self.state,
            events=EventLog(),
            metrics=self.metrics[name],
            transports={"prod": self.transports[name]},
        )

    async def tick(self, *names: str, seconds: float = 10) -> dict[str, TickReport]:
        self.clock.advance(seconds)
        return {name: await self.daemons[name].run_tick() for name in names}

    def puts(self, name: str) -> int:
        return sum(1 for method, _ in self.transports[name].requests if method == "PUT")

    def held(self, name: str) -> float | None:
        registry = self.metrics[name].registry
        return registry.get_sample_value("flink_autoscaler_lease_held", {"cluster": "prod"})
