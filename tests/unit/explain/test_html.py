"""``explain --html``'s page from a timeline value: a chart per panel, labelled, the decision table,
everything inline and every name escaped."""

from __future__ import annotations

import re
from dataclasses import replace

from timeline_values import T0, record, sample

from autoscaler.explain.html import render_html
from autoscaler.explain.records import CostRecord, ForecastRecord
from autoscaler.explain.timeline import job_timeline
from autoscaler.reasons import Reason


def page(timelines, title="flink-autoscaler: c1/orders") -> str:
    return render_html(timelines, title=title, generated_ms=T0 + 3_600_000)


def scaled_timeline():
    held = replace(
        record(T0 + 10_000, Reason.NOT_WORTH_IT, decided=2),
        detail="a restart costs 0.40 slot-h, waiting 0.10 slot-h",
        forecast=ForecastRecord(
            600.0, peak_rate=2400.0, level_rate=2000.0, peak_in_s=120.0, confidence=0.8, basis="trend"
        ),
    )
    records = [
        record(T0, Reason.WINDOW_NOT_FULL),
        held,
        record(T0 + 20_000, Reason.SCALING, decided=2, scaled=True),
        record(T0 + 80_000, Reason.IN_BAND, work=2, capacity=2500.0, lag=0.0),
    ]
    return job_timeline(records)


def test_each_job_has_three_svg_charts_with_axis_labels_and_a_legend():
    html = page([scaled_timeline()])
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 3 and html.count("</svg>") == 3
    for label in ("records/s", "records", "subtasks", "time (UTC)"):
        assert f">{label}<" in html
    for legend in (
        "offered load",
        "capacity at running parallelism",
        "scaled up",
        "change wanted, held",
        "Work",
    ):
        assert legend in html
    assert "2025-11-27" in html  # times as UTC dates, not offsets


def test_the_decision_table_lists_every_decision_newest_first_with_costs_and_forecast():
    html = page([scaled_timeline()])
    table = html[html.index('<table class="decisions"') :]
    rows = re.findall(r"<tr class=\"[a-z]*\">.*?</tr>", table)
    assert len(rows) == 4
    assert "InBand" in rows[0] and "WindowNotFull" in rows[-1]
    assert 'class="scaled"' in rows[1] and "Work: 1 → 2" in rows[1]
    assert 'class="held"' in rows[2] and "0.40 slot-h" in rows[2] and "peak 2,400 rec/s" in rows[2]
    assert "2025-11-27 00:00:20" in rows[1]


def test_the_page_loads_nothing_from_the_network():
    html = page([scaled_timeline()])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"url\(\s*['\"]?https?:", html)
    # The only URLs are the SVG namespaces, which no browser fetches.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


def test_names_from_flink_are_escaped_and_the_page_says_where_the_points_come_from():
    t = scaled_timeline()
    hostile = replace(t, job_key="c1/<script>alert(1)</script>")
    html = page([hostile], title="<b>x</b>")
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "decision records alone" in html
    archived = job_timeline(
        [record(T0 + 10_000, Reason.IN_BAND)],
        [sample(0, read=0, pending=0, busy_ms=0), sample(10, read=10_000, pending=0, busy_ms=5_000)],
    )
    assert "from the archive" in page([archived])


def test_a_job_with_no_points_still_draws_its_charts_saying_so():
    bare = job_timeline([replace(record(T0, Reason.CLUSTER_UNREACHABLE), vertices=())])
    html = page([bare])
    assert html.count("<svg") == 3 and "no load recorded" in html and "no parallelism recorded" in html


def test_a_cluster_page_has_a_section_per_job_and_the_same_input_draws_the_same_page():
    one, other = scaled_timeline(), replace(scaled_timeline(), job_key="c1/clicks")
    html = page([one, other], title="flink-autoscaler: cluster c1")
    assert html.count('<section class="job">') == 2 and html.count("<svg") == 6
    assert html == page([one, other], title="flink-autoscaler: cluster c1")


def test_the_table_shows_both_costs_and_the_seconds_above_the_lag_target_where_recorded():
    cost = CostRecord(
        horizon_s=1800.0,
        rate=2000.0,
        change_total=9_650.0,
        change_slot_seconds=5_400.0,
        change_restarts=1,
        change_lag_s=120.0,
        wait_total=3_600.0,
        wait_slot_seconds=3_600.0,
        wait_restarts=0,
        wait_lag_s=0.0,
        slots_now=2,
        slots_then=3,
        capacity_now=2500.0,
        capacity_then=3750.0,
    )
    held = replace(
        record(T0 + 10_000, Reason.NOT_WORTH_IT, decided=2),
        cost=cost,
        above_lag_target=False,
        lag_above_target_s=40.0,
    )
    html = page([job_timeline([record(T0, Reason.WINDOW_NOT_FULL), held])])
    table = html[html.index('<table class="decisions"') :]
    assert "<th>costs (slot-s) and lag target</th>" in table
    rows = re.findall(r"<tr class=\"[a-z]*\">.*?</tr>", table)
    assert "changing now 9,650 slot-s, waiting 3,600 slot-s over 30 min at 2,000 rec/s (held;" in rows[0]
    assert "5,400 / 1 / 120 against 3,600 / 0 / 0" in rows[0]
    assert "lag target: within it at the decision, 40 s above it over this decision&#x27;s run" in rows[0]
    assert rows[1].count("<td>") == 7 and rows[1].endswith("<td>-</td></tr>"), "not weighed: a dash"
    plain = page([scaled_timeline()])
    assert "costs (slot-s)" not in plain, "cost.enabled and lag.target off: the table as before"
