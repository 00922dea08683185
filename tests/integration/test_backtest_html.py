"""``backtest --html`` on a recorded history (the real daemon against the simulator): the series each
world keeps (every tick, its rescales), the scores unchanged by keeping them, the page the command
writes beside its report and ``--out`` file, and that page in a real browser."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pyarrow.csv as pa_csv
import pytest
from backtest_history import LIVE, TICKS, WIDER, histories, record, table, write_config
from browser import CHROMIUM, NO_CHROMIUM, blank_reason, look_at

import autoscaler.backtest.spark as backtest_spark
import autoscaler.evaluate.spark.session as spark_session
from autoscaler.backtest.jobs import ACTUAL, BEST, RESULT_SCHEMA, BacktestOptions, backtest_tables
from autoscaler.cli import main
from autoscaler.settings import Settings


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    asyncio.run(record(root, jobs=2))
    return root


def options(tmp_path: Path, *, series: bool) -> BacktestOptions:
    a = Settings.load(write_config(tmp_path / "a.yaml", LIVE))
    b = Settings.load(write_config(tmp_path / "b.yaml", WIDER))
    return BacktestOptions({"A": a, "B": b}, series=series)


def test_each_world_keeps_every_tick_and_its_rescales_and_scores_the_same(
    history: Path, tmp_path: Path
) -> None:
    samples, decisions = table(history, "samples"), table(history, "decisions")
    plain = backtest_tables(samples, decisions, options(tmp_path, series=False))
    kept = backtest_tables(samples, decisions, options(tmp_path, series=True))
    assert plain.schema == RESULT_SCHEMA
    assert kept.select(RESULT_SCHEMA.names).to_pylist() == plain.to_pylist()  # the scores as without

    puts = {h.key.split("/", 1)[1]: sorted(h.puts) for h in histories(history)}
    rows = kept.to_pylist()
    assert {r["world"] for r in rows} == {ACTUAL, "A", BEST, "B"}
    for r in rows:
        assert r["error"] is None
        assert len(r["series_ms"]) == len(r["series_slots"]) == len(r["series_backlog"])
        assert len(r["restarts_ms"]) == r["restarts"]
        if r["world"] != BEST:  # the best plan runs on its own step grid
            assert len(r["series_ms"]) == TICKS and r["series_ms"] == sorted(r["series_ms"])
        if r["world"] in (ACTUAL, "A"):  # A is the configuration the daemon ran: it did what the daemon did
            assert r["restarts_ms"] == puts[r["job_name"]]
        assert all(s > 0 for s in r["series_slots"]) and all(b >= 0 for b in r["series_backlog"])
    assert any(r["series_backlog"] and max(r["series_backlog"]) > 0 for r in rows)


def run_backtest(history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    """The command as a user runs it, with the plain-Python backtest in place of Spark's (the same
    rows: tests/integration/test_backtest_spark.py) so that no JVM starts."""

    class NoSpark:
        def stop(self) -> None:
            pass

    def plain(_spark: Any, root: Path, opts: BacktestOptions, **_: Any) -> Any:
        return backtest_tables(table(root, "samples"), table(root, "decisions"), opts)

    monkeypatch.setattr(spark_session, "create_spark_session", lambda _settings: NoSpark())
    monkeypatch.setattr(backtest_spark, "backtest_on_spark", plain)
    a, b = write_config(tmp_path / "a.yaml", LIVE), write_config(tmp_path / "b.yaml", WIDER)
    return main(["backtest", "--history", str(history), "-c", str(a), "--against", str(b), *extra])


def test_the_command_writes_the_page_and_out_keeps_its_columns(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page, out = tmp_path / "report" / "backtest.html", tmp_path / "results.csv"
    assert run_backtest(history, tmp_path, monkeypatch, "--html", str(page), "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "Backtest of 2 job(s)" in printed and f"The report as a page: {page}" in printed
    html = page.read_text(encoding="utf-8")
    assert html.index('<table class="totals"') < html.index('<section class="job"')
    jobs = re.findall(r"<h2>Job (sim/stepped-\d)", html)
    assert sorted(jobs) == ["sim/stepped-0", "sim/stepped-1"]  # B runs wider: both jobs differ
    assert html.count("<svg") == 2 * len(jobs)
    assert pa_csv.read_csv(out).column_names == RESULT_SCHEMA.names  # no list columns in a CSV

    assert run_backtest(history, tmp_path, monkeypatch, "--html", str(page), "--top", "1") == 0
    assert len(re.findall(r"<h2>Job ", page.read_text(encoding="utf-8"))) == 1


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_page_in_a_real_browser_draws_every_chart_and_logs_nothing(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "backtest.html"
    assert run_backtest(history, tmp_path, monkeypatch, "--html", str(page)) == 0
    looked = look_at(page, tmp_path / "backtest.png")
    assert looked.console == []  # the page has no script: any message is an error
    assert [name.split(":")[1] for name in looked.charts] == ["slots", "backlog"] * 2
    blank = {
        name: why for name, box in looked.charts.items() if (why := blank_reason(looked.screenshot, box))
    }
    assert blank == {}, f"charts missing or blank in {looked.screenshot}: {blank}"
    assert 'class="totals"' in looked.dom
