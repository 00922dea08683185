"""Command line: ``flink-autoscaler run | demo | simulate | check-config``.

``main(argv)`` parses the list it is given, so tests never touch sys.argv.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from autoscaler import __version__
from autoscaler.logs import configure_logging
from autoscaler.settings import ConfigError, Settings

__all__ = ["main"]

log = structlog.get_logger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"flink-autoscaler: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


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
    run.set_defaults(func=_cmd_run)

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


def _cmd_run(args: argparse.Namespace) -> int:
    settings = Settings.load(args.config)
    configure_logging(settings.log_format, settings.log_level)
    if not settings.clusters:
        raise ConfigError("no clusters configured: add a 'clusters:' list to the config file")
    return asyncio.run(_run(settings))


async def _run(settings: Settings) -> int:
    from autoscaler.daemon import Daemon
    from autoscaler.evaluate.spark import SparkEvaluator, create_spark_session
    from autoscaler.metrics import MetricsReporter, serve_metrics
    from autoscaler.plugins.configured import PluginInstances
    from autoscaler.plugins.loader import discover_plugins

    registry, _ = discover_plugins(settings.plugins_dir)
    log.info("executor_plugins", discovered=[f"{p.name} ({p.class_path}, {p.origin})" for p in registry])

    spark = await asyncio.to_thread(create_spark_session, settings.spark)
    evaluator = SparkEvaluator(spark)
    await asyncio.to_thread(evaluator.warm_up)
    metrics = MetricsReporter()
    server = serve_metrics(settings.metrics_address, metrics.registry) if settings.metrics_address else None
    daemon = Daemon(settings, evaluator=evaluator, metrics=metrics, plugins=PluginInstances(registry))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await daemon.serve(stop)
    finally:
        await daemon.aclose()
        if server is not None:
            server.shutdown()
        spark.stop()
    return 0


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
    from autoscaler.plugins.loader import discover_plugins

    settings = Settings.load(args.config)
    registry, problems = discover_plugins(settings.plugins_dir)
    for p in registry:
        print(f"{p.name:<24} {p.class_path:<50} {p.origin}")
    if not len(registry):
        print("no executor plugins installed")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _cmd_check_config(args: argparse.Namespace) -> int:
    settings = Settings.load(args.config)
    print(f"{args.config}: OK ({len(settings.clusters)} cluster(s))")
    for cluster in settings.clusters:
        options = settings.options_for(cluster)
        print(f"\ncluster {cluster.name} ({cluster.rest_url}):")
        for key, value in options.to_flink_conf().items():
            print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
