"""Where ``flink-autoscaler status`` and ``explain`` read from: one small interface over three sources.

:class:`DecisionReader` is all the CLI needs: the last :class:`~autoscaler.explain.DecisionRecord` per
job, the jobs' states, and a job's recent events. :class:`StoreReader` builds it from

- the decisions: :class:`JsonDecisionDir`, one JSON file per job that the running daemon replaces
  atomically after each of the job's decisions (so another process always reads a whole file), or
  :class:`MemoryDecisions` in the daemon's own process;
- the state store and event sink of ``autoscaler.state`` (the daemon writes states at the end of each
  tick, so these are read from the store, never copied into the decision files).

:func:`open_reader` opens that trio the way the CLI needs it: the state database read-only (no
migration, no new file), and without it when ``state_url`` is ``memory://`` (nothing outlives the
daemon's process then, so only the decisions can be shown).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import structlog

from autoscaler.events import Event
from autoscaler.explain import DecisionRecord, record_from_outcome
from autoscaler.state import JobState
from autoscaler.state.store import Lease

if TYPE_CHECKING:
    from autoscaler.outcome import JobOutcome

__all__ = [
    "DecisionReader",
    "DecisionSource",
    "DecisionWriter",
    "EventSource",
    "JsonDecisionDir",
    "MemoryDecisions",
    "StateSource",
    "StoreReader",
    "open_reader",
    "outcome_recorder",
]

log = structlog.get_logger(__name__)


class DecisionReader(Protocol):
    """What the CLI reads; every call returns a fresh snapshot (the daemon keeps writing)."""

    def load_decisions(self) -> dict[str, DecisionRecord]:
        """The last decision of every job, by job key."""
        ...

    def load_states(self) -> dict[str, JobState]:
        """The state of every job, by job key."""
        ...

    def events(self, job_key: str) -> list[Event]:
        """The job's recent events, oldest first."""
        ...

    def load_leases(self) -> list[Lease]:
        """Which daemon acts on which cluster."""
        ...


class DecisionWriter(Protocol):
    def save_decision(self, record: DecisionRecord) -> None:
        """Replace the job's last decision."""
        ...


class DecisionSource(Protocol):
    def load_decisions(self) -> dict[str, DecisionRecord]: ...


class StateSource(Protocol):
    """The read half of ``autoscaler.state.StateStore``."""

    def keys(self) -> Iterable[str]: ...

    def load_many(self, job_keys: Iterable[str]) -> dict[str, JobState]: ...

    def leases(self) -> list[Lease]: ...


class EventSource(Protocol):
    """The query half of ``autoscaler.events.EventStore`` (the in-memory log and the SQL sink)."""

    def events(
        self, job_key: str | None = None, *, since_ms: int | None = None, limit: int | None = None
    ) -> list[Event]: ...


def outcome_recorder(writer: DecisionWriter) -> Callable[[JobOutcome], None]:
    """A ``Daemon(on_outcome=...)`` callback: every job's outcome becomes its last decision record."""

    def save(outcome: JobOutcome) -> None:
        writer.save_decision(record_from_outcome(outcome))

    return save


class StoreReader:
    """A :class:`DecisionReader` over decisions, a state store and an event source (each optional
    but the decisions: a missing one reads as empty)."""

    def __init__(
        self,
        decisions: DecisionSource,
        state: StateSource | None = None,
        events: EventSource | None = None,
        *,
        max_events: int = 20,
    ) -> None:
        self._decisions, self._state, self._events = decisions, state, events
        self._max_events = max_events

    def load_decisions(self) -> dict[str, DecisionRecord]:
        return self._decisions.load_decisions()

    def load_states(self) -> dict[str, JobState]:
        if self._state is None:
            return {}
        return self._state.load_many(list(self._state.keys()))

    def load_leases(self) -> list[Lease]:
        return [] if self._state is None else self._state.leases()

    def events(self, job_key: str) -> list[Event]:
        if self._events is None:
            return []
        return self._events.events(job_key, limit=self._max_events)


class MemoryDecisions:
    """The last decision per job, in this process (the daemon's own view, tests)."""

    def __init__(self) -> None:
        self._records: dict[str, DecisionRecord] = {}
        self._lock = threading.Lock()

    def save_decision(self, record: DecisionRecord) -> None:
        with self._lock:
            self._records[record.job_key] = record

    def load_decisions(self) -> dict[str, DecisionRecord]:
        with self._lock:
            return dict(self._records)


class JsonDecisionDir:
    """One ``<job key>.json`` per job in ``directory`` (the key percent-encoded, it holds a '/')."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def save_decision(self, record: DecisionRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"{quote(record.job_key, safe='')}.json"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(record.to_json())
            os.replace(tmp, target)  # readers see the old file or the new one, never half of one
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def load_decisions(self) -> dict[str, DecisionRecord]:
        if not self.directory.is_dir():
            raise FileNotFoundError(f"no decisions directory at {self.directory}")
        out = {}
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = DecisionRecord.from_json(path.read_text(encoding="utf-8"))
            except FileNotFoundError:  # replaced between glob and read: the next call sees the new one
                continue
            except (OSError, TypeError, ValueError) as exc:  # a newer schema, or not ours: skip, not fail
                log.warning("decision_file_unreadable", path=str(path), error=str(exc))
                continue
            out[record.job_key] = record
        return out


def open_reader(
    state_url: str, decisions_dir: str | Path
) -> tuple[StoreReader, list[str], Callable[[], None]]:
    """The CLI's reader: decisions from ``decisions_dir``, states and events from the state database.

    Returns the reader, notes for the operator on what cannot be shown, and a function that closes the
    database. The database is opened without migrating and never created: a reader must not change it.
    """
    decisions = JsonDecisionDir(decisions_dir)
    state, events, close, notes = _open_state(state_url)
    return StoreReader(decisions, state, events), notes, close


def _open_state(
    url: str,
) -> tuple[StateSource | None, EventSource | None, Callable[[], None], list[str]]:
    import sqlalchemy as sa

    from autoscaler.events import SqlEventSink
    from autoscaler.state.db import Database, current_revision
    from autoscaler.state.sql import SqlStateStore
    from autoscaler.state.stores import MEMORY_URL

    def nothing() -> None:
        return None

    if url == MEMORY_URL:
        note = "state_url is memory://: pending rescales and events live only inside the daemon"
        return None, None, nothing, [note]
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        path = Path(parsed.database).expanduser()
        if not path.exists():
            return None, None, nothing, [f"no state database at {path} (state_url {url!r})"]
    db = Database.open(url, upgrade=False)
    try:
        revision = current_revision(db.engine)
    except Exception as exc:  # unreachable server, wrong credentials: show what the files hold
        db.close()
        return None, None, nothing, [f"cannot read the state database: {exc}"]
    if revision is None:
        db.close()
        return None, None, nothing, ["the state database has no schema yet (has the daemon started?)"]
    return SqlStateStore(db), SqlEventSink(db), db.close, []
