"""Fixtures of the e2e suite: one real Flink cluster per session, a fresh load job per test, and the
daemon as a real process per test. Run with ``.venv/bin/python -m pytest -m e2e`` (see docs/e2e.md).
With ``FLINK_E2E_LANES=N`` (N > 1) the scenarios run N at a time, each lane on a cluster of its own
(tests/e2e/lanes.py).

Without Java 17+ or without the package index the suite is skipped with the reason; with
``FLINK_E2E_REQUIRE=1`` (CI) it fails instead, so a broken machine can never pass as green.
"""

from __future__ import annotations

import os
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
    TestDaemons,
    TestJobs,
    Unavailable,
    build_load_job,
    cache_dir,
    check_java,
    cpu_gate_plugins,
    install_flink,
    log,
    new_run_dir,
)
from lanes import Lanes, lane_count, runs_in_a_lane, slug

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
    path = new_run_dir(cache_dir() / "runs", KEEP_RUNS)  # never prunes a run still going on
    log(f"logs of this run: {path}")
    return path


@pytest.fixture
def test_dir(run_dir: Path, request: pytest.FixtureRequest) -> Path:
    path = run_dir / slug(request.node.name)
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def plugins_dir(run_dir: Path) -> Path:
    """The cpu-gate example's wheel in a plugins dir, built as an operator builds it (cpu_gate_plugins)."""
    return cpu_gate_plugins(run_dir)


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


@pytest.fixture
def submit_job(
    flink: Flink, flink_cluster: FlinkCluster, test_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., LoadJob]]:
    """Submit a fresh load job (named after the test); every job it submitted is cancelled afterwards."""
    jobs = TestJobs(flink_cluster, flink.jar, test_dir, f"e2e-{slug(request.node.name)}")
    yield jobs
    jobs.cancel_all()


@pytest.fixture
def run_daemon(
    flink_cluster: FlinkCluster, test_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., DaemonProcess]]:
    """Start the real daemon (``python -m autoscaler run --config <file>``) against the cluster.

    The test stops it itself (and asserts the clean exit); whatever is still running at the end is
    stopped with SIGTERM, then SIGKILL, by PID. Its log is printed when the test failed.
    """
    daemons = TestDaemons(flink_cluster, test_dir)
    yield daemons
    daemons.stop_all(
        failed=getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    )


# ---------------------------------------------------------------------------------------------- lanes
_LANES: list[Lanes] = []  # the session's, once the first test a lane can run has started them


def _in_lanes(item: pytest.Item) -> bool:
    return lane_count() > 1 and runs_in_a_lane(item)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With lanes, the tests a lane cannot run go first, on the suite's cluster, before the lanes take it."""
    if lane_count() > 1:
        items[:] = [i for i in items if not _in_lanes(i)] + [i for i in items if _in_lanes(i)]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A lane's test: start the lanes at the first one, then wait for this test's scenario."""
    if not _in_lanes(pyfuncitem):
        return None
    if not _LANES:
        values = pyfuncitem.funcargs  # the item's whole fixture closure: the suite's Flink, dir, cluster
        flink: Flink = values["flink"]
        lanes = Lanes(
            lane_count(), flink.install, flink.jar, values["run_dir"], values["flink_cluster"], _TIMINGS
        )
        lanes.start([i for i in pyfuncitem.session.items if _in_lanes(i)])
        _LANES.append(lanes)
    _LANES[0].wait(pyfuncitem)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    # A lane's test only waits here; its lane times the scenario itself.
    if item.get_closest_marker("e2e") is not None and not _in_lanes(item):
        _TIMINGS.tests[item.name] = _TIMINGS.tests.get(item.name, 0.0) + report.duration
