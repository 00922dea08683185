"""A real Apache Flink 2.3 session cluster on 127.0.0.1, its load job, and the daemon as a process.

Everything comes from the package index: ``apache-flink-libraries`` (the jars) and ``apache-flink``
installed with ``--no-deps`` (only for its ``bin/`` scripts and ``conf/``), into a cache directory
(``$FLINK_E2E_CACHE``, else ``.e2e-cache/`` in the repository) once. The load job is compiled there
from ``tests/e2e/java`` with ``javac`` against the installed jars, again once per source version.

Processes started here (the JobManager, the TaskManager, each daemon) are tracked by PID and always
ended by PID: by their owner's ``stop()``, by an ``atexit`` hook, and, if the test process itself is
killed, by the kernel (``PR_SET_PDEATHSIG`` through ``setpriv``). Nothing is ever killed by name.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import quote

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "FLINK_VERSION",
    "REPO",
    "DaemonProcess",
    "FlinkCluster",
    "FlinkInstall",
    "JobWatcher",
    "LoadJob",
    "Rest",
    "RestError",
    "TestDaemons",
    "TestJobs",
    "Tick",
    "TickWatcher",
    "Unavailable",
    "build_load_job",
    "cache_dir",
    "check_java",
    "cpu_gate_plugins",
    "deferred_until",
    "free_port",
    "install_flink",
    "keep_log",
    "requested_bounds",
    "wait_until",
]

FLINK_VERSION = "2.3.0"
PACKAGES = (f"apache-flink-libraries=={FLINK_VERSION}", f"apache-flink=={FLINK_VERSION}")
REPO = Path(__file__).resolve().parents[2]
JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "flinkautoscaler" / "e2e" / "LoadJob.java"
ENTRY_CLASS = "flinkautoscaler.e2e.LoadJob"

SOURCE = "Source: BacklogSource"
WORK = "Work"
AGGREGATE = "Aggregate"
WORK_ID = "674df9b0384c0348e0b9d1034a44c46c"  # Flink derives it from the operator uid "work"
SOURCE_ID = "e5a72f353fc1e6bbf3bd96a41384998c"  # and the source's from its uid
CLUSTER = "e2e"  # the cluster's name in the daemon's config: a job's key is "e2e/<job name>"

_T = TypeVar("_T")


class RestError(RuntimeError):
    """A Flink REST call of the test's own that did not answer 200."""


class Unavailable(Exception):
    """A prerequisite of the e2e suite is missing (Java, or the package index): skip, don't fail."""


_KEPT = threading.local()  # a lane's thread keeps its scenario's lines (tests/e2e/lanes.py)


def log(message: str) -> None:
    """Progress lines for the CI log (pytest -s shows them; otherwise they appear with a failure)."""
    line = f"[e2e {time.strftime('%H:%M:%S')}] {message}"
    print(line, file=sys.stderr, flush=True)
    kept: list[str] | None = getattr(_KEPT, "lines", None)
    if kept is not None:
        kept.append(line)


@contextlib.contextmanager
def keep_log(lines: list[str]) -> Iterator[None]:
    """Also keep in ``lines`` what this thread logs: a lane's scenario runs while pytest captures the
    output of another test, so its lines are printed again with its own test when it failed."""
    _KEPT.lines = lines
    try:
        yield
    finally:
        _KEPT.lines = None


# ============================================================================================ processes
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()


def _spawn(
    argv: Sequence[str], *, log_file: Path, env: Mapping[str, str], cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a process that dies with us: tracked for atexit, and killed by the kernel if we are."""
    prefix: list[str] = []
    if shutil.which("setpriv") and sys.platform.startswith("linux"):
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"]  # exec's the command: the PID stays the same
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:  # a file, never a pipe: a chatty process can never block on it
        proc = subprocess.Popen(
            [*prefix, *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C in the terminal goes to pytest, which stops us in order
        )
    with _LIVE_LOCK:
        _LIVE[proc.pid] = proc
    return proc


def _end(proc: subprocess.Popen[bytes], timeout_s: float, sig: int = signal.SIGTERM) -> int | None:
    """Signal one process by its PID, wait, and SIGKILL it if it is still there after ``timeout_s``."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log(f"pid {proc.pid} still alive {timeout_s:.0f} s after signal {sig}: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        return proc.returncode
    finally:
        with _LIVE_LOCK:
            _LIVE.pop(proc.pid, None)


@atexit.register
def _end_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE.values())
    for proc in live:
        _end(proc, 15)


def _clean_env(**extra: str) -> dict[str, str]:
    """Our environment without any FLINK_* settings of the caller's (they would steer the scripts)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLINK_", "_FLINK"))}
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    what: str,
    probe: Callable[[], _T | None],
    timeout_s: float,
    *,
    every_s: float = 0.5,
    alive: Callable[[], None] | None = None,
) -> _T:
    """Poll ``probe`` until it returns something truthy; ``alive`` raises if a process we need died.

    A REST call of the probe that fails (a busy JobManager's 5xx, a dropped connection) counts as
    "not yet"; the last such failure is named if the wait times out.
    """
    deadline = time.monotonic() + timeout_s
    failure = ""
    while True:
        if alive is not None:
            alive()
        try:
            value = probe()
        except (RestError, httpx.TransportError) as exc:
            value, failure = None, f" (last REST failure: {exc})"
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}{failure}")
        time.sleep(every_s)


# ============================================================================================ install
def cache_dir() -> Path:
    configured = os.environ.get("FLINK_E2E_CACHE")
    path = Path(configured).expanduser() if configured else REPO / ".e2e-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``, so two test runs never install into the same cache at once."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_IN_USE = ".in-use"
_HELD: list[IO[str]] = []  # the open lock files of this process's run directories, held till it exits


def new_run_dir(runs: Path, keep: int) -> Path:
    """A fresh ``<runs>/<time>-<pid>`` for this run, after removing all but the newest ``keep`` others.

    A run holds a shared lock on its directory's ``.in-use`` file for as long as its process lives (the
    kernel drops it when the process ends, however it ends), and a directory is removed only if that lock
    can be taken exclusively: a run still going on, however old, is never pruned under another run's
    feet. Pruning and creating happen under one lock, so two runs starting together see each other."""
    runs.mkdir(parents=True, exist_ok=True)
    with _locked(runs / ".prune.lock"):
        for old in sorted(p for p in runs.iterdir() if p.is_dir())[:-keep]:
            if not _in_use(old):
                shutil.rmtree(old, ignore_errors=True)
        path = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        path.mkdir()
        handle = (path / _IN_USE).open("a")
        fcntl.flock(handle, fcntl.LOCK_SH)
        _HELD.append(handle)
    return path


def _in_use(run: Path) -> bool:
    """Whether a live process holds ``run``'s lock (a directory of a run before these locks has none)."""
    try:
        with (run / _IN_USE).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def check_java() -> str:
    """``java`` and ``javac`` 17+ on PATH (Flink 2.3 and Spark 4 both need 17); returns the version."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise Unavailable(
                f"{tool} is not on PATH: the e2e suite needs a JDK 17+ (openjdk-17-jdk-headless)"
            )
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))  # "1.8.0_x"
    if major < 17:
        raise Unavailable(
            f"java is version {major or '?'}; the e2e suite needs Java 17+: {out.strip()[:200]}"
        )
    return out.splitlines()[0] if out else f"java {major}"


_NO_INDEX = (
    "No matching distribution",
    "Could not find a version",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectionError",
    "NewConnectionError",
    "Read timed out",
    "No module named pip",
)


@dataclass(frozen=True)
class FlinkInstall:
    """Flink's distribution as the two packages lay it out: ``FLINK_HOME`` is ``<site>/pyflink``."""

    root: Path  # <cache>/flink-<version>
    seconds: float  # how long the install took (0.0 when it came from the cache)

    @property
    def home(self) -> Path:
        return self.root / "site" / "pyflink"

    @property
    def lib(self) -> Path:
        return self.home / "lib"

    def size_mb(self) -> float:
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file()) / 1e6


_REQUIRED = (
    f"lib/flink-dist-{FLINK_VERSION}.jar",
    "bin/jobmanager.sh",
    "bin/taskmanager.sh",
    "bin/flink-console.sh",
    "bin/config.sh",
    "bin/bash-java-utils.jar",
    "conf/config.yaml",
    "conf/log4j-console.properties",
)


def install_flink(cache: Path) -> FlinkInstall:
    """Install Flink once into ``cache``: into a scratch directory first, renamed when complete."""
    root = cache / f"flink-{FLINK_VERSION}"
    done = root / "installed.json"
    if done.exists():
        return FlinkInstall(root, 0.0)
    with _locked(cache / ".install.lock"):
        if done.exists():  # another run finished it while we waited for the lock
            return FlinkInstall(root, 0.0)
        started = time.monotonic()
        scratch = cache / f"flink-{FLINK_VERSION}.partial"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)  # a leftover without its marker is incomplete
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            "--no-deps",  # apache-flink's own deps (beam, pandas, ...) are for PyFlink, not for a JVM cluster
            "--target",
            str(scratch / "site"),
            *PACKAGES,
        ]
        log(f"installing {' '.join(PACKAGES)} into {root} (once; kept for later runs)")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            lines = [ln for ln in output.splitlines() if "is ignored: it is neither" not in ln]
            tail = "\n".join(lines[-6:])
            if any(marker in output for marker in _NO_INDEX):
                raise Unavailable(f"cannot install {' '.join(PACKAGES)} from the package index: {tail}")
            raise RuntimeError(f"pip install of Flink failed ({proc.returncode}):\n{tail}")
        home = scratch / "site" / "pyflink"
        missing = [f for f in _REQUIRED if not (home / f).exists()]
        if missing:
            raise RuntimeError(f"the Flink packages lack {missing} (in {home})")
        seconds = time.monotonic() - started
        (scratch / "installed.json").write_text(
            json.dumps({"packages": PACKAGES, "seconds": round(seconds, 1), "at": time.time()})
        )
        os.replace(scratch, root)
        install = FlinkInstall(root, seconds)
        log(f"installed Flink {FLINK_VERSION} in {seconds:.1f} s ({install.size_mb():.0f} MB)")
        return install


def build_load_job(install: FlinkInstall, cache: Path) -> Path:
    """Compile ``LoadJob.java`` against the installed jars into a jar, once per source and Flink version."""
    source = JAVA_SOURCE.read_bytes()
    digest = hashlib.sha256(source + FLINK_VERSION.encode()).hexdigest()[:16]
    jar = cache / "jobs" / f"load-job-{digest}.jar"
    if jar.exists():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        proc = subprocess.run(
            [
                "javac",
                "-nowarn",
                "--release",
                "17",
                "-encoding",
                "UTF-8",
                "-d",
                str(classes),
                "-cp",
                f"{install.lib}/*",
                str(JAVA_SOURCE),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed:\n{proc.stdout}{proc.stderr}")
        partial = Path(tmp) / "load-job.jar"
        manifest = f"Manifest-Version: 1.0\r\nMain-Class: {ENTRY_CLASS}\r\n\r\n"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", manifest)
            for f in sorted(classes.rglob("*.class")):
                zf.write(f, f.relative_to(classes).as_posix())
        os.replace(partial, jar)
    log(f"compiled {JAVA_SOURCE.name} -> {jar.name} in {time.monotonic() - started:.1f} s")
    return jar


# ============================================================================================ REST
class Rest:
    """A small synchronous client for the test's own calls (the daemon has its own, under test)."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call, retried on transport errors only (a busy JobManager may drop a connection)."""
        for attempt in range(5):
            try:
                return self._http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt == 4:
                    raise
                time.sleep(1.0 + attempt)
        raise AssertionError("unreachable")

    def get(self, path: str, **params: str) -> Any:
        response = self.request("GET", path, params=params or None)
        if response.status_code != 200:
            raise RestError(f"GET {path} -> {response.status_code}: {response.text[:500]}")
        return response.json()

    def metric(self, path: str, names: Sequence[str], agg: str = "sum") -> dict[str, float]:
        """An aggregated metrics query; {} when Flink answers [] (lazy fetcher, or an unknown name)."""
        answer = self.get(path, get=",".join(names), agg=agg)
        return {m["id"]: float(m[agg]) for m in answer if isinstance(m.get(agg), int | float)}


# ============================================================================================ cluster
@dataclass(frozen=True)
class ClusterOptions:
    """The lab's fast settings (flink-rest.md §2, §5): rescales in 2-3 s instead of 15-60 s."""

    slots: int = 8
    jobmanager_memory: str = "1g"
    taskmanager_memory: str = "1536m"
    cooldown: str = "10 s"  # jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling (default 30 s)
    stabilization: str = "2 s"  # ...executing.resource-stabilization-timeout (default 1 min)
    metric_fetch_ms: int = 5000  # metrics.fetcher.update-interval (default 10 s)
    refresh_ms: int = 1000  # web.refresh-interval: the REST ExecutionGraph cache (default 3 s)


class FlinkCluster:
    """One JobManager and one TaskManager, started in the foreground so their PIDs are ours."""

    def __init__(self, install: FlinkInstall, run_dir: Path, options: ClusterOptions | None = None) -> None:
        self.install = install
        self.run_dir = run_dir
        self.options = options or ClusterOptions()
        self.rest_port = free_port()
        self.rpc_port = free_port()
        self.blob_port = free_port()
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.rest = Rest(self.url)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.started_s = 0.0
        self._jar_id: str | None = None

    @property
    def conf_dir(self) -> Path:
        return self.run_dir / "conf"

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "log"

    def _write_conf(self) -> None:
        o = self.options
        bundled = yaml.safe_load((self.install.home / "conf" / "config.yaml").read_text())
        java_opts = bundled["env"]["java"]["opts"]["all"]  # the --add-opens Java 17 needs
        for sub in ("conf", "log", "pid", "tmp", "web-upload", "web-tmp", "checkpoints"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        for f in self.install.home.joinpath("conf").glob("log*"):
            shutil.copy(f, self.conf_dir / f.name)
        conf = {
            "env": {"java": {"opts": {"all": java_opts}}},
            "jobmanager": {
                "bind-host": "127.0.0.1",
                "rpc": {"address": "127.0.0.1", "port": self.rpc_port},
                "memory": {"process": {"size": o.jobmanager_memory}},
                "execution": {"failover-strategy": "region"},
                "scheduler": "adaptive",
                "adaptive-scheduler": {
                    "executing": {
                        "cooldown-after-rescaling": o.cooldown,
                        "resource-stabilization-timeout": o.stabilization,
                    }
                },
            },
            "taskmanager": {
                "bind-host": "127.0.0.1",
                "host": "127.0.0.1",
                "numberOfTaskSlots": o.slots,
                "memory": {"process": {"size": o.taskmanager_memory}},
            },
            "parallelism": {"default": 1},
            "rest": {"address": "127.0.0.1", "bind-address": "127.0.0.1", "port": self.rest_port},
            "blob": {"server": {"port": str(self.blob_port)}},
            "execution": {
                "checkpointing": {
                    "dir": (self.run_dir / "checkpoints").as_uri(),
                    "unaligned": {"enabled": True},  # fast checkpoints under back-pressure: fast rescales
                }
            },
            "metrics": {"fetcher": {"update-interval": o.metric_fetch_ms}},
            "web": {
                "refresh-interval": o.refresh_ms,
                "submit": {"enable": True},
                "tmpdir": str(self.run_dir / "web-tmp"),
                "upload": {"dir": str(self.run_dir / "web-upload")},
            },
            "io": {"tmp": {"dirs": str(self.run_dir / "tmp")}},
        }
        (self.conf_dir / "config.yaml").write_text(yaml.safe_dump(conf, sort_keys=False))

    def start(self, timeout_s: float = 240) -> None:
        started = time.monotonic()
        self._write_conf()
        env = _clean_env(
            FLINK_CONF_DIR=str(self.conf_dir),
            FLINK_LOG_DIR=str(self.log_dir),
            FLINK_PID_DIR=str(self.run_dir / "pid"),
            FLINK_IDENT_STRING="e2e",
        )
        bin_dir = self.install.home / "bin"
        for name, script in (("jobmanager", "jobmanager.sh"), ("taskmanager", "taskmanager.sh")):
            self.processes[name] = _spawn(
                ["bash", str(bin_dir / script), "start-foreground"],
                log_file=self.log_dir / f"{name}.out",
                env=env,
            )
        log(
            f"starting Flink {FLINK_VERSION}: REST {self.url}, JobManager pid "
            f"{self.processes['jobmanager'].pid}, TaskManager pid {self.processes['taskmanager'].pid}, "
            f"logs in {self.log_dir}"
        )

        def ready() -> dict[str, Any] | None:
            try:
                overview = self.rest.get("/overview")
            except (httpx.TransportError, RestError):
                return None
            ok = overview.get("taskmanagers", 0) >= 1 and overview.get("slots-total", 0) >= self.options.slots
            return overview if ok else None

        try:
            wait_until("the Flink cluster's REST API and slots", ready, timeout_s, alive=self.check_alive)
        except Exception:
            log(self.log_tail())
            self.stop()
            raise
        self.started_s = time.monotonic() - started
        log(f"Flink cluster ready in {self.started_s:.1f} s")

    def check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"the Flink {name} (pid {proc.pid}) exited with {proc.returncode}")

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for f in sorted(self.log_dir.glob("*.out")):
            text = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {f} (last {lines} lines)\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self, timeout_s: float = 30) -> float:
        """Cancel what runs, then SIGTERM each JVM by PID (TaskManager first), SIGKILL after ``timeout_s``."""
        started = time.monotonic()
        with contextlib.suppress(Exception):
            if all(p.poll() is None for p in self.processes.values()):
                for job in self.rest.get("/jobs/overview")["jobs"]:
                    if job["state"] not in ("FINISHED", "CANCELED", "FAILED"):
                        self.rest.request("PATCH", f"/jobs/{job['jid']}", params={"mode": "cancel"})
        for name in ("taskmanager", "jobmanager"):
            proc = self.processes.get(name)
            if proc is not None:
                _end(proc, timeout_s)
        self.rest.close()
        seconds = time.monotonic() - started
        left = [p.pid for p in self.processes.values() if p.poll() is None]
        log(f"Flink cluster stopped in {seconds:.1f} s" + (f"; STILL RUNNING: {left}" if left else ""))
        return seconds

    # ------------------------------------------------------------------------------------ jobs
    def upload(self, jar: Path) -> str:
        if self._jar_id is None:
            with jar.open("rb") as f:
                response = self.rest.request(
                    "POST",
                    "/jars/upload",
                    files={"jarfile": (jar.name, f, "application/x-java-archive")},
                    timeout=120,
                )
            body = response.json()
            if response.status_code != 200 or body.get("status") != "success":
                raise RuntimeError(f"jar upload failed: {response.status_code} {body}")
            self._jar_id = Path(body["filename"]).name
        return self._jar_id

    def submit(
        self,
        jar: Path,
        name: str,
        control: Path,
        *,
        work_parallelism: int = 1,
        cost_us: float = 800.0,
        partitions: int = 8,
        checkpoint_ms: int = 2000,
        timeout_s: float = 120,
        flink_config: Mapping[str, str] | None = None,
    ) -> LoadJob:
        """Run the load job (nothing arrives until ``LoadJob.set_load``) and wait until all of it runs.

        ``flink_config``: the job's own configuration (``flinkConfiguration`` of the run request, FLIP-256).
        A session cluster does not show it in ``/jobs/:id/jobmanager/config`` (that is the cluster's), so
        a job's ``job.autoscaler.*`` keys go in ``pipeline.global-job-parameters``, which the daemon reads
        from ``/jobs/:id/config``."""
        args = {
            "control": str(control),
            "name": name,
            "cost-us": str(cost_us),
            "partitions": str(partitions),
            "checkpoint-ms": str(checkpoint_ms),
            "work-parallelism": str(work_parallelism),
        }
        program_args = [item for k, v in args.items() for item in (f"--{k}", v)]
        jar_id = self.upload(jar)
        response = self.rest.request(
            "POST",
            f"/jars/{jar_id}/run",
            json={
                "entryClass": ENTRY_CLASS,
                "programArgsList": program_args,
                **({"flinkConfiguration": dict(flink_config)} if flink_config else {}),
            },
            timeout=180,
        )
        body = response.json()
        if response.status_code != 200 or "jobid" not in body:
            raise RuntimeError(f"job submission failed: {response.status_code} {str(body)[:2000]}")
        job = LoadJob(self, body["jobid"], name, control, cost_us)
        job.wait_running(timeout_s)
        return job


# ============================================================================================ the job
@dataclass(frozen=True)
class Observation:
    t: float  # time.time()
    state: str
    parallelism: Mapping[str, int]  # vertex name -> parallelism
    running: bool  # the job and every task of every vertex RUNNING


class LoadJob:
    """One submitted load job: its control file (offered rate, cost per record) and its vertices."""

    def __init__(self, cluster: FlinkCluster, job_id: str, name: str, control: Path, cost_us: float) -> None:
        self.cluster = cluster
        self.rest = cluster.rest
        self.job_id = job_id
        self.name = name
        self.control = control
        self.rate = 0.0
        self.cost_us = cost_us
        self._t0_ms = 0
        self._base = 0.0

    def details(self) -> dict[str, Any]:
        return self.rest.get(f"/jobs/{self.job_id}")

    def observe(self) -> Observation:
        d = self.details()
        parallelism = {v["name"]: int(v["parallelism"]) for v in d["vertices"]}
        running = d["state"] == "RUNNING" and all(
            v["status"] == "RUNNING" and v["tasks"].get("RUNNING", 0) == v["parallelism"]
            for v in d["vertices"]
        )
        return Observation(time.time(), d["state"], parallelism, running)

    def vertex(self, name: str) -> tuple[str, str]:
        """(id, full name) of the one vertex whose name starts with ``name``."""
        found = [(v["id"], v["name"]) for v in self.details()["vertices"] if v["name"].startswith(name)]
        if len(found) != 1:
            raise LookupError(f"{len(found)} vertices start with {name!r}")
        return found[0]

    def parallelism(self, name: str) -> int:
        return next(p for n, p in self.observe().parallelism.items() if n.startswith(name))

    def wait_running(self, timeout_s: float = 120) -> Observation:
        def running() -> Observation | None:
            obs = self.observe()
            if obs.state in ("FAILED", "CANCELED", "FINISHED"):
                exceptions = self.rest.get(f"/jobs/{self.job_id}/exceptions")
                raise RuntimeError(f"job {self.name} ended {obs.state}: {str(exceptions)[:2000]}")
            return obs if obs.running else None

        return wait_until(f"job {self.name} running", running, timeout_s, alive=self.cluster.check_alive)

    def set_load(self, rate: float | None = None, cost_us: float | None = None) -> float:
        """Change the offered rate (records/s) and Work's cost per record (us) from now on.

        Arrivals continue from where they are (the control file carries the records arrived so far),
        so the backlog is never reset. Returns the wall time of the change.
        """
        now_ms = int(time.time() * 1000)
        if self._t0_ms:
            self._base += self.rate * (now_ms - self._t0_ms) / 1000.0
        self._t0_ms = now_ms
        self.rate = self.rate if rate is None else float(rate)
        self.cost_us = self.cost_us if cost_us is None else float(cost_us)
        text = f"t0_ms={now_ms}\nbase={self._base:.3f}\nrate={self.rate}\ncost_us={self.cost_us}\n"
        partial = self.control.with_suffix(".partial")
        partial.write_text(text)
        os.replace(partial, self.control)  # the job never reads half a file
        log(
            f"load of {self.name}: {self.rate:.0f} rec/s offered, Work {self.cost_us:.0f} us/record "
            f"({1e6 / self.cost_us:.0f} rec/s per subtask)"
        )
        return now_ms / 1000.0

    def pending_records(self) -> float:
        """The source's backlog (sum of pendingRecords over subtasks); NaN while Flink has no value yet."""
        vid, _ = self.vertex(SOURCE)
        base = f"/jobs/{self.job_id}/vertices/{vid}/subtasks/metrics"
        names = [m["id"] for m in self.rest.get(base) if m["id"].endswith(".pendingRecords")]
        if not names:
            return math.nan
        values = self.rest.metric(base, names)
        return math.fsum(values.values()) if len(values) == len(names) else math.nan

    def cancel(self, timeout_s: float = 90, *, free_slots: bool = True) -> None:
        """Cancel the job and wait until it ended; with ``free_slots``, also until every slot is free
        again (leave it off while other jobs of the test still run: they hold theirs)."""
        with contextlib.suppress(Exception):
            self.rest.request("PATCH", f"/jobs/{self.job_id}", params={"mode": "cancel"})

        def ended() -> bool:
            return self.rest.get(f"/jobs/{self.job_id}")["state"] in ("CANCELED", "FAILED", "FINISHED")

        wait_until(f"job {self.name} cancelled", ended, timeout_s)
        if not free_slots:
            return
        # The slots come back a moment later; the next job must find all of them free.
        total = self.cluster.options.slots
        wait_until(
            "all slots free",
            lambda: self.rest.get("/overview")["slots-available"] >= total,
            timeout_s,
        )


class JobWatcher:
    """Polls the job in the background and keeps every change of the running parallelism.

    By default it reads ``/jobs/:id``. Flink answers that from its metric store and, like every
    metrics query, starts a new metric fetch whenever the last one is more than
    ``metrics.fetcher.update-interval`` old: polled twice a second it, not the daemon, sets when Flink
    fetches (every ~5.1 s: the first poll after 5 s), and the daemon's ticks then read fetches that
    landed up to a fetch interval before them. ``quiet`` reads ``/jobs/overview`` (the job's state and
    its running tasks) and ``/jobs/:id/plan`` (each vertex's parallelism, current after an
    adaptive-scheduler rescale) instead; neither touches the metric store, so only the daemon's
    queries start fetches, as on a cluster nobody else reads.
    """

    def __init__(self, job: LoadJob, every_s: float = 0.5, *, quiet: bool = False) -> None:
        self.job = job
        self.every_s = every_s
        self.quiet = quiet
        self.observations: list[Observation] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{job.name}", daemon=True)
        self._rest = Rest(job.cluster.url)
        # The plan names vertices by id only; their names are read once (one fetch, before the watch).
        self._names = {v["id"]: v["name"] for v in job.details()["vertices"]} if quiet else {}

    def __enter__(self) -> JobWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._rest.close()

    def _observe(self) -> Observation:
        d = self._rest.get(f"/jobs/{self.job.job_id}")
        parallelism = {v["name"]: int(v["parallelism"]) for v in d["vertices"]}
        running = d["state"] == "RUNNING" and all(
            v["status"] == "RUNNING" and v["tasks"].get("RUNNING", 0) == v["parallelism"]
            for v in d["vertices"]
        )
        return Observation(time.time(), d["state"], parallelism, running)

    def _observe_quietly(self) -> Observation:
        """The same observation from two answers that start no metric fetch. Every task of the job
        running, as many as the plan's parallelisms add up to: that plan is the one running (a rescale
        between the two reads makes the counts differ, so it never counts as running)."""
        jobs = self._rest.get("/jobs/overview")["jobs"]
        overview = next(j for j in jobs if j["jid"] == self.job.job_id)
        nodes = self._rest.get(f"/jobs/{self.job.job_id}/plan")["plan"]["nodes"]
        parallelism = {self._names.get(n["id"], n["id"]): int(n["parallelism"]) for n in nodes}
        tasks = overview["tasks"]
        running = (
            overview["state"] == "RUNNING"
            and bool(parallelism)
            and tasks["running"] == tasks["total"] == sum(parallelism.values())
        )
        return Observation(time.time(), overview["state"], parallelism, running)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                obs = self._observe_quietly() if self.quiet else self._observe()
                last = self.observations[-1] if self.observations else None
                if last is None or (last.state, last.parallelism, last.running) != (
                    obs.state,
                    obs.parallelism,
                    obs.running,
                ):
                    self.observations.append(obs)
            except Exception:  # a slow answer must not end the watch; count it
                self.errors += 1
            self._stop.wait(self.every_s)

    def running_parallelisms(self, vertex: str) -> list[tuple[float, int]]:
        """(first time seen, parallelism) each time ``vertex`` ran fully at a new parallelism."""
        out: list[tuple[float, int]] = []
        for obs in self.observations:
            if not obs.running:
                continue
            p = next(v for n, v in obs.parallelism.items() if n.startswith(vertex))
            if not out or out[-1][1] != p:
                out.append((obs.t, p))
        return out

    def first_running_at(self, vertex: str, parallelism: int, after: float) -> float | None:
        for t, p in self.running_parallelisms(vertex):
            if p == parallelism and t >= after:
                return t
        return None

    def first_running_above(self, vertex: str, parallelism: int, after: float) -> float | None:
        for t, p in self.running_parallelisms(vertex):
            if p > parallelism and t >= after:
                return t
        return None


# ============================================================================================ daemon
def requested_bounds(scaling_event: Mapping[str, Any], vertex_id: str) -> tuple[int, int]:
    """The ``(lower, upper)`` a ``Scaling`` event says was requested for ``vertex_id``."""
    match = re.search(rf"{vertex_id}: (\d+)\.\.(\d+)", scaling_event["message"])
    assert match, scaling_event["message"]
    return int(match.group(1)), int(match.group(2))


def deferred_until(message: str) -> float:
    """The instant a ``CooldownDeferred`` message names ("... until 2026-01-01T00:00:00Z ...")."""
    match = re.search(r"until (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", message)
    assert match, message
    return datetime.fromisoformat(match.group(1)).timestamp()


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass
class DaemonProcess:
    """``python -m autoscaler run --config <file>`` as an operator runs it, with JSON logs in a file."""

    name: str
    work_dir: Path
    rest_url: str
    autoscaler: Mapping[str, Any]
    control_loop_interval: str = "6 s"
    plugins_dir: Path | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def config_file(self) -> Path:
        return self.work_dir / f"{self.name}.yaml"

    @property
    def log_file(self) -> Path:
        return self.work_dir / f"{self.name}.log"

    @property
    def state_file(self) -> Path:
        return self.work_dir / f"{self.name}.db"

    @property
    def state_url(self) -> str:
        return f"sqlite:///{self.state_file}"

    @property
    def decisions_dir(self) -> Path:
        return self.work_dir / f"{self.name}-decisions"

    def decision_file(self, job_name: str) -> Path:
        """Where the daemon keeps the job's newest decision, rewritten after each of its ticks."""
        return self.decisions_dir / f"{quote(f'{CLUSTER}/{job_name}', safe='')}.json"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def write_config(self) -> Path:
        config: dict[str, Any] = {
            "clusters": [{"name": CLUSTER, "rest_url": self.rest_url}],
            "control_loop_interval": self.control_loop_interval,
            "metrics_address": f"127.0.0.1:{self.metrics_port}",
            "log_format": "json",
            "log_level": "INFO",
            # One core for Spark: the 2-core machine also runs Flink and the tests.
            "spark": {"master": "local[1]", "conf": {"spark.driver.memory": "1g"}},
            "autoscaler": dict(self.autoscaler),
            # The durable store (SQLite), one per daemon of a test: a restart finds its state again.
            "state_url": self.state_url,
            # Each job's newest decision, the tick's evaluation with it (read by TickWatcher).
            "decisions_dir": str(self.decisions_dir),
            # A stable name, as the systemd unit gives: a restarted daemon takes its cluster lease
            # back at once instead of waiting for the killed process's lease to run out.
            "instance_id": f"e2e-{self.name}",
        }
        if self.plugins_dir is not None:
            config["plugins_dir"] = str(self.plugins_dir)
        config.update(self.extra)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        return self.config_file

    def start(self) -> DaemonProcess:
        if not self.config_file.exists():
            self.write_config()
        env = _clean_env(SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = str(REPO)  # this checkout's daemon, whatever checkout the venv came from
        self.starts += 1
        with self.log_file.open("a") as f:
            f.write(json.dumps({"event": "e2e_daemon_start", "start": self.starts, "t": time.time()}) + "\n")
        self.proc = _spawn(
            [sys.executable, "-m", "autoscaler", "run", "--config", str(self.config_file)],
            log_file=self.log_file,
            env=env,
            cwd=self.work_dir,  # whatever it writes by a relative path lands with the test's files
        )
        log(f"{self.name} started (pid {self.proc.pid}), log {self.log_file}")
        return self

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise RuntimeError(f"the daemon exited ({code}):\n{self.tail()}")

    def wait_started(self, timeout_s: float = 240) -> None:
        def started() -> bool:
            return any(r.get("event") == "daemon_started" for r in self.records(current_start=True))

        wait_until(f"daemon {self.name} started", started, timeout_s, alive=self.check_alive)

    def stop(self, timeout_s: float = 90) -> int | None:
        """SIGTERM and wait: the daemon finishes its tick, logs daemon_stopped and exits 0."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:  # already stopped (or killed): nothing to do, nothing to say
            return self.proc.returncode
        code = _end(self.proc, timeout_s, signal.SIGTERM)
        log(f"{self.name} stopped with exit code {code}")
        return code

    def kill(self) -> int | None:
        """SIGKILL: no chance to finish anything, as when a machine dies."""
        if self.proc is None:
            return None
        code = _end(self.proc, 30, signal.SIGKILL)
        log(f"{self.name} killed (SIGKILL), exit code {code}")
        return code

    # ------------------------------------------------------------------------------------ logs
    def records(self, *, current_start: bool = False) -> list[dict[str, Any]]:
        """The JSON log lines so far (Spark's own lines, which are not JSON, are left out).

        Each carries ``_start``: which start of the daemon (1, 2, ...) wrote it; with
        ``current_start`` only the lines of the latest start are returned.
        """
        if not self.log_file.exists():
            return []
        out: list[dict[str, Any]] = []
        start = 0
        for line in self.log_file.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("event") == "e2e_daemon_start":
                start = int(record.get("start", start + 1))
                if current_start:
                    out.clear()
                continue
            out.append({**record, "_start": start})
        return out

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        """Operator events (``"event": "event"`` lines), each with ``t``: its time as a Unix timestamp."""
        out = []
        for r in self.records():
            if r.get("event") == "event" and (reason is None or r.get("reason") == reason):
                out.append({**r, "t": _ts(r["timestamp"])})
        return out

    def decisions(self) -> list[dict[str, Any]]:
        return [{**r, "t": _ts(r["timestamp"])} for r in self.records() if r.get("event") == "decision"]

    def wait_for_event(self, reason: str, timeout_s: float, *, after: float = 0.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events(reason) if e["t"] >= after), None)

        return wait_until(
            f"a {reason} event from the daemon", found, timeout_s, every_s=1.0, alive=self.check_alive
        )

    def wait_for_decision(
        self, outcome: str, timeout_s: float, *, after: float = 0.0, count: int = 1
    ) -> dict[str, Any]:
        """The ``count``-th decision with ``outcome`` (a Reason value, e.g. "InBand") after ``after``."""

        def found() -> dict[str, Any] | None:
            hits = [d for d in self.decisions() if d.get("outcome") == outcome and d["t"] >= after]
            return hits[count - 1] if len(hits) >= count else None

        return wait_until(
            f"{count} {outcome} decision(s) of the daemon",
            found,
            timeout_s,
            every_s=1.0,
            alive=self.check_alive,
        )

    def put_before(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The PUT /jobs/:id/resource-requirements the daemon logged just before ``event`` (its Scaling)."""
        puts = [
            {**r, "t": _ts(r["timestamp"])}
            for r in self.records()
            if r.get("event") == "flink_resource_requirements_set"
        ]
        before = [p for p in puts if p["t"] <= event["t"]]
        if not before:
            raise AssertionError(f"no resource-requirements PUT logged before {event}")
        return before[-1]

    def tail(self, lines: int = 60) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------------------------ metrics
    def metrics(self) -> dict[str, float]:
        """/metrics as {name{labels}: value}, labels sorted; {} while the endpoint is not up."""
        try:
            text = httpx.get(self.metrics_url, timeout=10).text
        except httpx.TransportError:
            return {}
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
        return out

    def metric(self, name: str, **labels: str) -> float:
        """The sum of every sample of ``name`` whose labels include ``labels`` (0 if none)."""
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        return sum(
            v for k, v in self.metrics().items() if k.startswith(name + "{") and all(w in k for w in wanted)
        )


# ============================================================================================ plugins
_WHEELS: dict[Path, Path] = {}
_WHEELS_LOCK = threading.Lock()


def cpu_gate_plugins(run_dir: Path) -> Path:
    """The cpu-gate example built as an operator would (``pip wheel --no-deps``) into a plugins dir.

    Built from a copy, so the build leaves nothing behind in plugins/cpu-gate; once per run (the
    fixture and a lane may both ask, from two threads).
    """
    with _WHEELS_LOCK:
        if run_dir in _WHEELS:
            return _WHEELS[run_dir]
        work = run_dir / "cpu-gate"
        source = work / "src"
        shutil.copytree(
            REPO / "plugins" / "cpu-gate",
            source,
            ignore=shutil.ignore_patterns("build", "*.egg-info", "tests"),
            dirs_exist_ok=True,
        )
        out = work / "plugins"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (wheel,) = out.glob("*.whl")
        log(f"built {wheel.name}")
        _WHEELS[run_dir] = out
        return out


# ============================================================================================ one test's
class TestJobs:
    """Submits one test's load jobs to a cluster (named after the test unless named), and cancels all of
    them when the test is over. What the ``submit_job`` fixture hands out, and what a lane gives a
    scenario it runs (tests/e2e/lanes.py)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, cluster: FlinkCluster, jar: Path, test_dir: Path, default_name: str) -> None:
        self.cluster = cluster
        self.jar = jar
        self.test_dir = test_dir
        self.default_name = default_name
        self.jobs: list[LoadJob] = []

    def __call__(self, **kwargs: Any) -> LoadJob:
        name = kwargs.pop("name", None) or self.default_name
        started = time.monotonic()
        job = self.cluster.submit(self.jar, name, self.test_dir / f"{name}.control", **kwargs)
        self.jobs.append(job)
        log(f"job {name} ({job.job_id}) running {time.monotonic() - started:.1f} s after submission")
        return job

    def cancel_all(self) -> None:
        for i, job in enumerate(self.jobs):
            try:
                job.cancel(free_slots=i == len(self.jobs) - 1)  # all slots are free once the last one ended
            except Exception as exc:  # the next test resubmits; say why this one may have left a job behind
                log(f"could not cancel {job.name}: {exc}")


class TestDaemons:
    """Starts one test's daemons (``python -m autoscaler run --config <file>``) against a cluster, and
    stops whatever still runs when the test is over (SIGTERM, then SIGKILL, by PID), printing their logs
    if it failed. What the ``run_daemon`` fixture hands out, and what a lane gives a scenario."""

    __test__ = False

    def __init__(self, cluster: FlinkCluster, test_dir: Path) -> None:
        self.cluster = cluster
        self.test_dir = test_dir
        self.daemons: list[DaemonProcess] = []

    def __call__(self, autoscaler: dict[str, Any], **kwargs: Any) -> DaemonProcess:
        daemon = DaemonProcess(
            name=kwargs.pop("name", "daemon"),
            work_dir=self.test_dir,
            rest_url=self.cluster.url,
            autoscaler=autoscaler,
            **kwargs,
        )
        self.daemons.append(daemon)
        return daemon.start()

    def stop_all(self, *, failed: bool) -> None:
        for daemon in self.daemons:
            daemon.stop()
            if failed:
                log(f"daemon log {daemon.log_file} (tail):\n{daemon.tail(80)}")
        if failed:
            log(self.cluster.log_tail(20))


# ============================================================================================ ticks
@dataclass(frozen=True)
class Tick:
    """One tick's outcome for a job and the evaluation behind it, as the daemon saved it."""

    t: float  # the tick's time (Unix seconds, the daemon's clock)
    outcome: str  # a Reason value
    detail: str
    window_samples: int | None
    scaled: bool
    vertices: Mapping[str, Mapping[str, Any]]  # vertex name -> its record (records/s; None: not measured)
    # forecast.enabled: the job's load forecast at the decision (ForecastRecord: peak_rate, basis, ... or
    # ``none`` and ``detail``: why there is none); None for a job that keeps no forecast
    forecast: Mapping[str, Any] | None = None

    def vertex(self, name: str) -> Mapping[str, Any] | None:
        """The record of the vertex whose name starts with ``name``; None if the tick evaluated none."""
        return next((v for n, v in self.vertices.items() if n.startswith(name)), None)

    def value(self, name: str, metric: str) -> float | None:
        v = self.vertex(name)
        return None if v is None or v.get(metric) is None else float(v[metric])


@dataclass(frozen=True)
class WindowRow:
    """One sample of a vertex as the daemon stored it in its metric window."""

    t: float  # the sample's time (Unix seconds)
    running_since: float
    num_records_in: float | None
    pending_records: float | None


class TickWatcher:
    """Every tick's decision for one job, and every window row of one vertex, read in the background.

    The daemon rewrites the job's newest decision (``DaemonProcess.decision_file``) after each of its
    ticks, with that tick's evaluation; polling it several times per tick keeps every tick
    (``ticks``). The stored metric window (the SQLite state file, opened read-only: WAL lets it be
    read while the daemon writes) is trimmed as the window slides; polling it keeps every row the
    window ever held for ``vertex_id`` (``window``): the samples the ticks' rates came from.
    """

    def __init__(self, daemon: DaemonProcess, job: LoadJob, vertex_id: str, every_s: float = 0.25) -> None:
        self.daemon = daemon
        self.job = job
        self.vertex_id = vertex_id
        self.every_s = every_s
        self.ticks: list[Tick] = []
        self.window: dict[float, WindowRow] = {}
        self.errors = 0
        self._file = daemon.decision_file(job.name)
        self._seen_ms: int | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"ticks-{job.name}", daemon=True)

    def __enter__(self) -> TickWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.poll()

    def _run(self) -> None:
        rounds = 0
        while not self._stop.is_set():
            try:
                self._read_decision()
                if rounds % 4 == 0:
                    self._read_window()
            except Exception:  # a half-created file or a locked database: the next round reads it
                self.errors += 1
            rounds += 1
            self._stop.wait(self.every_s)

    def poll(self) -> None:
        """Read both once more now (after the daemon stopped, to keep its last tick)."""
        self._read_decision()
        self._read_window()

    def _read_decision(self) -> None:
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        with self._lock:
            if data["ts_ms"] == self._seen_ms:
                return
            self._seen_ms = data["ts_ms"]
            self.ticks.append(
                Tick(
                    t=data["ts_ms"] / 1000,
                    outcome=data["outcome"],
                    detail=data["detail"],
                    window_samples=data.get("window_samples"),
                    scaled=bool(data.get("scaled")),
                    vertices={v["name"]: v for v in data.get("vertices", ())},
                    forecast=data.get("forecast"),
                )
            )

    def _read_window(self) -> None:
        if not self.daemon.state_file.exists():
            return
        db = sqlite3.connect(f"{self.daemon.state_file.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            rows = db.execute(
                "SELECT ts_ms, running_since_ms, num_records_in, pending_records "
                "FROM autoscaler_metric_window WHERE job_key = ? AND vertex = ?",
                (f"{CLUSTER}/{self.job.name}", self.vertex_id),
            ).fetchall()
        except sqlite3.OperationalError:  # the daemon has not created its schema yet
            return
        finally:
            db.close()
        with self._lock:
            for ts_ms, since_ms, records_in, pending in rows:
                self.window[ts_ms / 1000] = WindowRow(ts_ms / 1000, since_ms / 1000, records_in, pending)

    def snapshot(self) -> tuple[list[Tick], list[WindowRow]]:
        with self._lock:
            return list(self.ticks), [self.window[t] for t in sorted(self.window)]
