"""A daemon killed with SIGKILL right after it issued a rescale, then started again on the same
durable state (SQLite, ``state_url``): the rescale it had in flight is confirmed, not repeated, and
the cooldown it was in (``scaling-interval.min`` from that rescale) still holds.

The state database is read from the test as well (the daemon's own store, ``autoscaler.state``), so
the cooldown is checked on the daemon's clock: the retry instant and the second rescale's record,
against the first record's timestamp, to the millisecond and without any tolerance.
"""

from __future__ import annotations

import math
import time
from datetime import datetime
from pathlib import Path

import pytest
from harness import WORK, WORK_ID, DaemonProcess, JobWatcher, deferred_until, requested_bounds, wait_until

from autoscaler.state import JobState

pytestmark = pytest.mark.e2e

MIN_S = 120
# 6,000 rec/s is 1.2 x what even 4 subtasks handle (4 x 1,250): out of the utilization band [0.4, 1.0]
# whatever first target the 30 s window gave. At 4,800, a first target of 4 left the raise at 0.96,
# inside the band, and the daemon rightly never wanted to grow again (a CI run waited 600 s for it).
RAISE = 6000
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.scaling-interval.min": f"{MIN_S} s",
}


def _state(daemon: DaemonProcess, job_name: str) -> JobState:
    """The job's state as the daemon saved it, read with the daemon's own store."""
    from autoscaler.state import SqlStateStore, open_database  # SQLAlchemy, only when this test runs

    db = open_database(daemon.state_url)
    try:
        return SqlStateStore(db).load(f"e2e/{job_name}")
    finally:
        db.close()


@pytest.mark.e2e_seconds(250)
def test_a_killed_daemon_resumes_its_cooldown_and_does_not_rescale_twice(
    submit_job, run_daemon, timings
) -> None:
    test = "restart"
    daemon = run_daemon(OPTIONS)
    job = submit_job(work_parallelism=1, cost_us=800)
    with JobWatcher(job) as watcher:
        load_at = job.set_load(rate=2000)
        first = daemon.wait_for_event("Scaling", timeout_s=600)
        # Killed as soon as the Scaling event shows (the state was saved before it was logged),
        # most likely before its next tick could confirm the rescale.
        assert daemon.kill() == -9
        killed_at = time.time()
        killed = _state(daemon, job.name)
        put1 = daemon.put_before(first)
        # 3 as a rule; a 30 s window's rate can tip it to 4 (see test_e2e_scaling's docstring)
        _, p1 = requested_bounds(first, WORK_ID)
        ran1 = wait_until(
            f"Work running at parallelism {p1}",
            lambda: watcher.first_running_at(WORK, p1, after=put1["t"] - 1),
            300,
        )
        # Work must grow again, but only once the cooldown is over; out of the band for p1 = 4 too
        raise_at = job.set_load(rate=RAISE)
        daemon.start()
        daemon.wait_started()
        restarted_at = next(r for r in daemon.records(current_start=True) if r["event"] == "daemon_started")
        deferred = daemon.wait_for_event("CooldownDeferred", timeout_s=600, after=ran1)
        second = daemon.wait_for_event("Scaling", timeout_s=600, after=first["t"] + 1)
        put2 = daemon.put_before(second)
        grown = wait_until(
            f"Work running above parallelism {p1}",
            lambda: watcher.first_running_above(WORK, p1, after=put2["t"] - 1),
            300,
        )
        final = _state(daemon, job.name)

    timings.add(test, "load change -> first Scaling event", first["t"] - load_at)
    timings.add(test, f"PUT -> Work running at {p1} (/jobs/:id)", ran1 - put1["t"])
    timings.add(
        test,
        "SIGKILL -> restarted daemon started (Spark up, first tick scheduled)",
        datetime.fromisoformat(restarted_at["timestamp"]).timestamp() - killed_at,
    )
    timings.add(test, "load raise -> second Scaling event (after the cooldown)", second["t"] - raise_at)
    timings.add(test, f"PUT -> Work running above {p1} (/jobs/:id)", grown - put2["t"])

    # What the killed daemon had saved: the rescale, in the history and as the cooldown's start.
    assert 2 <= p1 <= 4, first
    assert [dict(r.changes) for r in killed.history] == [{WORK_ID: (1, p1)}], killed
    r1_ms = killed.history[-1].ts_ms
    assert killed.last_rescale_ms == r1_ms
    # The restarted daemon confirmed the rescale the first one had in flight; it did not issue it again.
    confirmations = [e for e in daemon.events("ScalingConfirmed") if f"Work {p1}" in e["message"]]
    assert len(confirmations) == 1, confirmations
    if killed.pending is not None:  # the usual case: killed before the confirming tick
        assert confirmations[0]["_start"] == 2
    puts = [r for r in daemon.records() if r.get("event") == "flink_resource_requirements_set"]
    assert [r["_start"] for r in puts] == [1, 2], puts
    # The cooldown survived: deferred to exactly first rescale + min, on the daemon's clock ...
    retry_ms = r1_ms + MIN_S * 1000
    assert deferred["_start"] == 2
    assert deferred_until(deferred["message"]) == math.floor(retry_ms / 1000), (deferred, r1_ms)
    # ... and the second rescale came at that instant, not before.
    assert second["_start"] == 2 and second["t"] * 1000 >= retry_ms
    assert dict(final.history[0].changes) == {WORK_ID: (1, p1)}, final
    assert len(final.history) == 2 and final.history[1].ts_ms >= retry_ms, final
    assert final.history[0].confirmed_ms is not None
    # Flink saw exactly two rescales.
    assert [p for _, p in watcher.running_parallelisms(WORK)][:2] == [1, p1]
    assert len(watcher.running_parallelisms(WORK)) == 3
    assert daemon.stop() == 0
    assert Path(daemon.state_file).exists()
