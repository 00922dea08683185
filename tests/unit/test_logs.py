"""What the logging configuration lets through from the libraries' stdlib loggers."""

from __future__ import annotations

import asyncio
import logging

import pytest
import structlog

from autoscaler.logs import configure_logging


def _error_with(logger: logging.Logger, exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        logger.error("Error running job tick", exc_info=True)


def test_a_tick_cancelled_by_the_stop_is_no_error_but_a_failed_one_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """APScheduler's shutdown cancels a tick it had just started (the demo's end, a SIGTERM): its
    executor logged that as an error with a traceback. Any other exception still shows."""
    saved = structlog.get_config()
    try:
        configure_logging("console", "WARNING")
        executor = logging.getLogger("apscheduler.executors.default")
        with caplog.at_level(logging.WARNING):
            _error_with(executor, asyncio.CancelledError())
            _error_with(executor, ValueError("boom"))
    finally:
        structlog.configure(**saved)
    shown = [r.exc_info[0] for r in caplog.records if r.name == executor.name and r.exc_info]
    assert shown == [ValueError]
