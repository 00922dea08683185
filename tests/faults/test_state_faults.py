"""The SQLite state database locked by another process, then deleted, under the real daemon process.

Locked for longer than SQLite's busy timeout (30 s), the daemon cannot renew its lease: it stands by
for those ticks, says why, and takes the lease back when the lock goes. Deleted (``rm state.db*``),
the file is put back from the daemon's open connection before its next lease renewal, so a second
daemon started on the path afterwards finds the lease taken and the job's history intact: no split
brain, no state lost.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from autoscaler.simulator.server import SimulatorServer
from autoscaler.state import open_stores

from .harness import Contains, Daemon, SimJob, daemon_config, free_port, sim_cluster
from .proxy import RESOURCE_REQUIREMENTS, FaultProxy

pytestmark = [pytest.mark.faults, pytest.mark.spark]

LOCK_S = 35  # past SQLite's 30 s busy timeout (autoscaler.state.db)


def _config(url: str, db: Path, port: int, instance: str) -> str:
    text = daemon_config({"sim": url}, state_url=f"sqlite:///{db}", metrics_port=port)
    return text.replace("instance_id: fault-matrix", f"instance_id: {instance}") + "lease_ttl: 3 s\n"


def test_a_locked_then_deleted_state_database_costs_no_state_and_never_two_leaders(tmp_path: Path) -> None:
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "stateful")
    db = tmp_path / "state.db"
    port_a, port_b = free_port(), free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        a = Daemon(tmp_path / "a", _config(proxy.url, db, port_a, "a"), port_a)
        with a:
            a.wait_event(job, "Scaling")
            a.wait_event(job, "ScalingConfirmed")
            history = _history(db, job)
            assert len(history) == 1

            # Locked: another process holds the write lock past the busy timeout.
            mark = a.mark()
            locker = sqlite3.connect(db, isolation_level=None, timeout=5)
            locker.execute("BEGIN EXCLUSIVE")
            try:
                a.wait_log("lease_unavailable", since=mark, error=Contains("database is locked"))
                health = httpx.get(a.metrics_url.replace("/metrics", "/healthz"), timeout=10)
                assert health.status_code == 200  # the loop waits on a worker thread, it is not wedged
                assert a.metric("flink_autoscaler_lease_held", cluster="sim") == 0
            finally:
                locker.execute("ROLLBACK")
                locker.close()
            a.wait_log("lease_acquired", since=mark, cluster="sim")
            assert a.metric("flink_autoscaler_errors_total", reason="StateStoreError") >= 1
            # Said in words, not a traceback, wherever the lock met the daemon (issue 35).
            assert not [line for line in a.logs(since=mark) if "exception" in line]

            # Deleted: put back before the next lease renewal.
            mark = a.mark()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            a.wait_log("state_database_restored", since=mark)
            assert db.exists() and _history(db, job) == history

            with Daemon(tmp_path / "b", _config(proxy.url, db, port_b, "b"), port_b) as b:
                b.wait_log("standing_by", cluster="sim", holder="a")
                deadline = time.monotonic() + 5  # a few of b's ticks: it never takes the lease
                while time.monotonic() < deadline:
                    assert b.find("lease_acquired") == []
                    time.sleep(0.5)
                assert b.metric("flink_autoscaler_lease_held", cluster="sim") == 0
                assert b.stop() == 0
            assert a.metric("flink_autoscaler_lease_held", cluster="sim") == 1
            assert a.stop() == 0
    assert _history(db, job) == history
    assert len(proxy.forwarded(method="PUT", path=RESOURCE_REQUIREMENTS)) == 1


def _history(db: Path, job: SimJob) -> list[tuple[int, dict[str, tuple[int, int]]]]:
    """The job's rescales as stored: when, and what (a record gains its verification later)."""
    stores = open_stores(f"sqlite:///{db}")
    try:
        return [(r.ts_ms, dict(r.changes)) for r in stores.state.load(job.key).history]
    finally:
        stores.close()
