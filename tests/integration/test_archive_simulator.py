"""The history archive on a running daemon: the real daemon against the simulator (Python evaluator,
fake clock) with ``archive_dir`` set, its Parquet read back after a few ticks and a rescale.

Every collected sample is a row per vertex and tick, every job outcome a row per vertex, the rescale
the daemon made is there as ``applied`` with the parallelism it asked for, and the rows are what the
daemon saw: the parallelism and the graph rebuild the job's topology.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
from sim_world import QUICK, TICK_S, sim_world

from autoscaler.archive import ArchiveWriter, TickArchive
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant

TICKS = 14


def read(root: Path, table: str) -> list[dict]:
    return ds.dataset(root / table, format="parquet", partitioning="hive").to_table().to_pylist()


async def test_the_daemon_archives_a_row_per_vertex_per_tick_and_its_decisions(tmp_path: Path) -> None:
    metrics = MetricsReporter()
    writer = ArchiveWriter(tmp_path, flush_interval_ms=6 * TICK_S * 1000, metrics=metrics)
    world = sim_world(8, QUICK, metrics=metrics, archive=TickArchive(writer))
    job = world.sim.submit(work_job(name="busy", input_rate=Constant(rate=3000.0)))
    for _ in range(TICKS):
        await world.tick()
    await world.daemon.aclose()  # writes what is still buffered

    samples = read(tmp_path, "samples")
    vertices = {v.id: v for v in world.outcomes[0].decision.evaluation.sample.topology}  # type: ignore[union-attr]
    ticks = sorted({r["ts_ms"] for r in samples})
    assert 1 < len(ticks) <= TICKS
    for ts in ticks:  # one row per vertex per tick, no more
        assert sorted(r["vertex"] for r in samples if r["ts_ms"] == ts) == sorted(vertices)
    assert {(r["cluster"], r["job"], r["job_name"]) for r in samples} == {("sim", job, "busy")}
    last = max(ticks)
    rows = sorted((r for r in samples if r["ts_ms"] == last), key=lambda r: r["vertex_index"])
    assert [r["vertex"] for r in rows] == list(vertices)  # topological order
    assert [r["parallelism"] for r in rows] == [world.sim.parallelism(job)[v.name] for v in vertices.values()]
    assert rows[0]["inputs"] == [] and rows[1]["inputs"][0]["source"] == rows[0]["vertex"]
    assert all(r["num_records_in"] >= 0 for r in rows)

    decisions = read(tmp_path, "decisions")
    assert len({r["ts_ms"] for r in decisions}) == TICKS  # every tick's outcome
    scaled = [o for o in world.outcomes if o.outcome is Reason.SCALING]
    assert scaled, "the load needs a scale-up within the ticks"
    applied = [
        r for r in decisions if r["status"] == "applied" and r["target_parallelism"] != r["parallelism"]
    ]
    asked = {vid: c.target for o in scaled for vid, c in o.decision.changes.items()}  # type: ignore[union-attr]
    assert {r["vertex"]: r["requested_parallelism"] for r in applied} == asked
    assert metrics.registry.get_sample_value(
        "flink_autoscaler_archive_rows_total", {"table": "samples"}
    ) == len(samples)
    assert metrics.registry.get_sample_value(
        "flink_autoscaler_archive_failures_total", {"operation": "write"}
    ) in (
        None,
        0.0,
    )
