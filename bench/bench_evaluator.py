"""Benchmark the evaluator on a synthetic fleet (a script, not a test).

Prints per-tick wall times and three ratios:

* Spark vs the plain-Python oracle (``aggregate_window`` + ``evaluate_vertices``), from the same run;
* batched Spark tick (``SparkEvaluator.evaluate``) vs one Spark query per job (measured on a few jobs,
  extrapolated to the fleet);
* appending new rows to the window kept in Spark vs re-shipping the whole window every tick.

Several fleet sizes run one after the other in one session (``--jobs 1000 10000``), and the end compares
each size's Spark tick with the targets of issue 13 (must-show 3): 1,000 jobs x 10 vertices in at most
0.5 s and 10,000 jobs x 10 vertices in at most 2 s, with a 120 s window. The issue's figures:

    .venv/bin/python bench/bench_evaluator.py --jobs 1000 10000 --vertices 10 --ticks 18 --no-baselines \
    --conf spark.driver.memory=4g

(``--no-baselines`` leaves out the re-ship and per-job queries, which at 10,000 jobs take minutes per
tick; the oracle always runs, in a process of its own. With the default 1 GiB driver heap, the
10,000-job window and the checkpoint that supersedes it do not fit Spark's storage memory together and
a tick costs the JVM half as much CPU again.) Beside wall times it prints each tick's CPU time, Python's
and the JVM's: on a machine shared with other work they tell what the tick costs better than the clock.
``--help`` for the knobs.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import multiprocessing
import os
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from autoscaler.evaluate import SparkEvaluator, aggregate_window, create_spark_session, evaluate_vertices
from autoscaler.evaluate.spark.evaluator import ROW_DDL, collect_aggregates, rows_frame
from autoscaler.evaluate.spark.frames import series_slot
from autoscaler.evaluate.spark.phases import PHASES, EvaluationPhases
from autoscaler.evaluate.spark.series import SeriesNames, vertex_order
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.gc_tuning import GC_THRESHOLDS, tune_gc
from autoscaler.model import Edge, JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AutoscalerOptions, SparkSettings

T0 = 1_800_000_000_000
# Issue 13, must-show 3: the evaluator's tick at (jobs, vertices) with a 120 s window, at most this long.
TARGETS_S = {(1000, 10): 0.5, (10000, 10): 2.0}
TARGET_WINDOW_S = 120


# ---------------------------------------------------------------------------------------------- the fleet
@dataclass(frozen=True, slots=True)
class Fleet:
    jobs: int
    vertices: int
    interval_ms: int
    options: AutoscalerOptions
    seed: int = 1

    def topology(self) -> JobTopology:
        """A chain src -> v1 -> ... with a HASH edge into v1 (so alignment runs)."""
        names = ["src", *(f"v{i}" for i in range(1, self.vertices))]
        infos = [VertexInfo(n, n, 2 + i % 3, 128) for i, n in enumerate(names)]
        edges = [
            Edge(a, b, "HASH" if i == 0 else "REBALANCE")
            for i, (a, b) in enumerate(itertools.pairwise(names))
        ]
        return JobTopology.build(infos, edges)

    def tick(self, n: int) -> list[JobSample]:
        topo = self.topology()
        rng = random.Random(self.seed * 1_000_003 + n)
        t_s = n * self.interval_ms / 1000
        out = []
        for j in range(self.jobs):
            rate = 100.0 * (1 + j % 17)
            vertices = {
                vid: VertexSample(
                    busy_time_ms_per_s=rng.uniform(50, 950),
                    backpressured_ms_per_s=rng.uniform(0, 100),
                    num_records_in=rate * t_s,
                    num_records_out=rate * t_s,
                    accumulated_busy_time_ms=500.0 * t_s,
                    num_records_in_per_s=rate * rng.uniform(0.9, 1.1),
                    pending_records=1000.0 + (10.0 * t_s if vid == "src" else 0.0),
                    observed_tpr=rng.choice([float("nan"), 3 * rate]),
                    accumulated_busy_time_agg_ms=600.0 * t_s,  # the counter the default TPR path reads
                )
                for vid in topo.vertices
            }
            target = JobTarget(JobRef("bench", f"id{j}", f"job-{j:05d}"), self.options)
            out.append(JobSample(target, T0 + n * self.interval_ms, T0, topo, vertices))
        return out


# ---------------------------------------------------------------------------------------------- baselines
@dataclass
class DriverWindows:
    """The same window bookkeeping as SparkEvaluator, rows held in Python (for the oracle and re-ship)."""

    book: WindowBook = field(default_factory=WindowBook)
    rows: dict[str, list[tuple[int, JobSample]]] = field(default_factory=dict)

    def advance(self, samples: Sequence[JobSample], now_ms: int) -> None:
        for s in samples:
            status = self.book.observe_sample(s, now_ms)
            if status.kept:
                self.rows.setdefault(s.job.key, []).append((status.epoch, s))
        keep = self.book.retain(now_ms, present=[s.job.key for s in samples])
        self.rows = {
            k: [(e, s) for e, s in rows if e == keep[k][0] and s.ts_ms >= keep[k][1]]
            for k, rows in self.rows.items()
            if k in keep
        }

    def row_count(self) -> int:
        return sum(len(r) * len(r[0][1].topology.vertices) for r in self.rows.values() if r)


def oracle_tick(windows: DriverWindows, samples: Sequence[JobSample], now_ms: int) -> None:
    """Plain Python: aggregate every vertex window, then the same driver-side evaluation."""
    windows.advance(samples, now_ms)
    for s in samples:
        rows = windows.rows.get(s.job.key, [])
        aggs = {
            vid: aggregate_window([(x.ts_ms, x.vertices[vid]) for _, x in rows])
            for vid in s.topology.vertices
        }
        evaluate_vertices(s, aggs, s.target.options)


class OracleProcess:
    """The plain-Python oracle in a process of its own, given the same fleet, tick by tick.

    The oracle keeps every sample of its windows as Python objects: some 2.5 million at 10,000 jobs with
    a 120 s window. In the Spark evaluator's process, each full garbage collection would walk them and
    be charged to whichever tick it fell in (up to 0.7 s). Each process builds its own identical
    samples (the fleet is seeded) and the two run one after the other, never at once.
    """

    def __init__(self, fleet: Fleet) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process that runs a JVM
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_oracle_worker, args=(child, fleet), daemon=True)
        self._process.start()

    def tick(self, n: int, now_ms: int) -> tuple[float, int]:
        """Tick ``n`` of the oracle: (seconds, rows its windows hold)."""
        self._conn.send((n, now_ms))
        seconds, rows = self._conn.recv()
        return seconds, rows

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(timeout=60)


def _oracle_worker(conn: Any, fleet: Fleet) -> None:
    windows = DriverWindows()
    while (message := conn.recv()) is not None:
        n, now_ms = message
        samples = fleet.tick(n)
        conn.send((timed(lambda s=samples, t=now_ms: oracle_tick(windows, s, t)), windows.row_count()))


def reship_tick(
    spark: Any, windows: DriverWindows, samples: Sequence[JobSample], now_ms: int, parts: int
) -> None:
    """Ship the whole window from the driver every tick (what the appended window avoids)."""
    windows.advance(samples, now_ms)
    frame, names = rows_frame(
        (key, e, vid, s.ts_ms, s.vertices[vid])
        for key, rows in windows.rows.items()
        for e, s in rows
        for vid in s.topology.vertices
    )
    aggregates = collect_aggregates(spark.createDataFrame(frame, ROW_DDL).coalesce(parts), names)
    for s in samples:
        evaluate_vertices(s, aggregates.get(s.job.key, {}), s.target.options)


def per_job_queries(evaluator: SparkEvaluator, job_keys: Sequence[str]) -> float:
    """One filtered Spark query per job over the retained window; returns seconds per job."""
    from pyspark.sql import functions as F

    window = evaluator._frames.window  # the bench may peek: it measures the anti-pattern on the same data
    if window is None or not job_keys:
        return float("nan")
    start = time.perf_counter()
    for key in job_keys:
        job = evaluator._book.get(key)
        if job is None:
            continue
        names = SeriesNames({job.epoch: (key, vertex_order(job.vertex_ids))})
        collect_aggregates(window.where(series_slot(F.col("series")) == job.epoch), names)
    return (time.perf_counter() - start) / len(job_keys)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------- CPU time
def cpu_clock(spark: Any) -> Callable[[], tuple[float, float]]:
    """CPU seconds used so far by this process and by the local driver JVM (NaN without one).

    Wall time on a shared machine depends on what else runs; CPU time much less. A tick's CPU time gives
    what it would take on the same cores left to it alone: the Python part runs on one thread while the
    JVM waits, then the JVM runs on every core (``cpu estimate`` below).
    """
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    stat = f"/proc/{proc.pid}/stat" if proc is not None else ""
    ticks = os.sysconf("SC_CLK_TCK")

    def jvm() -> float:
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    return lambda: (time.process_time(), jvm())


# ---------------------------------------------------------------------------------------------- main
@dataclass(frozen=True)
class Result:
    """One fleet size's steady-state medians (full-window ticks), in seconds."""

    jobs: int
    vertices: int
    spark_s: float
    spark_max_s: float
    oracle_s: float
    cpu_estimate_s: float  # Python CPU + JVM CPU / cores: the tick on these cores alone


def run_size(spark: Any, args: argparse.Namespace, jobs: int, parts: int, cores: int) -> Result:
    """Every tick of one fleet size on a fresh evaluator, printed as it goes."""
    options = AutoscalerOptions(
        metrics_window=timedelta(seconds=args.window_s), stabilization_interval=timedelta(0)
    )
    fleet = Fleet(jobs, args.vertices, args.interval_s * 1000, options)
    evaluator = SparkEvaluator(spark)
    print(
        f"\nfleet: {jobs} jobs x {args.vertices} vertices, {args.ticks} ticks every {args.interval_s}s, "
        f"window {args.window_s}s"
    )
    oracle, reship = OracleProcess(fleet), DriverWindows()
    clock = cpu_clock(spark)
    rows: list[tuple[int, int, float, float, float, float]] = []
    cpu: list[tuple[float, float]] = []
    settles: list[float] = []
    phases: list[EvaluationPhases] = []  # where each tick's time went (SparkEvaluator.last_phases)
    print(
        f"{'tick':>4} {'rows':>8} {'spark ms':>9} {'ckpt ms':>8} {'oracle ms':>10} {'reship ms':>10}"
        f" {'per-job ms/job':>15} {'cpu py ms':>10} {'cpu jvm ms':>11}"
        f" {'window ms':>10} {'query ms':>9} {'driver ms':>10}"
    )
    for n in range(args.ticks):
        samples, now = fleet.tick(n), T0 + n * args.interval_s * 1000
        before = clock()
        spark_s = timed(lambda s=samples, t=now: evaluator.evaluate(s, t))
        # The window's checkpoint, which the tick left running in the background: waited for here, so
        # its CPU counts in this tick's and nothing of it overlaps the oracle or the next tick.
        settles.append(timed(evaluator.settle))
        after = clock()
        phases.append(evaluator.last_phases or EvaluationPhases())
        cpu.append((after[0] - before[0], after[1] - before[1]))
        oracle_s, oracle_rows = oracle.tick(n, now)
        reship_s = per_job_s = float("nan")
        if args.baselines:
            reship_s = timed(lambda s=samples, t=now: reship_tick(spark, reship, s, t, parts))
            if n >= args.ticks - args.per_job_ticks:
                per_job_s = per_job_queries(evaluator, [s.job.key for s in samples[: args.per_job_sample]])
        rows.append((n, evaluator.window_size(), spark_s, oracle_s, reship_s, per_job_s))
        assert evaluator.window_size() == oracle_rows
        assert not args.baselines or evaluator.window_size() == reship.row_count()
        ms = [x * 1e3 for x in (spark_s, oracle_s, reship_s, per_job_s)]
        print(
            f"{n:>4} {rows[-1][1]:>8} {ms[0]:>9.0f} {settles[-1] * 1e3:>8.0f} {ms[1]:>10.0f} {ms[2]:>10.0f}"
            f" {ms[3]:>15.0f}"
            f" {cpu[-1][0] * 1e3:>10.0f} {cpu[-1][1] * 1e3:>11.0f}"
            f" {phases[-1].window * 1e3:>10.0f} {phases[-1].spark * 1e3:>9.0f}"
            f" {phases[-1].driver * 1e3:>10.0f}",
            flush=True,
        )

    oracle.close()
    full = [r for r in rows if r[1] == rows[-1][1]] or rows  # the window no longer grows
    print()
    for label, sel in (("all ticks but the first 2", rows[2:] or rows), ("full-window ticks", full)):
        spark_ms, oracle_ms = (1e3 * statistics.median(r[i] for r in sel) for i in (2, 3))
        print(f"{label} ({len(sel)}): median spark {spark_ms:.0f} ms, oracle {oracle_ms:.0f} ms")
        print(f"  ratio spark / python oracle:      {spark_ms / oracle_ms:8.2f}x")
        if args.baselines:
            reship_ms = 1e3 * statistics.median(r[4] for r in sel)
            print(
                f"  re-ship {reship_ms:.0f} ms; ratio re-ship / appended window: {reship_ms / spark_ms:8.2f}x"
            )
    late = [r for r in rows if not math.isnan(r[5])]  # ticks where one query per job was timed
    if late:
        per_job = statistics.median(r[5] for r in late)
        spark_late = statistics.median(r[2] for r in late)
        print(
            f"one Spark query per job: {per_job * 1e3:.0f} ms/job -> {per_job * jobs:.1f} s per tick for "
            f"{jobs} jobs; ratio per-job / batched: {per_job * jobs / spark_late:.1f}x"
        )
    full_cpu = [cpu[r[0]] for r in full]
    estimate = statistics.median(py + jvm / cores for py, jvm in full_cpu)
    print(
        f"full-window ticks: median CPU {statistics.median(p for p, _ in full_cpu):.2f} s Python, "
        f"{statistics.median(j for _, j in full_cpu):.2f} s JVM -> {estimate:.2f} s on {cores} cores alone "
        f"(the JVM's with the window's checkpoint, which ran on for a median "
        f"{statistics.median(settles[r[0]] for r in full):.2f} s after the tick)"
    )
    median = {p: statistics.median(getattr(phases[r[0]], p) for r in full) for p in PHASES}
    print(
        "full-window ticks: median phases "
        + ", ".join(f"{p} {median[p]:.2f} s" for p in PHASES)
        + " (window: the windows' bookkeeping in the driver; spark: the query and the checkpoint the tick "
        "waited for; driver: the graph arithmetic)"
    )
    return Result(
        jobs,
        args.vertices,
        statistics.median(r[2] for r in full),
        max(r[2] for r in full),
        statistics.median(r[3] for r in full),
        estimate,
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[200], help="fleet sizes, run in this order")
    ap.add_argument("--vertices", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--interval-s", type=int, default=10, help="seconds between samples")
    ap.add_argument("--window-s", type=int, default=TARGET_WINDOW_S, help="metrics.window (rows age out)")
    ap.add_argument("--per-job-sample", type=int, default=10, help="jobs timed one query each")
    ap.add_argument("--per-job-ticks", type=int, default=3, help="last N ticks where per-job is timed")
    ap.add_argument(
        "--no-baselines",
        dest="baselines",
        action="store_false",
        help="skip the re-ship and per-job baselines (the oracle still runs)",
    )
    ap.add_argument(
        "--warm-up",
        type=int,
        default=30,
        help="tiny ticks first: the JVM compiles Spark's planning and scheduling paths over tens of ticks, "
        "which a daemon running for days has long done",
    )
    ap.add_argument("--master", default="local[*]")
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark.conf in the daemon's config (e.g. spark.driver.memory=4g)",
    )
    ap.add_argument(
        "--default-gc",
        dest="tune_gc",
        action="store_false",
        help="keep CPython's collector thresholds instead of the daemon's (autoscaler/gc_tuning.py)",
    )
    args = ap.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    replaced = tune_gc() if args.tune_gc else None  # as the daemon runs (flink-autoscaler run)

    t = time.perf_counter()
    spark = create_spark_session(SparkSettings(master=args.master, app_name="bench-evaluator", conf=conf))
    session_s = time.perf_counter() - t
    warmer = SparkEvaluator(spark)
    warm_s = timed(lambda: [warmer.warm_up() for _ in range(args.warm_up)])
    parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or "4"))
    gc_text = f"the daemon's {GC_THRESHOLDS}" if replaced else f"default {gc.get_threshold()}"
    print(
        f"master {args.master} {conf}; session {session_s:.1f}s, {args.warm_up} warm-up ticks {warm_s:.1f}s; "
        f"gc thresholds {gc_text}"
    )
    local = re.fullmatch(r"local\[(\d+)\]", args.master)
    cores = int(local.group(1)) if local else os.cpu_count() or 1  # the JVM's cores (remote: a guess)
    results = [run_size(spark, args, jobs, parts, cores) for jobs in args.jobs]
    spark.stop()

    print("\nsteady state (full-window ticks, medians), Spark evaluator beside the plain-Python oracle;")
    print(
        f"cpu est.: Python CPU + JVM CPU / {cores} cores, the tick on these cores with nothing else running"
    )
    print(
        f"{'fleet':>16} {'spark s':>8} {'max s':>6} {'cpu est. s':>11} {'oracle s':>9} {'oracle/spark':>13}"
        "  target (issue 13)"
    )
    for r in results:
        target = TARGETS_S.get((r.jobs, r.vertices)) if args.window_s == TARGET_WINDOW_S else None
        verdict = "-"
        if target is not None:
            verdict = f"<= {target:.1f} s: {'MET' if r.spark_s <= target else 'MISSED'}"
            verdict += f" (cpu est.: {'MET' if r.cpu_estimate_s <= target else 'MISSED'})"
        fleet = f"{r.jobs} x {r.vertices}"
        print(
            f"{fleet:>16} {r.spark_s:>8.2f} {r.spark_max_s:>6.2f} {r.cpu_estimate_s:>11.2f} "
            f"{r.oracle_s:>9.2f} {r.oracle_s / r.spark_s:>12.2f}x  {verdict}"
        )


if __name__ == "__main__":
    main()
