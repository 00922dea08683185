"""Run a pytest selection as a few pytest processes at once, each a lane with its share of the tests.

    .venv/bin/python scripts/pytest_lanes.py --lanes 3 -q -m "faults or process" --durations=15

Why: the fault matrix and the process-level suites (CI's step 2) spend their time waiting in real time,
on a daemon's Spark JVM to start, on a metric window to fill, on a lease to run out, and a 2-core machine
is idle through most of it. Tests that wait side by side take the time of the longest lane instead of the
sum. Why processes and not threads in one pytest (as ``tests/e2e/lanes.py`` does with its Flink
clusters): these tests run simulated clusters and fault proxies in the test process itself, and in one
process they would share one interpreter lock; a process per lane keeps each test's world as it is when
it runs alone. Not pytest-xdist: no new dependency, and a lane is a plain pytest run one can repeat.

How: every argument but ``--lanes`` goes to pytest. The selection is collected once (``--collect-only``),
cut into units, and the units are handed out longest first, each to the lane with the least expected time
so far. A unit is the tests of a file that share a module-scoped fixture (one daemon or server for them,
started once), or a single test. Each lane is ``python -m pytest ARGS NODE-IDS`` with its own
``--basetemp``, its output in a file, printed whole when the lane ends; the exit code is the worst
lane's (the lanes' directory is kept when it is not 0). Every collected test is in exactly one lane:
nothing is dropped, a test that takes longer than expected only makes its lane longer. The lanes die
with this process (``PR_SET_PDEATHSIG``), and the daemons they start die with them.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_S = 1.0
"""A test's expected seconds when neither it nor its file is in :data:`EXPECTED_S`."""
EXPECTED_S: dict[str, float] = {
    # Seconds (setup + call) of the slow ones in a three-lane run of CI's step 2 on 2 cores beside other
    # work (2026-11-29, docs/performance.md "Test and CI times"): a test's by its name (a parametrized
    # test's, per parameter), or, for each test of it, a file's. Only how the lanes are filled depends
    # on them: a stale or missing entry costs balance, never a test.
    "test_sigkill_at_random_points_of_a_tick_five_times_loses_nothing_and_rescales_once": 520,
    "test_a_locked_then_deleted_state_database_costs_no_state_and_never_two_leaders": 285,
    "test_evaluator_on_a_standalone_cluster_equals_the_oracle": 260,
    "test_two_daemons_split_200_jobs_by_shard_and_one_takes_over_when_the_other_is_killed": 260,
    "test_sigkill_after_a_rescale_loses_no_history_or_cooldown_and_never_rescales_twice": 250,
    "test_a_daemon_whose_spark_cannot_start_again_hands_its_lease_to_a_standby": 235,
    "test_a_restarted_connect_server_gives_the_evaluator_a_new_session_and_its_windows_back": 180,
    "test_plugins_that_raise_hang_or_return_garbage_veto_and_the_job_scales_once_they_behave": 155,
    "test_a_killed_spark_jvm_is_replaced_reaped_and_the_job_still_scales_once": 130,
    "test_a_killed_leader_is_replaced_by_the_standby_which_never_rescales_twice": 105,
    "test_long_and_slashed_job_names_are_written_explained_and_exported_small": 100,
    "test_the_backtest_command_runs_unchanged_on_a_standalone_cluster": 90,
    "test_a_scrape_flood_neither_delays_the_probes_nor_skips_a_tick": 70,
    "test_evaluator_on_spark_connect_equals_the_oracle": 60,
    "test_a_trickling_answer_costs_its_job_one_deadline_and_the_other_jobs_nothing": 60,
    "test_run_scrapes_serves_metrics_and_stops_cleanly_on_sigterm": 55,
    "test_sigterm_ends_the_process_while_a_plain_plugin_call_blocks_for_ever": 50,
    "tests/faults/test_cluster_faults.py": 9,  # one daemon for the file's 14 tests
    "tests/faults/test_job_faults.py": 5,  # one daemon for the file's 25 tests
}
"""Seconds a test takes alone, by its function's name or, for each test of it, by its file's path."""


@dataclass
class Lane:
    number: int
    units: list[list[str]] = field(default_factory=list)
    expected_s: float = 0.0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    started: float = 0.0
    took_s: float = 0.0

    @property
    def node_ids(self) -> list[str]:
        return [node for unit in self.units for node in unit]


def _collect(pytest_args: list[str]) -> list[str]:
    """The node ids pytest selects with these arguments, in its order."""
    done = subprocess.run(
        # --verbosity last: whatever -q or -v the run has, one node id a line
        [sys.executable, "-m", "pytest", "--collect-only", *pytest_args, "--verbosity=-1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 5):  # 5: nothing selected
        sys.exit(f"pytest_lanes: collecting failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return [line.strip() for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]


def _module_fixtures(path: str) -> tuple[set[str], dict[str, set[str]]]:
    """The file's module-scoped fixtures, and the names each of its functions takes as arguments."""
    tree = ast.parse((REPO / path).read_text())
    shared: set[str] = set()
    takes: dict[str, set[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        takes[node.name] = {arg.arg for arg in node.args.args}
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and any(
                kw.arg == "scope" and isinstance(kw.value, ast.Constant) and kw.value.value == "module"
                for kw in decorator.keywords
            ):
                shared.add(node.name)
    return shared, takes


def _file_units(path: str, nodes: list[str]) -> list[list[str]]:
    """A file's tests cut into units: tests that share a module-scoped fixture (directly or through
    another fixture of the file) stay together, so it starts once; every other test is a unit of its own.
    A test the file's top level does not define (a class's, a plugin's) keeps to the file's first unit."""
    shared, takes = _module_fixtures(path)

    def needs(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found = set()
        for arg in takes.get(name, set()) - seen:
            if arg in shared:
                found.add(arg)
            if arg in takes:
                found |= needs(arg, seen | {name})
        return found

    units: list[tuple[set[str], list[str]]] = []
    for node in nodes:
        name = node.split("::")[-1].split("[", 1)[0]
        key = needs(name) if name in takes else {"?"}
        joined = [unit for unit in units if unit[0] & key]
        if not joined:
            units.append((set(key), [node]))
            continue
        first = joined[0]
        first[0].update(key)
        first[1].append(node)
        for other in joined[1:]:  # a test that needs two fixtures joins their units
            first[0].update(other[0])
            first[1].extend(other[1])
            units.remove(other)
    return [nodes for _, nodes in units]


def _expected_s(node: str) -> float:
    test = node.split("::")[-1].split("[", 1)[0]
    return EXPECTED_S.get(test, EXPECTED_S.get(node.split("::", 1)[0], DEFAULT_S))


def _units(node_ids: list[str]) -> list[tuple[float, list[str]]]:
    """The selection cut into units, each with its expected seconds."""
    by_file: dict[str, list[str]] = defaultdict(list)
    for node in node_ids:
        by_file[node.split("::", 1)[0]].append(node)
    units: list[tuple[float, list[str]]] = []
    for path, nodes in by_file.items():
        for unit in _file_units(path, nodes):
            units.append((sum(_expected_s(node) for node in unit), unit))
    return units


def _plan(units: list[tuple[float, list[str]]], count: int) -> list[Lane]:
    lanes = [Lane(n) for n in range(count)]
    for seconds, nodes in sorted(units, key=lambda unit: unit[0], reverse=True):
        lane = min(lanes, key=lambda lane: lane.expected_s)
        lane.units.append(nodes)
        lane.expected_s += seconds
    return [lane for lane in lanes if lane.units]


def _dies_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _start(lane: Lane, pytest_args: list[str], workdir: Path) -> None:
    lane.log = workdir / f"lane-{lane.number}.log"
    basetemp = workdir / f"lane-{lane.number}-tmp"
    with lane.log.open("wb") as out:
        lane.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *pytest_args, f"--basetemp={basetemp}", *lane.node_ids],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_dies_with_parent,
        )
    lane.started = time.monotonic()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Run a pytest selection in a few pytest processes at once (every other argument "
        "goes to pytest).",
    )
    parser.add_argument("--lanes", type=int, default=int(os.environ.get("PYTEST_LANES", "3")))
    ours, pytest_args = parser.parse_known_args(argv)
    node_ids = _collect(pytest_args)
    if not node_ids:
        print("pytest_lanes: no tests selected")
        return 5
    lanes = _plan(_units(node_ids), max(1, ours.lanes))
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="pytest-lanes-"))
    for lane in lanes:
        print(
            f"pytest_lanes: lane {lane.number}: {len(lane.node_ids)} test(s), about {lane.expected_s:.0f} s"
            f" alone: {', '.join(sorted({node.split('::')[0] for node in lane.node_ids}))}",
            flush=True,
        )
        _start(lane, pytest_args, workdir)
    worst = 0
    waiting = list(lanes)
    while waiting:
        for lane in list(waiting):
            assert lane.proc is not None and lane.log is not None
            code = lane.proc.poll()
            if code is None:
                continue
            waiting.remove(lane)
            lane.took_s = time.monotonic() - lane.started
            print(f"\n===== pytest_lanes: lane {lane.number}, exit {code} after {lane.took_s:.0f} s =====")
            print(lane.log.read_text(errors="replace"), flush=True)
            worst = max(worst, code)
        time.sleep(0.5)
    took = ", ".join(f"lane {lane.number} {lane.took_s:.0f} s" for lane in lanes)
    total = time.monotonic() - started
    print(f"pytest_lanes: {len(node_ids)} tests in {len(lanes)} lanes, {total:.0f} s ({took})")
    if worst == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    else:  # what the failed tests left: daemon logs, configs, state files
        print(f"pytest_lanes: the lanes' logs and temporary directories are in {workdir}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
