"""The evaluator on a real Spark standalone cluster and a real Spark Connect server, both on 127.0.0.1.

The servers are the ones the pyspark wheel ships (``bin/spark-class``, ``bin/spark-submit``), started
per module on random free ports and torn down by process group whatever the tests do. The evaluator
itself runs in a child Python process, as it does in the daemon: a process holds one classic
SparkContext (this run's local one, ``tests/conftest.py``), and a Connect session switches PySpark's
column functions to Connect for the whole process. The child checks that its evaluations equal the
plain-Python oracle (``autoscaler.evaluate.oracle.evaluator``) tick after tick (append, slide,
restart, custom metrics, ``forget``, ``restored=``), that superseded window checkpoints leave the server, and
(standalone) that losing the executor that holds the window refills the windows instead of failing.
The backtest command runs on the standalone cluster as it does locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import operator
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.csv as pa_csv
import pytest

from autoscaler.backtest.jobs import RESULT_SCHEMA, BacktestOptions, backtest_tables
from autoscaler.evaluate.spark.evaluator import create_spark_session, is_connect, session_conf
from autoscaler.settings import Settings, SparkSettings

TESTS = Path(__file__).resolve().parents[1]
APP_NAME = "flink-autoscaler-remote-test"
START_TIMEOUT_S = 180.0  # a JVM start on a loaded 2-core CI machine
CHILD_TIMEOUT_S = 420.0

needs_java = pytest.mark.skipif(
    shutil.which("java") is None, reason="Java is not installed; a Spark server needs Java 17+"
)


# ---------------------------------------------------------------------------------------------- servers
def _spark_home() -> Path:
    """The Spark distribution inside the pyspark wheel: bin/, jars/ (spark-connect included)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    """A random port that is free now, below Linux's ephemeral range so outgoing connections don't take it."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1")


def _server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env.update(extra)
    return env


def _die_with_parent() -> None:
    """Linux: SIGTERM the process (a server, a checks' child) if this test process dies without tearing
    down (killed, timed out). Its own copy of ``child_processes.dies_with_parent``: this file also runs
    as the checks' child, without tests/builders on its path."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG, kept across exec


@dataclass
class _Server:
    """A Spark daemon in its own process group, logging to a file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, name: str, cmd: list[str], workdir: Path, env: dict[str, str]) -> _Server:
        log = workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=workdir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        return cls(name, proc, log)

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first log line matching ``pattern``; fails if the server exits or never logs it."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(pattern, self.log.read_text(errors="replace"))
            if found:
                return found
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.2)
        pytest.fail(f"{self.name} did not log {pattern!r} within {START_TIMEOUT_S:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM the whole group (a Worker's executors too), SIGKILL what is left after 20 s."""
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
                break
        with contextlib.suppress(ProcessLookupError):  # children that outlived the group leader
            os.killpg(self.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def _servers() -> Iterator[list[_Server]]:
    started: list[_Server] = []
    try:
        yield started
    finally:
        for server in reversed(started):
            server.stop()


@dataclass(frozen=True)
class ConnectServer:
    url: str  # sc://127.0.0.1:PORT
    ui: str  # the server's REST API, to see what it keeps in storage


@dataclass(frozen=True)
class StandaloneCluster:
    url: str  # spark://127.0.0.1:PORT
    ui: str  # the Master's web UI (JSON at /json/)
    worker_pgid: int  # the Worker's process group, its executors included


def _start_connect_server(servers: list[_Server], name: str, workdir: Path, port: int) -> ConnectServer:
    """Start a Connect server on ``port`` (listed in ``servers`` at once, for the teardown)."""
    cmd = [
        str(_spark_home() / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--name",
        "connect-server",
        *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
        *("--conf", f"spark.connect.grpc.binding.port={port}"),
        *("--conf", f"spark.ui.port={_free_port()}"),
        *("--conf", "spark.ui.showConsoleProgress=false"),
        # A System.gc() every second, so the ContextCleaner frees what no one holds within seconds.
        *("--conf", "spark.cleaner.periodicGC.interval=1s"),
        "spark-internal",
    ]
    servers.append(server := _Server.start(name, cmd, workdir, _server_env()))
    ui_port = server.wait_for(r"Successfully started service 'SparkUI' on port (\d+)")[1]
    address = server.wait_for(r"Spark Connect server started at: (\S+:\d+)")[1]
    return ConnectServer(f"sc://{address}", f"http://127.0.0.1:{ui_port}")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    with _servers() as servers:
        workdir = tmp_path_factory.mktemp("spark-connect")
        yield _start_connect_server(servers, "connect", workdir, _free_port())


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    workdir = tmp_path_factory.mktemp("spark-standalone")
    spark_class = str(_spark_home() / "bin" / "spark-class")
    env = _server_env(SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    with _servers() as servers:
        master_cmd = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master_cmd += ["--port", str(_free_port()), "--webui-port", str(_free_port())]
        servers.append(master := _Server.start("master", master_cmd, workdir, env))
        url = master.wait_for(r"Starting Spark master at (spark://\S+)")[1]
        ui_port = master.wait_for(r"Successfully started service 'MasterUI' on port (\d+)")[1]
        worker_cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
        worker_cmd += ["--cores", "1", "--memory", "1g", "--webui-port", str(_free_port())]
        worker_cmd += ["--work-dir", str(workdir / "work")]  # not $SPARK_HOME/work, inside the venv
        servers.append(worker := _Server.start("worker", worker_cmd, workdir, env))
        worker.wait_for(r"Successfully registered with master")
        yield StandaloneCluster(url, f"http://127.0.0.1:{ui_port}", worker.proc.pid)


def _get_json(url: str) -> Any:
    # 60 s: a server's UI busy with a new session's JVM work on 2 loaded cores answered after 10 s
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


def _run_checks(master: str, ui: str = "", worker_pgid: int = 0) -> str:
    """Run :func:`remote_checks` in a child Python; its output, or the test fails with it."""
    env = _server_env()
    env.pop("SPARK_LOCAL_IP")  # the child's create_spark_session decides, as the daemon's does
    done = subprocess.run(
        [sys.executable, __file__, master, ui, str(worker_pgid)],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=_die_with_parent,
    )
    output = f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-12000:]}"
    if done.returncode != 0:
        pytest.fail(f"the checks against {master} failed (exit {done.returncode}):\n{output}")
    return done.stdout


# ---------------------------------------------------------------------------------------------- tests
@pytest.mark.spark
@pytest.mark.process
@needs_java
def test_evaluator_on_spark_connect_equals_the_oracle(connect_server: ConnectServer) -> None:
    out = _run_checks(connect_server.url, connect_server.ui)
    assert "remote checks passed" in out


@pytest.mark.spark
@pytest.mark.process
@needs_java
def test_a_restarted_connect_server_gives_the_evaluator_a_new_session_and_its_windows_back(
    tmp_path: Path,
) -> None:
    """The server forgets every session when it restarts; the evaluator reconnects and reloads."""
    port = _free_port()
    with _servers() as servers:
        connect = _start_connect_server(servers, "connect-1", tmp_path, port)
        env = _server_env()
        env.pop("SPARK_LOCAL_IP")
        with (tmp_path / "child.out").open("w") as out, (tmp_path / "child.err").open("w") as err:
            child = subprocess.Popen(
                [sys.executable, __file__, "reconnect", connect.url, str(tmp_path)],
                env=env,
                stdout=out,
                stderr=err,
                text=True,
                preexec_fn=_die_with_parent,
            )
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT_S
            while not (tmp_path / "ready").exists() and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert (tmp_path / "ready").exists(), (tmp_path / "child.err").read_text()[-12000:]
            servers[0].stop()
            _start_connect_server(servers, "connect-2", tmp_path, port)
            (tmp_path / "restarted").touch()
            child.wait(timeout=CHILD_TIMEOUT_S)
        finally:
            if child.poll() is None:
                child.kill()
        output = (tmp_path / "child.out").read_text()
        assert child.returncode == 0, f"{output}\n--- stderr\n{(tmp_path / 'child.err').read_text()[-12000:]}"
        assert "reconnect checks passed" in output


@pytest.mark.spark
@pytest.mark.process
@needs_java
def test_evaluator_on_a_standalone_cluster_equals_the_oracle(standalone_cluster: StandaloneCluster) -> None:
    out = _run_checks(standalone_cluster.url, worker_pgid=standalone_cluster.worker_pgid)
    assert "remote checks passed" in out
    apps = _get_json(f"{standalone_cluster.ui}/json/")
    ran = [a for a in apps["activeapps"] + apps["completedapps"] if a["name"] == APP_NAME]
    assert ran, apps  # the cluster ran the child's application, not some local fallback


@pytest.mark.spark
@pytest.mark.process
@needs_java
def test_the_backtest_command_runs_unchanged_on_a_standalone_cluster(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """``flink-autoscaler backtest`` with ``spark.master: spark://…``: the jobs replay on the cluster's
    executors, and every row equals the plain-Python backtest of the same history."""
    # Here, not at the top: this file also runs as the checks' child process, without tests/ on its path.
    from backtest_history import LIVE, WIDER, record, table, write_config

    history = tmp_path / "history"
    asyncio.run(record(history, jobs=2))
    a = write_config(tmp_path / "a.yaml", LIVE, spark_master=standalone_cluster.url)
    b = write_config(tmp_path / "b.yaml", WIDER, spark_master=standalone_cluster.url)
    out = tmp_path / "results.csv"
    env = _server_env()
    env.pop("SPARK_LOCAL_IP")
    command = [sys.executable, "-m", "autoscaler", "backtest", "--history", str(history)]
    command += ["--config", str(a), "--against", str(b), "--out", str(out)]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, preexec_fn=_die_with_parent
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-8000:]}"
    assert "Backtest of 2 job(s)" in done.stdout

    options = BacktestOptions({"A": Settings.load(a), "B": Settings.load(b)})
    plain = backtest_tables(table(history, "samples"), table(history, "decisions"), options).to_pylist()
    ran = pa_csv.read_csv(out).cast(RESULT_SCHEMA).to_pylist()
    key = operator.itemgetter("cluster", "job_name", "world")
    assert sorted(ran, key=key) == sorted(plain, key=key)
    apps = _get_json(f"{standalone_cluster.ui}/json/")
    assert any(a["name"] == "flink-autoscaler" for a in apps["activeapps"] + apps["completedapps"]), apps


def test_connect_sessions_turn_the_plan_cache_off_unless_told_otherwise() -> None:
    """Connect keeps a session's last plans, each pinning a superseded window: off by default."""
    key = "spark.connect.session.planCache.enabled"
    assert session_conf(SparkSettings(master="sc://127.0.0.1:15002"))[key] == "false"
    assert session_conf(SparkSettings(master="sc://h:15002", conf={key: "true"}))[key] == "true"
    assert key not in session_conf(SparkSettings(master="spark://h:7077"))
    assert key not in session_conf(SparkSettings(master="local[2]"))
    assert is_connect(" sc://h:15002") and not is_connect("spark://h:7077")


@pytest.mark.parametrize(
    ("master", "bind_loopback"),
    [
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("spark://[::1]:7077", True),
        ("spark://127.0.0.1:7077,127.0.0.2:7077", True),
        ("spark://10.1.2.3:7077", False),  # executors elsewhere must reach the driver
        ("spark://127.0.0.1:7077,10.1.2.3:7077", False),
    ],
)
def test_standalone_driver_binds_to_loopback_only_for_a_loopback_master(
    master: str, bind_loopback: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoscaler.evaluate.spark.session import _prepare_environment

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/cluster/python3")
    _prepare_environment(master)
    assert (os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1") is bind_loopback
    assert os.environ["PYSPARK_PYTHON"] == "/opt/cluster/python3"  # the operator's executors' Python


# ---------------------------------------------------------------------------------------------- child side
def remote_checks(master: str, ui: str, worker_pgid: int) -> None:
    """Everything the daemon does with its session, against ``master``; raises on the first difference.

    Runs in the child process (``tests/builders`` on ``sys.path`` for the samples and the comparison).
    ``ui``: the Connect server's REST API; ``worker_pgid``: the standalone Worker's process group, whose
    executor it kills.
    """
    session = create_spark_session(SparkSettings(master=master, app_name=APP_NAME))
    try:
        if is_connect(master):
            assert type(session).__module__ == "pyspark.sql.connect.session", type(session)
        else:
            assert session.sparkContext.master == master
        _superseded_windows_leave_the_server(session, ui)
        _ticks_equal_the_oracle(session)
        if worker_pgid:
            _a_lost_executor_restarts_the_windows(session, worker_pgid)
    finally:
        session.stop()
    print("remote checks passed")


def _stored_rdds(session: Any, ui: str) -> int:
    """RDDs the server holds in storage: the window checkpoints. Connect clients ask the server's REST."""
    if not ui:
        return len(session.sparkContext._jsc.sc().getRDDStorageInfo())
    [app] = _get_json(f"{ui}/api/v1/applications")
    return len(_get_json(f"{ui}/api/v1/applications/{app['id']}/storage/rdd"))


def _superseded_windows_leave_the_server(session: Any, ui: str) -> None:
    """Months of ticks must not pile up one stored window per tick on the server."""
    from evaluator_samples import T0, job_sample

    from autoscaler.evaluate.spark.evaluator import SparkEvaluator
    from autoscaler.model import JobSample, VertexSample

    before = _stored_rdds(session, ui)
    evaluator = SparkEvaluator(session)
    for tick in range(8):
        now = T0 + tick * 10_000
        plain = job_sample("c", now, {"src": VertexSample(num_records_in=float(tick))})
        sample = JobSample(
            plain.target,
            now,
            plain.running_since_ms,
            plain.topology,
            plain.vertices,
            custom_job_metrics={"cpu": 0.5},
        )
        evaluator.evaluate([sample], now)
    evaluator.settle()  # the last tick's checkpoint, taken in the background, supersedes the one before
    # The live window and its custom-metric frame stay; what they superseded goes (on Connect, at the
    # server's next GC).
    deadline = time.monotonic() + 60
    while (stored := _stored_rdds(session, ui)) > before + 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stored <= before + 2, f"{stored - before} windows stored after 8 ticks"


def _ticks_equal_the_oracle(session: Any) -> None:
    """Warm-up, empty ticks, then jobs that append, slide, restart, stabilize, go quiet, are forgotten and
    report custom metrics; finally a fresh evaluator resumes a job from its stored samples."""
    from evaluator_parity import assert_same
    from evaluator_samples import FAST, T0, TOPOLOGIES, job_sample, noisy_vertex

    from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
    from autoscaler.evaluate.spark.evaluator import SparkEvaluator
    from autoscaler.model import NAN, JobSample
    from autoscaler.reasons import Reason
    from autoscaler.settings import AutoscalerOptions

    rng = random.Random(13)
    ours, oracle = SparkEvaluator(session), PythonEvaluator()
    ours.warm_up()
    assert ours.evaluate([], T0) == {} and ours.window_size() == 0
    slow = AutoscalerOptions(
        metrics_window=timedelta(seconds=30), stabilization_interval=timedelta(seconds=15)
    )
    b_running = T0
    b_samples: list[JobSample] = []
    want: dict[str, Any] = {}
    ready = 0  # evaluations compared on a window that was judged, not only waiting ones
    for tick in range(9):
        now = T0 + tick * 10_000
        if tick == 4:
            b_running = now - 5_000  # job b restarted (rescaled) 5 s ago: a new window epoch
        samples = []
        for name in ("a", "b", "c", "d"):
            if (name == "c" and tick >= 5) or (name == "a" and tick >= 7):
                continue  # c goes quiet and ages out; a is forgotten after tick 6
            vertices = {
                vid: noisy_vertex(rng, tick * 10.0, 100.0 * (i + 1))
                for i, vid in enumerate(TOPOLOGIES[name].vertices)
            }
            sample = job_sample(
                name,
                now,
                vertices,
                running_since_ms=b_running if name == "b" else T0,
                options=slow if name == "d" else FAST,
            )
            if name == "a":  # custom metrics: a job-level value and a vertex gauge, both with holes
                sample = JobSample(
                    sample.target,
                    now,
                    sample.running_since_ms,
                    sample.topology,
                    sample.vertices,
                    custom_vertex_metrics={"src": {"gauge": NAN if tick % 3 == 2 else float(tick)}},
                    custom_job_metrics={"cpu": 0.1 * tick, "unknown": NAN},
                )
            if name == "b":
                b_samples.append(sample)
            samples.append(sample)
        got, want = ours.evaluate(samples, now), oracle.evaluate(samples, now)
        assert_same(got, want)
        assert (ours.window_size(), ours.custom_window_size()) == (
            oracle.window_size(),
            oracle.custom_window_size(),
        ), tick
        if tick == 1:
            assert got["c1/d"].not_ready is Reason.STABILIZING
        if tick == 3:  # full by the clock; a metric with holes all through its first half may hold it back
            assert got["c1/a"].window_full
        ready += sum(1 for e in got.values() if e.not_ready is None)
        if tick == 6:
            ours.forget(["c1/a"])
            oracle.forget(["c1/a"])
    assert got["c1/b"].vertices and got["c1/b"].window_full  # the restarted job refilled its window
    assert ready >= 5, ready  # 11 with these seeds: most windows with holes are judged
    # A restarted daemon: a fresh evaluator given b's stored samples (any order) resumes b's window.
    resumed = SparkEvaluator(session)
    last = b_samples[-1]
    got = resumed.evaluate([last], last.ts_ms, restored={"c1/b": b_samples[-2::-1]})
    assert_same(got, {"c1/b": want["c1/b"]})
    assert resumed.window_size() == len(TOPOLOGIES["b"].vertices) * want["c1/b"].window_samples


def test_a_connect_master_without_the_connect_client_says_how_to_install_it(tmp_path: Path) -> None:
    """In a child: this process may already hold the Connect modules, imported with grpc present."""
    script = tmp_path / "no_grpc.py"  # a file, not -c: PySpark takes a file-less __main__ for doctests
    script.write_text(
        "import sys; sys.modules['grpc'] = None\n"  # as if grpcio were not installed
        "from autoscaler.evaluate.spark.evaluator import create_spark_session\n"
        "from autoscaler.settings import SparkSettings\n"
        "create_spark_session(SparkSettings(master='sc://127.0.0.1:15002'))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "pip install 'flink-autoscaler[connect]'" in done.stderr, done.stderr[-3000:]


def _executors_of(pgid: int) -> list[int]:
    """PIDs of the executor JVMs in a Worker's process group."""
    pids = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if (
                os.getpgid(int(entry.name)) == pgid
                and b"CoarseGrainedExecutorBackend" in (entry / "cmdline").read_bytes()
            ):
                pids.append(int(entry.name))
    return pids


def _stored_ticks(ours: Any, seed: int) -> tuple[Callable[[int], tuple[Any, Any]], list[list[str]]]:
    """``tick(i)``: (ours, a plain-Python oracle that never loses anything) on tick ``i`` of 2 jobs.
    Every sample is kept, as the daemon's state database does, for ``reload``; ``reloads`` lists the
    job keys of each reload the evaluator asked for."""
    from evaluator_samples import T0, job_sample, noisy_vertex

    from autoscaler.evaluate.oracle.evaluator import PythonEvaluator

    rng, oracle = random.Random(seed), PythonEvaluator()
    stored: dict[str, list[Any]] = {}
    reloads: list[list[str]] = []

    def reload(samples: Any) -> dict[str, list[Any]]:
        reloads.append(sorted(s.job.key for s in samples))
        return {s.job.key: list(stored[s.job.key]) for s in samples}

    def tick(i: int) -> tuple[Any, Any]:
        now = T0 + i * 10_000
        samples = [
            job_sample(name, now, {vid: noisy_vertex(rng, i * 10.0, 50.0) for vid in vertices})
            for name, vertices in (("a", ("src", "work")), ("c", ("src",)))
        ]
        got = ours.evaluate(samples, now, reload=reload), oracle.evaluate(samples, now)
        for sample in samples:
            stored.setdefault(sample.job.key, []).append(sample)
        return got

    return tick, reloads


def _a_lost_executor_restarts_the_windows(session: Any, worker_pgid: int) -> None:
    """Local checkpoints live on one executor: when it dies the window is gone. The evaluator refills
    every window from the stored samples (``reload``, as the daemon gives it from its state database)
    and evaluates on as if nothing was lost, instead of failing every later tick."""
    from evaluator_parity import assert_same

    from autoscaler.evaluate.spark.evaluator import SparkEvaluator

    tick, reloads = _stored_ticks(SparkEvaluator(session), seed=17)
    for i in range(3):
        assert_same(*tick(i))
    executors = _executors_of(worker_pgid)
    assert executors, "no executor in the Worker's process group"
    for pid in executors:
        os.kill(pid, signal.SIGKILL)
    for i in range(3, 5):
        got, want = tick(i)
        assert_same(got, want)
    assert reloads == [["c1/a", "c1/c"]]  # once, at the tick that found the blocks gone
    assert got["c1/a"].window_samples > 2 and got["c1/a"].vertices  # afresh, it would hold 2


def reconnect_checks(url: str, handshake: Path) -> None:
    """Ticks on ``url``, then (after the parent restarted the server) ticks that equal the oracle that
    lost nothing: the evaluator made a new session once and replayed the stored samples into it."""
    from evaluator_parity import assert_same

    from autoscaler.evaluate.spark.evaluator import start_evaluator

    ours = start_evaluator(SparkSettings(master=url, app_name=APP_NAME))
    first = ours.session
    [policy] = first.client.get_retry_policies()
    assert policy.max_retries == 5, policy.max_retries  # a tick fails fast while the server is away
    tick, reloads = _stored_ticks(ours, seed=23)
    for i in range(3):
        assert_same(*tick(i))
    (handshake / "ready").touch()
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not (handshake / "restarted").exists():
        assert time.monotonic() < deadline, "the parent never restarted the server"
        time.sleep(0.2)
    for i in range(3, 5):
        got, want = tick(i)
        assert_same(got, want)
    assert ours.session is not first
    assert reloads == [["c1/a", "c1/c"]], reloads  # once, at the first tick on the new server
    assert got["c1/a"].window_samples > 2  # afresh, it would hold 2
    ours.stop()
    print("reconnect checks passed")


if __name__ == "__main__":  # the child of the tests above; a file, as PySpark wants a real __main__
    sys.path[1:1] = [str(TESTS / "builders")]
    try:
        if sys.argv[1] == "reconnect":
            reconnect_checks(sys.argv[2], Path(sys.argv[3]))
        else:
            remote_checks(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    except BaseException:  # exit now: a Connect client's threads may keep a failed child alive
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
