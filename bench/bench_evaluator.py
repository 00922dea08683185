"""Benchmark the evaluator on a synthetic fleet (a script, not a test).

Prints per-tick wall times and three ratios:

* batched Spark tick (``SparkEvaluator.evaluate``) vs one Spark query per job (measured on a few jobs,
  extrapolated to the fleet);
* Spark vs the plain-Python oracle (``aggregate_window`` + ``evaluate_vertices``);
* appending new rows to the window kept in Spark vs re-shipping the whole window every tick.

Run: ``.venv/bin/python bench/bench_evaluator.py --jobs 200`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from autoscaler.evaluate import SparkEvaluator, aggregate_window, create_spark_session, evaluate_vertices
from autoscaler.evaluate.spark import ROW_DDL, collect_aggregates, rows_frame
from autoscaler.evaluate.window_book import WindowBook
from autoscaler.model import Edge, JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AutoscalerOptions, SparkSettings

T0 = 1_800_000_000_000


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


def reship_tick(
    spark: Any, windows: DriverWindows, samples: Sequence[JobSample], now_ms: int, parts: int
) -> None:
    """Ship the whole window from the driver every tick (what the appended window avoids)."""
    windows.advance(samples, now_ms)
    frame = rows_frame(
        (key, e, vid, s.ts_ms, s.vertices[vid])
        for key, rows in windows.rows.items()
        for e, s in rows
        for vid in s.topology.vertices
    )
    aggregates = collect_aggregates(spark.createDataFrame(frame, ROW_DDL).coalesce(parts))
    for s in samples:
        evaluate_vertices(s, aggregates.get(s.job.key, {}), s.target.options)


def per_job_queries(evaluator: SparkEvaluator, job_keys: Sequence[str]) -> float:
    """One filtered Spark query per job over the retained window; returns seconds per job."""
    from pyspark.sql import functions as F

    window = evaluator._window  # the bench may peek: it measures the anti-pattern on the same data
    if window is None or not job_keys:
        return float("nan")
    start = time.perf_counter()
    for key in job_keys:
        collect_aggregates(window.where(F.col("job_key") == key))
    return (time.perf_counter() - start) / len(job_keys)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--vertices", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--interval-s", type=int, default=10, help="seconds between samples")
    ap.add_argument("--window-s", type=int, default=120, help="metrics.window (short so rows age out)")
    ap.add_argument("--per-job-sample", type=int, default=10, help="jobs timed one query each")
    ap.add_argument("--per-job-ticks", type=int, default=3, help="last N ticks where per-job is timed")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args(argv)

    options = AutoscalerOptions(
        metrics_window=timedelta(seconds=args.window_s), stabilization_interval=timedelta(0)
    )
    fleet = Fleet(args.jobs, args.vertices, args.interval_s * 1000, options)
    t = time.perf_counter()
    spark = create_spark_session(SparkSettings(master=args.master, app_name="bench-evaluator"))
    session_s = time.perf_counter() - t
    evaluator = SparkEvaluator(spark)
    warm_s = timed(evaluator.warm_up)
    parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or "4"))
    print(
        f"fleet: {args.jobs} jobs x {args.vertices} vertices, {args.ticks} ticks every {args.interval_s}s, "
        f"window {args.window_s}s; master {args.master}; session {session_s:.1f}s, warm-up {warm_s:.2f}s"
    )

    oracle, reship = DriverWindows(), DriverWindows()
    rows: list[tuple[int, int, float, float, float, float]] = []
    print(
        f"{'tick':>4} {'rows':>7} {'spark ms':>9} {'oracle ms':>10} {'reship ms':>10} {'per-job ms/job':>15}"
    )
    for n in range(args.ticks):
        samples, now = fleet.tick(n), T0 + n * args.interval_s * 1000
        spark_s = timed(lambda s=samples, t=now: evaluator.evaluate(s, t))
        oracle_s = timed(lambda s=samples, t=now: oracle_tick(oracle, s, t))
        reship_s = timed(lambda s=samples, t=now: reship_tick(spark, reship, s, t, parts))
        per_job_s = float("nan")
        if n >= args.ticks - args.per_job_ticks:
            per_job_s = per_job_queries(evaluator, [s.job.key for s in samples[: args.per_job_sample]])
        rows.append((n, evaluator.window_size(), spark_s, oracle_s, reship_s, per_job_s))
        assert evaluator.window_size() == oracle.row_count() == reship.row_count()
        ms = [x * 1e3 for x in (spark_s, oracle_s, reship_s, per_job_s)]
        print(f"{n:>4} {rows[-1][1]:>7} {ms[0]:>9.0f} {ms[1]:>10.1f} {ms[2]:>10.0f} {ms[3]:>15.0f}")

    late = [r for r in rows if not math.isnan(r[5])]  # ticks where one query per job was timed
    per_job = statistics.median(r[5] for r in late)
    full = [r for r in rows if r[1] == rows[-1][1]] or rows  # the window no longer grows
    print()
    for label, sel in (("all ticks but the first 2", rows[2:] or rows), ("full-window ticks", full)):
        spark_ms, oracle_ms, reship_ms = (1e3 * statistics.median(r[i] for r in sel) for i in (2, 3, 4))
        print(
            f"{label} ({len(sel)}): median spark {spark_ms:.0f} ms, oracle {oracle_ms:.1f} ms, "
            f"re-ship {reship_ms:.0f} ms"
        )
        print(f"  ratio spark / python oracle:      {spark_ms / oracle_ms:8.2f}x")
        print(f"  ratio re-ship / appended window:  {reship_ms / spark_ms:8.2f}x")
    spark_late = statistics.median(r[2] for r in late)
    print(
        f"one Spark query per job: {per_job * 1e3:.0f} ms/job -> {per_job * args.jobs:.1f} s per tick for "
        f"{args.jobs} jobs; ratio per-job / batched: {per_job * args.jobs / spark_late:.1f}x"
    )
    spark.stop()


if __name__ == "__main__":
    main()
