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
    """Daemons named by instance id on one simulated cluster, one store and one clock.

    One job (``KEY``) by default; ``jobs`` names more (``prod/<name>`` each). ``shards``, ``ttl_s`` and
    ``tick_s`` are every daemon's cluster shards, lease TTL and control interval (the settings' own
    defaults where None); a daemon started later may have its own shard count."""

    def __init__(
        self,
        store: StateStore,
        names: Sequence[str] = ("a", "b"),
        *,
        jobs: Sequence[str] = ("job",),
        shards: int | None = None,
        ttl_s: float = TTL_S,
        tick_s: float | None = None,
        spec: SimClusterSpec | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.sim = SimCluster(spec or SimClusterSpec(cooldown_after_rescaling_s=0), self.clock)
        self.job_ids = {
            f"prod/{name}": self.sim.submit(work_job(name=name, input_rate=Constant(rate=2000.0)))
            for name in jobs
        }
        self.job_id = next(iter(self.job_ids.values()))  # the first job's: the one of a one-job fleet
        self.state = store
        self.shards, self.ttl_s, self.tick_s = shards, ttl_s, tick_s
        self.transports: dict[str, FaultyTransport] = {}
        self.metrics: dict[str, MetricsReporter] = {}
        self.evaluators: dict[str, StubEvaluator] = {}
        self.daemons: dict[str, Daemon] = {}
        for name in names:
            self.start(name)

    def start(
        self, name: str, *, shards: int | None = None, evaluator: StubEvaluator | None = None
    ) -> Daemon:
        """A daemon named ``name`` joins (or replaces the one of that name), with its own transport,
        metrics and evaluator (Work -> 3 unless given)."""
        self.transports[name] = FaultyTransport(transport(self.sim))
        self.metrics[name] = MetricsReporter()
        self.evaluators[name] = evaluator or StubEvaluator({"Work": 3})
        shards = shards if shards is not None else self.shards
        cluster = ClusterSettings(
            name="prod", rest_url="http://prod.invalid:8081", **({"shards": shards} if shards else {})
        )
        interval = {"control_loop_interval": timedelta(seconds=self.tick_s)} if self.tick_s else {}
        settings = Settings(
            clusters=[cluster],
            autoscaler={"job.autoscaler.enabled": "true"},
            metrics_address="",
            instance_id=name,
            lease_ttl=timedelta(seconds=self.ttl_s),
            **interval,
        )
        self.daemons[name] = Daemon(
            settings,
            evaluator=self.evaluators[name],
            clock=self.clock,
            state=self.state,
            events=EventLog(),
            metrics=self.metrics[name],
            transports={"prod": self.transports[name]},
        )
        return self.daemons[name]

    async def tick(self, *names: str, seconds: float | None = None) -> dict[str, TickReport]:
        """The clock moves (a control interval: ``tick_s``, else 10 s), then each daemon named ticks."""
        self.clock.advance(seconds if seconds is not None else self.tick_s or 10)
        return {name: await self.daemons[name].run_tick() for name in names}

    def puts(self, name: str) -> int:
        return sum(1 for method, _ in self.transports[name].requests if method == "PUT")

    def held(self, name: str) -> float | None:
        return self.gauge(name, "flink_autoscaler_lease_held")

    def gauge(self, name: str, metric: str) -> float | None:
        return self.metrics[name].registry.get_sample_value(metric, {"cluster": "prod"})
