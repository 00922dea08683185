"""structlog configuration: JSON for machines, console for people; per-job context via contextvars."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

__all__ = ["configure_logging"]


def configure_logging(fmt: Literal["console", "json"] = "console", level: str = "INFO") -> None:
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Spark's py4j and APScheduler log through stdlib logging; keep them quiet unless debugging.
    logging.basicConfig(
        level=max(numeric, logging.WARNING), stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
    for noisy in ("py4j", "apscheduler", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    # The daemon logs and counts skipped ticks itself (tick_skipped, flink_autoscaler_ticks_skipped_total).
    logging.getLogger("apscheduler.scheduler").setLevel(max(numeric, logging.ERROR))
