"""Gates that must keep a real job exactly as it is: an executor plugin's veto, and advisor mode.

Work is under-provisioned (1,250 rec/s per subtask at 2,000 rec/s offered), so the daemon reaches a
decision to scale it 1 -> 3; what is under test is that nothing reaches Flink, and that operators see
why in the events (JSON log) and in /metrics.
"""

from __future__ import annotations

import pytest
from harness import WORK, WORK_ID, JobWatcher, wait_until

pytestmark = pytest.mark.e2e

BASE = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.metrics.window": "60 s",
}
DECISIONS_AFTER = 3  # the gate holds over several ticks, not just the first


def _work_never_changed(watcher: JobWatcher, job) -> None:
    assert [p for _, p in watcher.running_parallelisms(WORK)] == [1]
    requirements = job.rest.get(f"/jobs/{job.job_id}/resource-requirements")
    assert requirements[WORK_ID]["parallelism"]["upperBound"] == 1
    assert job.parallelism(WORK) == 1


@pytest.mark.e2e_seconds(115)
def test_a_plugin_veto_keeps_the_job_as_it_is(plugins_dir, submit_job, run_daemon, timings):
    test = "veto"
    daemon = run_daemon(
        {
            **BASE,
            "job.autoscaler.scaling.custom-executors": "gate",
            "job.autoscaler.scaling.custom-executor.gate.class": "cpu-gate",
            "job.autoscaler.scaling.custom-executor.gate.threshold": "1.01",  # CPU load never gets there
        },
        plugins_dir=plugins_dir,
    )
    job = submit_job(work_parallelism=1, cost_us=800)
    with JobWatcher(job) as watcher:
        load_at = job.set_load(rate=2000)
        veto = daemon.wait_for_event("ScalingVetoed", timeout_s=600)
        timings.add(test, "load change -> ScalingVetoed event", veto["t"] - load_at)
        vetoed = wait_until(
            "the veto in /metrics",
            lambda: daemon.metric(
                "flink_autoscaler_plugin_outcomes_total", plugin="gate", outcome="ScalingVetoed", job=job.name
            ),
            120,
            every_s=2,
        )
        daemon.wait_for_decision("ScalingVetoed", timeout_s=300, count=DECISIONS_AFTER)

    assert "gate" in veto["message"] and veto["type"] == "Warning", veto
    assert vetoed >= 1
    assert daemon.events("Scaling") == []
    assert [r for r in daemon.records() if r.get("event") == "flink_resource_requirements_set"] == []
    _work_never_changed(watcher, job)
    started = [r for r in daemon.records() if r.get("event") == "executor_plugins"]
    assert started and any("cpu-gate" in d and ".whl" in d for d in started[0]["discovered"]), started
    assert daemon.stop() == 0


@pytest.mark.e2e_seconds(115)
def test_advisor_mode_reports_decisions_and_never_rescales(submit_job, run_daemon, timings):
    test = "advisor"
    daemon = run_daemon({**BASE, "job.autoscaler.scaling.enabled": "false"})
    job = submit_job(work_parallelism=1, cost_us=800)
    with JobWatcher(job) as watcher:
        load_at = job.set_load(rate=2000)
        report = daemon.wait_for_event("ScalingReport", timeout_s=600)
        timings.add(test, "load change -> ScalingReport event", report["t"] - load_at)
        advised = wait_until(
            "AdvisorMode decisions in /metrics",
            lambda: daemon.metric("flink_autoscaler_decisions_total", outcome="AdvisorMode", job=job.name),
            120,
            every_s=2,
        )
        daemon.wait_for_decision("AdvisorMode", timeout_s=300, count=DECISIONS_AFTER)

    assert report["message"].startswith("Scaling execution disabled by config"), report
    assert f"Vertex ID {WORK_ID} | Parallelism 1 -> 3" in report["message"], report
    assert advised >= 1
    assert daemon.events("Scaling") == []
    assert [r for r in daemon.records() if r.get("event") == "flink_resource_requirements_set"] == []
    _work_never_changed(watcher, job)
    assert daemon.stop() == 0
