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

import html
import io
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import matplotlib as mpl
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from autoscaler.explain.render import forecast_words, outcome_words
from autoscaler.explain.timeline import ARCHIVE, DecisionMark, JobTimeline, TimelinePoint

__all__ = ["render_html"]

_WIDTH_IN, _HEIGHT_IN = 10.0, 2.8
_STYLE = {
    "svg.fonttype": "none",  # text as <text>: readable, searchable, small
    "svg.hashsalt": "flink-autoscaler",  # the same timeline gives the same file
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "text.parse_math": False,  # a "$" in a vertex name is a dollar sign, not TeX
}
# How a decision is marked on the load chart: (matplotlib marker, colour, legend label).
_SCALED_UP = ("^", "#2ca02c", "scaled up")
_SCALED_DOWN = ("v", "#1f77b4", "scaled down")
_HELD = ("X", "#ff7f0e", "change wanted, held")
_OTHER = ("o", "#7f7f7f", "no change")

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #ccc; padding-top: .6em; }
.note { color: #555; font-size: .9em; }
figure { margin: .4em 0; } figcaption { font-size: .85em; color: #444; }
svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .85em; margin-top: .6em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr.scaled td { background: #eef8ee; } tr.held td { background: #fff4e6; }
"""


def render_html(timelines: Sequence[JobTimeline], *, title: str, generated_ms: int) -> str:
    """The page: a heading, then per job its charts and its decision table."""
    jobs = "\n".join(_job_section(t) for t in timelines)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style></head><body>\n"
        f"<h1>{_esc(title)}</h1>\n"
        f'<p class="note">Drawn by flink-autoscaler explain --html at {_utc(generated_ms)}; '
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
        f'<figure class="chart" data-chart="{name}">{svg}<figcaption>{_esc(caption)}</figcaption></figure>'
        for name, caption, svg in charts
    )
    return (
        f'<section class="job"><h2>Job {_esc(t.job_key)} <span class="note">(JobID {_esc(t.job_id)})</span>'
        f'</h2>\n<p class="note">{_esc(source)}</p>\n{figures}\n{_table(t)}</section>'
    )


# ---------------------------------------------------------------------------------------- charts
def _figure() -> tuple[Figure, Any]:
    """One chart. Fixed margins, not a computed layout: the three charts' time axes line up."""
    fig = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.17, top=0.86)
    return fig, fig.add_subplot()


def _legend(ax: Any, columns: int) -> None:
    """Above the plot, where it hides no line."""
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=columns, fontsize=8, frameon=False)


def _times(ms: Sequence[int]) -> list[datetime]:
    return [datetime.fromtimestamp(m / 1000, UTC) for m in ms]


def _time_axis(ax: Any, t: JobTimeline) -> None:
    locator = AutoDateLocator(tz=UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))
    ax.set_xlabel("time (UTC)")
    span = t.span_ms
    if span is not None:
        low, high = _times([span[0], span[1] if span[1] > span[0] else span[0] + 60_000])
        ax.set_xlim(low, high)
    for m in t.marks:
        if m.scaled:
            ax.axvline(_times([m.ts_ms])[0], color=_style(m)[1], linestyle="--", linewidth=0.8, alpha=0.7)


def _series(points: Sequence[TimelinePoint], attr: str) -> tuple[list[datetime], list[float]]:
    """The points' ``attr`` (None drawn as a gap)."""
    return _times([p.ts_ms for p in points]), [
        float("nan") if (v := getattr(p, attr)) is None else v for p in points
    ]


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} recorded", transform=ax.transAxes, ha="center", va="center", color="#888")


def _load_chart(t: JobTimeline) -> str:
    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
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
            _no_data(ax, "load")
        seen: set[str] = set()
        for m in t.marks:
            marker, colour, label = _style(m)
            y = _load_at(t.points, m.ts_ms)
            ax.scatter(
                _times([m.ts_ms]),
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
        _legend(ax, 6)
        return _svg(fig)


def _backlog_chart(t: JobTimeline) -> str:
    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
        x, lag = _series(t.points, "lag")
        ax.step(x, lag, where="post", color="#8c564b", label="backlog (sources' pending records)")
        if not any(v == v for v in lag):
            _no_data(ax, "backlog")
        ax.set_ylabel("records")
        ax.set_ylim(bottom=0)
        _time_axis(ax, t)
        _legend(ax, 1)
        return _svg(fig)


def _parallelism_chart(t: JobTimeline) -> str:
    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
        x = _times([p.ts_ms for p in t.points])
        for name in t.vertices:
            y = [float(p.parallelism[name]) if name in p.parallelism else float("nan") for p in t.points]
            ax.step(x, y, where="post", label=_clip(name, 40), linewidth=1.6)
        if not t.vertices:
            _no_data(ax, "parallelism")
        ax.set_ylabel("subtasks")
        ax.set_ylim(bottom=0)
        ax.yaxis.get_major_locator().set_params(integer=True)
        _time_axis(ax, t)
        if t.vertices:
            _legend(ax, min(4, len(t.vertices)))
        return _svg(fig)


def _load_at(points: Sequence[TimelinePoint], ts_ms: int) -> float:
    """Where a decision sits on the load chart: the offered load last known at its time (0 if none)."""
    known = [p.offered for p in points if p.ts_ms <= ts_ms and p.offered is not None]
    return known[-1] if known else 0.0


def _style(m: DecisionMark) -> tuple[str, str, str]:
    if m.scaled:
        return _SCALED_UP if m.scale_up else _SCALED_DOWN
    return _HELD if m.held else _OTHER


def _svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, no DOCTYPE, no metadata block."""
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = out.getvalue()
    text = text[text.index("<svg") :]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.DOTALL)


# ---------------------------------------------------------------------------------------- the table
def _table(t: JobTimeline) -> str:
    rows = []
    for m in reversed(t.marks):  # newest first, as explain prints them
        kind = "scaled" if m.scaled else "held" if m.held else ""
        run = f"{m.ticks} ticks since {_utc(m.first_ms)}" if m.ticks > 1 else "1 tick"
        changes = ", ".join(f"{name}: {before} → {to}" for name, before, to in m.changes) or "-"
        forecast = forecast_words(m.record.forecast) if m.record.forecast is not None else "-"
        rows.append(
            f'<tr class="{kind}"><td>{_utc(m.ts_ms)}</td><td>{_esc(run)}</td>'
            f"<td><b>{_esc(m.outcome)}</b><br>{_esc(outcome_words(m.outcome))}</td>"
            f"<td>{_esc(changes)}</td><td>{_esc(m.detail) or '-'}</td><td>{_esc(forecast)}</td></tr>"
        )
    columns = ("time (UTC)", "run", "outcome", "changes", "why", "load forecast")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    return (
        f'<table class="decisions"><caption>Decisions, newest first ({len(t.marks)})</caption>'
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _clip(text: str, limit: int) -> str:
    """A legend label: cut to ``limit``; a leading "_" (which matplotlib reads as "no label") kept."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f" {text}" if text.startswith("_") else text
