"""What the daemon remembers per job between ticks, and where it keeps it.

- ``model``: the frozen values (``JobState`` and its parts), loaded and saved whole per job.
- ``store``: the ``StateStore`` interface, the in-memory store and the metric-window rows.
- ``sql``: the durable store on SQLAlchemy Core (SQLite file by default, PostgreSQL by URL), with
  ``db`` (engine, transactions, Alembic migrations run at start-up), ``tables`` and ``codec`` (JSON with a
  schema version per row).

``open_stores(url)`` (``stores``) gives the daemon both its state store and its event sink on one
database. It, ``SqlStateStore`` and ``Database`` are imported on first use, so code that only needs the
values does not load SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from autoscaler.state.model import (
    DelayedScaleDown,
    JobState,
    PendingRescale,
    Recommendation,
    ScalingRecord,
    ScalingVerification,
    VertexVerification,
)
from autoscaler.state.store import (
    CustomWindowRow,
    HistoryChunk,
    HistoryWrite,
    MemoryStateStore,
    StateStore,
    WindowRow,
    WindowTick,
    custom_window_rows,
    group_window,
    window_rows,
)

if TYPE_CHECKING:
    from autoscaler.state.db import Database
    from autoscaler.state.sql import SqlStateStore
    from autoscaler.state.stores import Stores

__all__ = [
    "CustomWindowRow",
    "Database",
    "DelayedScaleDown",
    "HistoryChunk",
    "HistoryWrite",
    "JobState",
    "MemoryStateStore",
    "PendingRescale",
    "Recommendation",
    "ScalingRecord",
    "ScalingVerification",
    "SqlStateStore",
    "StateStore",
    "Stores",
    "VertexVerification",
    "WindowRow",
    "WindowTick",
    "custom_window_rows",
    "group_window",
    "open_database",
    "open_stores",
    "window_rows",
]


def open_database(url: str) -> Database:
    """Connect to ``url`` and migrate its schema to the newest revision (see ``autoscaler.state.db``)."""
    from autoscaler.state.db import Database

    return Database.open(url)


def open_stores(url: str) -> Stores:
    """The state store and event sink for ``url`` (``memory://`` or a database URL), see ``stores``."""
    from autoscaler.state.stores import open_stores

    return open_stores(url)


_LAZY = {
    "Database": "autoscaler.state.db",
    "SqlStateStore": "autoscaler.state.sql",
    "Stores": "autoscaler.state.stores",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
