"""A recorded history to backtest: the real daemon live against the simulator (fake clock, archive on),
a job whose load steps up then down, so the daemon rescales it twice; and the daemon's configuration as
YAML, with a variant, for the tests that run ``backtest`` as a command."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import yaml
from sim_world import QUICK, TICK_S, SimWorld, sim_world

from autoscaler.archive import ArchiveWriter, TickArchive
from autoscaler.archive.layout import PARTITIONING
from autoscaler.backtest.history import JobHistory, histories_from_tables
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import AutoscalerOptions
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Steps

TICKS = 80
# The daemon as it ran: the integration tests' quick options, scale-down allowed a minute after a rescale.
LIVE = {**QUICK, "job.autoscaler.scale-down.interval": "1 min"}
WIDER = {**LIVE, "job.autoscaler.utilization.target": "0.35"}  # another configuration: runs wider


def table(root: Path, name: str) -> pa.Table:
    return ds.dataset(root / name, format="parquet", partitioning=PARTITIONING).to_table()


def histories(root: Path) -> list[JobHistory]:
    return histories_from_tables(table(root, "samples"), table(root, "decisions"), AutoscalerOptions())


async def record(root: Path, jobs: int = 1) -> SimWorld:
    """Run the daemon live for ``TICKS`` ticks with its archive in ``root``; the world it ran."""
    writer = ArchiveWriter(root, flush_interval_ms=10 * TICK_S * 1000, metrics=MetricsReporter())
    world = sim_world(16 * jobs, LIVE, archive=TickArchive(writer))
    for i in range(jobs):
        steps = Steps(steps=[(0, 800.0 + 100 * i), (150, 4000.0), (400, 1500.0)])
        world.sim.submit(work_job(name=f"stepped-{i}" if jobs > 1 else "stepped", input_rate=steps))
    for _ in range(TICKS):
        await world.tick()
    await world.daemon.aclose()
    return world


def write_config(path: Path, autoscaler: dict[str, str], spark_master: str = "local[2]") -> Path:
    """A daemon config file with these options for the simulated cluster ``sim``."""
    config = {
        "clusters": [{"name": "sim", "rest_url": "http://sim.invalid:8081"}],
        "control_loop_interval": f"{TICK_S} s",
        "autoscaler": autoscaler,
        "spark": {"master": spark_master},
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
