"""The synthetic history archive (``bench/history_gen.py``) reads back as the daemon's own would: every
sample a complete JobSample of a chain, counters that only restart with the job, a backlog never
negative, a decision for every tick and every rescale seen in the samples' parallelism."""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from autoscaler.archive.reader import ArchivedSamples, read_samples
from autoscaler.archive.schema import DECISIONS_SCHEMA, SAMPLES_SCHEMA
from autoscaler.settings import AutoscalerOptions

BENCH = Path(__file__).resolve().parents[3] / "bench"
JOBS, VERTICES, TICKS = 3, 4, 360  # 1 hour at 10 s
COUNTERS = ("num_records_in", "num_records_out", "accumulated_busy_time_ms", "accumulated_busy_time_agg_ms")


@pytest.fixture(scope="module")
def gen() -> Iterator[ModuleType]:
    """The generator, imported the way the script runs (from ``bench/``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        yield importlib.import_module("history_gen")


@pytest.fixture(scope="module")
def archive(gen: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("history")
    made = gen.generate(root, jobs=JOBS, vertices=VERTICES, hours=1, sample_interval_s=10, seed=1, clusters=1)
    return root, made


@pytest.fixture(scope="module")
def samples(archive: tuple[Path, Any]) -> ArchivedSamples:
    return read_samples(archive[0], AutoscalerOptions())


@pytest.fixture(scope="module")
def decisions(archive: tuple[Path, Any]) -> list[dict[str, Any]]:
    table = ds.dataset(archive[0] / "decisions", format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: (r["job_name"], r["ts_ms"]))


def test_every_sample_reads_back_complete_as_a_chain(
    archive: tuple[Path, Any], samples: ArchivedSamples
) -> None:
    root, made = archive
    assert samples.incomplete == 0
    assert sorted(samples.jobs) == [f"bench-0/job-{j:05d}" for j in range(JOBS)]
    assert sum(len(ticks) for ticks in samples.jobs.values()) * VERTICES == made.sample_rows
    for ticks in samples.jobs.values():
        for tick in ticks:
            sample = tick.sample
            ids = [info.id for info in sample.topology]
            assert len(ids) == VERTICES and all(len(i) == 32 for i in ids)
            assert len(sample.job.job_id) == 32 and tick.tick_ms == sample.ts_ms
            assert [(e.source, e.target) for e in sample.topology.edges] == list(pairwise(ids))
            assert sample.num_source_partitions == {ids[0]: 32}
            src = sample.vertices[ids[0]]
            assert src.pending_records >= 0 and math.isnan(src.observed_tpr)
            assert all(math.isnan(sample.vertices[i].pending_records) for i in ids[1:])
            slots = sample.taskmanagers
            assert slots.slots_free == slots.slots_total - max(info.parallelism for info in sample.topology)
    files = sorted(p.relative_to(root).parts[:4] for p in root.rglob("*.parquet"))
    assert len(files) == made.files == 2 * JOBS
    assert {f[2].startswith("job=") and f[3] == "day=2026-01-01" for f in files} == {True}
    for path in root.rglob("*.parquet"):
        expected = SAMPLES_SCHEMA if path.parts[-5] == "samples" else DECISIONS_SCHEMA
        written = pq.read_schema(path)  # Parquet renames nested children (list "item" -> "element")
        assert written.equals(expected) and written.metadata == expected.metadata


def test_counters_only_restart_with_the_job(samples: ArchivedSamples) -> None:
    restarts = 0
    for ticks in samples.jobs.values():
        for before, after in pairwise(ticks):
            a, b = before.sample, after.sample
            restarted = b.running_since_ms != a.running_since_ms
            restarts += restarted
            assert b.running_since_ms >= a.running_since_ms
            for vid, metrics in b.vertices.items():
                for name in COUNTERS:
                    assert restarted or getattr(metrics, name) >= getattr(a.vertices[vid], name), name
                # a subtask is busy at most the time it ran: the counters started at the restart
                busy = metrics.accumulated_busy_time_agg_ms
                assert 0 <= busy <= b.ts_ms - b.running_since_ms + 1
    assert restarts > 0


def test_a_decision_for_every_tick_and_a_rescale_for_every_new_parallelism(
    samples: ArchivedSamples, decisions: list[dict[str, Any]]
) -> None:
    for key, ticks in samples.jobs.items():
        name = key.split("/")[1]
        rows = [r for r in decisions if r["job_name"] == name]
        by_tick: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_tick.setdefault(row["ts_ms"], []).append(row)
        assert len(by_tick) == TICKS
        sampled = {t.sample.ts_ms for t in ticks}
        for ts, tick_rows in by_tick.items():
            if ts in sampled:
                assert len(tick_rows) == VERTICES and all(r["vertex"] for r in tick_rows)
            else:  # restarting: one vertexless row
                assert [(r["vertex"], r["outcome"], r["status"]) for r in tick_rows] == [
                    (None, "NotRunning", "not_evaluated")
                ]
        rescales = {ts: rs for ts, rs in by_tick.items() if any(r["rescale_issued"] for r in rs)}
        for rs in rescales.values():
            assert {(r["outcome"], r["status"]) for r in rs} == {("Scaling", "applied")}
            assert all(r["requested_parallelism"] == r["target_parallelism"] for r in rs)
        # each change of parallelism in the samples is the last rescale's targets, after a restart
        for before, after in pairwise(ticks):
            old = {i.id: i.parallelism for i in before.sample.topology}
            new = {i.id: i.parallelism for i in after.sample.topology}
            issued = [ts for ts in rescales if before.sample.ts_ms <= ts < after.sample.ts_ms]
            restarted = after.sample.running_since_ms != before.sample.running_since_ms
            assert restarted == bool(issued)
            if issued:
                assert new == {r["vertex"]: r["target_parallelism"] for r in rescales[issued[-1]]} != old
            else:
                assert new == old
    assert any(r["rescale_issued"] for r in decisions)


def test_the_same_seed_makes_the_same_archive(gen: ModuleType, tmp_path: Path) -> None:
    def build(root: Path, workers: int) -> dict[str, bytes]:
        gen.generate(
            root, jobs=2, vertices=3, hours=0.5, sample_interval_s=10, seed=7, clusters=2, workers=workers
        )
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.parquet")}

    one = build(tmp_path / "a", 1)
    assert one == build(tmp_path / "b", 2)  # byte for byte, whatever the processes
    assert {name.split("/")[1] for name in one} == {"cluster=bench-0", "cluster=bench-1"}
