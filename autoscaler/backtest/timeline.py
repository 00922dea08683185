"""The backtest's jobs over time, as values: what ``backtest --html`` draws.

:func:`differing_jobs` is pure: the backtest's result rows (``autoscaler.backtest.jobs``, with the
``SERIES_FIELDS`` kept) in, the jobs where the configurations differ most out, each with every world's
slots, backlog and restarts over time. The drawing (``backtest/html.py``) takes only these values.

The measure. Jobs are ranked by the spread of their cost between the worlds that could have run
(actual, A, B: the most costly one's cost less the cheapest one's), in slot-hours: the cost prices
slots, restarts and time behind target alike (``autoscaler.foresight.cost``), so one number says how
much choosing between the configurations mattered for the job. The best plan in hindsight is drawn
beside them, a yardstick, but is not in the spread (no configuration could have run it). A job whose
worlds cost the same is not shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.backtest.jobs import BEST

__all__ = ["JobWorlds", "WorldSeries", "cost_spread", "differing_jobs"]


@dataclass(frozen=True, slots=True)
class WorldSeries:
    """One world of one job over time."""

    world: str  # its label: "actual", "A", "B", "best"
    name: str  # what it is, as the report names it
    ms: tuple[int, ...]  # the ticks (thinned), epoch ms
    slots: tuple[int, ...]  # the slots the job held at each
    backlog: tuple[float, ...]  # its sources' backlog at each, records
    restarts_ms: tuple[int, ...]  # when it rescaled (asked Flink to restart it)


@dataclass(frozen=True, slots=True)
class JobWorlds:
    """A job where the configurations differ, with its worlds in report order."""

    cluster: str
    job_name: str
    cost_spread: float  # slot-hours (cost_spread)
    worlds: tuple[WorldSeries, ...]

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.job_name}"

    @property
    def span_ms(self) -> tuple[int, int] | None:
        ms = [m for w in self.worlds for m in w.ms]
        return (min(ms), max(ms)) if ms else None


def cost_spread(per_world: Mapping[str, Mapping[str, Any]]) -> float:
    """The most costly world's cost less the cheapest's, in slot-hours, over the worlds that could have
    run (not the best plan in hindsight); 0 with fewer than two."""
    costs = [r["cost"] or 0.0 for label, r in per_world.items() if label != BEST]
    return (max(costs) - min(costs)) / 3600 if len(costs) > 1 else 0.0


def differing_jobs(rows: Iterable[Mapping[str, Any]], worlds: Mapping[str, str], top: int) -> list[JobWorlds]:
    """The (at most ``top``) jobs whose cost differs most between the worlds, most first (ties by
    name), each with its worlds in ``worlds``' order (label -> name). Rows with an error are left out:
    a world whose replay failed has no series."""
    by_job: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        if r["error"] is None:
            by_job.setdefault((r["cluster"], r["job_name"]), {})[r["world"]] = r
    ranked = sorted(((cost_spread(w), key, w) for key, w in by_job.items()), key=lambda s: (-s[0], s[1]))
    return [
        JobWorlds(
            cluster,
            name,
            spread,
            tuple(_series(label, text, w[label]) for label, text in worlds.items() if label in w),
        )
        for spread, (cluster, name), w in ranked[: max(0, top)]
        if spread > 0
    ]


def _series(label: str, name: str, row: Mapping[str, Any]) -> WorldSeries:
    return WorldSeries(
        label,
        name,
        tuple(row.get("series_ms") or ()),
        tuple(row.get("series_slots") or ()),
        tuple(row.get("series_backlog") or ()),
        tuple(row.get("restarts_ms") or ()),
    )
