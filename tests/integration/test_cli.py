"""The command line as an operator uses it: check-config, clear config errors, and `run` as a real
process against the simulator over HTTP, scraped on /metrics, probed on /healthz and /readyz, read by
`status` from another process, and stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from child_processes import dies_with_parent
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.cli import main
from autoscaler.clock import SystemClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import SimClusterSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "example.yaml"


def test_check_config_accepts_the_shipped_example(capsys):
    assert main(["check-config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "OK (1 cluster(s))" in out and "job.autoscaler.metrics.window: 15 min" in out


def test_invalid_config_exits_2_naming_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "clusters:\n  - name: p\n    rest_url: http://jm:8081\n"
        "autoscaler:\n  job.autoscaler.utilization.target: 3\n"
    )
    assert main(["check-config", str(bad)]) == 2
    assert "job.autoscaler.utilization.target" in capsys.readouterr().err
    assert main(["run", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(url, timeout=5).text
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.spark
@pytest.mark.process
def test_run_scrapes_serves_metrics_and_stops_cleanly_on_sigterm(tmp_path):
    sim = SimCluster(SimClusterSpec(), SystemClock())
    sim.submit(work_job(name="load-job"))
    port = _free_port()
    with SimulatorServer(sim) as server:
        config = tmp_path / "config.yaml"
        config.write_text(
            f"clusters:\n  - name: sim\n    rest_url: {server.url}\n"
            f"control_loop_interval: 1 s\nmetrics_address: 127.0.0.1:{port}\nlog_format: json\n"
            "spark:\n  master: local[1]\nautoscaler:\n  job.autoscaler.enabled: true\n"
            f"state_url: sqlite:///{tmp_path / 'state.db'}\n"
        )
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
        decisions = tmp_path / "decisions"
        log = (tmp_path / "daemon.log").open("w")  # a file, so a chatty daemon can never block on a pipe
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autoscaler",
                "run",
                "--config",
                str(config),
                "--decisions-dir",
                str(decisions),
            ],
            stdout=log,
            stderr=log,
            text=True,
            env=env,
            preexec_fn=dies_with_parent(),  # killed with the test process, if it dies first
        )
        try:
            url, deadline, seen = f"http://127.0.0.1:{port}/metrics", time.monotonic() + 180, {}
            while time.monotonic() < deadline and seen.get("flink_autoscaler_ticks_total[]", 0) < 3:
                assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-2000:]
                with contextlib.suppress(httpx.TransportError):  # not listening yet
                    seen = _metrics(url)
                time.sleep(0.5)
            assert seen.get("flink_autoscaler_ticks_total[]", 0) >= 3
            assert seen["flink_autoscaler_jobs[('cluster', 'sim')]"] == 1
            stages = ("collect", "load", "evaluate", "decide", "plugins", "realize", "record")
            timed = [
                seen.get(f"flink_autoscaler_tick_stage_duration_seconds_count[('stage', '{s}')]", 0)
                for s in stages
            ]
            assert min(timed) >= 2, timed  # every stage of every whole tick (a scrape may fall mid-report)
            waits = [k for k in seen if k.startswith("flink_autoscaler_metric_fetch_wait_seconds_count")]
            assert waits and all("('cluster', 'sim')" in k for k in waits)  # the real-time daemon waits
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
            assert ready.status_code in (200, 503) and ready.json()["reason"]
            # status, from another process, while the daemon runs
            status = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "autoscaler",
                    "status",
                    "-c",
                    str(config),
                    "--decisions-dir",
                    str(decisions),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert status.returncode == 0 and "sim/load-job" in status.stdout, status.stderr
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    stderr = (tmp_path / "daemon.log").read_text()
    assert proc.returncode == 0, stderr[-2000:]
    assert '"event": "daemon_stopped"' in stderr


def test_simulate_serves_flink_rest_until_its_duration(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "simulate", "--port", str(port), "--duration", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=dies_with_parent(),
    )
    try:
        deadline, overview = time.monotonic() + 30, None
        while overview is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                overview = httpx.get(f"http://127.0.0.1:{port}/overview", timeout=2).json()
            time.sleep(0.2)
        jobs = httpx.get(f"http://127.0.0.1:{port}/jobs/overview", timeout=2).json()["jobs"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert overview is not None and overview["flink-version"].startswith("2.3")
    assert [j["state"] for j in jobs] == ["RUNNING"]
