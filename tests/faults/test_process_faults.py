"""The daemon process through faults of its own machinery: its Spark JVM killed, a JVM that cannot start
again, SIGKILL at random points of a tick, and a leader killed while a standby waits on the same
state database (SQLite and PostgreSQL).

Each test asserts what the fault matrix asks: the daemon keeps running (or is the one killed), no
rescale is made twice or from bad data, no state is lost, a log line and a metric name the fault, and
the daemon recovers when it heals. The Spark JVM is found as the daemon's child by its main class.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from autoscaler.simulator.server import SimulatorServer
from autoscaler.state import open_stores

from .harness import WAIT_S, Daemon, SimJob, daemon_config, free_port, sim_cluster
from .proxy import RESOURCE_REQUIREMENTS, FaultProxy

pytestmark = [pytest.mark.faults, pytest.mark.spark]

POSTGRES_URL = os.environ.get("FLINK_AUTOSCALER_TEST_POSTGRES_URL")
KILLS = 5


# ---------------------------------------------------------------------------------------------- helpers
def _spark_jvm(daemon: Daemon) -> int:
    """The pid of the daemon's Spark driver JVM (a process of its group running SparkSubmit)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for pid in _group(daemon.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"org.apache.spark.deploy.SparkSubmit" in cmdline and _state(pid) not in ("Z", None):
                return pid
        daemon.assert_running()
        assert time.monotonic() < deadline, "no Spark JVM found under the daemon"
        time.sleep(0.2)


def _group(pgid: int) -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    yield int(entry.name)
            except OSError:
                continue


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie nobody reaped); None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _config(
    cluster_url: str, state_url: str, port: int, *, instance: str = "fault-matrix", lease_ttl_s: int = 3
) -> str:
    """The harness's config, as daemon ``instance`` with a short lease (a standby takes over quickly)."""
    text = daemon_config({"sim": cluster_url}, state_url=state_url, metrics_port=port)
    return (
        text.replace("instance_id: fault-matrix", f"instance_id: {instance}")
        + f"lease_ttl: {lease_ttl_s} s\n"
    )


def _daemon(workdir: Path, config: str, port: int, env: dict[str, str] | None = None) -> Daemon:
    """The daemon of ``workdir``, started by its ``with`` block."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Daemon(workdir, config, port, env=env)


def _wait(condition: object, what: str, *daemons: Daemon) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        for d in daemons:
            d.assert_running()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------- Spark
def test_a_killed_spark_jvm_is_replaced_reaped_and_the_job_still_scales_once(tmp_path: Path) -> None:
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "jvm-killed")
    port = free_port()
    with SimulatorServer(sim) as server:
        config = _config(server.url, f"sqlite:///{tmp_path / 'state.db'}", port)
        with _daemon(tmp_path / "d", config, port) as daemon:
            daemon.wait_log("decision", job=job.name)  # a tick ran: the window is far from full yet
            jvm = _spark_jvm(daemon)
            mark = daemon.mark()
            os.kill(jvm, signal.SIGKILL)

            lost = daemon.wait_log("spark_session_lost", since=mark)
            daemon.wait_log("spark_session_reconnected", since=mark)
            daemon.wait_event(job, "Scaling", since=mark)
            _wait(lambda: job.work_parallelism() == 3, "Work at 3", daemon)
            daemon.wait_decision(job, "InBand", since=mark)

            assert lost["jvm_exit_code"] == -signal.SIGKILL and "driver JVM is gone" in lost["detail"]
            assert _state(jvm) is None  # reaped, not a zombie
            assert _spark_jvm(daemon) != jvm
            assert daemon.metric("flink_autoscaler_spark_lost_total", what="session") == 1
            assert daemon.metric("flink_autoscaler_spark_up") == 1
            assert len(daemon.events(job, "Scaling")) == 1 and sim.rescale_count(job.job_id) == 1
            assert daemon.stop() == 0


def test_a_daemon_whose_spark_cannot_start_again_hands_its_lease_to_a_standby(tmp_path: Path) -> None:
    """The leader's Java goes away under it (``JAVA_HOME`` points at a directory an upgrade removed) and
    its JVM dies: it cannot evaluate, so it releases the lease and the standby acts; once Java is back
    it evaluates again and stays standby while the other holds the lease."""
    java = shutil.which("java")
    assert java is not None
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").symlink_to(Path(java).resolve())
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "spark-down")
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    port_a, port_b = free_port(), free_port()
    with SimulatorServer(sim) as server:
        env = {**os.environ, "JAVA_HOME": str(java_home)}
        with _daemon(tmp_path / "a", _config(server.url, state_url, port_a, instance="a"), port_a, env) as a:
            a.wait_log("lease_acquired", cluster="sim")
            with _daemon(tmp_path / "b", _config(server.url, state_url, port_b, instance="b"), port_b) as b:
                b.wait_log("standing_by", cluster="sim")
                mark_a, mark_b = a.mark(), b.mark()
                (java_home / "bin" / "java").unlink()
                os.kill(_spark_jvm(a), signal.SIGKILL)

                a.wait_log("evaluator_unavailable", since=mark_a)
                a.wait_log("lease_released", since=mark_a, reason="evaluator_unavailable")
                b.wait_log("lease_acquired", since=mark_b, cluster="sim")
                _wait(lambda: job.work_parallelism() == 3, "Work at 3", a, b)
                b.wait_decision(job, "InBand", since=mark_b)
                assert a.metric("flink_autoscaler_spark_up") == 0
                assert a.metric("flink_autoscaler_lease_held", cluster="sim") == 0
                assert b.metric("flink_autoscaler_lease_held", cluster="sim") == 1

                healed = a.mark()
                (java_home / "bin" / "java").symlink_to(Path(java).resolve())
                a.wait_log("evaluator_recovered", since=healed)
                a.wait_log("standing_by", since=healed, cluster="sim", holder="b")
                assert a.metric("flink_autoscaler_spark_up") == 1

                scalings = a.events(job, "Scaling") + b.events(job, "Scaling")
                assert len(scalings) == 1 and sim.rescale_count(job.job_id) == 1
                assert a.find("decision", since=mark_a, outcome="Scaling") == []  # no act without Spark
                assert b.stop() == 0
            assert a.stop() == 0


# ---------------------------------------------------------------------------------------------- SIGKILL
def test_sigkill_at_random_points_of_a_tick_five_times_loses_nothing_and_rescales_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261126)  # fixed: a failure replays with the same kill points
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "killed-often")
    db = tmp_path / "state.db"
    port = free_port()
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        config = _config(proxy.url, f"sqlite:///{db}", port)
        for n in range(KILLS):
            with _daemon(tmp_path / f"run{n}", config, port) as daemon:
                daemon.wait_log("decision", job=job.name)
                for _ in range(rng.randrange(3)):  # a few ticks in, then at a random point of one
                    daemon.wait_log("decision", job=job.name, since=daemon.mark())
                time.sleep(rng.uniform(0.0, 1.0))
                daemon.kill()
            with sqlite3.connect(db) as conn:  # every kill leaves a database that reads whole
                assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)

        with _daemon(tmp_path / "last", config, port) as daemon:
            _wait(lambda: job.work_parallelism() == 3, "Work at 3", daemon)
            daemon.wait_decision(job, "InBand")
            assert daemon.stop() == 0
    puts = proxy.forwarded(method="PUT", path=RESOURCE_REQUIREMENTS)
    assert len(puts) == 1, puts  # one rescale over six processes, whichever of them made it
    stores = open_stores(f"sqlite:///{db}")
    try:
        (record,) = stores.state.load(job.key).history
        assert sorted(record.changes.values()) == [(1, 3)]
    finally:
        stores.close()


# ---------------------------------------------------------------------------------------------- leases
@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres",
            marks=pytest.mark.skipif(
                not POSTGRES_URL,
                reason="set FLINK_AUTOSCALER_TEST_POSTGRES_URL (bash tests/postgres.sh start)",
            ),
        ),
    ]
)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    assert POSTGRES_URL is not None
    schema = f"faults_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(sa.make_url(POSTGRES_URL).set(drivername="postgresql+psycopg"))
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    url = sa.make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def test_a_killed_leader_is_replaced_by_the_standby_which_never_rescales_twice(
    tmp_path: Path, state_url: str
) -> None:
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "leader-killed")
    port_a, port_b = free_port(), free_port()
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        a = _daemon(tmp_path / "a", _config(proxy.url, state_url, port_a, instance="a"), port_a)
        with a:
            a.wait_log("lease_acquired", cluster="sim")
            with _daemon(tmp_path / "b", _config(proxy.url, state_url, port_b, instance="b"), port_b) as b:
                b.wait_log("standing_by", cluster="sim")
                a.wait_event(job, "Scaling")  # the leader rescaled; it dies before it sees it run
                mark_b = b.mark()
                a.kill()

                b.wait_log("lease_acquired", since=mark_b, cluster="sim")
                _wait(lambda: job.work_parallelism() == 3, "Work at 3", b)
                b.wait_decision(job, "InBand", since=mark_b)
                assert b.metric("flink_autoscaler_lease_held", cluster="sim") == 1
                assert b.events(job, "Scaling") == []  # it resumed a's state: the rescale was a's
                assert b.stop() == 0
    assert len(proxy.forwarded(method="PUT", path=RESOURCE_REQUIREMENTS)) == 1
