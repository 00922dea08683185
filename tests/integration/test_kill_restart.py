"""The daemon is SIGKILLed right after issuing a rescale and started again on the same state file.

Against the simulator over HTTP, in real time: the restarted daemon finds the pending rescale, sends
no second PUT, confirms it, keeps the history, and still counts its cooldown from the rescale the
killed process made.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_processes import dies_with_parent

from autoscaler.clock import SystemClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import open_stores

pytestmark = [pytest.mark.spark, pytest.mark.process]

COOLDOWN_MIN_S = 600


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "run", "--config", str(config)],
            stdout=out,
            stderr=out,
            env=env,
            cwd=config.parent,
            preexec_fn=dies_with_parent(),  # killed with the test process, if it dies first
        )


def _events(log: Path) -> list[dict]:
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("event") == "event":
                lines.append(entry)
    return lines


def _wait_for(condition, what: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, f"daemon exited while waiting for {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.25)


def test_sigkill_after_a_rescale_loses_no_history_or_cooldown_and_never_rescales_twice(tmp_path: Path):
    sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=5, restart_pause_s=1), SystemClock())
    job_id = sim.submit(work_job(name="load-job", input_rate=Constant(rate=2000.0)))
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    with SimulatorServer(sim) as server:
        base = (
            f"clusters:\n  - name: sim\n    rest_url: {server.url}\n"
            f"control_loop_interval: 1 s\nmetrics_address: ''\nlog_format: json\nstate_url: {state_url}\n"
            # Stable across the restart, as the systemd unit's: the lease is taken back at once.
            "instance_id: sim-daemon\n"
            "spark:\n  master: local[1]\n"
            # Longer than the restarted daemon's start (Spark's JVM) on a loaded 2-core machine: with 20 s,
            # a CI run found every stored row older than the window by its first tick, and restored none.
            "autoscaler:\n  job.autoscaler.enabled: true\n  job.autoscaler.metrics.window: 40 s\n"
            "  job.autoscaler.stabilization.interval: 10 s\n"
        )
        config = tmp_path / "config.yaml"
        config.write_text(base)
        # The restarted daemon also has a cooldown: it must count from the rescale the killed one made.
        restarted_config = tmp_path / "restarted.yaml"
        restarted_config.write_text(base + f"  job.autoscaler.scaling-interval.min: {COOLDOWN_MIN_S} s\n")
        first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
        first = _start(config, first_log)
        try:
            # Killed the moment the PUT went out (its Scaling event), before Flink applied it.
            _wait_for(
                lambda: any(e["reason"] == "Scaling" for e in _events(first_log)),
                "the rescale",
                first,
                first_log,
            )
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()

        second = _start(restarted_config, second_log)
        try:
            _wait_for(
                lambda: any(e["reason"] == "ScalingConfirmed" for e in _events(second_log)),
                "the confirmation",
                second,
                second_log,
            )
            assert sim.parallelism(job_id)["Work"] == 3
            sim.set_input_rate(job_id, Constant(rate=4000.0))  # now Work would need more: the cooldown holds
            _wait_for(
                lambda: any(e["reason"] == "CooldownDeferred" for e in _events(second_log)),
                "a deferred decision",
                second,
                second_log,
            )
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0
        finally:
            if second.poll() is None:
                second.kill()

    assert sim.rescale_count(job_id) == 1  # one PUT applied; none after the restart
    assert '"event": "windows_restored"' in second_log.read_text()  # resumed the stored metric window
    assert not any(e["reason"] == "Scaling" for e in _events(second_log))
    stores = open_stores(state_url)
    try:
        state = stores.state.load("sim/load-job")
    finally:
        stores.close()
    (record,) = state.history
    assert record.confirmed_ms is not None and state.pending is None
    deferred = next(e for e in _events(second_log) if e["reason"] == "CooldownDeferred")
    retry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((record.ts_ms + COOLDOWN_MIN_S * 1000) // 1000))
    assert retry in deferred["message"]  # counted from the killed process's rescale
