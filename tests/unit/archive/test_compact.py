"""A finished day's part files merged into one: the rows unchanged, today's files left alone, a crash
between the merge and the deletes repaired at the next pass, and a failure counted, never raised."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from archive_values import DAY_MS, JOB, OTHER, T0, outcome, sample

from autoscaler.archive import ArchiveWriter
from autoscaler.archive.compact import REPLACES_KEY, compact_day
from autoscaler.archive.layout import partition_dir
from autoscaler.metrics import MetricsReporter

FAR = 10 * DAY_MS  # a flush interval no test reaches


def rows(directory: Path) -> list[tuple]:
    table = ds.dataset(directory, format="parquet").to_table()
    return sorted(zip(table["ts_ms"].to_pylist(), table["vertex"].to_pylist(), strict=True))


def three_flushes(root: Path, start: int = T0) -> ArchiveWriter:
    writer = ArchiveWriter(root, flush_interval_ms=FAR)
    for i in range(3):
        ts = start + i * 60_000
        writer.add(ts, [sample(ts)], [outcome("unchanged", ts)])
        writer.flush(ts)
    return writer


def test_a_finished_days_files_become_one_with_the_same_rows(tmp_path: Path) -> None:
    writer = three_flushes(tmp_path)
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    before = rows(day)
    assert len(list(day.glob("part-*.parquet"))) == 3 and len(before) == 6
    assert writer.compact(T0 + 3_600_000) == 0  # still that day: left as written
    assert writer.compact(T0 + DAY_MS) == 2  # the next day: samples and decisions merged
    [merged] = day.glob("part-*.parquet")
    assert rows(day) == before
    replaced = json.loads(pq.read_schema(merged).metadata[REPLACES_KEY])
    assert len(replaced) == 3 and merged.name not in replaced
    assert writer.compact(T0 + DAY_MS) == 0  # one file: nothing more to do, nothing read


def test_the_files_a_merge_replaced_are_deleted_at_the_next_pass_after_a_crash(tmp_path: Path) -> None:
    three_flushes(tmp_path)
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    before, aside = rows(day), tmp_path / "aside"
    shutil.copytree(day, aside)
    assert compact_day(day, T0 + DAY_MS)
    for path in aside.glob("part-*.parquet"):  # as if the daemon died before deleting them
        shutil.copy(path, day / path.name)
    assert len(rows(day)) == 2 * len(before)
    assert not compact_day(day, T0 + DAY_MS + 1)
    assert rows(day) == before and len(list(day.glob("part-*.parquet"))) == 1


def test_files_of_different_schemas_are_left_as_they_are(tmp_path: Path) -> None:
    three_flushes(tmp_path)
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    pq.write_table(pa.table({"ts_ms": [T0], "vertex": ["x"]}), day / "part-9999999999999-other.parquet")
    assert not compact_day(day, T0 + DAY_MS)
    assert len(list(day.glob("part-*.parquet"))) == 4


def test_a_file_that_cannot_be_read_is_counted_not_raised(tmp_path: Path) -> None:
    metrics = MetricsReporter()
    writer = three_flushes(tmp_path)
    writer.metrics = metrics
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    (day / "part-9999999999999-broken.parquet").write_bytes(b"not parquet")
    assert writer.compact(T0 + DAY_MS) == 1  # the decisions still merged
    failures = metrics.registry.get_sample_value(
        "flink_autoscaler_archive_failures_total", {"operation": "compact"}
    )
    assert failures == 1 and len(list(day.glob("part-*.parquet"))) == 4


def test_the_hourly_pass_of_a_flush_compacts_the_days_before(tmp_path: Path) -> None:
    writer = three_flushes(tmp_path)
    writer.add(T0 + DAY_MS + 2 * 3_600_000, [sample(T0 + DAY_MS)], [])
    writer.flush(T0 + DAY_MS + 2 * 3_600_000)  # more than an hour since the last pass
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    assert len(list(day.glob("part-*.parquet"))) == 1


def test_a_broken_partition_does_not_stop_the_others(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, flush_interval_ms=FAR)
    for i in range(2):
        writer.add(T0 + i, [sample(T0 + i), sample(T0 + i, OTHER)], [])
        writer.flush(T0 + i)
    broken = partition_dir(tmp_path, "samples", OTHER.cluster, OTHER.job_id, "2025-11-27")
    (broken / "part-0000000000000-broken.parquet").write_bytes(b"not parquet")
    assert writer.compact(T0 + DAY_MS) == 1  # JOB's samples merged; OTHER's day left as it was
    assert len(list(broken.glob("part-*.parquet"))) == 3


def test_only_the_days_this_writer_wrote_are_compacted(tmp_path: Path) -> None:
    three_flushes(tmp_path)
    writer = ArchiveWriter(tmp_path, flush_interval_ms=FAR)  # another daemon, or this one restarted
    assert writer.compact(T0 + DAY_MS) == 0
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    assert len(list(day.glob("part-*.parquet"))) == 3


def test_two_merges_of_the_same_files_keep_one(tmp_path: Path) -> None:
    three_flushes(tmp_path)
    day = partition_dir(tmp_path, "samples", JOB.cluster, JOB.job_id, "2025-11-27")
    before, aside = rows(day), tmp_path / "aside"
    shutil.copytree(day, aside)
    assert compact_day(day, T0 + DAY_MS)  # one daemon's merge ...
    assert compact_day(aside, T0 + DAY_MS + 1)  # ... and another's of the same files, in the same instant
    [second] = aside.glob("part-*.parquet")
    shutil.copy(second, day / second.name)
    assert len(rows(day)) == 2 * len(before)
    assert not compact_day(day, T0 + DAY_MS + 2)
    assert rows(day) == before and [p.name for p in day.glob("part-*.parquet")] != [second.name]
