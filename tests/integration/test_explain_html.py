"""``explain --html`` on what a demo-like daemon kept: the real daemon against the simulator on a fake
clock, the demo's options and load step, its decisions written as ``run --decisions-dir`` writes them
and its ticks archived; once it has scaled the job up, the CLI draws the job's page, and headless
Chromium loads it (skipped where none is installed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import CHROMIUM, NO_CHROMIUM, blank_reason, look_at
from sim_world import sim_world

from autoscaler.archive import ArchiveWriter, TickArchive
from autoscaler.cli import main
from autoscaler.decision_store import JsonDecisionDir, outcome_recorder
from autoscaler.demo import DEMO_LOAD, DEMO_OPTIONS
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.tick.steps import JobOutcome

TICKS = 24  # 240 simulated seconds: the load steps up at 60 s, the daemon scales up after its window


async def run_demo_like(tmp_path: Path) -> list[JobOutcome]:
    metrics = MetricsReporter()
    archive = TickArchive(ArchiveWriter(tmp_path / "archive", flush_interval_ms=3_600_000, metrics=metrics))
    world = sim_world(8, DEMO_OPTIONS, metrics=metrics, archive=archive)
    world.sim.submit(work_job(name="load-job", input_rate=DEMO_LOAD))
    record = outcome_recorder(JsonDecisionDir(tmp_path / "decisions"))

    def keep(outcome: JobOutcome) -> None:
        world.outcomes.append(outcome)
        record(outcome)

    world.daemon.on_outcome = keep
    try:
        for _ in range(TICKS):
            await world.tick()
    finally:
        await world.daemon.aclose()  # writes the archive's buffer
    return world.outcomes


async def test_explain_html_draws_the_scaled_job_from_the_archive(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config: the default state_url, nothing else read from the cwd
    outcomes = await run_demo_like(tmp_path)
    assert any(o.outcome is Reason.SCALING for o in outcomes), "the demo's load needs a scale-up"
    out = tmp_path / "load-job.html"
    args = ["--decisions-dir", str(tmp_path / "decisions"), "--archive", str(tmp_path / "archive")]
    assert main(["explain", "load-job", "--html", str(out), *args]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert page.count("<svg") == 3
    assert "from the archive" in page
    assert ">records/s<" in page and ">subtasks<" in page and ">time (UTC)<" in page
    assert "scaled up" in page  # the rescale's marker in the legend
    rows = re.findall(r'<tr class="scaled">.*?</tr>', page)
    assert rows and "Scaling" in rows[0] and "Work: 1 →" in rows[0]
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)

    # The whole cluster, and without the archive: the decision records alone, said on the page.
    cluster = tmp_path / "sim.html"
    assert main(["explain", "--cluster", "sim", "--html", str(cluster), "--decisions-dir", args[1]]) == 0
    drawn = cluster.read_text(encoding="utf-8")
    assert drawn.count('<section class="job">') == 1 and "decision records alone" in drawn


async def test_explain_html_of_an_unknown_job_or_without_a_job_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    await run_demo_like(tmp_path)
    args = ["--decisions-dir", str(tmp_path / "decisions")]
    assert main(["explain", "nope", "--html", str(tmp_path / "x.html"), *args]) == 1
    assert "known jobs: sim/load-job" in capsys.readouterr().err
    assert main(["explain", "--html", str(tmp_path / "x.html"), *args]) == 2
    assert "name one job, or a cluster" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
async def test_the_page_in_a_real_browser_draws_every_chart_and_logs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    await run_demo_like(tmp_path)
    page = tmp_path / "load-job.html"
    args = ["--decisions-dir", str(tmp_path / "decisions"), "--archive", str(tmp_path / "archive")]
    assert main(["explain", "load-job", "--html", str(page), *args]) == 0
    looked = look_at(page, tmp_path / "load-job.png")
    assert looked.console == []  # the page has no script: any message is an error (a failed load, ...)
    assert [name.split(":")[1] for name in looked.charts] == ["load", "backlog", "parallelism"]
    blank = {
        name: why for name, box in looked.charts.items() if (why := blank_reason(looked.screenshot, box))
    }
    assert blank == {}, f"charts missing or blank in {looked.screenshot}: {blank}"
    assert 'class="decisions"' in looked.dom and "Scaling" in looked.dom


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_browser_check_sees_a_blank_chart_a_missing_one_and_a_console_error(tmp_path):
    """The check itself: a page that fails it in each way is caught (so a pass means something)."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body>"
        '<figure class="chart" data-chart="load"><svg width="960" height="270"></svg></figure>'
        '<figure class="chart" data-chart="backlog"></figure>'
        '<script>console.error("boom")</script></body></html>',
        encoding="utf-8",
    )
    looked = look_at(page, tmp_path / "broken.png")
    assert any("boom" in line for line in looked.console)
    assert "pixels drawn" in (blank_reason(looked.screenshot, looked.charts["0:load"]) or "")
    assert blank_reason(looked.screenshot, looked.charts["1:backlog"]) == "no <svg> in the figure"
