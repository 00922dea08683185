"""The page's data: the jobs whose cost differs most between the worlds, each world over time, from
plain result rows."""

from __future__ import annotations

from autoscaler.backtest.jobs import ACTUAL, BEST
from autoscaler.backtest.timeline import cost_spread, differing_jobs

WORLDS = {ACTUAL: "actual", "A": "A: a.yaml", "B": "B: b.yaml", BEST: "best in hindsight"}
T0 = 1_800_000_000_000


def row(job: str, world: str, cost: float, *, error: str | None = None, slots: int = 2) -> dict:
    return {
        "cluster": "prod",
        "job_name": job,
        "world": world,
        "cost": cost,
        "error": error,
        "series_ms": [T0, T0 + 10_000, T0 + 20_000],
        "series_slots": [slots, slots * 2, slots],
        "series_backlog": [0.0, 500.0, 10.0],
        "restarts_ms": [T0 + 10_000],
    }


def test_the_spread_is_the_cost_between_the_worlds_that_could_run_in_slot_hours() -> None:
    per_world = {
        ACTUAL: row("j", ACTUAL, 3600.0),
        "A": row("j", "A", 9000.0),
        BEST: row("j", BEST, 0.0),  # a yardstick, not in the spread
    }
    assert cost_spread(per_world) == 1.5
    assert cost_spread({ACTUAL: row("j", ACTUAL, 3600.0)}) == 0.0  # one world: nothing to compare


def test_the_jobs_are_ranked_by_their_spread_at_most_top_and_equal_ones_left_out() -> None:
    rows = [
        *(row("small", w, c) for w, c in [(ACTUAL, 3600.0), ("A", 7200.0), ("B", 3600.0)]),
        *(row("large", w, c) for w, c in [(ACTUAL, 3600.0), ("A", 3600.0), ("B", 36000.0), (BEST, 1.0)]),
        *(row("same", w, 3600.0) for w in (ACTUAL, "A", "B")),
        *(row("mid", w, c) for w, c in [(ACTUAL, 0.0), ("A", 10800.0)]),
    ]
    shown = differing_jobs(rows, WORLDS, top=10)
    assert [(j.job_name, j.cost_spread) for j in shown] == [("large", 9.0), ("mid", 3.0), ("small", 1.0)]
    assert [j.job_name for j in differing_jobs(rows, WORLDS, top=2)] == ["large", "mid"]
    assert differing_jobs(rows, WORLDS, top=0) == []


def test_each_job_has_its_worlds_in_report_order_with_their_series() -> None:
    rows = [row("j", BEST, 1.0, slots=1), row("j", "B", 7200.0, slots=3), row("j", ACTUAL, 3600.0)]
    [job] = differing_jobs(rows, WORLDS, top=5)
    assert job.key == "prod/j"
    assert [(w.world, w.name) for w in job.worlds] == [
        (ACTUAL, "actual"),
        ("B", "B: b.yaml"),
        (BEST, "best in hindsight"),
    ]
    b = job.worlds[1]
    assert b.ms == (T0, T0 + 10_000, T0 + 20_000)
    assert b.slots == (3, 6, 3) and b.backlog == (0.0, 500.0, 10.0) and b.restarts_ms == (T0 + 10_000,)
    assert job.span_ms == (T0, T0 + 20_000)


def test_a_failed_replay_is_no_world_and_rows_without_series_give_empty_ones() -> None:
    rows = [
        row("j", ACTUAL, 3600.0),
        row("j", "A", 0.0, error="ValueError: no graph"),
        {**row("j", "B", 7200.0), "series_ms": None, "series_slots": None, "series_backlog": None},
    ]
    [job] = differing_jobs(rows, WORLDS, top=5)
    assert [w.world for w in job.worlds] == [ACTUAL, "B"]
    assert job.worlds[1].ms == () and job.worlds[1].slots == ()
