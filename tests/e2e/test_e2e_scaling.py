"""The daemon as a process against a real Flink 2.3 cluster: scale up, scale down, cooldown.

The load job's Work operator handles 1e6 / cost_us records/s per subtask (parked, not computed), so
the capacity model's answer is known in advance: at 2,000 rec/s offered and 1,250 rec/s per subtask,
Work needs ceil(2000 / (1250 * 0.7)) = 3 subtasks, and with the default restart and catch-up terms
(restart.time 5 min, catch-up.duration 30 min) round(lag/1800 + 2000/6 + 2000/0.7) / 1250 = 2.6 -> 3
as well (3 holds for any measured target rate between about 1,600 and 2,300 rec/s). Only the
scale-up test, with a 60 s window, asserts that 3: a 30 s window's rate, from counter deltas that Flink's
lazy metric fetcher hands out up to a fetch interval late, can leave that range (one CI run measured
2,320 rec/s and rescaled to 4). The cooldown and restart tests are about timing, so they take the
first target from the daemon's own Scaling event.

Windows are short (stabilization 30 s, window 30-60 s) and the tick is 6 s, just over Flink's metric
fetch interval (5 s), so every tick triggers a fresh fetch and all samples are equally old. Rates come
from counter deltas (metrics.prefer-counter-rates, the default), so Flink's 60 s meter ramp after a
restart does not matter.

The only wall-clock assertions are the behaviours under test: a scale-down not before
scale-down.interval, a second rescale not before last rescale + scaling-interval.min. They compare
the daemon's own log timestamps, written after a tick's collection and evaluation; ticks are on a
fixed 6 s grid, so acting one tick early would be off by a whole tick, and half a tick
(``TOLERANCE_S``) absorbs the difference in how long two ticks took to log.
"""

from __future__ import annotations

import time

import pytest
from browser import CHROMIUM, blank_reason, look_at
from harness import CLUSTER, WORK, WORK_ID, JobWatcher, deferred_until, requested_bounds, wait_until

from autoscaler.cli import main as cli

pytestmark = pytest.mark.e2e

TICK_S = 6
TOLERANCE_S = TICK_S / 2
BASE = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.metrics.window": "60 s",
    "job.autoscaler.utilization.target": "0.7",
}


def _parallelisms(watcher: JobWatcher) -> list[int]:
    return [p for _, p in watcher.running_parallelisms(WORK)]


@pytest.mark.e2e_seconds(190)
def test_scale_up_to_the_predicted_parallelism_in_one_rescale(submit_job, run_daemon, timings):
    test = "scale-up"
    daemon = run_daemon(BASE)
    job = submit_job(work_parallelism=1, cost_us=800)
    with JobWatcher(job) as watcher:
        load_at = job.set_load(rate=2000)  # Work handles 1,250: the backlog grows by 750 rec/s
        scaling = daemon.wait_for_event("Scaling", timeout_s=600)
        put = daemon.put_before(scaling)
        running_at = wait_until(
            "Work running at parallelism 3",
            lambda: watcher.first_running_at(WORK, 3, after=put["t"] - 1),
            300,
        )
        timings.add(test, "load change -> Scaling event", scaling["t"] - load_at)
        timings.add(test, "PUT -> Work running at 3 (/jobs/:id)", running_at - put["t"])
        backlog_at_rescale = job.pending_records()
        drained_at = wait_until(
            "the backlog drained",
            lambda: time.time() if job.pending_records() < 1000 else None,
            600,
            every_s=3,
        )
        timings.add(
            test,
            f"rescale -> backlog drained (from {backlog_at_rescale:.0f} records)",
            drained_at - running_at,
        )
        # A full window of the new epoch is evaluated and finds Work in its band: no second rescale.
        settled = daemon.wait_for_decision("InBand", timeout_s=600, after=running_at)
        timings.add(test, "rescale -> next full-window decision (InBand)", settled["t"] - running_at)

    assert requested_bounds(scaling, WORK_ID) == (1, 3)

    # What an operator looks at afterwards (issue 39): the job's timeline, drawn from what the daemon
    # kept of its decisions on real Flink, and loaded in a real browser where there is one.
    page = daemon.decisions_dir.parent / "scale-up-timeline.html"
    job_key = f"{CLUSTER}/{job.name}"
    assert cli(["explain", job_key, "--html", str(page), "--decisions-dir", str(daemon.decisions_dir)]) == 0
    drawn = page.read_text(encoding="utf-8")
    assert drawn.count("<svg") == 3 and "scaled up" in drawn and "Work: 1 →" in drawn
    if CHROMIUM is not None:
        looked = look_at(page, page.with_suffix(".png"))
        assert looked.console == []
        blank = {n: why for n, box in looked.charts.items() if (why := blank_reason(looked.screenshot, box))}
        assert blank == {}, f"charts missing or blank in {looked.screenshot}: {blank}"
    assert len(daemon.events("Scaling")) == 1, daemon.events("Scaling")
    assert _parallelisms(watcher) == [1, 3]
    assert job.parallelism(WORK) == 3
    assert daemon.stop() == 0
    assert any(r.get("event") == "daemon_stopped" for r in daemon.records())


@pytest.mark.e2e_seconds(210)
def test_scale_down_waits_for_the_scale_down_interval(submit_job, run_daemon, timings):
    test = "scale-down"
    # Longer than the window (60 s): the first decision on the lower load comes a window after the
    # drop and must be held. With interval == window the delay, counted from the first sample of
    # the new load, had already run out by then, and the job scaled down on its first decision
    # (correct, but the test could not see the hold; one CI run in about five).
    interval_s = 90
    # The delay under test, not the cost gate: with restart.time unmeasured (1 min) the restart costs
    # what one slot saves in 40 min, so the recommended profile's gate would hold this one-slot
    # scale-down for some 25 min (docs/algorithm.md 9.2; the forecast scenario runs the gate on Flink).
    daemon = run_daemon(
        {
            **BASE,
            "job.autoscaler.scale-down.interval": f"{interval_s} s",
            "job.autoscaler.cost.enabled": "false",
        }
    )
    job = submit_job(work_parallelism=2, cost_us=800)
    with JobWatcher(job) as watcher:
        job.set_load(rate=1500)  # 60 % of Work's 2 x 1,250: inside the band [0.4, 1.0]
        steady = daemon.wait_for_decision("InBand", timeout_s=600)
        drop_at = job.set_load(rate=400)  # 16 %: one subtask is enough (400 / 0.7 + 400/6 < 1,250)
        held = daemon.wait_for_decision("ScaleDownDelayed", timeout_s=600, after=drop_at)
        scaling = daemon.wait_for_event("Scaling", timeout_s=600, after=drop_at)
        put = daemon.put_before(scaling)
        running_at = wait_until(
            "Work running at parallelism 1",
            lambda: watcher.first_running_at(WORK, 1, after=put["t"] - 1),
            300,
        )
    timings.add(test, "steady state (InBand) -> load drop", drop_at - steady["t"])
    timings.add(test, "load drop -> first ScaleDownDelayed", held["t"] - drop_at)
    timings.add(test, "first ScaleDownDelayed -> Scaling event", scaling["t"] - held["t"])
    timings.add(test, "load drop -> Scaling event", scaling["t"] - drop_at)
    timings.add(test, "PUT -> Work running at 1 (/jobs/:id)", running_at - put["t"])

    # Not before the interval: the delay counts from the first sample of the lower load (the window
    # restarted at the load change, metrics.load-change.threshold), so the scale-down comes at least
    # the interval after the drop, though less than that after the first recommendation.
    assert scaling["t"] - drop_at >= interval_s - TOLERANCE_S, (drop_at, scaling)
    delayed = [d for d in daemon.decisions() if d["outcome"] == "ScaleDownDelayed"]
    assert all(d["t"] < scaling["t"] for d in delayed)
    assert requested_bounds(scaling, WORK_ID) == (1, 1)
    assert len(daemon.events("Scaling")) == 1
    assert _parallelisms(watcher) == [2, 1]
    assert daemon.stop() == 0


@pytest.mark.e2e_seconds(250)
def test_cooldown_defers_the_second_rescale_to_last_rescale_plus_min(submit_job, run_daemon, timings):
    test = "cooldown"
    min_s = 120  # longer than restart + stabilization + window (about 70 s): the next decision lands inside
    daemon = run_daemon(
        {**BASE, "job.autoscaler.metrics.window": "30 s", "job.autoscaler.scaling-interval.min": f"{min_s} s"}
    )
    job = submit_job(work_parallelism=1, cost_us=800)
    with JobWatcher(job) as watcher:
        job.set_load(rate=2000)
        first = daemon.wait_for_event("Scaling", timeout_s=600)
        put1 = daemon.put_before(first)
        _, p1 = requested_bounds(first, WORK_ID)  # 3 as a rule; see the module docstring
        ran1 = wait_until(
            f"Work running at parallelism {p1}",
            lambda: watcher.first_running_at(WORK, p1, after=put1["t"] - 1),
            300,
        )
        # about 8 subtasks' worth: Work must grow again, even from a first target of 4 (6,000 is
        # 1.2 x 4 x 1,250; 4,800 would be 0.96, inside the band, and no second rescale would come)
        raise_at = job.set_load(rate=6000)
        deferred = daemon.wait_for_event("CooldownDeferred", timeout_s=600, after=ran1)
        second = daemon.wait_for_event("Scaling", timeout_s=600, after=first["t"] + 1)
        put2 = daemon.put_before(second)
        grown = wait_until(
            f"Work running above parallelism {p1}",
            lambda: watcher.first_running_above(WORK, p1, after=put2["t"] - 1),
            300,
        )
    retry_at = deferred_until(deferred["message"])
    timings.add(test, "load raise -> CooldownDeferred", deferred["t"] - raise_at)
    timings.add(test, "first Scaling -> second Scaling", second["t"] - first["t"])
    timings.add(test, "retry instant -> second Scaling event", second["t"] - retry_at)
    timings.add(test, f"PUT -> Work running above {p1} (/jobs/:id)", grown - put2["t"])

    # The deferral names last rescale + min (to the second; the tick read its clock before logging).
    assert first["t"] + min_s - 15 <= retry_at <= first["t"] + min_s, (first, deferred)
    assert deferred["t"] < retry_at
    # The second rescale is issued at that instant, and not before.
    assert second["t"] >= retry_at
    assert second["t"] - first["t"] >= min_s - TOLERANCE_S
    assert 2 <= p1 <= 4, first  # the capacity model's 3, give or take a 30 s window's noise
    assert requested_bounds(second, WORK_ID)[1] > p1
    assert len(daemon.events("Scaling")) == 2
    assert _parallelisms(watcher)[:2] == [1, p1] and len(_parallelisms(watcher)) == 3
    assert daemon.stop() == 0
