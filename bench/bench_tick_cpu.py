"""Two checkouts' tick side by side on the same deterministic fleet: what a code change did to the
daemon's CPU, without the machine's noise (a script).

``bench_fleet.py`` measures the real process against a simulator in real time, which is what an
operator runs, and its figures move with the machine: on 2026-11-29 the simulator's CPU per tick, the
same code answering the same requests, varied by 30 % between runs of one afternoon, and a tick that
reads a little slower crosses Flink's next metric fetch, whose landing mid-read makes the next tick
read some jobs again (``metric_fetch_landed_mid_read``): a small change shows as a large one, or hides.
This benchmark takes both out:

* the fleet of ``bench/fleet.py`` (N jobs x 10 vertices) in an in-process simulator on a fake clock,
  moved one control interval per tick, Flink's metric fetch every 5 s: every run reads the same
  answers and takes the same decisions;
* the plain-Python evaluator (``autoscaler.evaluate.oracle``), the state in memory, no decision files:
  what is left is the daemon's own Python code;
* each run is a child process that imports one checkout (``PYTHONPATH``), so the base needs no copy of
  this file; runs alternate A B B A A B ... so a drift of the machine falls on both sides;
* per tick: the process's CPU, the simulator's share of it (its in-process answers, timed per request),
  and the daemon's own stage histogram (``flink_autoscaler_tick_stage_duration_seconds``), which here
  is CPU time: no stage waits on I/O; and the collect stage without the simulator's answers.

Printed per figure: the mean over runs of each run's per-tick mean (the first ``--skip`` ticks left out:
they list every job's metric names), the runs' min-max, base and this checkout, and the difference.

Run: ``.venv/bin/python bench/bench_tick_cpu.py --base <rev>`` (a commit, checked out in a temporary
worktree, or a directory); ``--jobs 1000 --ticks 12 --rounds 2`` by default (some 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("collect", "load", "evaluate", "decide", "plugins", "slots", "realize", "record")
TICK_S = 10
FETCH_S = 5.0


# ---------------------------------------------------------------------------------------------- a run
def measure(jobs: int, ticks: int) -> list[dict[str, float]]:
    """One run in this process, against whichever ``autoscaler`` it imports: a row of figures per tick."""
    return asyncio.run(_measure(jobs, ticks))


async def _measure(jobs: int, ticks: int) -> list[dict[str, float]]:
    from fleet import CLUSTER, fleet_cluster, fleet_job

    from autoscaler.clock import FakeClock
    from autoscaler.daemon import Daemon
    from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
    from autoscaler.metrics import MetricsReporter
    from autoscaler.settings import ClusterSettings, Settings
    from autoscaler.simulator.engine import SimCluster
    from autoscaler.simulator.rest import transport
    from autoscaler.state import MemoryStateStore
    from autoscaler.state.events import EventLog

    clock = FakeClock()
    sim = SimCluster(fleet_cluster(jobs, FETCH_S, 1.0), clock)
    for j in range(jobs):
        sim.submit(fleet_job(j, 10))
    answers = _TimedTransport(transport(sim))
    settings = Settings(
        clusters=[
            ClusterSettings(name=CLUSTER, rest_url="http://simulator.invalid", metric_fetch_wait=timedelta(0))
        ],
        control_loop_interval=timedelta(seconds=TICK_S),
        metrics_address="",
        decisions_dir=None,
        persist_window=False,
        autoscaler={
            "job.autoscaler.enabled": "true",
            "job.autoscaler.metrics.window": "60 s",  # full after 6 ticks: later ones decide
            "job.autoscaler.stabilization.interval": "30 s",
        },
    )
    metrics = MetricsReporter()
    daemon = Daemon(
        settings,
        evaluator=PythonEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=metrics,
        transports={CLUSTER: answers},
    )
    rows: list[dict[str, float]] = []
    try:
        before = _stage_sums(metrics.registry)
        for _ in range(ticks):
            clock.advance(ms=TICK_S * 1000)
            cpu, answers.cpu_s = time.process_time(), 0.0
            await daemon.run_tick()
            after = _stage_sums(metrics.registry)
            row = {"tick": time.process_time() - cpu, "simulator": answers.cpu_s}
            row |= {s: after.get(s, 0.0) - before.get(s, 0.0) for s in STAGES}
            row["collect, the daemon's part"] = row["collect"] - answers.cpu_s
            rows.append(row)
            before = after
    finally:
        await daemon.aclose()
    return rows


class _TimedTransport:
    """The simulator's in-process transport, with the CPU its answers take (their share of a tick)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.cpu_s = 0.0

    async def handle_async_request(self, request: Any) -> Any:
        started = time.thread_time()
        try:
            return await self._inner.handle_async_request(request)
        finally:
            self.cpu_s += time.thread_time() - started

    async def aclose(self) -> None:
        await self._inner.aclose()


def _stage_sums(registry: Any) -> dict[str, float]:
    """Each stage's total seconds so far, from the daemon's own histogram."""
    sums: dict[str, float] = {}
    for family in registry.collect():
        if family.name == "flink_autoscaler_tick_stage_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    sums[sample.labels["stage"]] = sample.value
    return sums


# ---------------------------------------------------------------------------------------------- the A/B
def order(rounds: int) -> list[str]:
    """A B B A, repeated: each side runs as often first as second, so a drift falls on both."""
    out: list[str] = []
    for r in range(rounds):
        out += ["base", "this"] if r % 2 == 0 else ["this", "base"]
    return out


def summarize(runs: Mapping[str, Sequence[Sequence[Mapping[str, float]]]], skip: int) -> list[str]:
    """The table: per figure, base and this checkout (mean of the runs' per-tick means, min-max)."""
    figures = ["tick", "simulator", *STAGES[:1], "collect, the daemon's part", *STAGES[1:]]
    lines = [
        "| CPU s per tick | base: mean (runs min-max) | this: mean (runs min-max) | this - base |",
        "|---|---|---|---|",
    ]
    for figure in figures:
        cells, means = [], []
        for side in ("base", "this"):
            per_run = [statistics.fmean(row[figure] for row in rows[skip:]) for rows in runs[side]]
            means.append(statistics.fmean(per_run))
            cells.append(f"{means[-1]:.3f} ({min(per_run):.3f}-{max(per_run):.3f})")
        delta = means[1] - means[0]
        pct = f" ({100 * delta / means[0]:+.1f} %)" if means[0] > 0.005 else ""
        lines.append(f"| {figure} | {cells[0]} | {cells[1]} | {delta:+.3f}{pct} |")
    return lines


@contextmanager
def checkout(base: str) -> Iterator[Path]:
    """``base`` as a directory: itself if it is one, else a temporary worktree of that commit."""
    path = Path(base)
    if path.is_dir():
        yield path.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="bench-tick-cpu-") as tmp:
        tree = Path(tmp) / "base"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "-q", "--detach", str(tree), base], check=True)
        try:
            yield tree
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=False)


def _child(tree: Path, args: argparse.Namespace) -> list[dict[str, float]]:
    """One run in a child process importing ``tree``'s ``autoscaler``."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--jobs", str(args.jobs)]
    argv += ["--ticks", str(args.ticks)]
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a run in {tree} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD~1", help="a commit (a temporary worktree) or a directory")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=12, help="ticks per run")
    ap.add_argument("--skip", type=int, default=2, help="first ticks of each run left out")
    ap.add_argument("--rounds", type=int, default=2, help="A B (then B A) pairs")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        from autoscaler.gc_tuning import tune_gc
        from autoscaler.logs import configure_logging

        configure_logging("json", "ERROR")
        tune_gc()  # as the daemon's process does
        print(json.dumps(measure(args.jobs, args.ticks)))
        return 0
    runs: dict[str, list[list[dict[str, float]]]] = {"base": [], "this": []}
    with checkout(args.base) as base_tree:
        trees = {"base": base_tree, "this": ROOT}
        for k, side in enumerate(order(args.rounds), 1):
            started = time.monotonic()
            runs[side].append(_child(trees[side], args))
            print(f"  run {k}: {side} ({time.monotonic() - started:.0f} s)", flush=True)
    left_out = f"{args.ticks} ticks per run ({args.skip} left out)"
    print(f"\n{args.jobs} jobs x 10 vertices, {left_out}, base {args.base}")
    print("\n".join(summarize(runs, args.skip)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
