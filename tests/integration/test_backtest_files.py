"""What each Spark task of the backtest runs, without Spark: one archived job read from its own files
and backtested. It equals the backtest of the same job's rows read as a whole archive; a job whose files
cannot be read gets an error row, and the others are still backtested."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backtest_history import LIVE, record, table
from sim_world import sim_world

from autoscaler.archive.schema import SAMPLES
from autoscaler.backtest.files import backtest_archived_job, job_files
from autoscaler.backtest.jobs import ACTUAL, BEST, BacktestOptions, backtest_tables


def job_ids(root: Path, cluster: str) -> dict[str, list[str]]:
    """Each archived job name's JobIDs, as the Spark plan's listing finds them."""
    names: dict[str, set[str]] = {}
    rows = table(root, SAMPLES).select(["cluster", "job", "job_name"]).to_pylist()
    for row in rows:
        if row["cluster"] == cluster:
            names.setdefault(row["job_name"], set()).add(row["job"])
    return {name: sorted(ids) for name, ids in names.items()}


def test_a_job_read_from_its_own_files_backtests_as_the_whole_archive_does(tmp_path: Path) -> None:
    world = asyncio.run(record(tmp_path, jobs=2))
    options = BacktestOptions({"A": sim_world(16, LIVE).daemon.settings})
    cluster = world.daemon.settings.clusters[0].name
    plain = backtest_tables(table(tmp_path, "samples"), table(tmp_path, "decisions"), options).to_pylist()

    for name, ids in job_ids(tmp_path, cluster).items():
        rows = backtest_archived_job(tmp_path, cluster, name, ids, options).to_pylist()
        assert rows == [r for r in plain if r["job_name"] == name]
        assert [r["world"] for r in rows] == [ACTUAL, "A", BEST]  # the best plan in hindsight last
    assert backtest_archived_job(tmp_path, cluster, "no-such-job", ["0" * 32], options).num_rows == 0


def test_a_job_whose_file_is_not_parquet_gets_an_error_row_and_the_others_go_on(tmp_path: Path) -> None:
    world = asyncio.run(record(tmp_path, jobs=2))
    options = BacktestOptions({"A": sim_world(16, LIVE).daemon.settings})
    cluster = world.daemon.settings.clusters[0].name
    ids = job_ids(tmp_path, cluster)
    broken = job_files(tmp_path, SAMPLES, cluster, ids["stepped-0"])[0]
    Path(broken).write_bytes(b"not parquet at all")

    rows = backtest_archived_job(tmp_path, cluster, "stepped-0", ids["stepped-0"], options).to_pylist()
    assert len(rows) == 1
    assert rows[0]["world"] == ACTUAL and rows[0]["restarts"] is None
    assert rows[0]["error"].startswith("unreadable history: ")
    others = backtest_archived_job(tmp_path, cluster, "stepped-1", ids["stepped-1"], options).to_pylist()
    assert [r["error"] for r in others] == [None, None, None]  # actual, A, the best plan
