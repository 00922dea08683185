"""A job rescaled, cancelled and submitted again under its name, on real Flink (issue 36, item 1): the new
JobID is rescaled as soon as its own metrics call for it.

On Flink 2.3 the new job has its own JobID, runs what it was submitted with (Work at 1, requirements
1..1) and holds none of its predecessor's request. The daemon used to take the old JobID's last rescale
as a request standing for the new one, and so held the new job in ``WaitingForSlots`` ("Flink runs Work
at 1 of the 3 asked") with the cluster's slots free, for as long as its recommendation stayed what the
old JobID had been asked; then it "verified" that old rescale against the new job.

``vertex.max-parallelism`` 3 makes the recommendation the same both times (2,500 rec/s needs Work at
3 to 4 for 1,250 rec/s per subtask; the cap makes it 3), which is exactly the case that was held.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from harness import WORK, WORK_ID, DaemonProcess, requested_bounds, wait_until

from autoscaler.state import JobState

pytestmark = pytest.mark.e2e

OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "20 s",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.vertex.max-parallelism": "3",
}
# What a new job's decisions may be before its first full window: waiting for its own metrics.
WAITING_FOR_ITS_METRICS = {"Stabilizing", "WindowNotFull"}


def _state(daemon: DaemonProcess, job_name: str) -> JobState:
    """The job's state as the daemon saved it, read with the daemon's own store."""
    from autoscaler.state import SqlStateStore, open_database  # SQLAlchemy, only when this test runs

    db = open_database(daemon.state_url)
    try:
        return SqlStateStore(db).load(f"e2e/{job_name}")
    finally:
        db.close()


@pytest.mark.e2e_seconds(170)
def test_a_resubmitted_job_is_rescaled_on_its_own_metrics(submit_job, run_daemon, timings) -> None:
    test = "resubmit"
    daemon = run_daemon(OPTIONS)
    old = submit_job(work_parallelism=1, cost_us=800)
    load_at = old.set_load(rate=2500)
    first = daemon.wait_for_event("Scaling", timeout_s=600)
    assert requested_bounds(first, WORK_ID) == (1, 3), first
    daemon.wait_for_event("ScalingConfirmed", timeout_s=300, after=first["t"])
    assert old.parallelism(WORK) == 3
    timings.add(test, "load change -> Scaling event (first JobID)", first["t"] - load_at)

    old.cancel()  # before a full window after the rescale: the rescale stays unverified
    submitted_at = time.time()
    new = submit_job(work_parallelism=1, cost_us=800)  # the same name, a new JobID
    assert new.name == old.name and new.job_id != old.job_id
    assert new.parallelism(WORK) == 1
    new.set_load(rate=2500)

    def judged() -> dict[str, Any] | None:
        """The new job's first decision that is not waiting for its own metrics."""
        mine = [d for d in daemon.decisions() if d["t"] >= submitted_at and d["job"] == new.name]
        return next((d for d in mine if d["outcome"] not in WAITING_FOR_ITS_METRICS), None)

    # As soon as its own metrics call for it: the first decision on its first full window rescales it.
    decided = wait_until("the new job's first full-window decision", judged, 600, alive=daemon.check_alive)
    assert decided["outcome"] == "Scaling", decided
    second = daemon.wait_for_event("Scaling", timeout_s=120, after=submitted_at)
    put = daemon.put_before(second)
    ran = wait_until(
        "the new job's Work running at 3", lambda: time.time() if new.parallelism(WORK) == 3 else None, 300
    )
    timings.add(test, "resubmission -> Scaling event (new JobID)", second["t"] - submitted_at)
    final = _state(daemon, new.name)

    assert put["job_id"] == new.job_id and requested_bounds(second, WORK_ID) == (1, 3), (put, second)
    # The old JobID's rescale was not measured on the new job (nothing was verified before its own ran).
    assert [e for e in daemon.events("ScalingVerified") if e["t"] <= ran] == []
    (resubmitted,) = daemon.events("JobResubmitted")
    assert f"JobID {old.job_id} -> {new.job_id}" in resubmitted["message"]
    assert [(r.job_id, dict(r.changes)) for r in final.history] == [
        (old.job_id, {WORK_ID: (1, 3)}),
        (new.job_id, {WORK_ID: (1, 3)}),
    ], final
    assert final.history[0].verification is None and final.job_id == new.job_id
    assert daemon.stop() == 0
