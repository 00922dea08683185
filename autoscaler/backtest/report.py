"""The backtest's answer in words: the fleet's totals for each world side by side, then the jobs where
the configurations differ most, each with its worlds side by side.

The columns are the same for every world: restarts (rescales sent), time below the needed capacity
(the parallelism could not carry the arrivals, or the job was restarting), time with the backlog above
the lag target, slot-hours, the cost (the three priced, ``autoscaler.foresight.cost``) and the regret:
the cost over the best plan in hindsight's for the same jobs (the ``best`` world, knowing every
arrival; ``autoscaler.backtest.optimum``). The rows come from ``autoscaler.backtest.jobs.RESULT_SCHEMA``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from autoscaler.backtest.jobs import ACTUAL, BEST

__all__ = ["cost_note", "headline", "render_report", "table_cells", "totals"]

_MEASURES = ("restarts", "below_capacity_s", "backlog_above_target_s", "slot_hours", "cost")


def totals(results: pa.Table) -> dict[str, dict[str, float]]:
    """World -> measure -> sum over the jobs that backtested without error; ``cost_planned``: the cost
    over the jobs that have a best plan only, what the regret divides."""
    rows = results.to_pylist()
    planned = {(r["cluster"], r["job_name"]) for r in rows if r["world"] == BEST and r["error"] is None}
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["error"] is not None:
            continue
        world = out.setdefault(row["world"], dict.fromkeys((*_MEASURES, "cost_planned"), 0.0))
        for m in _MEASURES:
            world[m] += row[m] or 0.0
        if (row["cluster"], row["job_name"]) in planned:
            world["cost_planned"] += row["cost"] or 0.0
    return out


def render_report(
    results: pa.Table,
    worlds: Mapping[str, str],
    *,
    lag_target_s: float,
    top: int = 10,
    seconds: float | None = None,
) -> str:
    """The text a user reads. ``worlds``: label -> what it is (a config file's name), in report order,
    ``actual`` first."""
    rows = results.to_pylist()
    jobs = sorted({(r["cluster"], r["job_name"]) for r in rows})
    errors = [r for r in rows if r["error"] is not None]
    lines = [headline(rows, len(jobs), seconds)]
    if not rows:
        return lines[0]
    lines += ["", _table(totals(results), worlds, lag_target_s)]
    planned = len({(r["cluster"], r["job_name"]) for r in rows if r["world"] == BEST})
    if planned:
        lines += ["", cost_note(planned, len(jobs))]
    if errors:
        lines += ["", f"{len(errors)} replay(s) failed and are not counted:"]
        lines += [f"  {r['cluster']}/{r['job_name']} ({r['world']}): {r['error']}" for r in errors[:top]]
    by_job: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["error"] is None:
            by_job.setdefault((r["cluster"], r["job_name"]), {})[r["world"]] = r
    ranked = sorted(by_job.items(), key=lambda kv: (-_spread(kv[1]), kv[0]))
    shown = [kv for kv in ranked[:top] if _spread(kv[1]) > 0]
    if shown:
        lines += ["", f"The {len(shown)} job(s) where the worlds differ most:"]
        for (cluster, name), per_world in shown:
            lines += ["", f"{cluster}/{name}", _table(per_world, worlds, lag_target_s, diverged=True)]
    elif jobs and not any(_spread(per_world) > 0 for _, per_world in ranked):
        lines += ["", "Every job fared the same in every world."]
    return "\n".join(lines)


def cost_note(planned: int, jobs: int) -> str:
    """What the cost and regret columns mean (shown when some job had a best plan)."""
    return (
        "cost: slot-seconds + restarts + seconds behind target, at the first configuration's\n"
        "job.autoscaler.cost.* prices, in slot-hours; regret: cost / the best plan in hindsight's\n"
        f"(every arrival known; {planned} of {jobs} job(s) had one to plan)."
    )


def headline(rows: Sequence[Mapping[str, Any]], jobs: int, seconds: float | None) -> str:
    """The report's first line: how many jobs, over which UTC span, how many ticks, how long it took."""
    if not rows:
        return "No replayable history found."
    first = min(r["first_ms"] for r in rows)
    last = max(r["last_ms"] for r in rows)
    ticks = sum(r["ticks"] for r in rows if r["world"] == ACTUAL)
    took = f", replayed in {seconds:.0f} s" if seconds is not None else ""
    return f"Backtest of {jobs} job(s), {_when(first)} .. {_when(last)} UTC, {ticks:,} job-ticks{took}."


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _spread(per_world: Mapping[str, Mapping[str, Any]]) -> float:
    """How much the worlds differ for a job: restarts, plus hours below capacity and behind target (the
    best plan in hindsight is a yardstick, not a world that could differ)."""
    values = [
        (r["restarts"], r["below_capacity_s"] / 3600, r["backlog_above_target_s"] / 3600)
        for label, r in per_world.items()
        if label != BEST
    ]
    return sum(max(v[i] for v in values) - min(v[i] for v in values) for i in range(3))


def _table(
    per_world: Mapping[str, Mapping[str, Any]],
    worlds: Mapping[str, str],
    lag_target_s: float,
    *,
    diverged: bool = False,
) -> str:
    header, *body = table_cells(per_world, worlds, lag_target_s, diverged=diverged)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    out = []
    for row in [header, *body]:
        out.append(
            "  "
            + "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(out)


def table_cells(
    per_world: Mapping[str, Mapping[str, Any]],
    worlds: Mapping[str, str],
    lag_target_s: float,
    *,
    diverged: bool = False,
) -> list[list[str]]:
    """The table of worlds as text cells: the header row, then a row per world present, in ``worlds``'
    order. The text report aligns them; the page puts them in an HTML table."""
    header = ["", "restarts", "below capacity", f"backlog > {lag_target_s:g} s", "slot-hours"]
    best = per_world.get(BEST)
    if best is not None:
        header += ["cost (slot-h)", "regret"]
    if diverged:
        header.append("diverged at")
    body = []
    for label, text in worlds.items():
        r = per_world.get(label)
        if r is None:
            continue
        cells = [
            text,
            f"{r['restarts']:,.0f}",
            _duration(r["below_capacity_s"]),
            _duration(r["backlog_above_target_s"]),
            f"{r['slot_hours']:,.1f}",
        ]
        if best is not None:
            cells += [f"{(r.get('cost') or 0.0) / 3600:,.1f}", _regret(r, best)]
        if diverged:
            at = r.get("diverged_ms")
            cells.append(_when(at) if at is not None else ("-" if label in (ACTUAL, BEST) else "never"))
        body.append(cells)
    return [header, *body]


def _regret(world: Mapping[str, Any], best: Mapping[str, Any]) -> str:
    """Cost over the best plan's, for the jobs that have one (the totals' ``cost_planned``)."""
    cost = world.get("cost_planned", world.get("cost"))
    yardstick = best.get("cost")
    if cost is None or not yardstick:
        return "-"
    return f"{cost / yardstick:.2f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
