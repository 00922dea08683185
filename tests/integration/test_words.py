"""Words that mislead (issue 36, item 6), on the real daemon against the simulator: what the log, ``explain``
and ``status`` say must be what happened."""

from __future__ import annotations

from pathlib import Path

from sim_world import sim_world
from structlog.testing import capture_logs

from autoscaler.events import SqlEventSink
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant
from autoscaler.state.db import Database

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
