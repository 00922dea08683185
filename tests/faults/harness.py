"""The fault matrix's world: simulated clusters, the fault proxy in front of one, and the real daemon process.

The daemon runs as in production, ``python -m autoscaler run --config X``, with its own Spark JVM, JSON
logs and a Prometheus endpoint; the tests see it only from outside: its log lines, its ``/metrics``, and
what reached the simulated cluster. Every wait here has a timeout, but only as a guard against a hang:
nothing asserts how fast the daemon is. Each wait also checks that the daemon is still running, since a
fault that kills it is the first defect to catch.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from child_processes import dies_with_parent
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.clock import SystemClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec, SimJobSpec

from .proxy import Exchange, FaultProxy, job_path

__all__ = [
    "METRICS_WINDOW_S",
    "RESCALED",
    "REST_TIMEOUT_S",
    "STABILIZATION_S",
    "WAIT_S",
    "Contains",
    "Daemon",
    "LogLine",
    "SimJob",
    "assert_not_rescaled",
    "daemon_config",
    "free_port",
    "needs_more_work",
    "requirement_puts",
    "sim_cluster",
    "wait_rescaled",
]

METRICS_WINDOW_S = 10
STABILIZATION_S = 5
REST_TIMEOUT_S = 2
"""``job.autoscaler.flink.rest-client.timeout``: short, so that answers slower than it cost seconds."""
WAIT_S = 120.0
"""The guard on every wait: far above what any step takes (a window is 15 s), so only a hang trips it."""
WORK_CAPACITY = 1250.0
LOAD = 2000.0
"""Offered records/s: Work at parallelism 1 handles 1250, so every job starts needing Work at 3."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sim_cluster() -> SimCluster:
    """A simulated cluster in real time with room for a dozen rescaled jobs; a short adaptive-scheduler
    cooldown and restart so that a rescale shows in ``/jobs/:id`` a second or two after its PUT."""
    spec = SimClusterSpec(slots=8, taskmanagers=6, cooldown_after_rescaling_s=2, restart_pause_s=1)
    return SimCluster(spec, SystemClock())


def needs_more_work(name: str) -> SimJobSpec:
    """The lab job offered more than its ``Work`` vertex handles at parallelism 1: the daemon should scale
    Work to 3 once its metric window is full, and nothing else."""
    return work_job(name=name, work_capacity=WORK_CAPACITY, input_rate=Constant(rate=LOAD))


@dataclass(frozen=True, slots=True)
class SimJob:
    """A job submitted to a simulated cluster, and how the daemon names it."""

    cluster: str
    sim: SimCluster
    job_id: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.name}"

    def work_parallelism(self) -> int:
        return self.sim.parallelism(self.job_id)["Work"]

    @classmethod
    def submit(cls, cluster: str, sim: SimCluster, name: str) -> SimJob:
        return cls(cluster, sim, sim.submit(needs_more_work(name)), name)


def daemon_config(
    clusters: Mapping[str, str],
    *,
    state_url: str,
    metrics_port: int,
    confirm_timeout: str = "5 min",
    options: Mapping[str, str] | None = None,
) -> str:
    """The daemon's YAML: one entry per cluster (name -> REST URL), 1 s ticks, JSON logs, one Spark core,
    a 10 s window after 5 s of stabilization, and a REST timeout of ``REST_TIMEOUT_S``."""
    lines = ["clusters:"]
    for name, url in clusters.items():
        lines += [f"  - name: {name}", f"    rest_url: {url}"]
    lines += [
        "control_loop_interval: 1 s",
        f"metrics_address: 127.0.0.1:{metrics_port}",
        "log_format: json",
        f"state_url: {state_url}",
        "instance_id: fault-matrix",
        f"confirm_timeout: {confirm_timeout}",
        "spark:",
        "  master: local[1]",
        "autoscaler:",
        "  job.autoscaler.enabled: 'true'",
        f"  job.autoscaler.metrics.window: {METRICS_WINDOW_S} s",
        f"  job.autoscaler.stabilization.interval: {STABILIZATION_S} s",
        f"  job.autoscaler.flink.rest-client.timeout: {REST_TIMEOUT_S} s",
    ]
    lines += [f"  {key}: '{value}'" for key, value in (options or {}).items()]
    return "\n".join(lines) + "\n"


def plugin_wheel(directory: Path, module: str, source: str, entry_points: Mapping[str, str]) -> Path:
    """``<module>-1.0-py3-none-any.whl`` in ``directory``: one module of plugin classes, installed as
    executor-plugin entry points (name -> ``module:Class``), as an operator drops a wheel in plugins_dir."""
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{module}-1.0-py3-none-any.whl"
    info = f"{module}-1.0.dist-info"
    dist = module.replace("_", "-")
    points = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{module}.py", source)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/entry_points.txt", "[flink_autoscaler.executor_plugins]\n" + points)
        zf.writestr(f"{info}/RECORD", "")
    return wheel


LogLine = dict[str, Any]


class Daemon:
    """``python -m autoscaler run --config <workdir>/config.yaml``, its JSON log and its ``/metrics``.

    ``with Daemon(workdir, config) as daemon:`` starts it and, whatever happens, kills it (and the Spark
    JVM it started, in its process group) on the way out; :meth:`stop` is the clean SIGTERM stop whose
    exit code a test asserts. If the test process is killed, the kernel kills the daemon
    (``child_processes.dies_with_parent``); its Spark JVM ends with it, as its Python driver is gone.
    """

    def __init__(
        self, workdir: Path, config: str, metrics_port: int, *, env: Mapping[str, str] | None = None
    ) -> None:
        """``env``: the process's environment instead of this one's (``SPARK_LOCAL_IP`` is always set)."""
        self.workdir = workdir
        self.env = env
        self.config = workdir / "config.yaml"
        self.log_path = workdir / "daemon.log"
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.config.write_text(config)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: list[LogLine] = []
        self._offset = 0
        self._partial = b""

    # ---------------------------------------------------------------------------------- lifecycle
    def start(self) -> Daemon:
        env = {**(os.environ if self.env is None else self.env), "SPARK_LOCAL_IP": "127.0.0.1"}
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "autoscaler", "run", "--config", str(self.config)],
                stdout=out,
                stderr=out,
                env=env,
                cwd=self.workdir,
                start_new_session=True,  # its own process group: the Spark JVM can be killed with it
                preexec_fn=dies_with_parent(),  # and the kernel kills it if this process dies first
            )
        return self

    @property
    def pid(self) -> int:
        """The daemon's pid, also its process group's id (the Spark JVM is in that group)."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def assert_running(self) -> None:
        assert self.running, f"the daemon exited (code {self._returncode()}):\n{self.tail()}"

    def stop(self, timeout_s: float = 90.0) -> int:
        """SIGTERM, as systemd or Kubernetes stop it; its exit code."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)
        return self._proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL the daemon's process group (itself and its Spark JVM), if anything of it is left."""
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait(timeout=30)

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()

    def _returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    # ---------------------------------------------------------------------------------- logs
    def logs(self, since: int = 0) -> list[LogLine]:
        """The JSON log lines from index ``since`` on (Spark's own lines on stderr are skipped)."""
        with self.log_path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        for raw in complete:
            if raw.startswith(b"{"):
                try:
                    self._lines.append(json.loads(raw))
                except json.JSONDecodeError:
                    continue
        return self._lines[since:]

    def mark(self) -> int:
        """The index of the next log line: ``logs(since=mark)`` is what was logged after this call."""
        return len(self.logs())

    def tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def find(self, event: str, *, since: int = 0, **fields: Any) -> list[LogLine]:
        """Log lines of ``event`` whose fields equal ``fields`` (or, given as :class:`Contains`, contain
        a text)."""
        return [line for line in self.logs(since) if line.get("event") == event and _has(line, fields)]

    def wait_for(self, match: Callable[[LogLine], bool], what: str, *, since: int = 0) -> LogLine:
        """The first log line from ``since`` on that ``match``es, waiting for it while the daemon runs."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = next((line for line in self.logs(since) if match(line)), None)
            if found is not None:
                return found
            self.assert_running()
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{self.tail()}"
            time.sleep(0.2)

    def wait_log(self, event: str, *, since: int = 0, **fields: Any) -> LogLine:
        return self.wait_for(
            lambda line: line.get("event") == event and _has(line, fields),
            f"log event {event} {fields}",
            since=since,
        )

    def job_logs(self, event: str, job: SimJob, *, since: int = 0, **fields: Any) -> list[LogLine]:
        """The job's log lines of ``event``: some name it ``job=<cluster>/<name>``, others ``cluster=``
        and ``job=<name>``; both are the job's."""
        return [line for line in self.find(event, since=since, **fields) if _of_job(line, job)]

    def wait_job_log(self, event: str, job: SimJob, *, since: int = 0, **fields: Any) -> LogLine:
        return self.wait_for(
            lambda line: line.get("event") == event and _has(line, fields) and _of_job(line, job),
            f"log event {event} of {job.key} {fields}",
            since=since,
        )

    def decisions(self, job: SimJob, *, since: int = 0) -> list[LogLine]:
        """The job's ``decision`` lines (one per tick it was judged or found unavailable)."""
        return self.job_logs("decision", job, since=since)

    def outcomes(self, job: SimJob, *, since: int = 0) -> set[str]:
        return {line["outcome"] for line in self.decisions(job, since=since)}

    def wait_decision(self, job: SimJob, outcome: str, *, since: int = 0) -> LogLine:
        return self.wait_job_log("decision", job, since=since, outcome=outcome)

    def events(self, job: SimJob, reason: str, *, since: int = 0) -> list[LogLine]:
        """The job's events of ``reason`` (``Scaling``, ``RescaleStuck``...), as logged."""
        return self.job_logs("event", job, since=since, reason=reason)

    def wait_event(self, job: SimJob, reason: str, *, since: int = 0) -> LogLine:
        return self.wait_job_log("event", job, since=since, reason=reason)

    # ---------------------------------------------------------------------------------- metrics
    def scrape(self) -> list[tuple[str, dict[str, str], float]]:
        """Every sample on ``/metrics``: (sample name, labels, value)."""
        text = httpx.get(self.metrics_url, timeout=10).text
        return [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples named ``name`` whose labels include ``labels`` (0 when there is none)."""
        return sum(
            value
            for sample, have, value in self.scrape()
            if sample == name and all(have.get(k) == v for k, v in labels.items())
        )

    def wait_metric(self, name: str, at_least: float, **labels: str) -> float:
        """Wait until ``metric(name, **labels)`` reaches ``at_least``; its value then."""
        deadline = time.monotonic() + WAIT_S
        while (value := self.metric(name, **labels)) < at_least:
            self.assert_running()
            assert time.monotonic() < deadline, f"timed out waiting for {name}{labels} >= {at_least}: {value}"
            time.sleep(0.2)
        return value


def _of_job(line: LogLine, job: SimJob) -> bool:
    return line.get("job") == job.key or (line.get("job") == job.name and line.get("cluster") == job.cluster)


@dataclass(frozen=True, slots=True)
class Contains:
    """A log field that contains ``text``: ``daemon.find("cluster_unavailable", error=Contains("503"))``."""

    text: str


def _has(line: LogLine, fields: Mapping[str, Any]) -> bool:
    for key, want in fields.items():
        have = line.get(key)
        if isinstance(want, Contains):
            if not isinstance(have, str) or want.text not in have:
                return False
        elif have != want:
            return False
    return True


# ------------------------------------------------------------------------------------ what reached Flink
RESCALED = {"Source: BacklogSource": 1, "Work": 3, "Aggregate -> Sink: Writer": 1}
"""What :func:`needs_more_work` needs: Work at 3, the rest unchanged."""


def requirement_puts(proxy: FaultProxy, job: SimJob, *, since: int = 0) -> list[Exchange]:
    """The job's ``PUT .../resource-requirements`` that the proxy saw (forwarded or not)."""
    return proxy.exchanges(since=since, method="PUT", path=job_path(job.job_id, "/resource-requirements$"))


def assert_not_rescaled(daemon: Daemon, job: SimJob, proxy: FaultProxy | None = None) -> None:
    """Nothing was done to the job: no PUT reached its cluster, it runs as submitted, and the daemon never
    decided a rescale of it. The daemon is still running, too."""
    daemon.assert_running()
    if proxy is not None:
        forwarded = [e for e in requirement_puts(proxy, job) if e.forwarded]
        assert not forwarded, f"{job.key}: a rescale reached the cluster during the fault: {forwarded}"
    assert job.sim.rescale_count(job.job_id) == 0, (
        f"{job.key} was rescaled: {job.sim.parallelism(job.job_id)}"
    )
    assert job.work_parallelism() == 1
    scaling = [line for line in daemon.decisions(job) if line["outcome"] == "Scaling"]
    assert not scaling, f"{job.key}: the daemon decided to rescale on bad data: {scaling}"


def wait_rescaled(daemon: Daemon, job: SimJob, *, since: int = 0, proxy: FaultProxy | None = None) -> None:
    """The daemon decides the rescale the load needs (Work 1 -> 3, nothing else), the PUT reaches the
    cluster, and the job runs it (``ScalingConfirmed``)."""
    daemon.wait_decision(job, "Scaling", since=since)
    daemon.wait_event(job, "ScalingConfirmed", since=since)
    assert job.sim.parallelism(job.job_id) == RESCALED
    if proxy is not None:
        assert any(e.forwarded for e in requirement_puts(proxy, job)), (
            f"{job.key}: no PUT reached the cluster"
        )
