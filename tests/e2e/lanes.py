"""Independent e2e scenarios at the same time, in lanes: each lane a Flink cluster of its own that runs
its scenarios one after another (``FLINK_E2E_LANES``, default 1: the suite in order on one cluster).

Most of a scenario is waiting, for windows, stabilization and cooldowns in real time, so scenarios that
wait side by side take the time of the longest lane instead of the sum. Why clusters and not one
larger cluster: a daemon acts on every job of the cluster it watches, and a job's own keys win over the
daemon's, so two scenarios' daemons on one cluster would decide for each other's jobs; the slot
scenarios also count the whole cluster's free slots. Every lane's cluster has the suite's settings
(8 slots, :class:`harness.ClusterOptions`), so a scenario sees in its lane what it sees alone.

How, with pytest running one test after another: at the first test a lane can run, every such test of
the session (as selected) is handed to the lanes, longest first, each to the lane with the least
expected time so far (``pytest.mark.e2e_seconds``: about how long the scenario takes alone), and the
lanes start. Lane 0 runs on the suite's cluster, the others start their own at once. Each test then
waits for its scenario's result: it passes, or its exception is raised again, traceback and all. A
lane calls the test function itself, with values made as the fixtures make them: ``submit_job``
(:class:`harness.TestJobs`), ``run_daemon`` (:class:`harness.TestDaemons`), ``test_dir``, ``timings``
and the session's values in :data:`SHARED`. A test that asks for any other fixture is not a lane's: it
runs as before, on the suite's cluster, ahead of the lanes (the conftest orders the tests so).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from harness import FlinkCluster, FlinkInstall, TestDaemons, TestJobs, cpu_gate_plugins, keep_log, log

__all__ = ["SHARED", "Lanes", "lane_count", "runs_in_a_lane", "slug"]

DEFAULT_SECONDS = 180.0  # a scenario without pytest.mark.e2e_seconds
# Session-wide values a scenario may ask for by name, made from the run's directory (once, and the same
# value its fixture gives: both call the same cached function).
SHARED: dict[str, Callable[[Path], Any]] = {"plugins_dir": cpu_gate_plugins}
_PER_TEST = frozenset({"submit_job", "run_daemon", "test_dir", "timings"})


def lane_count() -> int:
    """``FLINK_E2E_LANES``: how many scenarios may run at once, each on its own cluster (default 1)."""
    text = os.environ.get("FLINK_E2E_LANES", "1").strip()
    try:
        return max(1, int(text))
    except ValueError:
        raise pytest.UsageError(f"FLINK_E2E_LANES must be a whole number, not {text!r}") from None


def slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()[:60]


def _argnames(item: pytest.Item) -> set[str]:
    function = getattr(item, "function", None)
    if function is None:
        return {"?"}  # not a Python test function: never a lane's
    return set(inspect.signature(function).parameters)


def runs_in_a_lane(item: pytest.Item) -> bool:
    """An e2e test function that needs nothing but what a lane makes, and runs a job of its own."""
    names = _argnames(item)
    return (
        item.get_closest_marker("e2e") is not None
        and not inspect.iscoroutinefunction(getattr(item, "function", None))
        and not hasattr(item, "callspec")  # parametrized: its arguments are pytest's to give
        and "submit_job" in names
        and names <= _PER_TEST | SHARED.keys()
    )


def expected_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("e2e_seconds")
    return float(marker.args[0]) if marker is not None else DEFAULT_SECONDS


@dataclass
class Scenario:
    item: pytest.Item
    lane: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    took_s: float = 0.0
    lines: list[str] = field(default_factory=list)  # what its thread logged, daemon logs included


class Lanes:
    """The session's lanes: which scenario runs in which, the threads that run them, their results."""

    def __init__(
        self, count: int, install: FlinkInstall, jar: Path, run_dir: Path, cluster: FlinkCluster, timings: Any
    ) -> None:
        self.count = count
        self.install = install
        self.jar = jar
        self.run_dir = run_dir
        self.cluster = cluster  # the suite's, lane 0's
        self.timings = timings
        self.scenarios: dict[str, Scenario] = {}
        self.threads: list[threading.Thread] = []

    def __contains__(self, item: pytest.Item) -> bool:
        return item.nodeid in self.scenarios

    def start(self, items: Sequence[pytest.Item]) -> None:
        """Spread the scenarios over the lanes (longest first, to the least loaded) and start them all."""
        load = [0.0] * self.count
        lanes: list[list[Scenario]] = [[] for _ in range(self.count)]
        for item in sorted(items, key=expected_seconds, reverse=True):
            lane = min(range(self.count), key=lambda i: load[i])
            load[lane] += expected_seconds(item)
            scenario = Scenario(item, lane)
            lanes[lane].append(scenario)
            self.scenarios[item.nodeid] = scenario
        for lane, scenarios in enumerate(lanes):
            if not scenarios:
                continue
            names = ", ".join(s.item.name for s in scenarios)
            log(f"lane {lane}: {len(scenarios)} scenario(s), about {load[lane]:.0f} s alone: {names}")
            thread = threading.Thread(
                target=self._run_lane, args=(lane, scenarios), name=f"e2e-lane-{lane}", daemon=True
            )
            self.threads.append(thread)
            thread.start()

    def wait(self, item: pytest.Item) -> None:
        """Wait for the item's scenario; raise what it raised, after its log lines (into this test's
        captured output, where pytest shows them with the failure)."""
        scenario = self.scenarios[item.nodeid]
        scenario.done.wait()
        if scenario.error is not None:
            print("\n".join(scenario.lines), file=sys.stderr, flush=True)
            raise scenario.error

    # ------------------------------------------------------------------------------------ the threads
    def _run_lane(self, lane: int, scenarios: list[Scenario]) -> None:
        started = time.monotonic()
        cluster = self.cluster
        try:
            if lane != 0:
                cluster = FlinkCluster(self.install, self.run_dir / f"flink-lane-{lane}")
                cluster.start()
                self.timings.setup[f"lane {lane}: start its Flink cluster"] = cluster.started_s
        except BaseException as exc:  # every scenario of the lane fails with the reason
            for scenario in scenarios:
                scenario.error = exc
                scenario.done.set()
            return
        try:
            for scenario in scenarios:
                with keep_log(scenario.lines):
                    self._run(scenario, cluster)
        finally:
            if cluster is not self.cluster:
                self.timings.setup[f"lane {lane}: stop its Flink cluster"] = cluster.stop()
            self.timings.setup[f"lane {lane}: wall time ({len(scenarios)} scenario(s))"] = (
                time.monotonic() - started
            )

    def _run(self, scenario: Scenario, cluster: FlinkCluster) -> None:
        item = scenario.item
        test_dir = self.run_dir / slug(item.name)
        test_dir.mkdir(exist_ok=True)
        jobs = TestJobs(cluster, self.jar, test_dir, f"e2e-{slug(item.name)}")
        daemons = TestDaemons(cluster, test_dir)
        values: dict[str, Any] = {
            "submit_job": jobs,
            "run_daemon": daemons,
            "test_dir": test_dir,
            "timings": self.timings,
        }
        started = time.monotonic()
        log(f"lane {scenario.lane}: {item.name} started")
        try:
            for name in _argnames(item) & SHARED.keys():
                values[name] = SHARED[name](self.run_dir)
            item.function(**{name: values[name] for name in _argnames(item)})  # type: ignore[attr-defined]
        except BaseException as exc:
            scenario.error = exc
        finally:
            try:
                daemons.stop_all(failed=scenario.error is not None)
                jobs.cancel_all()
            finally:
                scenario.took_s = time.monotonic() - started
                self.timings.tests[item.name] = scenario.took_s
                outcome = "passed" if scenario.error is None else f"FAILED ({type(scenario.error).__name__})"
                log(f"lane {scenario.lane}: {item.name} {outcome} in {scenario.took_s:.1f} s")
                scenario.done.set()
