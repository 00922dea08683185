"""``explain --html``: job timelines drawn as one self-contained HTML page.

The page takes :class:`~autoscaler.explain.timeline.JobTimeline` values only (gathering them is
``timeline.py``'s job) and draws, per job, three charts over one time axis in UTC (the offered load and
the capacity at the running parallelism, with every decision marked; the backlog; the parallelism per
vertex, rescales as vertical lines on all three) and the table of its decisions under them.

Drawn with matplotlib as inline SVG: no script, no font or style sheet to fetch, so the file opens
offline, is small (tens of kB a job) and prints; text stays text (``svg.fonttype: none``), so the labels
are searchable and a test reads them. The figures are built with matplotlib's object API
(``Figure``, never ``pyplot``): no global state, nothing opens a window. Every name and text from Flink
or an operator is escaped before it reaches the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import matplotlib as mpl

from autoscaler.explain.charts import (
    BASE_CSS,
    STYLE,
    clip,
    esc,
    figure,
    legend,
    no_data,
    svg,
    time_axis,
    times,
    utc,
)
from autoscaler.explain.records import DecisionRecord
from autoscaler.explain.render import cost_words, forecast_words, lag_target_words, outcome_words
from autoscaler.explain.timeline import ARCHIVE, DecisionMark, JobTimeline, TimelinePoint

__all__ = ["render_html"]

# How a decision is marked on the load chart: (matplotlib marker, colour, legend label).
_SCALED_UP = ("^", "#2ca02c", "scaled up")
_SCALED_DOWN = ("v", "#1f77b4", "scaled down")
_HELD = ("X", "#ff7f0e", "change wanted, held")
_OTHER = ("o", "#7f7f7f", "no change")

_CSS = BASE_CSS + "tr.scaled td { background: #eef8ee; } tr.held td { background: #fff4e6; }\n"


def render_html(timelines: Sequence[JobTimeline], *, title: str, generated_ms: int) -> str:
    """The page: a heading, then per job its charts and its decision table."""
    jobs = "\n".join(_job_section(t) for t in timelines)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{esc(title)}</title>\n<style>{_CSS}</style></head><body>\n"
        f"<h1>{esc(title)}</h1>\n"
        f'<p class="note">Drawn by flink-autoscaler explain --html at {utc(generated_ms)}; '
        "times are UTC.</p>\n"
        f"{jobs}\n</body></html>\n"
    )


def _job_section(t: JobTimeline) -> str:
    if t.source == ARCHIVE:
        source = "Load, capacity, backlog and parallelism from the archive (every tick's samples)."
    else:
        source = (
            "No archive configured (archive_dir) or none for this job: the curves are drawn from the "
            f"decision records alone ({len(t.points)} point(s): the daemon keeps a job's last decisions, "
            "a run of ticks that decided the same counting as one), so they are coarse."
        )
    if t.thinned_from is not None:
        source += (
            f" Thinned to {len(t.points):,} of {t.thinned_from:,} points "
            "(each stretch's highest backlog, every rescale)."
        )
    charts = [
        (
            "load",
            "Offered load and capacity at the running parallelism (records/s), each decision marked",
            _load_chart(t),
        ),
        ("backlog", "Backlog at the sources (records)", _backlog_chart(t)),
        ("parallelism", "Parallelism per vertex (subtasks)", _parallelism_chart(t)),
    ]
    figures = "\n".join(
        f'<figure class="chart" data-chart="{name}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'
        for name, caption, svg in charts
    )
    return (
        f'<section class="job"><h2>Job {esc(t.job_key)} <span class="note">(JobID {esc(t.job_id)})</span>'
        f'</h2>\n<p class="note">{esc(source)}</p>\n{figures}\n{_table(t)}</section>'
    )


# ---------------------------------------------------------------------------------------- charts
def _time_axis(ax: Any, t: JobTimeline) -> None:
    time_axis(ax, t.span_ms, [(m.ts_ms, _style(m)[1]) for m in t.marks if m.scaled])


def _series(points: Sequence[TimelinePoint], attr: str) -> tuple[list[datetime], list[float]]:
    """The points' ``attr`` (None drawn as a gap)."""
    return times([p.ts_ms for p in points]), [
        float("nan") if (v := getattr(p, attr)) is None else v for p in points
    ]


def _load_chart(t: JobTimeline) -> str:
    with mpl.rc_context(STYLE):
        fig, ax = figure()
        x, offered = _series(t.points, "offered")
        _, capacity = _series(t.points, "capacity")
        drawn = t.points and any(v == v for v in offered + capacity)
        ax.step(x, offered, where="post", color="#d62728", label="offered load")
        ax.step(
            x,
            capacity,
            where="post",
            color="#9467bd",
            linestyle="-.",
            label="capacity at running parallelism",
        )
        if not drawn:
            no_data(ax, "load")
        seen: set[str] = set()
        for m in t.marks:
            marker, colour, label = _style(m)
            y = _load_at(t.points, m.ts_ms)
            ax.scatter(
                times([m.ts_ms]),
                [y],
                marker=marker,
                color=colour,
                s=70 if m.scaled or m.held else 18,
                zorder=3,
                label=None if label in seen else label,
            )
            seen.add(label)
        ax.set_ylabel("records/s")
        ax.set_ylim(bottom=0)
        _time_axis(ax, t)
        legend(ax, 6)
        return svg(fig)


def _backlog_chart(t: JobTimeline) -> str:
    with mpl.rc_context(STYLE):
        fig, ax = figure()
        x, lag = _series(t.points, "lag")
        ax.step(x, lag, where="post", color="#8c564b", label="backlog (sources' pending records)")
        if not any(v == v for v in lag):
            no_data(ax, "backlog")
        ax.set_ylabel("records")
        ax.set_ylim(bottom=0)
        _time_axis(ax, t)
        legend(ax, 1)
        return svg(fig)


def _parallelism_chart(t: JobTimeline) -> str:
    with mpl.rc_context(STYLE):
        fig, ax = figure()
        x = times([p.ts_ms for p in t.points])
        for name in t.vertices:
            y = [float(p.parallelism[name]) if name in p.parallelism else float("nan") for p in t.points]
            ax.step(x, y, where="post", label=clip(name, 40), linewidth=1.6)
        if not t.vertices:
            no_data(ax, "parallelism")
        ax.set_ylabel("subtasks")
        ax.set_ylim(bottom=0)
        ax.yaxis.get_major_locator().set_params(integer=True)
        _time_axis(ax, t)
        if t.vertices:
            legend(ax, min(4, len(t.vertices)))
        return svg(fig)


def _load_at(points: Sequence[TimelinePoint], ts_ms: int) -> float:
    """Where a decision sits on the load chart: the offered load last known at its time (0 if none)."""
    known = [p.offered for p in points if p.ts_ms <= ts_ms and p.offered is not None]
    return known[-1] if known else 0.0


def _style(m: DecisionMark) -> tuple[str, str, str]:
    if m.scaled:
        return _SCALED_UP if m.scale_up else _SCALED_DOWN
    return _HELD if m.held else _OTHER


# ---------------------------------------------------------------------------------------- the table
def _costs(r: DecisionRecord) -> str:
    """A decision's weighed costs (changing now, waiting) and its seconds above the lag target."""
    parts = []
    if r.cost is not None:
        parts.append(esc(cost_words(r.cost)))
    if r.above_lag_target is not None:
        parts.append("lag target: " + esc(lag_target_words(r)))
    return "<br>".join(parts) or "-"


def _table(t: JobTimeline) -> str:
    costs = any(m.record.cost is not None or m.record.above_lag_target is not None for m in t.marks)
    rows = []
    for m in reversed(t.marks):  # newest first, as explain prints them
        kind = "scaled" if m.scaled else "held" if m.held else ""
        run = f"{m.ticks} ticks since {utc(m.first_ms)}" if m.ticks > 1 else "1 tick"
        changes = ", ".join(f"{name}: {before} → {to}" for name, before, to in m.changes) or "-"
        forecast = forecast_words(m.record.forecast) if m.record.forecast is not None else "-"
        rows.append(
            f'<tr class="{kind}"><td>{utc(m.ts_ms)}</td><td>{esc(run)}</td>'
            f"<td><b>{esc(m.outcome)}</b><br>{esc(outcome_words(m.outcome))}</td>"
            f"<td>{esc(changes)}</td><td>{esc(m.detail) or '-'}</td><td>{esc(forecast)}</td>"
            + (f"<td>{_costs(m.record)}</td>" if costs else "")
            + "</tr>"
        )
    columns: tuple[str, ...] = ("time (UTC)", "run", "outcome", "changes", "why", "load forecast")
    if costs:  # cost.enabled or lag.target: both costs of each weighed change, the seconds above target
        columns += ("costs (slot-s) and lag target",)
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    return (
        f'<table class="decisions"><caption>Decisions, newest first ({len(t.marks)})</caption>'
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )
