"""The ``run`` command's process, put together: plugins discovered, ``/metrics`` and the health
endpoints served before Spark starts, the state stores and the archive opened, Spark up, then the
daemon until SIGTERM or SIGINT, and everything closed in reverse order.

Kept apart from :mod:`autoscaler.cli`, which parses arguments and prints: this is what a process
holds and in which order it lets go of it (how it ends whatever its plugins do is
:mod:`autoscaler.stopping`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autoscaler.settings import ConfigError, Settings
from autoscaler.start_checks import metrics_address_problem

if TYPE_CHECKING:
    from autoscaler.daemon import Daemon
    from autoscaler.metrics import MetricsReporter
    from autoscaler.plugins.loader import PluginRegistry

__all__ = ["run_daemon"]

log = structlog.get_logger(__name__)


async def run_daemon(settings: Settings, decisions_dir: Path | None = None) -> int:
    """Plugins discovered, ``/metrics`` served, then :func:`_serve` until a stop signal; 0 on a clean stop."""
    from autoscaler.health import Health, heartbeat, serve_http
    from autoscaler.metrics import MetricsReporter
    from autoscaler.plugins.evaluators import discover_evaluators
    from autoscaler.plugins.loader import discover_plugins

    registry, _ = discover_plugins(settings.plugins_dir)
    log.info("executor_plugins", discovered=[f"{p.name} ({p.class_path}, {p.origin})" for p in registry])
    evaluators, _ = discover_evaluators(settings.plugins_dir)
    log.info("custom_evaluators", discovered=[f"{p.name} ({p.class_path}, {p.origin})" for p in evaluators])

    # Served before Spark starts: /healthz answers at once, /readyz says "starting" until the first tick.
    health = Health(settings.control_loop_interval.total_seconds())
    metrics = MetricsReporter(
        health=health,
        vertex_metrics=settings.vertex_metrics,
        vertex_metrics_max_series=settings.vertex_metrics_max_series,
    )
    address = settings.metrics_address
    try:
        server = serve_http(address, metrics.registry, health) if address else None
    except OSError as exc:  # the port is taken, or the host is not this machine's
        raise ConfigError(f"cannot serve /metrics: {metrics_address_problem(address, exc)}") from exc
    beating = asyncio.create_task(heartbeat(health))  # /healthz turns 503 if the loop is blocked
    try:
        return await _serve(settings, registry, evaluators, metrics, decisions_dir)
    finally:
        beating.cancel()
        if server is not None:
            server.shutdown()


async def _serve(
    settings: Settings,
    registry: PluginRegistry,
    evaluators: PluginRegistry,
    metrics: MetricsReporter,
    decisions_dir: Path | None,
) -> int:
    """Spark up, then the daemon until SIGTERM or SIGINT."""
    from autoscaler.archive import open_archive
    from autoscaler.daemon import Daemon
    from autoscaler.decision_store import JsonDecisionDir, outcome_recorder
    from autoscaler.evaluate.spark.evaluator import start_evaluator
    from autoscaler.plugins.configured import PluginInstances
    from autoscaler.plugins.evaluators import EvaluatorInstances
    from autoscaler.state import open_stores

    archive = open_archive(settings, metrics)  # an unwritable archive_dir stops the start here
    stores = await asyncio.to_thread(open_stores, settings.state_url)  # migrates the schema
    try:
        lost = metrics.spark_lost
        evaluator = await asyncio.to_thread(
            start_evaluator, settings.spark, on_lost=lambda what: lost.labels(what).inc()
        )
        try:
            await asyncio.to_thread(evaluator.warm_up)
            metrics.report_spark(True)
            daemon = Daemon(
                settings,
                evaluator=evaluator,
                metrics=metrics,
                plugins=PluginInstances(registry),
                evaluators=EvaluatorInstances(evaluators),
                state=stores.state,
                events=stores.events,
                on_outcome=(
                    outcome_recorder(
                        JsonDecisionDir(
                            decisions_dir,
                            settings.decision_history,
                            on_write_failed=metrics.decision_write_failures.inc,
                        )
                    )
                    if decisions_dir
                    else None
                ),
                archive=archive,
            )
            await _until_stopped(daemon)
        finally:
            evaluator.stop()
    finally:
        stores.close()
    return 0


async def _until_stopped(daemon: Daemon) -> None:
    """Until SIGTERM or SIGINT, which also arm the stop's watchdog (``autoscaler.stopping``)."""
    from autoscaler.stopping import stop_on_signals

    stop = asyncio.Event()
    with stop_on_signals(stop):
        try:
            await daemon.serve(stop)
        finally:
            await daemon.aclose()
