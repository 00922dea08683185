"""Open the state store and the event sink the settings ask for, on one database, with one call."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.state.db import Database
from autoscaler.state.events import EventLog, EventStore, SqlEventSink
from autoscaler.state.sql import SqlStateStore
from autoscaler.state.store import MemoryStateStore, StateStore

__all__ = ["MEMORY_URL", "Stores", "open_stores"]

MEMORY_URL = "memory://"  # nothing survives the process: tests, the demo, a dry run


@dataclass(frozen=True, slots=True)
class Stores:
    state: StateStore
    events: EventStore
    database: Database | None = None  # None for memory

    def close(self) -> None:
        self.state.close()
        if self.database is not None:
            self.database.close()


def open_stores(url: str) -> Stores:
    """``memory://`` -> the in-memory store and log; anything else -> ``Database.open(url)`` (which
    migrates the schema) shared by a ``SqlStateStore`` and a ``SqlEventSink``."""
    if url == MEMORY_URL:
        return Stores(MemoryStateStore(), EventLog())
    db = Database.open(url)
    return Stores(SqlStateStore(db), SqlEventSink(db), db)
