"""Names the daemon does not choose: a 10,000-character job name, a job name with a '/', and a cluster
name with a '/'.

A job name is whatever its owner submitted, and it becomes a file name (the job's decision files) and a
Prometheus label (every series of the job). One daemon process runs two jobs whose 10,000-character
names differ only in their last character, and a job named ``team/etl``: each is autoscaled, its
decisions are written where ``explain`` finds them, no error is logged tick after tick, and ``/metrics``
stays small with the two long jobs still two jobs. Then the decisions directory is taken away: each
job's failed write is logged once and every one is counted, and the writes resume when it is back.

A cluster name is the operator's, and job keys are ``<cluster>/<job name>``: a '/' in it would let
``prod`` + ``x/y`` and ``prod/x`` + ``y`` share a key, so ``check-config`` and ``run`` refuse it (no
daemon needed for that).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from autoscaler.metric_labels import MAX_JOB_LABEL, job_label
from autoscaler.simulator.server import SimulatorServer

from .harness import WAIT_S, Daemon, SimJob, daemon_config, free_port, sim_cluster, wait_rescaled

pytestmark = [pytest.mark.faults]

CLUSTER = "sim"
LONG = ("a-job-name-as-long-as-a-page-" * 400)[:9_999]
PAGE_LIMIT = 100_000
"""Bytes of ``/metrics`` for three jobs: some 30 KB; with the names in full it was over 700 KB."""
WRITE_FAILURES = "flink_autoscaler_decision_write_failures_total"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m autoscaler ARGS`` as the operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=WAIT_S,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


def test_a_cluster_name_with_a_slash_is_refused_by_check_config_and_run(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        daemon_config(
            {"prod": "http://127.0.0.1:1", "prod/x": "http://127.0.0.1:2"},
            state_url=f"sqlite:///{tmp_path / 'state.db'}",
            metrics_port=free_port(),
        )
    )
    for command in (["check-config", str(config)], ["run", "--config", str(config)]):
        done = _cli(*command, cwd=tmp_path)
        assert done.returncode == 2, f"{command[0]}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "clusters.1.name: cluster 'prod/x': a cluster name must not contain '/'" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "state.db").exists()  # run stopped before it opened anything


@pytest.mark.spark
def test_long_and_slashed_job_names_are_written_explained_and_exported_small(tmp_path: Path) -> None:
    sim = sim_cluster()
    long_a = SimJob.submit(CLUSTER, sim, f"{LONG}A")
    long_b = SimJob.submit(CLUSTER, sim, f"{LONG}B")
    slashed = SimJob.submit(CLUSTER, sim, "team/etl")
    jobs = (long_a, long_b, slashed)
    port = free_port()
    decisions = tmp_path / "flink-autoscaler-decisions"  # the default decisions_dir, in the daemon's cwd
    with SimulatorServer(sim) as server:
        config = daemon_config(
            {CLUSTER: server.url}, state_url=f"sqlite:///{tmp_path / 'state.db'}", metrics_port=port
        )
        with Daemon(tmp_path, config, port) as daemon:
            for job in jobs:
                wait_rescaled(daemon, job)
            _wait_for(daemon, lambda: _explained(tmp_path, jobs), "explain showing every job's rescale")

            # The page: every job label within the cap, the two long jobs two jobs.
            labels = {have["job"] for _, have, _ in daemon.scrape() if "job" in have}
            assert max(len(label) for label in labels) <= MAX_JOB_LABEL
            assert {job_label(long_a.name), job_label(long_b.name), "team/etl"} <= labels
            assert job_label(long_a.name) != job_label(long_b.name)
            for job in jobs:  # counted once, and kept: a capped label is still its job's, not a gone one's
                assert daemon.metric("flink_autoscaler_scalings_total", job=job_label(job.name)) == 1
            size = len(httpx.get(daemon.metrics_url, timeout=10).content)
            assert size < PAGE_LIMIT, f"/metrics is {size} bytes"

            # Nothing failed at any tick: no error line, no unreadable decision file.
            errors = [line for line in daemon.logs() if line.get("level") == "error"]
            assert not errors, str(errors)[:2000]
            assert not daemon.find("decision_file_unreadable")

            # The decisions directory taken away: one line per job, every failed write counted.
            mark = daemon.mark()
            moved = tmp_path / "decisions-away"
            decisions.rename(moved)
            decisions.write_text("not a directory")
            daemon.wait_metric(WRITE_FAILURES, 3 * len(jobs))  # three ticks of them
            failed = daemon.find("decision_write_failed", since=mark)
            assert sorted(line["job"] for line in failed) == sorted(job.key for job in jobs)

            mark = daemon.mark()
            decisions.unlink()
            moved.rename(decisions)
            for job in jobs:
                daemon.wait_log("decision_write_recovered", since=mark, job=job.key)
            _wait_for(daemon, lambda: _explained(tmp_path, jobs), "explain after the directory came back")
            assert daemon.stop() == 0


def _explained(workdir: Path, jobs: tuple[SimJob, ...]) -> bool:
    """Whether ``explain`` finds each job by its key and shows its rescale among its last decisions."""
    for job in jobs:
        done = _cli("explain", "--config", "config.yaml", "--last", "20", job.key, cwd=workdir)
        if done.returncode != 0 or "[Scaling]" not in done.stdout:
            return False
        assert f"Job {job.key} (JobID {job.job_id})" in done.stdout
    return True


def _wait_for(daemon: Daemon, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        daemon.assert_running()
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{daemon.tail()}"
        time.sleep(0.5)
