"""An operator's path for a plugin: build the cpu-gate wheel, drop it into the plugins directory,
run the daemon against the simulator. First the gate vetoes (only Work wants more; the source does
not scale up), then the load outgrows the source and the gate approves and aligns every vertex."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.spark.evaluator import SparkEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.loader import discover_plugins
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import Constant, SimClusterSpec, SimEdgeSpec, SimJobSpec, SimVertexSpec
from autoscaler.state.events import EventLog

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "1 min",
    "job.autoscaler.stabilization.interval": "1 min",
    "job.autoscaler.scaling.custom-executors": "gate",
    "job.autoscaler.scaling.custom-executor.gate.class": "cpu-gate",
    "job.autoscaler.scaling.custom-executor.gate.threshold": "0.04",  # simulator TMs: 0.02 + 0.01/task
}


@pytest.fixture(scope="module")
def cpu_gate_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plugins")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(out),
            str(ROOT / "plugins" / "cpu-gate"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def _job() -> SimJobSpec:
    return SimJobSpec(
        name="gated",
        vertices=(
            SimVertexSpec(name="Source: Events", capacity_per_subtask=2500.0, source_partitions=12),
            SimVertexSpec(name="Work", capacity_per_subtask=1000.0),
            SimVertexSpec(name="Sink: Out", capacity_per_subtask=50000.0, output_ratio=0.0),
        ),
        edges=(
            SimEdgeSpec(source="Source: Events", target="Work"),
            SimEdgeSpec(source="Work", target="Sink: Out", ship_strategy="HASH"),
        ),
        input_rate=Constant(rate=1200.0),
    )


async def test_dropped_wheel_vetoes_then_approves_an_aligned_rescale(
    spark: Any, cpu_gate_wheel: Path, tmp_path: Path, monkeypatch
) -> None:
    # The test run imports the example plugins from source; take that away so the wheel is what loads.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "cpu-gate" not in p])
    monkeypatch.delitem(sys.modules, "flink_autoscaler_cpu_gate", raising=False)
    plugins_dir = tmp_path / "plugins"
    plugins_dir.mkdir()
    (plugins_dir / cpu_gate_wheel.name).write_bytes(cpu_gate_wheel.read_bytes())
    registry, problems = discover_plugins(plugins_dir)
    assert problems == [] and registry.find("cpu-gate").origin == f"wheel {cpu_gate_wheel.name}"

    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=10), clock)
    job_id = sim.submit(_job())
    events, metrics = EventLog(), MetricsReporter()
    with SimulatorServer(sim) as server:
        settings = Settings(
            clusters=[ClusterSettings(name="sim", rest_url=server.url)],
            autoscaler=OPTIONS,
            control_loop_interval=timedelta(seconds=10),
            metrics_address="",
        )
        daemon = Daemon(
            settings,
            evaluator=SparkEvaluator(spark),
            clock=clock,
            events=events,
            metrics=metrics,
            plugins=PluginInstances(registry),
        )

        async def ticks(n: int) -> list[Reason]:
            out = []
            for _ in range(n):
                clock.advance(10)
                out.extend(o.outcome for o in (await daemon.run_tick()).outcomes)
            return out

        # 1,200 rec/s: Work (1,000/subtask) must scale up; the source needs 1200/0.7 + 1200*300/1800 = 1,914
        # of its 2,500 per subtask, so it does not scale up and the gate vetoes.
        first = await ticks(20)
        assert Reason.SCALING_VETOED in first and sim.rescale_count(job_id) == 0
        vetoes = [e for e in events.events("sim/gated") if e.reason is Reason.SCALING_VETOED]
        assert vetoes and vetoes[0].key == "ScalingVetoed:gate"
        labels = {"cluster": "sim", "job": "gated", "plugin": "gate", "outcome": "ScalingVetoed"}
        assert metrics.registry.get_sample_value("flink_autoscaler_plugin_outcomes_total", labels) >= 1

        # 3,000 rec/s: the source needs 3000/0.7 + 500 = 4,786 -> 2 subtasks; the gate aligns all to it.
        sim.set_input_rate(job_id, Constant(rate=3000.0))
        second = await ticks(30)
        await daemon.aclose()

    assert Reason.SCALING in second and sim.rescale_count(job_id) == 1
    parallelism = sim.parallelism(job_id)
    assert set(parallelism.values()) == {2}, parallelism
    assert Reason.SCALING_MODIFIED in events.reasons("sim/gated")
    assert "cpu-gate" not in " ".join(p for p in sys.path if not p.endswith(".whl"))
    assert sys.modules["flink_autoscaler_cpu_gate"].__file__.startswith(
        str(plugins_dir / cpu_gate_wheel.name)
    )
