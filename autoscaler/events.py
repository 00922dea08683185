"""Events: what the daemon tells operators about a job, with the reference's reasons and dedup.

An identical event (same job, reason and key) within its interval only bumps a counter, as the
reference's handlers do, so a job stuck in one state does not flood the log.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

import structlog

from autoscaler.reasons import Reason

__all__ = ["Event", "EventLog", "EventSink", "EventType"]

log = structlog.get_logger("autoscaler.events")


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Event:
    job_key: str
    reason: Reason
    type: EventType
    message: str
    ts_ms: int
    key: str = ""  # dedup key within the reason; defaults to the message
    count: int = 1


class EventSink(Protocol):
    def emit(self, event: Event, interval_ms: int = 0) -> bool:
        """Record the event; return False if it was a duplicate within ``interval_ms``."""
        ...


class EventLog:
    """In-memory event history (bounded) that also logs every new event."""

    def __init__(self, max_events: int = 10_000) -> None:
        self._events: deque[Event] = deque(maxlen=max_events)
        self._last: dict[tuple[str, Reason, str], Event] = {}
        self._lock = threading.Lock()

    def emit(self, event: Event, interval_ms: int = 0) -> bool:
        dedup = (event.job_key, event.reason, event.key or event.message)
        with self._lock:
            previous = self._last.get(dedup)
            if previous is not None and interval_ms > 0 and event.ts_ms - previous.ts_ms < interval_ms:
                self._last[dedup] = replace(previous, count=previous.count + 1)
                return False
            self._last[dedup] = event
            self._events.append(event)
        level = log.warning if event.type is EventType.WARNING else log.info
        level(
            "event", job=event.job_key, reason=str(event.reason), type=str(event.type), message=event.message
        )
        return True

    def events(self, job_key: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self._events if job_key is None or e.job_key == job_key]

    def reasons(self, job_key: str | None = None) -> list[Reason]:
        return [e.reason for e in self.events(job_key)]
