"""The backtest's page from plain result rows: the totals table first, then each differing job with a
table and two charts (an <svg> each, axes labelled, a legend naming the worlds), nothing loaded from the
network, names escaped."""

from __future__ import annotations

import re

import pyarrow as pa

from autoscaler.backtest.html import render_backtest_html
from autoscaler.backtest.jobs import ACTUAL, BEST, result_schema

WORLDS = {ACTUAL: "actual", "A": "A: a.yaml", "B": "B: b.yaml", BEST: "best in hindsight"}
T0 = 1_800_000_000_000  # 2027-01-15 08:00 UTC


def row(job: str, world: str, restarts: int, cost: float, *, series: bool = True) -> dict:
    ms = [T0 + i * 10_000 for i in range(30)]
    return {
        "cluster": "prod",
        "job_name": job,
        "world": world,
        "ticks": 30,
        "first_ms": T0,
        "last_ms": ms[-1],
        "restarts": restarts,
        "below_capacity_s": 20.0 * restarts,
        "backlog_above_target_s": 10.0,
        "slot_hours": cost / 3600,
        "diverged_ms": T0 + 50_000 if world == "B" else None,
        "final_slots": 4,
        "cost": cost,
        "error": None,
        "series_ms": ms if series else None,
        "series_slots": [2 if i < 10 else 4 for i in range(30)] if series else None,
        "series_backlog": [float(max(0, 1000 - abs(i - 10) * 100)) for i in range(30)] if series else None,
        "restarts_ms": [T0 + 100_000] if series and restarts else None,
    }


def results(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=result_schema(series=True))


def page(table: pa.Table, top: int = 10) -> str:
    return render_backtest_html(table, WORLDS, lag_target_s=30, top=top, generated_ms=T0 + 3_600_000)


RESULTS = results(
    row("orders", ACTUAL, 2, 7200.0),
    row("orders", "A", 1, 5400.0),
    row("orders", "B", 3, 18000.0),
    row("orders", BEST, 1, 3600.0),
    row("clicks", ACTUAL, 0, 3600.0),
    row("clicks", "A", 0, 3600.0),
    row("clicks", "B", 0, 3600.0),
)


def test_the_totals_come_first_then_the_jobs_that_differ_with_a_table_and_two_charts_each() -> None:
    html = page(RESULTS)
    totals = html.index('<table class="totals"')
    assert totals < html.index('<section class="job"')
    assert "Backtest of 2 job(s), 2027-01-15 08:00 .. 2027-01-15 08:04 UTC" in html
    head = html[totals : html.index("</table>", totals)]
    assert all(f">{c}<" in head for c in ("restarts", "backlog &gt; 30 s", "slot-hours", "regret"))
    assert ">A: a.yaml<" in head and ">best in hindsight<" in head
    sections = re.findall(r'<section class="job">.*?</section>', html, flags=re.DOTALL)
    assert len(sections) == 1 and "Job prod/orders" in sections[0]  # clicks: the same everywhere
    assert "cost spread 3.50 slot-hours" in sections[0]
    charts = re.findall(r'<figure class="chart" data-chart="(\w+)"><svg', sections[0])
    assert charts == ["slots", "backlog"]
    assert sections[0].count("<svg") == 2
    assert 'class="worlds"' in sections[0] and ">2027-01-15 08:00<" in sections[0]  # B diverged


def test_each_chart_has_its_axes_labelled_with_units_and_a_legend_of_the_worlds_and_restarts() -> None:
    html = page(RESULTS)
    slots, backlog = re.findall(r"<svg.*?</svg>", html, flags=re.DOTALL)
    for svg, unit in ((slots, "slots"), (backlog, "records")):
        assert f">{unit}<" in svg and ">time (UTC)<" in svg
        for name in ("actual", "A: a.yaml", "B: b.yaml", "best in hindsight"):
            assert f">{name}<" in svg
        assert ">B: b.yaml: restarts (1)<" in svg
        assert ">08:01<" in svg or ">08:02<" in svg  # ticks in UTC wall time, not offsets


def test_top_limits_the_jobs_and_rows_without_series_draw_a_chart_that_says_so() -> None:
    plain = results(*(row("orders", w, 1, c, series=False) for w, c in [(ACTUAL, 3600.0), ("A", 7200.0)]))
    html = page(plain)
    assert html.count("<svg") == 2 and ">no slots recorded<" in html and ">no backlog recorded<" in html
    assert "<svg" not in page(RESULTS, top=0) and "at most" not in page(RESULTS, top=0)
    same = results(*(row("clicks", w, 0, 3600.0) for w in (ACTUAL, "A")))
    assert "Every job cost the same in every world" in page(same)
    empty = page(result_schema(series=True).empty_table())
    assert "No replayable history found." in empty and "<table" not in empty


def test_the_page_loads_nothing_from_the_network_and_escapes_names() -> None:
    hostile = [
        row('<script>alert("x")</script>', w, r, c) for w, r, c in [(ACTUAL, 0, 3600.0), ("A", 1, 9000.0)]
    ]
    worlds = {ACTUAL: "actual", "A": "A: <b>.yaml"}
    html = render_backtest_html(results(*hostile), worlds, lag_target_s=30, top=5, generated_ms=T0)
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert "&lt;script&gt;" in html and "A: &lt;b&gt;.yaml" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
