"""Fixtures of the e2e suite: one real Flink cluster per session, a fresh load job per test, and the
daemon as a real process per test. Run with ``.venv/bin/python -m pytest -m e2e`` (see docs/e2e.md).

Without Java 17+ or without the package index the suite is skipped with the reason; with
``FLINK_E2E_REQUIRE=1`` (CI) it fails instead, so a broken machine can never pass as green.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from harness import (
    DaemonProcess,
    FlinkCluster,
    FlinkInstall,
    LoadJob,
    Unavailable,
    build_load_job,
    cache_dir,
    check_java,
    install_flink,
    log,
)

KEEP_RUNS = 5


def _unavailable(reason: str) -> None:
    if os.environ.get("FLINK_E2E_REQUIRE") == "1":
        pytest.fail(f"e2e prerequisites missing (FLINK_E2E_REQUIRE=1): {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Timings:
    """What the suite measured, printed at the end of the run (so CI output always shows it)."""

    setup: dict[str, float] = field(default_factory=dict)
    rows: list[tuple[str, str, float]] = field(default_factory=list)  # (test, what, seconds)
    tests: dict[str, float] = field(default_factory=dict)  # test -> setup + call + teardown seconds

    def add(self, test: str, what: str, seconds: float) -> None:
        self.rows.append((test, what, seconds))
        log(f"{test}: {what}: {seconds:.1f} s")


_TIMINGS = Timings()
_STARTED = time.monotonic()


@pytest.fixture(scope="session")
def timings() -> Timings:
    return _TIMINGS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMINGS.setup and not _TIMINGS.rows:
        return
    tr = terminalreporter
    tr.section("e2e measurements (real Flink 2.3 cluster)")
    for what, seconds in _TIMINGS.setup.items():
        tr.write_line(f"  {what:<58} {seconds:7.1f} s")
    for test, what, seconds in _TIMINGS.rows:
        tr.write_line(f"  {test + ': ' + what:<58} {seconds:7.1f} s")
    for test, seconds in _TIMINGS.tests.items():
        tr.write_line(f"  {'test ' + test:<58} {seconds:7.1f} s")
    tr.write_line(f"  {'e2e session, wall time':<58} {time.monotonic() - _STARTED:7.1f} s")


@dataclass(frozen=True)
class Flink:
    install: FlinkInstall
    jar: Path


@pytest.fixture(scope="session")
def flink() -> Flink:
    """Flink 2.3 from the package index in the cache directory, and the compiled load job (once)."""
    try:
        check_java()
        cache = cache_dir()
        started = time.monotonic()
        install = install_flink(cache)
        jar = build_load_job(install, cache)
    except Unavailable as exc:
        _unavailable(str(exc))
        raise
    _TIMINGS.setup["install Flink + compile the load job (0 when cached)"] = time.monotonic() - started
    return Flink(install, jar)


@pytest.fixture(scope="session")
def run_dir() -> Path:
    """This run's logs, configs and checkpoints: ``<cache>/runs/<time>-<pid>``, the last few kept.

    Not pytest's tmp_path: that keeps only the last three runs of *any* pytest on the machine, and
    the logs of a failed e2e run are what one needs to read afterwards.
    """
    runs = cache_dir() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for old in sorted(runs.iterdir())[:-KEEP_RUNS]:
        shutil.rmtree(old, ignore_errors=True)
    path = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path.mkdir()
    log(f"logs of this run: {path}")
    return path


@pytest.fixture
def test_dir(run_dir: Path, request: pytest.FixtureRequest) -> Path:
    path = run_dir / _slug(request.node.name)
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def flink_cluster(flink: Flink, run_dir: Path) -> Iterator[FlinkCluster]:
    """A JobManager and a TaskManager for the whole session, always stopped by PID at the end."""
    cluster = FlinkCluster(flink.install, run_dir / "flink")

    # A SIGTERM (a CI timeout, a killed terminal) must still run this fixture's teardown: turn it into
    # the KeyboardInterrupt pytest stops on cleanly. (If pytest is SIGKILLed, the kernel ends the JVMs.)
    def _interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster.start()
        _TIMINGS.setup["start the Flink cluster (JobManager + TaskManager ready)"] = cluster.started_s
        yield cluster
    finally:
        try:
            _TIMINGS.setup["stop the Flink cluster"] = cluster.stop()
        finally:
            signal.signal(signal.SIGTERM, previous)


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()[:60]


@pytest.fixture
def submit_job(
    flink: Flink, flink_cluster: FlinkCluster, test_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., LoadJob]]:
    """Submit a fresh load job (named after the test); every job it submitted is cancelled afterwards."""
    jobs: list[LoadJob] = []

    def submit(**kwargs: Any) -> LoadJob:
        name = kwargs.pop("name", None) or f"e2e-{_slug(request.node.name)}"
        started = time.monotonic()
        job = flink_cluster.submit(flink.jar, name, test_dir / f"{name}.control", **kwargs)
        jobs.append(job)
        log(f"job {name} ({job.job_id}) running {time.monotonic() - started:.1f} s after submission")
        return job

    yield submit
    for i, job in enumerate(jobs):
        try:
            job.cancel(free_slots=i == len(jobs) - 1)  # the slots are all free once the last one ended
        except Exception as exc:  # the next test resubmits; say why this one may have left a job behind
            log(f"could not cancel {job.name}: {exc}")


@pytest.fixture
def run_daemon(
    flink_cluster: FlinkCluster, test_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., DaemonProcess]]:
    """Start the real daemon (``python -m autoscaler run --config <file>``) against the cluster.

    The test stops it itself (and asserts the clean exit); whatever is still running at the end is
    stopped with SIGTERM, then SIGKILL, by PID. Its log is printed when the test failed.
    """
    daemons: list[DaemonProcess] = []

    def run(autoscaler: dict[str, Any], **kwargs: Any) -> DaemonProcess:
        daemon = DaemonProcess(
            name=kwargs.pop("name", "daemon"),
            work_dir=test_dir,
            rest_url=flink_cluster.url,
            autoscaler=autoscaler,
            **kwargs,
        )
        daemons.append(daemon)
        return daemon.start()

    yield run
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for daemon in daemons:
        daemon.stop()
        if failed:
            log(f"daemon log {daemon.log_file} (tail):\n{daemon.tail(80)}")
    if failed:
        log(flink_cluster.log_tail(20))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    if item.get_closest_marker("e2e") is not None:
        _TIMINGS.tests[item.name] = _TIMINGS.tests.get(item.name, 0.0) + report.duration
