"""The backtest at fleet scale: a synthetic history of N jobs x V vertices x H hours, backtested on Spark.

``python bench/bench_backtest.py --jobs 1000 --vertices 10 --hours 24`` generates the history
(``bench/history_gen.py``: 10 s samples, a controller's rescales in the decisions table), then runs the
backtest as ``flink-autoscaler backtest`` does (``backtest_on_spark``: the jobs listed, one Spark task
per job, which reads its own files) through one configuration (A: the defaults), on ``--spark-master``
(``local[2]``: 2 cores; ``spark://host:7077`` runs the same plan on a standalone cluster). Beside it,
from the same run, the baseline: the same backtest of the first ``--baseline-jobs`` jobs in this one
Python process, without Spark. Figures:

* **job-ticks / s**: ticks of history replayed per second of wall time, each tick once for what actually
  happened and once through A (the replay is the daemon itself on a fake clock: evaluate, decide, gates,
  realize, for every tick);
* **CPU ms / job-tick** (baseline only): what one replayed tick costs one core;
* **parallel efficiency**: Spark's rate over (baseline rate x the master's cores).

With ``--doc`` it writes the table to ``docs/performance.md`` ("Backtest") with the command and date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from doc_section import write_section  # noqa: E402
from history_gen import generate  # noqa: E402

from autoscaler.archive.layout import PARTITIONING  # noqa: E402
from autoscaler.backtest.jobs import ACTUAL, BacktestOptions, backtest_tables  # noqa: E402
from autoscaler.backtest.report import render_report  # noqa: E402
from autoscaler.evaluate.spark.session import local_cores  # noqa: E402
from autoscaler.logs import configure_logging  # noqa: E402
from autoscaler.settings import Settings, SparkSettings  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
SECTION = "## Backtest"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--vertices", type=int, default=10)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--sample-interval", type=float, default=10.0)
    ap.add_argument("--history", type=Path, help="backtest this archive instead of generating one")
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra spark.* setting")
    ap.add_argument("--baseline-jobs", type=int, default=8, help="jobs the one-process baseline replays")
    ap.add_argument("--doc", action="store_true", help="write the table to docs/performance.md")
    args = ap.parse_args()
    configure_logging(level="WARNING")

    scratch = None
    if args.history is not None:
        root, made = args.history, None
    else:
        root = args.keep or Path(scratch := tempfile.mkdtemp(prefix="backtest-bench-"))
        started = time.perf_counter()
        made = generate(
            root,
            jobs=args.jobs,
            vertices=args.vertices,
            hours=args.hours,
            sample_interval_s=args.sample_interval,
        )
        made = f"{made}, generated in {time.perf_counter() - started:.0f} s"
        print(f"history: {made}")
    try:
        return _bench(root, args, made)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _bench(root: Path, args: argparse.Namespace, made: object) -> int:
    from autoscaler.backtest.spark import backtest_on_spark
    from autoscaler.evaluate.spark.session import create_spark_session

    config = Settings(clusters=[], metrics_address="", autoscaler={"job.autoscaler.enabled": "true"})
    options = BacktestOptions({"A": config})

    # Baseline: the first jobs, replayed here, one process, no Spark.
    every = sorted(_names(root))  # spread over the fleet: jobs differ in what a replay costs
    names = every[:: max(1, len(every) // max(1, args.baseline_jobs))][: args.baseline_jobs]
    samples = _table(root, "samples", names)
    decisions = _table(root, "decisions", names)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    base = backtest_tables(samples, decisions, options)
    base_cpu, base_wall = time.process_time() - cpu0, time.perf_counter() - wall0
    base_ticks = sum(r["ticks"] for r in base.to_pylist() if r["world"] == ACTUAL)

    conf = dict(kv.split("=", 1) for kv in args.conf)
    spark = create_spark_session(SparkSettings(master=args.spark_master, conf=conf))
    try:
        wall0 = time.perf_counter()
        results = backtest_on_spark(spark, root, options)
        wall = time.perf_counter() - wall0
    finally:
        spark.stop()
    rows = results.to_pylist()
    ticks = sum(r["ticks"] for r in rows if r["world"] == ACTUAL)
    jobs = len({(r["cluster"], r["job_name"]) for r in rows})
    errors = sum(1 for r in rows if r["error"] is not None)
    cores = local_cores(args.spark_master) if args.spark_master.strip().startswith("local") else None
    base_rate, rate = base_ticks / base_wall, ticks / wall
    efficiency = f"{rate / (base_rate * cores):.2f}" if cores else "n/a"
    table = "\n".join(
        [
            "| run | jobs | job-ticks | wall s | job-ticks / s | CPU ms / job-tick | parallel efficiency |",
            "|---|---|---|---|---|---|---|",
            f"| baseline: one Python process, no Spark | {len(names):,} | {base_ticks:,} | {base_wall:.1f} "
            f"| {base_rate:,.0f} | {base_cpu / base_ticks * 1000:.2f} | 1 core |",
            f"| Spark `{args.spark_master}` | {jobs:,} | {ticks:,} | {wall:.1f} | {rate:,.0f} "
            f"| | {efficiency} |",
        ]
    )
    print(table)
    print(f"replays failed: {errors}")
    print()
    print(
        render_report(results, {ACTUAL: "actual", "A": "A: defaults"}, lag_target_s=30.0, top=3, seconds=wall)
    )
    if args.doc:
        command = "python bench/bench_backtest.py " + " ".join(sys.argv[1:])
        _write_doc(command, table, made, rate, ticks)
    return 0


def _names(root: Path) -> list[str]:
    """Every job name, a file at a time (a day of 1,000 jobs holds 86 million rows)."""
    dataset = ds.dataset(root / "decisions", format="parquet", partitioning=PARTITIONING)
    names: set[str] = set()
    for fragment in dataset.get_fragments():
        names.update(fragment.to_table(columns=["job_name"]).column("job_name").unique().to_pylist())
    return sorted(names)


def _table(root: Path, name: str, job_names: list[str]):
    import pyarrow.compute as pc

    dataset = ds.dataset(root / name, format="parquet", partitioning=PARTITIONING)
    return dataset.to_table(filter=pc.field("job_name").isin(job_names))


def _write_doc(command: str, table: str, made: object, rate: float, ticks: int) -> None:
    full = 1000 * 8640  # job-ticks of 1,000 jobs x 1 day at 10 s
    scale = (
        f"The Spark run is the whole backtest: {ticks / rate / 3600:.2f} h of wall time for "
        f"{ticks / 1e6:.2f} M job-ticks, from listing the jobs to collecting their results.\n"
        if ticks >= full
        else f"At this rate, 1,000 jobs x 1 day at 10 s ({full / 1e6:.2f} M job-ticks) would take "
        f"{full / rate / 3600:.1f} h on the same cores.\n"
    )
    section = (
        f"{SECTION}\n\n**{dt.date.today().isoformat()}.** `{command}` (history: {made}):\n\n{table}\n\n"
        "Each job-tick is scored as it actually ran and replayed through configuration A (the daemon's "
        f"evaluate, decide and realize code on a fake clock). {scale}"
    )
    write_section(DOC, SECTION, section)


if __name__ == "__main__":
    raise SystemExit(main())
