"""The history archive on a running daemon: the real daemon against the simulator (Python evaluator,
fake clock) with ``archive_dir`` set, its Parquet read back after a few ticks and a rescale.

Every collected sample is a row per vertex and tick, every job outcome a row per vertex, the rescale
the daemon made is there as ``applied`` with the parallelism it asked for, and the rows are what the
daemon saw: the parallelism and the graph rebuild the job's topology.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from sim_world import QUICK, TICK_S, sim_world

from autoscaler.archive import ArchiveWriter, TickArchive
from autoscaler.archive.reader import read_samples
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
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


def comparable(sample: JobSample) -> tuple[Any, ...]:
    """What the evaluator reads of a sample, NaN made equal to itself."""

    def plain(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if dataclasses.is_dataclass(value):
            return tuple(plain(getattr(value, f.name)) for f in dataclasses.fields(value))
        if isinstance(value, Mapping):
            return tuple(sorted((k, plain(v)) for k, v in value.items()))
        return value

    return (
        sample.job,
        sample.ts_ms,
        sample.running_since_ms,
        sample.topology,
        plain(sample.vertices),
        plain(sample.taskmanagers),
        plain(sample.num_source_partitions),
        plain(sample.custom_vertex_metrics),
        plain(sample.custom_job_metrics),
        sample.stale_ticks,
        sample.restamped_ms,
    )


async def test_the_archive_reads_back_as_the_samples_the_daemon_evaluated(tmp_path: Path) -> None:
    """What a backtest replays is what the daemon had: each tick's samples, the graph as it ran (the
    rescale included), and the tick that read each one."""
    writer = ArchiveWriter(tmp_path, flush_interval_ms=5 * TICK_S * 1000, metrics=MetricsReporter())
    archive = TickArchive(writer)
    handed: list[tuple[int, JobSample]] = []
    hand_over = archive.hand_over

    def recording(now_ms: int, samples: Sequence[JobSample], outcomes: Sequence[Any]) -> None:
        handed.extend((now_ms, s) for s in samples)
        hand_over(now_ms, samples, outcomes)

    archive.hand_over = recording  # type: ignore[method-assign]
    world = sim_world(8, QUICK, archive=archive)
    world.sim.submit(work_job(name="busy", input_rate=Constant(rate=3000.0)))
    world.sim.submit(work_job(name="calm", input_rate=Constant(rate=300.0)))
    for _ in range(TICKS):
        await world.tick()
    await world.daemon.aclose()
    assert any(o.outcome is Reason.SCALING for o in world.outcomes), "a rescale within the ticks"

    options = AutoscalerOptions()
    read = read_samples(tmp_path, options)
    assert read.incomplete == 0
    assert set(read.jobs) == {"sim/busy", "sim/calm"}
    for key, ticks in read.jobs.items():
        live = [(now, s) for now, s in handed if s.job.key == key]
        assert [t.tick_ms for t in ticks] == [now for now, _ in live]  # every tick, in order
        assert [comparable(t.sample) for t in ticks] == [comparable(s) for _, s in live]
        assert all(t.sample.target.options is options for t in ticks)
    busy = [t.sample.topology.vertices for t in read.jobs["sim/busy"]]
    assert len({tuple(v.parallelism for v in vs.values()) for vs in busy}) > 1, "the rescale is seen"
    only_calm = read_samples(tmp_path, options, job_names=["calm"])
    assert set(only_calm.jobs) == {"sim/calm"}
