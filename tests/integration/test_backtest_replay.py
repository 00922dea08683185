"""Honest replay: the daemon runs live against the simulator with the archive on; a backtest of the same
configuration on that history decides what the daemon decided, tick by tick, and never diverges. A
different configuration diverges and re-simulates the job from there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from backtest_history import LIVE, WIDER, histories, record, table
from sim_world import sim_world

from autoscaler.backtest.jobs import ACTUAL, BEST, BacktestOptions, backtest_tables
from autoscaler.backtest.replay import replay_job, score_actual
from autoscaler.backtest.workload import estimate_workload
from autoscaler.durations import to_ms
from autoscaler.reasons import Reason


async def test_a_replay_of_the_live_configuration_decides_what_the_daemon_decided(tmp_path: Path) -> None:
    world = await record(tmp_path)
    live_scalings = [o for o in world.outcomes if o.outcome is Reason.SCALING]
    assert len(live_scalings) >= 2, "the load steps need rescales"
    [history] = histories(tmp_path)
    settings = world.daemon.settings
    options = settings.options_for(settings.clusters[0])
    workload = estimate_workload(history, to_ms(options.restart_time))

    replayed = await replay_job(history, settings, workload, flink_cooldown_ms=30_000)

    assert replayed.diverged_ms is None
    assert {t: dict(p) for t, p in replayed.puts.items()} == {t: dict(p) for t, p in history.puts.items()}
    live = {o.now_ms: o.outcome.value for o in world.outcomes}
    assert replayed.outcomes == {t: live[t] for t in history.ticks}  # every tick, the same outcome
    assert replayed.score.restarts == len(history.puts) == len(live_scalings)
    assert replayed.score == score_actual(history, workload)


async def test_another_configuration_diverges_and_re_simulates_the_job(tmp_path: Path) -> None:
    await record(tmp_path)
    [history] = histories(tmp_path)
    settings = sim_world(16, WIDER).daemon.settings
    workload = estimate_workload(history, 30_000)

    replayed = await replay_job(history, settings, workload, flink_cooldown_ms=30_000)

    assert replayed.diverged_ms is not None and replayed.diverged_ms in history.ticks
    actual = score_actual(history, workload)
    # A lower utilization target runs wider: more slot-hours, never less capacity than needed for longer.
    assert replayed.score.slot_hours > actual.slot_hours
    assert replayed.score.below_capacity_s <= actual.below_capacity_s
    assert sum(replayed.final_parallelism.values()) > sum(history.first.topology.parallelisms.values())


async def test_the_jobs_of_a_table_backtest_to_one_row_per_world(tmp_path: Path) -> None:
    await record(tmp_path, jobs=2)
    live, wider = sim_world(16, LIVE).daemon.settings, sim_world(16, WIDER).daemon.settings
    options = BacktestOptions({"A": live, "B": wider})

    samples, decisions = table(tmp_path, "samples"), table(tmp_path, "decisions")
    rows = (await asyncio.to_thread(backtest_tables, samples, decisions, options)).to_pylist()  # its own loop

    assert sorted((r["job_name"], r["world"]) for r in rows) == [
        (job, world) for job in ("stepped-0", "stepped-1") for world in sorted((ACTUAL, "A", "B", BEST))
    ]
    measures = ("restarts", "below_capacity_s", "backlog_above_target_s", "slot_hours")
    for job in ("stepped-0", "stepped-1"):
        by_world = {r["world"]: r for r in rows if r["job_name"] == job}
        assert all(r["error"] is None for r in by_world.values())
        assert [by_world["A"][m] for m in measures] == [by_world[ACTUAL][m] for m in measures]
        assert by_world["A"]["diverged_ms"] is None and by_world["B"]["diverged_ms"] is not None
        assert by_world["B"]["slot_hours"] > by_world[ACTUAL]["slot_hours"]
        # The best plan in hindsight is priced like the worlds, and none of them beats it.
        assert 0 < by_world[BEST]["cost"] <= min(by_world[w]["cost"] for w in (ACTUAL, "A", "B"))
