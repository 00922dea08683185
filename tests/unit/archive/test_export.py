"""``export-history``: the state database's metric window and scaling history, written in the archive's
layout and schema, read back equal, and a rerun that adds nothing; the messages when there is nothing
to read or nowhere to write."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from archive_values import DAY_MS, JOB, T0, sample

from autoscaler.archive.export import UNKNOWN_JOB_ID, export_history, parse_since
from autoscaler.archive.schema import DECISIONS_SCHEMA, SAMPLE_FIELDS, SAMPLES_SCHEMA
from autoscaler.cli import main
from autoscaler.model import JobRef
from autoscaler.settings import ConfigError
from autoscaler.state import JobState, ScalingRecord, open_stores
from autoscaler.state.store import custom_window_rows, window_rows


def read(root: Path, table: str) -> list[dict]:
    dataset = ds.dataset(root / table, format="parquet", partitioning="hive")
    return sorted(dataset.to_table().to_pylist(), key=lambda r: (r["ts_ms"], r["vertex"]))


@pytest.fixture
def state_url(tmp_path: Path) -> str:
    """A database holding ``orders``' window (3 ticks, the last a day later) and one rescale, and a
    job ``idle`` with a window but no state (so no JobID)."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    stores = open_stores(url)
    samples = [sample(T0), sample(T0 + 10_000), sample(T0 + DAY_MS)]
    idle = sample(T0, JobRef("c2", "c" * 32, "idle"))
    stores.state.append_windows({"c1/orders": [r for s in samples for r in window_rows(s)]})
    stores.state.append_windows({"c2/idle": window_rows(idle)})
    stores.state.append_custom_windows({"c1/orders": [r for s in samples for r in custom_window_rows(s)]})
    record = ScalingRecord(
        T0 + 5_000, {"work": (4, 6)}, confirmed_ms=T0 + 9_000, metrics={"work": (900.0, 1350.0)}
    )
    stores.state.save_many({"c1/orders": JobState(history=(record,), job_id=JOB.job_id)})
    stores.close()
    return url


def test_the_window_and_the_history_read_back_as_they_went_in(tmp_path: Path, state_url: str) -> None:
    out = tmp_path / "archive"
    summary = export_history(state_url, out)
    assert summary.rows == {"samples": 8, "decisions": 1} and summary.jobs == 2 and summary.files == 4
    rows = read(out, "samples")
    orders = [r for r in rows if r["job_name"] == "orders"]
    ticks = [T0, T0 + 10_000, T0 + DAY_MS]
    assert [(r["ts_ms"], r["vertex"]) for r in orders] == [(t, v) for t in ticks for v in ("src", "work")]
    expected = sample(T0 + 10_000)
    for row in orders[2:4]:
        assert (row["cluster"], row["job"], row["day"]) == ("c1", JOB.job_id, "2025-11-27")
        assert row["running_since_ms"] == expected.running_since_ms
        for name in SAMPLE_FIELDS:
            value = getattr(expected.vertices[row["vertex"]], name)
            assert row[name] == value or (math.isnan(row[name]) and math.isnan(value)), name
    assert orders[3]["custom_metrics"] == [("queue", 3.0)] and orders[3]["job_custom_metrics"] == [
        ("ext.lag", 9.0)
    ]
    assert orders[3]["parallelism"] is None and orders[3]["inputs"] is None  # not in the database: null
    assert orders[4]["day"] == "2025-11-28"
    idle = [r for r in rows if r["job_name"] == "idle"]
    assert {r["job"] for r in idle} == {UNKNOWN_JOB_ID} and len(idle) == 2
    [rescale] = read(out, "decisions")
    assert rescale["ts_ms"] == T0 + 5_000 and rescale["vertex"] == "work" and rescale["status"] == "applied"
    assert (rescale["parallelism"], rescale["target_parallelism"], rescale["outcome"]) == (4, 6, "Scaling")
    assert (rescale["true_processing_rate"], rescale["expected_processing_rate"]) == (900.0, 1350.0)
    assert rescale["load"] is None  # not kept by the history: null, not NaN


def test_the_export_has_the_archives_schema(tmp_path: Path, state_url: str) -> None:
    export_history(state_url, tmp_path / "a")
    for table, schema in (("samples", SAMPLES_SCHEMA), ("decisions", DECISIONS_SCHEMA)):
        [path] = list((tmp_path / "a" / table).rglob("*.parquet"))[:1]
        assert ds.dataset(path).schema.remove_metadata() == schema.remove_metadata()


def test_a_rerun_replaces_its_partitions_instead_of_adding_rows(tmp_path: Path, state_url: str) -> None:
    out = tmp_path / "archive"
    export_history(state_url, out)
    daemon_file = next((out / "samples").rglob("*.parquet")).with_name("part-0000000000001-x.parquet")
    daemon_file.write_bytes(next((out / "samples").rglob("export.parquet")).read_bytes())
    export_history(state_url, out)
    assert len(read(out, "samples")) == 8 + 2  # the export's rows once, the daemon's file left alone
    daemon_file.unlink()
    assert len(read(out, "samples")) == 8 and len(read(out, "decisions")) == 1


def test_since_and_cluster_narrow_the_export(tmp_path: Path, state_url: str) -> None:
    out = tmp_path / "archive"
    summary = export_history(state_url, out, since_ms=T0 + 10_000, clusters=["c1"])
    assert summary.rows == {"samples": 4, "decisions": 0} and summary.jobs == 1


def test_since_reads_a_date_a_date_time_or_a_duration_before_now() -> None:
    assert parse_since("2025-11-27", 0) == T0
    assert parse_since("2025-11-27T01:00", 0) == T0 + 3_600_000
    assert parse_since("2025-11-27T01:00+01:00", 0) == T0
    assert parse_since("2 d", T0) == T0 - 2 * DAY_MS
    with pytest.raises(ConfigError, match="--since 'yesterday'"):
        parse_since("yesterday", T0)


def test_the_cli_exports_and_says_so(
    tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLINK_AUTOSCALER_STATE_URL", state_url)
    assert main(["export-history", "--out", str(tmp_path / "a")]) == 0
    assert "exported 8 sample rows and 1 decision rows of 2 job(s)" in capsys.readouterr().out
    assert main(["export-history", "--out", str(tmp_path / "a"), "--cluster", "nope"]) == 1
    assert "nothing to export for cluster(s) nope" in capsys.readouterr().err


def test_the_cli_explains_a_missing_an_empty_or_an_unusable_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLINK_AUTOSCALER_STATE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    assert main(["export-history", "--out", str(tmp_path / "a")]) == 2
    assert "no state database at" in capsys.readouterr().err
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    open_stores(empty).close()
    monkeypatch.setenv("FLINK_AUTOSCALER_STATE_URL", empty)
    assert main(["export-history", "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert "nothing to export: the state database holds no samples or rescales (0 job(s) selected)" in err
    assert not (tmp_path / "a").exists()
    monkeypatch.setenv("FLINK_AUTOSCALER_STATE_URL", "memory://")
    assert main(["export-history", "--out", str(tmp_path / "a")]) == 2
    assert "memory://" in capsys.readouterr().err


def test_an_unwritable_directory_is_a_clear_error(tmp_path: Path, state_url: str) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot write the archive under"):
        export_history(state_url, tmp_path / "file")


def test_a_database_of_an_older_schema_is_a_clear_error(tmp_path: Path, state_url: str) -> None:
    from autoscaler.state.db import downgrade, make_engine

    engine = make_engine(state_url)
    downgrade(engine, "0003")  # before the custom metrics' window
    engine.dispose()
    with pytest.raises(ConfigError, match="older version is migrated when this version's daemon starts"):
        export_history(state_url, tmp_path / "a")
