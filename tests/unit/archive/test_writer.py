"""The archive writer: its schema and partitions, the flush policy, retention, and failures that are
counted, never raised. Plain values and the daemon's clock as plain milliseconds."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from archive_values import DAY_MS, JOB, OTHER, T0, outcome, sample

from autoscaler.archive import ArchiveWriter, TickArchive
from autoscaler.archive import writer as writer_module
from autoscaler.archive.schema import DECISIONS_SCHEMA, SAMPLES_SCHEMA, SCHEMA_VERSION
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobSample

MINUTE = 60_000


def read(root: Path, table: str) -> list[dict]:
    dataset = ds.dataset(root / table, format="parquet", partitioning="hive")
    return sorted(dataset.to_table().to_pylist(), key=lambda r: (r["ts_ms"], r["job"], r["vertex"] or ""))


def metric(metrics: MetricsReporter, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root).parent) for p in root.rglob("*.parquet"))


def test_samples_land_in_hive_partitions_with_every_field(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, flush_interval_ms=10 * DAY_MS)
    writer.add(T0 + 1000, [sample(T0 + 1000), sample(T0 + 1000, OTHER)], [])
    writer.add(T0 + DAY_MS, [sample(T0 + DAY_MS)], [])
    assert writer.flush(T0 + DAY_MS) == 3
    assert files(tmp_path) == [
        "samples/cluster=c%202%2Fx/job=" + "b" * 32 + "/day=2025-11-27",
        "samples/cluster=c1/job=" + "a" * 32 + "/day=2025-11-27",
        "samples/cluster=c1/job=" + "a" * 32 + "/day=2025-11-28",
    ]
    rows = read(tmp_path, "samples")
    assert len(rows) == 6  # two vertices per sample
    assert {r["cluster"] for r in rows} == {"c1", "c 2/x"}  # the partition values come back decoded
    work = next(r for r in rows if r["vertex"] == "work" and r["job"] == JOB.job_id)
    assert work["day"] == "2025-11-27" and work["ts_ms"] == T0 + 1000 and work["job_name"] == "orders"
    assert work["schema_version"] == SCHEMA_VERSION and work["running_since_ms"] == T0 + 1000 - MINUTE
    assert (work["vertex_index"], work["parallelism"], work["max_parallelism"]) == (1, 4, 128)
    assert work["inputs"] == [{"source": "src", "ship_strategy": "HASH"}]
    assert work["busy_time_ms_per_s"] == 500.0 and work["accumulated_busy_time_agg_ms"] == 3e6 / 4
    assert work["custom_metrics"] == [("queue", 3.0)] and work["job_custom_metrics"] == [("ext.lag", 9.0)]
    assert (work["tm_heap_used"], work["tm_count"], work["tm_slots_total"]) == (1e9, 3, 12)
    assert work["tm_memory"]["process"] == 1 and work["stale_ticks"] == 1
    src = next(r for r in rows if r["vertex"] == "src" and r["job"] == JOB.job_id)
    assert src["inputs"] == [] and src["num_source_partitions"] == 8 and src["pending_records"] == 42.0
    assert math.isnan(src["busy_time_ms_per_s"])  # not measured stays NaN, not null


def test_every_file_has_the_tables_schema_and_its_version(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path)
    writer.add(T0, [sample(T0)], [outcome("applied", T0)])
    writer.flush(T0)
    for path in tmp_path.rglob("*.parquet"):
        schema = pq.read_schema(path)
        expected = SAMPLES_SCHEMA if "samples" in path.parts else DECISIONS_SCHEMA
        assert schema.remove_metadata() == expected.remove_metadata()
        assert schema.metadata[b"autoscaler.schema_version"] == str(SCHEMA_VERSION).encode()


@pytest.mark.parametrize("kind", ["applied", "vetoed", "blocked", "unchanged"])
def test_a_decision_is_a_row_per_vertex_with_its_status(tmp_path: Path, kind: str) -> None:
    writer = ArchiveWriter(tmp_path)
    writer.add(T0, [], [outcome(kind, T0)])
    writer.flush(T0)
    rows = {r["vertex"]: r for r in read(tmp_path, "decisions")}
    assert set(rows) == {"src", "work"}
    work = rows["work"]
    assert work["status"] == kind and work["ts_ms"] == T0 and work["sample_ts_ms"] == T0 - 1000
    assert work["parallelism"] == 4 and work["recommended_parallelism"] == (4 if kind == "unchanged" else 6)
    assert work["target_parallelism"] == (4 if kind == "unchanged" else 6)
    assert work["requested_parallelism"] == (6 if kind == "applied" else None)
    assert work["rescale_issued"] is (kind == "applied")
    assert work["vetoed_by"] == ("guard" if kind == "vetoed" else None)
    assert work["true_processing_rate"] == 1000.0 and work["outside_band"] is (kind != "unchanged")
    assert rows["src"]["target_parallelism"] == 2


def test_an_outcome_without_an_evaluation_is_one_row_without_a_vertex(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path)
    writer.add(T0, [], [outcome("not_evaluated", T0)])
    writer.flush(T0)
    [row] = read(tmp_path, "decisions")
    assert (row["vertex"], row["status"], row["outcome"]) == (None, "not_evaluated", "ClusterUnreachable")
    assert row["detail"] == "connection refused" and row["sample_ts_ms"] is None


def test_rows_are_written_once_the_flush_interval_has_passed(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, flush_interval_ms=5 * MINUTE)
    for minute in range(5):  # ticks at 0..4 min: all buffered, nothing written
        writer.add(T0 + minute * MINUTE, [sample(T0 + minute * MINUTE)], [outcome("unchanged", T0)])
    assert files(tmp_path) == [] and writer.buffered_rows == 5 * 2 + 5 * 2
    writer.add(T0 + 5 * MINUTE, [sample(T0 + 5 * MINUTE)], [])
    assert len(files(tmp_path)) == 2 and writer.buffered_rows == 0  # one file per table and partition
    assert len(read(tmp_path, "samples")) == 12


def test_a_buffer_over_its_bytes_flushes_early(tmp_path: Path) -> None:
    probe = ArchiveWriter(tmp_path / "probe", flush_interval_ms=60 * MINUTE)
    probe.add(T0, [sample(T0)], [])
    one_tick = probe.buffered_bytes
    assert 0 < one_tick < 10_000  # Arrow columns: a few hundred bytes a row
    writer = ArchiveWriter(tmp_path / "a", flush_interval_ms=60 * MINUTE, max_buffered_bytes=one_tick + 1)
    writer.add(T0, [sample(T0)], [])
    assert files(tmp_path / "a") == []
    writer.add(T0 + 10_000, [sample(T0 + 10_000)], [])
    assert len(read(tmp_path / "a", "samples")) == 4 and writer.buffered_bytes == 0


def test_rows_arrow_cannot_take_are_dropped_and_counted_the_tick_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = MetricsReporter()
    writer = ArchiveWriter(tmp_path, metrics=metrics)
    real = writer_module.sample_rows

    def wrong_type(value: JobSample, tick_ms: int | None = None) -> list[dict]:
        rows = real(value, tick_ms)
        if value.job is OTHER:
            rows[0]["busy_time_ms_per_s"] = "busy"  # not a float
        return rows

    monkeypatch.setattr(writer_module, "sample_rows", wrong_type)
    writer.add(T0, [sample(T0), sample(T0, OTHER)], [])
    writer.flush(T0)
    assert {r["job"] for r in read(tmp_path, "samples")} == {JOB.job_id}
    assert metric(metrics, "flink_autoscaler_archive_failures_total", operation="convert") == 1


def test_retention_deletes_only_the_days_before_it(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, retention_days=2, flush_interval_ms=10 * DAY_MS)
    for day in range(5):  # 2025-11-27 .. 2025-12-01
        writer.add(T0 + day * DAY_MS, [sample(T0 + day * DAY_MS)], [outcome("applied", T0 + day * DAY_MS)])
    writer.flush(T0)  # written at the first day: nothing is old yet
    assert len(files(tmp_path)) == 10
    now = T0 + 4 * DAY_MS + 3_600_000  # 2025-12-01 01:00: keeps 11-29, 11-30 and today
    assert writer.prune(now) == 4
    days = sorted({r["day"] for r in read(tmp_path, "samples")})
    assert days == ["2025-11-29", "2025-11-30", "2025-12-01"]
    assert sorted({r["day"] for r in read(tmp_path, "decisions")}) == days
    assert writer.prune(now) == 0


def test_retention_zero_keeps_everything(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, retention_days=0)
    writer.add(T0, [sample(T0)], [])
    writer.flush(T0)
    assert writer.prune(T0 + 1000 * DAY_MS) == 0 and len(files(tmp_path)) == 1


def test_a_failing_write_is_counted_and_logged_not_raised(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    root.write_text("a file where the directory should be")
    metrics = MetricsReporter()
    writer = ArchiveWriter(root, metrics=metrics)
    writer.add(T0, [sample(T0)], [outcome("applied", T0)])
    assert writer.flush(T0) == 0
    assert metric(metrics, "flink_autoscaler_archive_failures_total", operation="write") == 2
    assert metric(metrics, "flink_autoscaler_archive_rows_dropped_total", table="samples") == 2
    assert metric(metrics, "flink_autoscaler_archive_rows_dropped_total", table="decisions") == 2
    assert writer.buffered_rows == 0  # dropped, so a lasting failure cannot fill the memory


def test_a_value_that_cannot_become_rows_is_counted_and_the_others_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = MetricsReporter()
    writer = ArchiveWriter(tmp_path, metrics=metrics)

    def broken(_: object) -> list[dict]:
        raise ValueError("no rows")

    monkeypatch.setattr("autoscaler.archive.writer.decision_rows", broken)
    writer.add(T0, [sample(T0)], [outcome("applied", T0)])
    writer.flush(T0)
    assert metric(metrics, "flink_autoscaler_archive_failures_total", operation="convert") == 1
    assert len(read(tmp_path, "samples")) == 2
    assert metric(metrics, "flink_autoscaler_archive_rows_total", table="samples") == 2


async def test_the_tick_archive_writes_what_it_buffered_when_closed(tmp_path: Path) -> None:
    archive = TickArchive(ArchiveWriter(tmp_path, flush_interval_ms=60 * MINUTE))
    for i in range(3):
        archive.hand_over(T0 + i * 10_000, [sample(T0 + i * 10_000)], [outcome("unchanged", T0 + i * 10_000)])
    await archive.close(T0 + 30_000)
    assert len(read(tmp_path, "samples")) == 6 and len(read(tmp_path, "decisions")) == 6
    archive.hand_over(T0 + 40_000, [sample(T0 + 40_000)], [])  # after close: ignored, not raised
    await archive.close(T0 + 50_000)
    assert len(read(tmp_path, "samples")) == 6


async def test_a_full_queue_drops_the_tick_and_counts_it(tmp_path: Path) -> None:
    metrics = MetricsReporter()
    writer = ArchiveWriter(tmp_path, metrics=metrics)
    archive = TickArchive(writer, queue_ticks=1)
    with writer._lock:  # the worker is stuck in add(): the queue fills behind it
        for i in range(4):
            archive.hand_over(T0 + i, [sample(T0 + i)], [])
        dropped = metric(metrics, "flink_autoscaler_archive_failures_total", operation="queue_full")
    await archive.close(T0 + 10)
    assert dropped >= 2  # one in the worker's hands, one queued, the rest dropped
    assert len(read(tmp_path, "samples")) == 2 * (4 - dropped)
