"""structlog configuration: JSON for machines, console for people; per-job context via contextvars.

Every log line, whatever its format, goes through :func:`redact_secrets` (``autoscaler.safe_text``): a
URL, a header mapping or an error text that quotes a credential is logged with it hidden. The console
format also escapes control characters (:func:`escape_for_console`), since a job name from Flink may hold
a newline or an ESC sequence; JSON needs no such step, as JSON escapes them itself (``\\n``, ``\\u001b``,
and with ``ensure_ascii`` every non-ASCII character such as U+202E). The stdlib loggers of Spark's py4j
and APScheduler print through :class:`SafeFormatter`, the same path.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, Literal

import structlog

from autoscaler.safe_text import escape_controls, for_terminal, is_headers, redact, redact_headers

__all__ = ["SafeFormatter", "configure_logging", "console_processors", "escape_for_console", "redact_secrets"]

# What structlog's ConsoleRenderer prints as it is; it prints every other value as its repr(), which
# escapes controls in strings already.
_RAW_KEYS = ("event", "timestamp", "level", "logger", "logger_name")
_BLOCK_KEYS = ("exception", "stack")  # multi-line by nature: their line breaks stay


_PLAIN = frozenset({bool, int, float})


def redact_secrets(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: hide every secret in every value of the line (``safe_text.redact``)."""
    for key, value in event_dict.items():
        if value is None or type(value) in _PLAIN:  # most values: nothing to look into
            continue
        hidden = redact_headers(value) if is_headers(key, value) else redact(value)
        if hidden is not value:
            event_dict[key] = hidden
    return event_dict


def escape_for_console(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor for the console renderer: the values it prints raw get their controls escaped."""
    for key in _RAW_KEYS:
        if isinstance(event_dict.get(key), str):
            event_dict[key] = escape_controls(event_dict[key])
    for key in _BLOCK_KEYS:
        if isinstance(event_dict.get(key), str):
            event_dict[key] = escape_controls(event_dict[key], keep_lines=True)
    return event_dict


def console_processors() -> list[structlog.types.Processor]:
    """The last steps of a console log line: redact, escape, render (also the CLI's warnings-only logs)."""
    return [redact_secrets, escape_for_console, structlog.dev.ConsoleRenderer(colors=False)]


class SafeFormatter(logging.Formatter):
    """A stdlib log line redacted and escaped like the structlog ones (a traceback keeps its lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(super().format(record), keep_lines=True)


def _not_a_stop(record: logging.LogRecord) -> bool:
    """Drops APScheduler's ``Error running job`` for a tick cancelled before it began: the scheduler's
    shutdown (the daemon stopping) cancels a task it had just started, so it never reaches
    ``Scheduler._run_tick``, which says ``tick_cancelled`` for one it began. Not an error: seen at the
    end of a demo whose stop fell on a tick's start."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, asyncio.CancelledError)


def configure_logging(fmt: Literal["console", "json"] = "console", level: str = "INFO") -> None:
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    rendering: list[structlog.types.Processor] = (
        [redact_secrets, structlog.processors.JSONRenderer()] if fmt == "json" else console_processors()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            *rendering,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Spark's py4j and APScheduler log through stdlib logging; keep them quiet unless debugging.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=max(numeric, logging.WARNING), handlers=[handler])
    for noisy in ("py4j", "apscheduler", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    # The daemon logs and counts skipped ticks itself (tick_skipped, flink_autoscaler_ticks_skipped_total).
    logging.getLogger("apscheduler.scheduler").setLevel(max(numeric, logging.ERROR))
    executors = logging.getLogger("apscheduler.executors.default")
    if _not_a_stop not in executors.filters:
        executors.addFilter(_not_a_stop)
