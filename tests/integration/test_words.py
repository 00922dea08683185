"""Words that mislead (issue 36, item 6), on the real daemon against the simulator: what the log, ``explain``
and ``status`` say must be what happened."""

from __future__ import annotations

from pathlib import Path

from sim_world import QUICK, TICK_S, sim_world
from structlog.testing import capture_logs

from autoscaler.explain import explain, record_from_outcome, status_table
from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant
from autoscaler.state.db import Database
from autoscaler.state.events import SqlEventSink

DAY_S = 86_400


async def test_the_daily_cleanup_logs_events_cleaned_up_once(tmp_path: Path) -> None:
    db = Database.open(f"sqlite:///{tmp_path / 'state.db'}")
    world = sim_world(8, events=SqlEventSink(db))
    world.sim.submit(work_job(name="load-job", work_capacity=1250.0, input_rate=Constant(rate=2000.0)))
    for _ in range(20):  # a rescale and its events
        await world.tick()
    assert world.events.events("sim/load-job")
    retention_s = world.daemon.settings.event_retention.total_seconds()
    world.clock.advance(retention_s + DAY_S)

    with capture_logs() as logs:
        await world.daemon._cleanup()  # the daily housekeeping, as the schedule runs it

    cleaned = [line for line in logs if line["event"] == "events_cleaned_up"]
    assert len(cleaned) == 1 and cleaned[0]["deleted"] > 0
    assert not world.events.events("sim/load-job")
    db.close()


async def test_status_says_why_a_recommendation_above_the_parallelism_is_not_applied() -> None:
    # Work at 3 x 1,250 rec/s under 3,200 rec/s: 85 % busy, inside the band (up to 100 %), while the
    # target of 70 % recommends ceil(3200 / 875) = 4. Nothing is sent: the row must not read as pending.
    world = sim_world(8)
    job = work_job(name="busy", work_parallelism=3, input_rate=Constant(rate=3200.0))
    job_id = world.sim.submit(job)
    for _ in range(20):
        await world.tick()
    last = world.outcomes[-1]
    assert last.outcome is Reason.IN_BAND and world.sim.rescale_count(job_id) == 0
    record = record_from_outcome(last)

    table = status_table({record.job_key: record}, {}, world.clock.now_ms())

    (work,) = [line.split() for line in table.splitlines() if line.strip().startswith("Work")]
    assert work[1:3] == ["3", "4"]  # P 3, REC 4 ...
    assert "no action: no vertex outside its utilization band" in table  # ... and why nothing is sent


async def test_explain_shows_the_restart_time_used_and_where_it_came_from() -> None:
    world = sim_world(
        8,
        {
            **QUICK,
            "job.autoscaler.restart.time": "90 s",
            "job.autoscaler.restart.time-tracking.enabled": "true",
        },
    )
    job_id = world.sim.submit(work_job(name="load-job", input_rate=Constant(rate=2000.0)))
    while world.sim.rescale_count(job_id) == 0:
        await world.tick()
    (scaled,) = [o for o in world.outcomes if o.outcome is Reason.SCALING]
    # The decision to rescale had no restart of the job measured: restart.time, said so.
    assert (
        "Restart time used: 90 s, configured (restart.time; no restart of this job measured yet"
        in explain(record_from_outcome(scaled))
    )
    for _ in range(15):  # the restart is measured when the daemon confirms it; later decisions use it
        await world.tick()
    (record,) = world.daemon.state.load("sim/load-job").history
    assert record.restart_duration_ms is not None
    text = explain(record_from_outcome(world.outcomes[-1]))
    used = record.restart_duration_ms // 1000
    assert (
        f"Restart time used: {used} s, measured: the longest of the 1 restart measured for this job, "
        f"{record.restart_duration_ms / 1000:.1f} s (restart.time-tracking.enabled" in text
    )


async def test_counters_starting_over_after_the_daemons_own_rescale_are_said_as_the_restart() -> None:
    # Flink fetching metrics once per control-loop interval, as on the lab cluster (5 s and 5 s): a tick
    # after the rescale reads /jobs/:id with the new run's RUNNING time while the metric store still
    # holds the old tasks' counters; they fall at the next fetch, within the same run. A tick reads the
    # fetch from before the restart when its own fetch misses its wait (a drift cycle's last tick on the
    # lab); here no tick waits (metric_fetch_wait 0), so the first one after the rescale always does.
    world = sim_world(8, fetch_interval_s=TICK_S, fetch_wait_s=0)
    job_id = world.sim.submit(
        work_job(name="load-job", work_capacity=1250.0, input_rate=Constant(rate=2000.0))
    )
    with capture_logs() as logs:
        for _ in range(40):
            await world.tick()
    assert world.sim.parallelism(job_id)["Work"] == 3 and world.sim.rescale_count(job_id) == 1

    assert not [line for line in logs if line["event"] == "metric_counters_fell"]
    (restarted,) = [line for line in logs if line["event"] == "metric_counters_restarted"]
    assert restarted["log_level"] == "info"
    assert "(a rescale: Work 1 -> 3) and its record counters started over" in restarted["detail"]
    resets = world.metrics.registry.get_sample_value(
        "flink_autoscaler_metric_counter_resets_total", {"cluster": "sim", "job": "load-job"}
    )
    assert not resets  # not a reset within a run
    # The window after it waited out the restart's stabilization like any restart: the verification
    # came from a full window of the new run.
    assert Reason.SCALING_VERIFIED in world.events.reasons("sim/load-job")
    since = world.sim.job(job_id).running_since_ms
    early = [o.outcome for o in world.outcomes if since < o.now_ms < since + 30_000]  # QUICK: 30 s
    assert early and Reason.WINDOW_NOT_FULL not in early  # stabilizing, not a window restarted at the fall
