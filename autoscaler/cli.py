"""Command line: ``flink-autoscaler run | status | explain | export-history | backtest | demo | simulate |
plugins | check-config``.

``main(argv)`` parses the list it is given, so tests never touch sys.argv. ``status`` and ``explain``
read what a running daemon wrote (``run --decisions-dir``), so they work beside it, in another process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autoscaler import __version__
from autoscaler.backtest.command import add_backtest_command
from autoscaler.gc_tuning import tune_gc
from autoscaler.logs import configure_logging, console_processors
from autoscaler.safe_text import for_terminal, redact_url
from autoscaler.settings import ConfigError, Settings
from autoscaler.start_checks import NO_CLUSTERS, start_checks

if TYPE_CHECKING:
    from autoscaler.decision_store import DecisionReader
    from autoscaler.explain import DecisionRecord
    from autoscaler.model import JobSample

__all__ = ["main"]

log = structlog.get_logger(__name__)

DECISIONS_DIR_ENV = "FLINK_AUTOSCALER_DECISIONS_DIR"
EXPLAIN_LAST = 5  # decisions `explain` shows unless told otherwise: the newest one and four before it


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except ConfigError as exc:
        print(for_terminal(f"flink-autoscaler: {exc}", keep_lines=True), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


READER_GONE = 141  # what a shell reports for a command ended by SIGPIPE (128 + 13)


def _reader_gone() -> int:
    """Whoever read the output stopped reading (``check-config X | head -1``): end quietly, as a Unix tool
    ended by SIGPIPE would, instead of a ``BrokenPipeError`` traceback. Python ignores SIGPIPE, so the
    write raises instead; as the ``signal`` module's "Note on SIGPIPE" advises, stdout goes to devnull so
    that the flush at the interpreter's exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return READER_GONE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="flink-autoscaler", description="Autoscaler daemon for Apache Flink jobs."
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run the daemon")
    run.add_argument(
        "--config", "-c", type=Path, help="YAML config file (env FLINK_AUTOSCALER_* wins over it)"
    )
    _decisions_dir_option(run, "write each job's last decision there, for status and explain")
    run.set_defaults(func=_cmd_run)

    status = sub.add_parser("status", help="jobs and vertices as the running daemon last saw them")
    _reader_options(status)
    status.set_defaults(func=_cmd_status)

    why = sub.add_parser("explain", help="why a job's last decisions were what they were")
    why.add_argument("job", nargs="?", help="job key (cluster/name), job name, or JobID")
    why.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write the job's timeline (load, capacity, backlog, parallelism, each decision) and its "
        "decisions as one self-contained HTML file",
    )
    why.add_argument(
        "--cluster", metavar="NAME", help="with --html and no job: every job of this cluster, one page"
    )
    why.add_argument(
        "--archive",
        type=Path,
        metavar="DIR",
        help="with --html: the history archive to draw every tick from (default: the archive_dir "
        "setting; without one, the decision records alone are drawn)",
    )
    why.add_argument(
        "--last",
        type=_positive,
        default=EXPLAIN_LAST,
        metavar="N",
        help=f"show the job's last N decisions, the newest in full (default {EXPLAIN_LAST}; at most what "
        "the daemon keeps, a run of ticks that decided the same counting as one)",
    )
    _reader_options(why)
    why.set_defaults(func=_cmd_explain)

    export = sub.add_parser(
        "export-history", help="write the state database's samples and rescales as the Parquet archive"
    )
    export.add_argument("--config", "-c", type=Path, help="the daemon's config file (for state_url)")
    export.add_argument("--out", type=Path, required=True, metavar="DIR", help="the archive's directory")
    export.add_argument(
        "--since", metavar="WHEN", help="only rows from then on: 2026-11-20, 2026-11-20T12:00 (UTC) or 7 d"
    )
    export.add_argument(
        "--cluster", action="append", default=[], metavar="NAME", help="only this cluster (repeatable)"
    )
    export.set_defaults(func=_cmd_export_history)

    add_backtest_command(sub)

    demo = sub.add_parser(
        "demo", help="run the daemon against a simulated cluster whose load steps up, then down"
    )
    demo.add_argument("--duration", type=float, default=75.0, help="wall-clock seconds to run (default 75)")
    demo.add_argument(
        "--speed", type=float, default=10.0, help="simulated seconds per wall second (default 10)"
    )
    demo.add_argument("--log-level", default="WARNING", help="daemon log level shown under the decisions")
    demo.set_defaults(func=_cmd_demo)

    sim = sub.add_parser("simulate", help="serve a simulated Flink 2.3 cluster over REST")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8081)
    sim.add_argument("--scenario", default="demo", help="built-in scenario name or a YAML file")
    sim.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    sim.add_argument("--duration", type=float, default=None, help="stop after this many wall seconds")
    sim.set_defaults(func=_cmd_simulate)

    plugins = sub.add_parser("plugins", help="list the executor plugins the daemon would discover")
    plugins.add_argument("--config", "-c", type=Path, help="config file (for plugins_dir)")
    plugins.set_defaults(func=_cmd_plugins)

    check = sub.add_parser("check-config", help="validate a config file and print the effective options")
    check.add_argument("config", type=Path)
    check.set_defaults(func=_cmd_check_config)
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of decisions, 1 or more, got {text!r}")
    return value


def _decisions_dir_option(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument(
        "--decisions-dir",
        type=Path,
        default=None,
        help=f"{text} (default: the decisions_dir setting, also ${DECISIONS_DIR_ENV})",
    )


def _reader_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", type=Path, help="the daemon's config file (for state_url)")
    _decisions_dir_option(parser, "where the daemon writes its decisions (run --decisions-dir)")


def _cmd_run(args: argparse.Namespace) -> int:
    from autoscaler.process import run_daemon
    from autoscaler.stopping import exit_process

    settings = Settings.load(args.config)
    configure_logging(settings.log_format, settings.log_level)
    for warning in settings.option_warnings():
        log.warning("option_unknown", detail=warning)
    if not settings.clusters:
        raise ConfigError(NO_CLUSTERS)
    tune_gc()  # a fleet's metric window is a million Python objects: see autoscaler/gc_tuning.py
    code = asyncio.run(run_daemon(settings, args.decisions_dir or settings.decisions_dir))
    return exit_process(code)  # the last line names plugin calls left running (autoscaler/stopping.py)


@contextlib.contextmanager
def _reader(args: argparse.Namespace) -> Iterator[DecisionReader]:
    """Decisions from the directory, states and events from the daemon's state database (read-only)."""
    from autoscaler.decision_store import open_reader

    settings = Settings.load(args.config)
    decisions_dir = _decisions_dir(args, settings)
    with _warnings_only():
        reader, notes, close = open_reader(settings.state_url, decisions_dir, settings.decision_history)
        for note in notes:
            print(for_terminal(f"note: {note}"), file=sys.stderr)
        try:
            yield reader
        finally:
            close()


def _decisions_dir(args: argparse.Namespace, settings: Settings) -> Path:
    decisions_dir = args.decisions_dir or settings.decisions_dir
    if decisions_dir is None:
        raise ConfigError(
            f"no decisions directory: pass --decisions-dir or set decisions_dir (${DECISIONS_DIR_ENV}) "
            "to the directory the daemon writes"
        )
    if not Path(decisions_dir).is_dir():
        raise ConfigError(f"no decisions at {decisions_dir}: has the daemon run with this config?")
    return Path(decisions_dir)


@contextlib.contextmanager
def _warnings_only() -> Iterator[None]:
    """status and explain print a table to stdout: library logs go to stderr, warnings only.

    The previous configuration comes back afterwards, so ``main`` called in-process changes nothing.
    """
    saved = structlog.get_config()
    structlog.configure(
        processors=[structlog.processors.add_log_level, *console_processors()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    try:
        yield
    finally:
        structlog.configure(**saved)


def _cmd_status(args: argparse.Namespace) -> int:
    from autoscaler.clock import SystemClock
    from autoscaler.explain import status_table

    with _reader(args) as reader:
        records, states, leases = reader.load_decisions(), reader.load_states(), reader.load_leases()
        last_events = {key: events[-1] for key in records if (events := reader.events(key))}
    print(status_table(records, states, SystemClock().now_ms(), last_events, leases))
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from autoscaler.clock import SystemClock
    from autoscaler.explain import explain, find_record

    if args.html is not None:
        return _explain_html(args)
    if args.job is None or args.cluster is not None or args.archive is not None:
        raise ConfigError("explain: name a job (--cluster and --archive go with --html FILE)")
    with _reader(args) as reader:
        records = reader.load_decisions()
        record = find_record(records, args.job)
        events = reader.events(record.job_key) if record is not None else []
        history = reader.history(record.job_key) if record is not None and args.last > 1 else []
    if record is None:
        known = ", ".join(sorted(records)) or "none"
        print(
            for_terminal(f"flink-autoscaler: no decision recorded for {args.job!r} (known jobs: {known})"),
            file=sys.stderr,
        )
        return 1
    earlier = [r for r in history if r.ts_ms < record.first_ms][-(args.last - 1) :] if args.last > 1 else []
    print(explain(record, now_ms=SystemClock().now_ms(), events=events, earlier=earlier))
    return 0


def _explain_html(args: argparse.Namespace) -> int:
    """``explain --html``: the timelines of one job or of a cluster's jobs, from their decision records
    and, where an archive is configured, its samples since the oldest decision kept."""
    from autoscaler.clock import SystemClock
    from autoscaler.decision_store import JsonDecisionDir
    from autoscaler.explain import find_record
    from autoscaler.explain.html import render_html
    from autoscaler.explain.timeline import job_timeline

    if (args.job is None) == (args.cluster is None):
        raise ConfigError("explain --html: name one job, or a cluster with --cluster NAME (not both)")
    settings = Settings.load(args.config)
    # The decisions alone (and the archive): the page draws no state or event, so the state database
    # is not opened (nor a note printed when there is none, as after the demo).
    reader = JsonDecisionDir(_decisions_dir(args, settings), settings.decision_history)
    with _warnings_only():
        records = reader.load_decisions()
        if args.job is not None:
            found = find_record(records, args.job)
            chosen = [found] if found is not None else []
        else:
            chosen = sorted(
                (r for r in records.values() if r.cluster == args.cluster), key=lambda r: r.job_key
            )
        histories = {r.job_key: reader.load_history(r.job_key) or [r] for r in chosen}
    if not chosen:
        what = f"job {args.job!r}" if args.job is not None else f"cluster {args.cluster!r}"
        known = ", ".join(sorted(records)) or "none"
        print(
            for_terminal(f"flink-autoscaler: no decision recorded for {what} (known jobs: {known})"),
            file=sys.stderr,
        )
        return 1
    archive = args.archive or settings.archive_dir
    samples = _archived_samples(archive, histories) if archive is not None else {}
    timelines = [job_timeline(history, samples.get(key, ())) for key, history in histories.items()]
    title = (
        f"flink-autoscaler: {args.job}"
        if args.job is not None
        else f"flink-autoscaler: cluster {args.cluster}"
    )
    page = render_html(timelines, title=title, generated_ms=SystemClock().now_ms())
    try:
        args.html.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {args.html}: {exc.strerror or exc}") from exc
    drawn = "the archive" if any(samples.values()) else "the decision records alone"
    print(
        for_terminal(
            f"wrote {args.html} ({len(page) / 1024:,.0f} KiB, {len(timelines)} job(s), from {drawn})"
        )
    )
    return 0


def _archived_samples(
    archive: Path, histories: Mapping[str, Sequence[DecisionRecord]]
) -> dict[str, list[JobSample]]:
    """Each job's archived samples from its oldest kept decision on (a month of ticks would draw a
    month; the decisions say which part of it the operator is asking about)."""
    from autoscaler.archive.reader import read_samples
    from autoscaler.settings import AutoscalerOptions

    if not archive.is_dir():
        raise ConfigError(f"no archive at {archive} (--archive or archive_dir)")
    firsts = {key: min(r.first_ms for r in history) for key, history in histories.items()}
    clusters = {r.cluster for history in histories.values() for r in history}
    names = {r.job_name for history in histories.values() for r in history}
    with _warnings_only():
        read = read_samples(archive, AutoscalerOptions(), clusters=clusters, job_names=names)
    return {
        key: [t.sample for t in read.jobs.get(key, ()) if t.sample.ts_ms >= first]
        for key, first in firsts.items()
    }


def _cmd_export_history(args: argparse.Namespace) -> int:
    from autoscaler.archive.export import export_command

    settings = Settings.load(args.config)
    with _warnings_only():
        return export_command(settings.state_url, args.out, since=args.since, clusters=args.cluster)


def _cmd_demo(args: argparse.Namespace) -> int:
    from autoscaler.demo import run_demo

    return run_demo(duration_s=args.duration, speed=args.speed, log_level=args.log_level)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from autoscaler.simulator.scenarios import SCENARIOS, load_scenario
    from autoscaler.simulator.server import run_simulator

    if args.scenario in SCENARIOS:
        cluster, jobs = SCENARIOS[args.scenario]()
    elif Path(args.scenario).is_file():
        cluster, jobs = load_scenario(Path(args.scenario))
    else:
        raise ConfigError(
            f"unknown scenario {args.scenario!r}: use one of {sorted(SCENARIOS)} or a YAML file"
        )
    run_simulator(cluster, jobs, host=args.host, port=args.port, speed=args.speed, duration_s=args.duration)
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    from autoscaler.plugins.evaluators import discover_evaluators
    from autoscaler.plugins.loader import discover_plugins

    settings = Settings.load(args.config)
    problems: list[str] = []
    for kind, discover in (
        ("executor plugins", discover_plugins),
        ("custom evaluators", discover_evaluators),
    ):
        registry, found = discover(settings.plugins_dir)
        problems += found
        print(f"{kind}:")
        for p in registry:
            print(f"  {p.name:<24} {p.class_path:<50} {p.origin}")
        if not len(registry):
            print("  none installed")
    for problem in dict.fromkeys(problems):
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _cmd_check_config(args: argparse.Namespace) -> int:
    """Every line printed through ``for_terminal``: the URL without its secrets, names and values with
    their controls escaped (a header's value is never printed)."""
    settings = Settings.load(args.config)
    checks = start_checks(settings)  # what run would refuse at start (autoscaler/start_checks.py)
    if checks.problems:
        raise ConfigError("\n  ".join([f"{args.config}: run would not start:", *checks.problems]))
    for warning in checks.warnings:
        print(for_terminal(f"warning: {warning}"), file=sys.stderr)
    print(for_terminal(f"{args.config}: OK ({len(settings.clusters)} cluster(s))"))
    for warning in settings.option_warnings():
        print(for_terminal(f"warning: {warning}"), file=sys.stderr)
    for cluster in settings.clusters:
        options = settings.options_for(cluster)
        print()
        print(for_terminal(f"cluster {cluster.name} ({redact_url(cluster.rest_url)}):"))
        for key, value in options.to_flink_conf().items():
            print(for_terminal(f"  {key}: {value}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
