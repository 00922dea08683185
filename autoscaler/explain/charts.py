"""The drawing both reports share (``explain --html``, ``backtest --html``): one chart as inline SVG.

matplotlib, as inline SVG: no script, no font or style sheet to fetch, so a page opens offline, is
small and prints; text stays text (``svg.fonttype: none``), so the labels are searchable and a test
reads them. Figures are built with matplotlib's object API (``Figure``, never ``pyplot``): no global
state, nothing opens a window. Every chart has the same size and fixed margins, so the charts of one
job line up on their time axis, which is in UTC.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

__all__ = [
    "BASE_CSS",
    "STYLE",
    "clip",
    "esc",
    "figure",
    "legend",
    "no_data",
    "svg",
    "time_axis",
    "times",
    "utc",
]

_WIDTH_IN, _HEIGHT_IN = 10.0, 2.8
STYLE = {
    "svg.fonttype": "none",  # text as <text>: readable, searchable, small
    "svg.hashsalt": "flink-autoscaler",  # the same values give the same file
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "text.parse_math": False,  # a "$" in a vertex name is a dollar sign, not TeX
}
"""The rc parameters every chart is drawn under (``matplotlib.rc_context(STYLE)``)."""

BASE_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #ccc; padding-top: .6em; }
.note { color: #555; font-size: .9em; }
figure { margin: .4em 0; } figcaption { font-size: .85em; color: #444; }
svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .85em; margin-top: .6em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
"""


def figure() -> tuple[Figure, Any]:
    """One chart. Fixed margins, not a computed layout: the charts' time axes line up."""
    fig = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.17, top=0.86)
    return fig, fig.add_subplot()


def legend(ax: Any, columns: int) -> None:
    """Above the plot, where it hides no line."""
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=columns, fontsize=8, frameon=False)


def times(ms: Sequence[int]) -> list[datetime]:
    return [datetime.fromtimestamp(m / 1000, UTC) for m in ms]


def time_axis(ax: Any, span_ms: tuple[int, int] | None, lines: Iterable[tuple[int, str]] = ()) -> None:
    """The x axis in UTC over ``span_ms`` (a minute at least), with a dashed vertical line at each of
    ``lines`` (ms, colour): the rescales."""
    locator = AutoDateLocator(tz=UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))
    ax.set_xlabel("time (UTC)")
    if span_ms is not None:
        low, high = times([span_ms[0], span_ms[1] if span_ms[1] > span_ms[0] else span_ms[0] + 60_000])
        ax.set_xlim(low, high)
    for ms, colour in lines:
        ax.axvline(times([ms])[0], color=colour, linestyle="--", linewidth=0.8, alpha=0.7)


def no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} recorded", transform=ax.transAxes, ha="center", va="center", color="#888")


def svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, no DOCTYPE, no metadata block."""
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = out.getvalue()
    text = text[text.index("<svg") :]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.DOTALL)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def clip(text: str, limit: int) -> str:
    """A legend label: cut to ``limit``; a leading "_" (which matplotlib reads as "no label") kept."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f" {text}" if text.startswith("_") else text
