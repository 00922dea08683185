"""The backtest's report and command: totals per world side by side, the jobs that differ most, the
failed replays named; an unusable input is a clear message and exit code 2, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from autoscaler.backtest.command import backtest_command
from autoscaler.backtest.jobs import ACTUAL, BEST, RESULT_SCHEMA
from autoscaler.backtest.report import render_report, totals

WORLDS = {ACTUAL: "actual", "A": "A: a.yaml", "B": "B: b.yaml"}


def row(
    job: str, world: str, restarts: int, below: float, behind: float, slots: float, **extra: object
) -> dict:
    return {
        "cluster": "prod",
        "job_name": job,
        "world": world,
        "ticks": 8640,
        "first_ms": 1_800_000_000_000,
        "last_ms": 1_800_086_390_000,
        "restarts": restarts,
        "below_capacity_s": below,
        "backlog_above_target_s": behind,
        "slot_hours": slots,
        "diverged_ms": extra.get("diverged_ms"),
        "final_slots": 4,
        "cost": extra.get("cost", slots * 3600 + restarts * 600 + behind * 30),
        "error": extra.get("error"),
    }


RESULTS = pa.Table.from_pylist(
    [
        row("orders", ACTUAL, 6, 3600.0, 1800.0, 96.0),
        row("orders", "A", 2, 600.0, 300.0, 110.0, diverged_ms=1_800_000_600_000),
        row("orders", "B", 6, 3600.0, 1800.0, 96.0),
        row("clicks", ACTUAL, 0, 0.0, 0.0, 48.0),
        row("clicks", "A", 0, 0.0, 0.0, 48.0),
        row("clicks", "B", 0, 0.0, 0.0, 0.0, error="ValueError: no graph"),
    ],
    schema=RESULT_SCHEMA,
)


def test_totals_sum_each_world_over_the_jobs_that_replayed() -> None:
    sums = totals(RESULTS)
    assert sums[ACTUAL] == {
        "restarts": 6,
        "below_capacity_s": 3600,
        "backlog_above_target_s": 1800,
        "slot_hours": 144,
        "cost": 144 * 3600 + 6 * 600 + 1800 * 30,
        "cost_planned": 0,  # no job has a best plan here
    }
    assert sums["A"]["restarts"] == 2 and sums["A"]["slot_hours"] == 158
    assert sums["B"]["slot_hours"] == 96  # the failed replay is not counted


def test_the_report_puts_the_worlds_side_by_side_and_names_what_failed() -> None:
    text = render_report(RESULTS, WORLDS, lag_target_s=30, top=5, seconds=12.3)
    assert text.startswith("Backtest of 2 job(s), ")
    assert "17,280 job-ticks, replayed in 12 s." in text
    lines = text.splitlines()
    assert any(line.split()[:2] == ["A:", "a.yaml"] and "158.0" in line for line in lines)
    assert "1 replay(s) failed and are not counted:" in text and "prod/clicks (B): ValueError" in text
    assert "prod/orders" in text and "never" in text  # B never diverged for orders
    assert "prod/clicks\n" not in text  # the same in every world that replayed: not shown in detail


def test_the_best_plan_in_hindsight_gives_each_world_its_regret_over_the_jobs_it_planned() -> None:
    planned = pa.Table.from_pylist(
        [
            *RESULTS.to_pylist(),
            row("orders", BEST, 1, 0.0, 100.0, 90.0, cost=90 * 3600 + 600 + 3000.0),
        ],
        schema=RESULT_SCHEMA,
    )
    sums = totals(planned)
    # clicks has no best plan: its cost counts in the world's cost, not in what the regret divides.
    assert sums["A"]["cost_planned"] == 110 * 3600 + 2 * 600 + 300 * 30
    assert sums["A"]["cost"] == sums["A"]["cost_planned"] + 48 * 3600

    text = render_report(planned, {**WORLDS, BEST: "best in hindsight"}, lag_target_s=30, top=5)

    regret_a = (110 * 3600 + 2 * 600 + 300 * 30) / (90 * 3600 + 600 + 3000)
    a_line = next(line for line in text.splitlines() if line.split()[:2] == ["A:", "a.yaml"])
    assert a_line.split()[-1] == f"{regret_a:.2f}"
    best_line = next(line for line in text.splitlines() if line.strip().startswith("best in hindsight"))
    assert best_line.split()[-1] == "1.00"
    assert "1 of 2 job(s) had one to plan" in text
    assert "prod/orders" in text  # still shown for A against actual, not because of the yardstick


def test_a_missing_archive_or_a_bad_config_is_a_message_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert backtest_command(tmp_path / "nowhere", [tmp_path / "a.yaml"]) == 2
    assert "no archive at" in capsys.readouterr().err
    (tmp_path / "samples").mkdir()
    bad = tmp_path / "a.yaml"
    bad.write_text("control_loop_interval: soon\n", encoding="utf-8")
    assert backtest_command(tmp_path, [bad]) == 2
    assert "control_loop_interval" in capsys.readouterr().err


def test_rows_that_make_no_job_are_an_error_row_not_a_failed_backtest() -> None:
    from autoscaler.archive.schema import SAMPLES_SCHEMA
    from autoscaler.backtest.jobs import BacktestOptions, backtest_tables
    from autoscaler.settings import Settings

    row = {f.name: None for f in SAMPLES_SCHEMA}
    row.update(
        schema_version=1, ts_ms=10_000, tick_ms=10_000, job_name="broken", running_since_ms=0, vertex="v1",
        vertex_name="map", vertex_index=0, parallelism=1, max_parallelism=8,
        inputs=[{"source": "nowhere", "ship_strategy": "HASH"}],  # an edge from a vertex the job lacks
    )  # fmt: skip
    table = pa.Table.from_pylist([row], schema=SAMPLES_SCHEMA)
    table = table.append_column("cluster", pa.array(["prod"])).append_column("job", pa.array(["f" * 32]))
    options = BacktestOptions({"A": Settings(clusters=[], metrics_address="")})

    [result] = backtest_tables(table, None, options).to_pylist()

    assert (result["cluster"], result["job_name"], result["world"]) == ("prod", "broken", ACTUAL)
    assert result["error"].startswith("unreadable history: ValueError")


def test_top_zero_shows_the_totals_alone() -> None:
    text = render_report(RESULTS, WORLDS, lag_target_s=30, top=0)
    assert "prod/orders" not in text and "fared the same" not in text


def test_no_rows_is_said_in_one_line() -> None:
    assert (
        render_report(RESULT_SCHEMA.empty_table(), WORLDS, lag_target_s=30) == "No replayable history found."
    )
