"""``flink-autoscaler backtest``: load the configurations, start Spark, backtest the archive, print the
report and (with ``--out``) write every job's results.

The configurations are daemon config files, as ``run`` reads them: the ``autoscaler`` options (and a
cluster's own, for the jobs of a cluster the file names) are what a replay decides with; the first
file's ``spark`` section says where the backtest runs (``--spark-master`` overrides it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoscaler.durations import parse_duration, to_ms
from autoscaler.settings import ConfigError, Settings

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["add_backtest_command", "backtest_command", "write_html"]


def add_backtest_command(sub: Any) -> None:
    """The ``backtest`` subcommand on the CLI's subparsers."""
    p = sub.add_parser(
        "backtest", help="replay the archived history through a configuration (and another), on Spark"
    )
    p.add_argument("--history", type=Path, required=True, metavar="DIR", help="the archive's directory")
    p.add_argument(
        "--config", "-c", type=Path, required=True, metavar="A.yaml", help="the configuration to replay (A)"
    )
    p.add_argument("--against", type=Path, metavar="B.yaml", help="a second configuration (B)")
    p.add_argument(
        "--cluster", action="append", default=[], metavar="NAME", help="only this cluster (repeatable)"
    )
    p.add_argument(
        "--job", action="append", default=[], metavar="NAME", help="only this job name (repeatable)"
    )
    p.add_argument(
        "--lag-target",
        type=parse_duration,
        default="30 s",
        metavar="DURATION",
        help="a source further behind than this counts as backlog above target (default 30 s)",
    )
    p.add_argument(
        "--flink-cooldown",
        type=parse_duration,
        default="30 s",
        metavar="DURATION",
        help="the clusters' adaptive-scheduler cooldown after a rescale (not archived; default Flink's 30 s)",
    )
    p.add_argument("--spark-master", help="where to run (default: the first config's spark.master)")
    p.add_argument("--out", type=Path, metavar="FILE", help="write every job's results (.parquet or .csv)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="jobs shown in detail (default 10)")
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also draw the report as a self-contained HTML page: the totals, then the --top jobs whose "
        "cost differs most between the worlds, each world's slots and backlog over time",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    configs = [args.config] if args.against is None else [args.config, args.against]
    return backtest_command(
        args.history,
        configs,
        clusters=args.cluster,
        job_names=args.job,
        lag_target=args.lag_target,
        flink_cooldown=args.flink_cooldown,
        spark_master=args.spark_master,
        out=args.out,
        top=max(0, args.top),
        html=args.html,
    )


def backtest_command(
    history: Path,
    configs: Sequence[Path],
    *,
    clusters: Sequence[str] = (),
    job_names: Sequence[str] = (),
    lag_target: timedelta = timedelta(seconds=30),
    flink_cooldown: timedelta = timedelta(seconds=30),
    spark_master: str | None = None,
    out: Path | None = None,
    top: int = 10,
    html: Path | None = None,
) -> int:
    """Run the backtest; 0 on success, 1 when there was nothing to replay (no job, or none matching
    ``--cluster`` / ``--job``), 2 when an input is unusable (said on stderr)."""
    # Imported here: the CLI's other commands start without pyarrow and PySpark.
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    from autoscaler.backtest.jobs import ACTUAL, BEST, RESULT_SCHEMA, BacktestOptions
    from autoscaler.backtest.report import render_report
    from autoscaler.backtest.spark import backtest_on_spark
    from autoscaler.evaluate.spark.session import create_spark_session

    if not (history / "samples").is_dir():
        print(f"backtest: no archive at {history} (expected {history / 'samples'})", file=sys.stderr)
        return 2
    try:
        loaded = {_label(i): Settings.load(path) for i, path in enumerate(configs)}
    except ConfigError as exc:
        print(f"backtest: {exc}", file=sys.stderr)
        return 2
    worlds = {
        ACTUAL: "actual",
        **{label: f"{label}: {p.name}" for label, p in zip(loaded, configs, strict=True)},
        BEST: "best in hindsight",
    }
    options = BacktestOptions(
        loaded,
        flink_cooldown_ms=to_ms(flink_cooldown),
        lag_target_s=lag_target.total_seconds(),
        series=html is not None,  # each world over time, for the page's charts
    )
    spark_settings = next(iter(loaded.values())).spark
    if spark_master is not None:
        spark_settings = spark_settings.model_copy(update={"master": spark_master})

    spark = create_spark_session(spark_settings)
    started = time.perf_counter()
    try:
        results = backtest_on_spark(
            spark, history, options, clusters=clusters, job_names=job_names, progress=_tell
        )
    finally:
        spark.stop()
    took = time.perf_counter() - started
    print(render_report(results, worlds, lag_target_s=options.lag_target_s, top=top, seconds=took))
    if html is not None:
        write_html(html, results, worlds, lag_target_s=options.lag_target_s, top=top, seconds=took)
        print(f"\nThe report as a page: {html}")
        results = results.select(list(RESULT_SCHEMA.names))  # --out's columns stay what they were
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".csv":
            pa_csv.write_csv(results, out)
        else:
            pq.write_table(results, out)
        print(f"\nEvery job's results: {out}")
    return 0 if results.num_rows else 1


def write_html(
    path: Path,
    results: pa.Table,
    worlds: Mapping[str, str],
    *,
    lag_target_s: float,
    top: int,
    seconds: float | None = None,
) -> None:
    """The page (``autoscaler.backtest.html``) of ``results`` (a table with the series kept) at ``path``."""
    from autoscaler.backtest.html import render_backtest_html
    from autoscaler.clock import SystemClock

    page = render_backtest_html(
        results,
        worlds,
        lag_target_s=lag_target_s,
        top=top,
        generated_ms=SystemClock().now_ms(),
        seconds=seconds,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")


def _tell(done: object) -> None:
    """A progress line on stderr, away from the report on stdout."""
    print(done, file=sys.stderr, flush=True)


def _label(index: int) -> str:
    return chr(ord("A") + index)
