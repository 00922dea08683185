"""The backtest on Spark: the archive's jobs listed, each job read and replayed in a Spark task of its own;
the results equal the plain-Python backtest of the same rows, job by job and world by world, and the
jobs replayed so far are told while it runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from backtest_history import LIVE, WIDER, record, table
from sim_world import sim_world

from autoscaler.backtest.jobs import BacktestOptions, backtest_tables
from autoscaler.backtest.progress import JobsDone
from autoscaler.backtest.spark import backtest_on_spark

pytestmark = pytest.mark.spark


def by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["cluster"], r["job_name"], r["world"]): r for r in rows}


def test_the_backtest_on_spark_equals_the_plain_python_one(spark: Any, tmp_path: Path) -> None:
    asyncio.run(record(tmp_path, jobs=2))
    options = BacktestOptions(
        {"A": sim_world(16, LIVE).daemon.settings, "B": sim_world(16, WIDER).daemon.settings}
    )

    told: list[JobsDone] = []
    on_spark = backtest_on_spark(
        spark, tmp_path, options, progress=told.append, progress_every_s=0.01
    ).to_pylist()
    plain = backtest_tables(table(tmp_path, "samples"), table(tmp_path, "decisions"), options).to_pylist()

    assert len(on_spark) == 8  # two jobs: actual, A, B and the best plan in hindsight
    assert by_key(on_spark) == by_key(plain)
    # Two jobs, each replayed for seconds in its own task: told while they ran, never more than there are.
    assert told and {t.jobs for t in told} == {2} and all(0 <= t.done <= 2 for t in told)
    assert [t.done for t in told] == sorted(t.done for t in told)
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
    only = backtest_on_spark(spark, tmp_path, options, job_names=["stepped-1"]).to_pylist()
    assert {r["job_name"] for r in only} == {"stepped-1"}


def test_an_empty_archive_backtests_to_no_rows(spark: Any, tmp_path: Path) -> None:
    options = BacktestOptions({"A": sim_world(16, LIVE).daemon.settings})
    assert backtest_on_spark(spark, tmp_path, options).num_rows == 0


def test_each_worlds_series_comes_back_from_spark_as_the_plain_python_backtest_keeps_it(
    spark: Any, tmp_path: Path
) -> None:
    asyncio.run(record(tmp_path, jobs=1))
    options = BacktestOptions({"A": sim_world(16, WIDER).daemon.settings}, series=True)
    on_spark = backtest_on_spark(spark, tmp_path, options).to_pylist()
    plain = backtest_tables(table(tmp_path, "samples"), table(tmp_path, "decisions"), options).to_pylist()
    assert by_key(on_spark) == by_key(plain)
    assert all(r["series_ms"] for r in on_spark)  # the list columns crossed the JVM
    empty = backtest_on_spark(spark, tmp_path / "none", options)
    assert "series_ms" in empty.column_names and empty.num_rows == 0
