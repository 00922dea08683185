"""Events: what the daemon tells operators about a job, with the reference's reasons and dedup.

An identical event within its interval only bumps a counter, as the reference's handlers do, so a job
stuck in one state does not flood the log. Identical means the same dedup key: a hash of (job key,
type, reason, message key or else the message). The interval is counted from the row's first
occurrence, so a condition that lasts gets one new row per interval with the repeats counted in it.

Two sinks with one contract (``tests/unit/state/test_store.py``): ``EventLog`` in memory (tests, demo)
and ``SqlEventSink`` in the state database, which keeps events across restarts, serves the CLI's
queries and forgets rows after a retention period (``cleanup``, meant to run once a day). Both log
every new event through structlog; repeats are logged at debug level only.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol, cast, runtime_checkable

import sqlalchemy as sa
import structlog

from autoscaler.reasons import Reason
from autoscaler.state.db import Database
from autoscaler.state.tables import EVENTS

__all__ = ["Event", "EventLog", "EventSink", "EventStore", "EventType", "SqlEventSink", "dedup_key"]

log = structlog.get_logger("autoscaler.state.events")


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


def dedup_key(job_key: str, type_: EventType | str, reason: Reason | str, key: str) -> str:
    """The reference's event key: a hash of (job key, type, reason, message key or message)."""
    text = "\x1f".join((job_key, str(type_), str(reason), key))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Event:
    job_key: str
    reason: Reason
    type: EventType
    message: str  # of the latest occurrence counted in this event
    ts_ms: int  # first occurrence
    key: str = ""  # dedup key within the reason; defaults to the message
    count: int = 1  # occurrences: the first plus the repeats within the interval
    last_ms: int | None = None  # latest occurrence when count > 1

    @property
    def dedup_key(self) -> str:
        return dedup_key(self.job_key, self.type, self.reason, self.key or self.message)

    @property
    def last_seen_ms(self) -> int:
        return self.ts_ms if self.last_ms is None else self.last_ms


class EventSink(Protocol):
    def emit(self, event: Event, interval_ms: int = 0) -> bool:
        """Record the event; return False if it was a repeat within ``interval_ms`` (only counted).

        ``interval_ms <= 0`` never deduplicates (the reference's enabled scaling reports).
        """
        ...


@runtime_checkable
class EventStore(EventSink, Protocol):
    """A sink that can also be queried (the CLI) and cleaned up (the daemon, once a day)."""

    def events(
        self, job_key: str | None = None, *, since_ms: int | None = None, limit: int | None = None
    ) -> list[Event]:
        """Events oldest first; ``since_ms`` keeps those seen at or after it, ``limit`` the newest N."""
        ...

    def reasons(self, job_key: str | None = None) -> list[Reason]: ...

    def cleanup(self, now_ms: int, retention_ms: int, *, batch_size: int = 2000) -> int:
        """Delete events last seen before ``now_ms - retention_ms``; ``retention_ms <= 0`` keeps all."""
        ...


def _log_event(event: Event, *, repeat: bool = False) -> None:
    fields = {"job": event.job_key, "reason": str(event.reason), "type": str(event.type)}
    if repeat:
        log.debug("event_repeated", **fields, count=event.count)
        return
    level = log.warning if event.type is EventType.WARNING else log.info
    level("event", **fields, message=event.message)


def _is_repeat(previous_ts_ms: int, event: Event, interval_ms: int) -> bool:
    return interval_ms > 0 and event.ts_ms - previous_ts_ms < interval_ms


class EventLog:
    """In-memory event history (bounded: the oldest events go first) that also logs every new event."""

    def __init__(self, max_events: int = 10_000) -> None:
        self._events: OrderedDict[int, Event] = OrderedDict()
        self._latest: dict[str, int] = {}  # dedup key -> id of its newest event
        self._next_id = 0
        self._max_events = max_events
        self._lock = threading.Lock()

    def emit(self, event: Event, interval_ms: int = 0) -> bool:
        key = event.dedup_key
        with self._lock:
            latest = self._latest.get(key)
            previous = self._events.get(latest) if latest is not None else None
            if latest is not None and previous is not None and _is_repeat(previous.ts_ms, event, interval_ms):
                bumped = replace(
                    previous, count=previous.count + 1, last_ms=event.ts_ms, message=event.message
                )
                self._events[latest] = bumped
            else:
                bumped = None
                self._events[self._next_id] = event
                self._latest[key] = self._next_id
                self._next_id += 1
                while len(self._events) > self._max_events:
                    self._drop_oldest()
        if bumped is not None:
            _log_event(bumped, repeat=True)
            return False
        _log_event(event)
        return True

    def _drop_oldest(self) -> None:
        old_id, old = self._events.popitem(last=False)
        if self._latest.get(old.dedup_key) == old_id:
            del self._latest[old.dedup_key]

    def events(
        self, job_key: str | None = None, *, since_ms: int | None = None, limit: int | None = None
    ) -> list[Event]:
        with self._lock:
            found = [
                e
                for e in self._events.values()
                if (job_key is None or e.job_key == job_key)
                and (since_ms is None or e.last_seen_ms >= since_ms)
            ]
        return found if limit is None else found[max(0, len(found) - limit) :]

    def reasons(self, job_key: str | None = None) -> list[Reason]:
        return [e.reason for e in self.events(job_key)]

    def cleanup(self, now_ms: int, retention_ms: int, *, batch_size: int = 2000) -> int:
        if retention_ms <= 0:
            return 0
        cutoff = now_ms - retention_ms
        with self._lock:
            old = [i for i, e in self._events.items() if e.last_seen_ms < cutoff]
            for i in old:
                event = self._events.pop(i)
                if self._latest.get(event.dedup_key) == i:
                    del self._latest[event.dedup_key]
        return len(old)


class SqlEventSink:
    """Events in the ``autoscaler_events`` table of the state database (``autoscaler.state.db``).

    One row per event; a repeat within its interval updates the newest row with its dedup key (count,
    latest time and message) instead of inserting. Emitting inside the state store's ``transaction()``
    (same ``Database``, same thread) commits with the tick; outside, each emit is its own transaction.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def emit(self, event: Event, interval_ms: int = 0) -> bool:
        key = event.dedup_key
        try:
            with self.db.write() as conn:
                previous = None
                if interval_ms > 0:
                    previous = conn.execute(
                        sa.select(EVENTS.c.id, EVENTS.c.ts_ms, EVENTS.c.count)
                        .where(EVENTS.c.dedup_key == key)
                        .order_by(EVENTS.c.ts_ms.desc(), EVENTS.c.id.desc())
                        .limit(1)
                    ).first()
                if previous is not None and _is_repeat(previous.ts_ms, event, interval_ms):
                    conn.execute(
                        sa.update(EVENTS)
                        .where(EVENTS.c.id == previous.id)
                        .values(count=EVENTS.c.count + 1, last_ms=event.ts_ms, message=event.message)
                    )
                    repeat_count = previous.count + 1
                else:
                    repeat_count = 0
                    conn.execute(
                        sa.insert(EVENTS).values(
                            job_key=event.job_key,
                            type=str(event.type),
                            reason=str(event.reason),
                            message=event.message,
                            message_key=event.key,
                            dedup_key=key,
                            ts_ms=event.ts_ms,
                            last_ms=event.ts_ms,
                            count=event.count,
                        )
                    )
        except Exception:
            _log_event(event)  # operators still see it in the log; the caller reports the failure
            raise
        if repeat_count:
            _log_event(replace(event, count=repeat_count), repeat=True)
            return False
        _log_event(event)
        return True

    def events(
        self, job_key: str | None = None, *, since_ms: int | None = None, limit: int | None = None
    ) -> list[Event]:
        query = sa.select(EVENTS).order_by(EVENTS.c.id.desc())
        if job_key is not None:
            query = query.where(EVENTS.c.job_key == job_key)
        if since_ms is not None:
            query = query.where(EVENTS.c.last_ms >= since_ms)
        if limit is not None:
            query = query.limit(limit)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [_event_from_row(row) for row in reversed(rows)]

    def reasons(self, job_key: str | None = None) -> list[Reason]:
        return [e.reason for e in self.events(job_key)]

    def cleanup(self, now_ms: int, retention_ms: int, *, batch_size: int = 2000, pause_s: float = 0.0) -> int:
        """Delete events last seen before ``now_ms - retention_ms``, ``batch_size`` rows per transaction
        (``pause_s`` between batches), so a large backlog never holds a long lock."""
        if retention_ms <= 0:
            return 0
        cutoff = now_ms - retention_ms
        batch = (
            sa.select(EVENTS.c.id).where(EVENTS.c.last_ms < cutoff).order_by(EVENTS.c.id).limit(batch_size)
        )
        deleted = 0
        while True:
            with self.db.write() as conn:
                n = conn.execute(sa.delete(EVENTS).where(EVENTS.c.id.in_(batch))).rowcount
            deleted += n
            if n < batch_size:
                break
            if pause_s > 0:
                time.sleep(pause_s)
        return deleted  # the caller logs it (schedule.cleanup): one line per cleanup, whatever the sink


def _event_from_row(row: Any) -> Event:
    try:
        reason = Reason(row.reason)
    except ValueError:  # written by a newer daemon: keep the text rather than hide the event
        reason = cast(Reason, row.reason)
    try:
        type_ = EventType(row.type)
    except ValueError:
        type_ = cast(EventType, row.type)
    return Event(
        job_key=row.job_key,
        reason=reason,
        type=type_,
        message=row.message,
        ts_ms=row.ts_ms,
        key=row.message_key,
        count=row.count,
        last_ms=None if row.count <= 1 else row.last_ms,
    )
