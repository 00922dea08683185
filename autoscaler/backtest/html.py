"""``backtest --html``: the backtest as one self-contained HTML page.

First the totals, the table ``backtest`` prints (per world its restarts, time below capacity and behind
target, slot-hours, cost and regret, the best plan in hindsight's beside them), then the jobs where the
configurations differ most (``autoscaler.backtest.timeline``: ranked by the spread of their cost
between the worlds), each with its own table and two charts over one UTC time axis: the slots the job
held and its sources' backlog, every world (actual, A, B, the best plan) one line, each restart a
marker in the world's colour on both.

Drawn with the explain page's helpers (``autoscaler.explain.charts``: matplotlib, inline SVG, no
script, nothing fetched when the page is viewed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib as mpl
import pyarrow as pa

from autoscaler.backtest.jobs import ACTUAL, BEST
from autoscaler.backtest.report import cost_note, headline, table_cells, totals
from autoscaler.backtest.timeline import JobWorlds, WorldSeries, differing_jobs
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

__all__ = ["render_backtest_html"]

# How each world is drawn: (colour, line style, line width). Configurations after B cycle the last two.
_ACTUAL = ("#222222", "-", 2.0)
_BEST = ("#2ca02c", ":", 1.8)
_CONFIGS = (("#1f77b4", "--", 1.6), ("#d62728", "-.", 1.6), ("#9467bd", "--", 1.4), ("#ff7f0e", "-.", 1.4))

_CSS = BASE_CSS + "td.num, th.num { text-align: right; }\n"


def render_backtest_html(
    results: pa.Table,
    worlds: Mapping[str, str],
    *,
    lag_target_s: float,
    top: int,
    generated_ms: int,
    seconds: float | None = None,
) -> str:
    """The page. ``results``: the backtest's rows with the ``SERIES_FIELDS`` (without them the jobs'
    charts say there is nothing recorded); ``worlds``: label -> what it is, in report order."""
    rows = results.to_pylist()
    jobs = sorted({(r["cluster"], r["job_name"]) for r in rows})
    parts = [f'<p class="lead">{esc(headline(rows, len(jobs), seconds))}</p>']
    if rows:
        parts.append(_html_table(table_cells(totals(results), worlds, lag_target_s), "totals"))
        planned = len({(r["cluster"], r["job_name"]) for r in rows if r["world"] == BEST})
        if planned:
            parts.append(f'<p class="note">{esc(cost_note(planned, len(jobs)))}</p>')
        errors = [r for r in rows if r["error"] is not None]
        if errors:
            parts.append(f'<p class="note">{len(errors)} replay(s) failed and are not counted.</p>')
    shown = differing_jobs(rows, worlds, top)
    if shown:
        parts.append(
            f'<p class="note">The {len(shown)} job(s) whose cost differs most between the worlds '
            "(the most costly world's cost less the cheapest's, the best plan in hindsight not counted), "
            f"at most {top}.</p>"
        )
    elif rows:
        parts.append('<p class="note">Every job cost the same in every world: no job to show.</p>')
    per_world = _rows_by_job(rows)
    parts += [_job_section(j, per_world[(j.cluster, j.job_name)], worlds, lag_target_s) for j in shown]
    title = "flink-autoscaler backtest"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style></head><body>\n"
        f"<h1>{title}</h1>\n"
        f'<p class="note">Drawn by flink-autoscaler backtest --html at {utc(generated_ms)}; '
        "times are UTC.</p>\n" + "\n".join(parts) + "\n</body></html>\n"
    )


def _rows_by_job(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["error"] is None:
            out.setdefault((r["cluster"], r["job_name"]), {})[r["world"]] = r
    return out


def _html_table(cells: list[list[str]], kind: str) -> str:
    header, *body = cells
    head = "".join(f"<th{'' if i == 0 else ' class=num'}>{esc(c)}</th>" for i, c in enumerate(header))
    lines = [
        "<tr>"
        + "".join(f"<td{'' if i == 0 else ' class=num'}>{esc(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in body
    ]
    return f'<table class="{kind}"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


def _job_section(
    job: JobWorlds, per_world: Mapping[str, Mapping[str, Any]], worlds: Mapping[str, str], lag_target_s: float
) -> str:
    charts = [
        ("slots", "Slots the job held (parallelism), per world; each restart marked", _slots_chart(job)),
        ("backlog", "Backlog at the sources (records), per world; each restart marked", _backlog_chart(job)),
    ]
    figures = "\n".join(
        f'<figure class="chart" data-chart="{name}">{chart}<figcaption>{esc(caption)}</figcaption></figure>'
        for name, caption, chart in charts
    )
    table = _html_table(table_cells(per_world, worlds, lag_target_s, diverged=True), "worlds")
    return (
        f'<section class="job"><h2>Job {esc(job.key)} <span class="note">(cost spread '
        f"{job.cost_spread:,.2f} slot-hours)</span></h2>\n{table}\n{figures}\n</section>"
    )


def _look(world: WorldSeries, index: int) -> tuple[str, str, float]:
    if world.world == ACTUAL:
        return _ACTUAL
    if world.world == BEST:
        return _BEST
    return _CONFIGS[min(index, len(_CONFIGS) - 1)]


def _draw(job: JobWorlds, what: str, unit: str, value: Any, integer: bool) -> str:
    """One chart: ``value(world)`` -> the y values of each world's points, a line each, restarts marked
    on it."""
    with mpl.rc_context(STYLE):
        fig, ax = figure()
        drawn = False
        configs = 0
        for world in job.worlds:
            colour, style, width = _look(world, configs)
            configs += world.world not in (ACTUAL, BEST)
            if not world.ms:
                continue
            ys = value(world)
            drawn = True
            ax.step(
                times(world.ms),
                ys,
                where="post",
                color=colour,
                linestyle=style,
                linewidth=width,
                label=clip(world.name, 40),
            )
            if world.restarts_ms:
                at = [_at(world.ms, ys, ms) for ms in world.restarts_ms]
                ax.scatter(
                    times(world.restarts_ms),
                    at,
                    marker="v",
                    color=colour,
                    s=40,
                    zorder=3,
                    label=f"{clip(world.name, 24)}: restarts ({len(world.restarts_ms)})",
                )
        if not drawn:
            no_data(ax, what)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        if integer:
            ax.yaxis.get_major_locator().set_params(integer=True)
        time_axis(ax, job.span_ms)
        if drawn:
            legend(ax, 4)
        return svg(fig)


def _slots_chart(job: JobWorlds) -> str:
    return _draw(job, "slots", "slots", lambda w: [float(s) for s in w.slots], integer=True)


def _backlog_chart(job: JobWorlds) -> str:
    return _draw(job, "backlog", "records", lambda w: list(w.backlog), integer=False)


def _at(ms: list[int] | tuple[int, ...], ys: list[float], when: int) -> float:
    """Where a restart sits on a world's line: its value last known at that time (the first before it)."""
    value = ys[0]
    for at, y in zip(ms, ys, strict=True):
        if at > when:
            break
        value = y
    return value
