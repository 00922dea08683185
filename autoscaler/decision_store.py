"""Where ``flink-autoscaler status`` and ``explain`` read from: one small interface over three sources.

:class:`DecisionReader` is all the CLI needs: the last :class:`~autoscaler.explain.DecisionRecord` per
job, a job's last decisions, the jobs' states, and a job's recent events. :class:`StoreReader` builds
it from

- the decisions: :class:`JsonDecisionDir`, per job a JSON file with its newest decision that the running
  daemon replaces atomically after each of the job's decisions (so another process always reads a
  whole file) and a file with the decisions before it, or :class:`MemoryDecisions` in the daemon's own
  process. Both keep a job's last ``keep`` decisions (:data:`DECISION_HISTORY` by default), a run of
  ticks that decided the same counting as one (``autoscaler.explain.add_decision``);
- the state store and event sink of ``autoscaler.state`` (the daemon writes states at the end of each
  tick, so these are read from the store, never copied into the decision files).

:func:`open_reader` opens that trio the way the CLI needs it: the state database read-only (no
migration, no new file), and without it when ``state_url`` is ``memory://`` (nothing outlives the
daemon's process then, so only the decisions can be shown).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import structlog

from autoscaler.explain import DecisionRecord, add_decision, record_from_outcome
from autoscaler.settings.daemon_settings import DECISION_HISTORY, MAX_DECISION_HISTORY
from autoscaler.state import JobState
from autoscaler.state.events import Event
from autoscaler.state.store import Lease

if TYPE_CHECKING:
    from autoscaler.tick.steps import JobOutcome

__all__ = [
    "DECISION_HISTORY",
    "DecisionReader",
    "DecisionSource",
    "DecisionWriter",
    "EventSource",
    "JsonDecisionDir",
    "MemoryDecisions",
    "StateSource",
    "StoreReader",
    "file_stem",
    "open_reader",
    "outcome_recorder",
]

log = structlog.get_logger(__name__)

# Decisions kept per job: the daemon's ``decision_history`` setting (20 by default, at most 1000).
_LATEST, _EARLIER = ".json", ".history.jsonl"
# Characters of a file name's stem (the job's part of it). Common filesystems allow 255 bytes per name;
# the longest name written is the temporary ".<stem>.history.jsonl.<pid>.tmp", 27 more (a 7-digit pid).
_MAX_STEM = 200
_DIGEST_HEX = 32


class DecisionReader(Protocol):
    """What the CLI reads; every call returns a fresh snapshot (the daemon keeps writing)."""

    def load_decisions(self) -> dict[str, DecisionRecord]:
        """The last decision of every job, by job key."""
        ...

    def history(self, job_key: str) -> list[DecisionRecord]:
        """The job's last decisions, oldest first (the newest is its ``load_decisions`` record)."""
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
        """Add the job's newest decision (it extends the newest kept one when it decided the same)."""
        ...


class DecisionSource(Protocol):
    def load_decisions(self) -> dict[str, DecisionRecord]: ...

    def load_history(self, job_key: str) -> list[DecisionRecord]: ...


class StateSource(Protocol):
    """The read half of ``autoscaler.state.StateStore``."""

    def keys(self) -> Iterable[str]: ...

    def load_many(self, job_keys: Iterable[str]) -> dict[str, JobState]: ...

    def leases(self) -> list[Lease]: ...


class EventSource(Protocol):
    """The query half of ``autoscaler.state.events.EventStore`` (the in-memory log and the SQL sink)."""

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

    def history(self, job_key: str) -> list[DecisionRecord]:
        return self._decisions.load_history(job_key)

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


def _checked(keep: int) -> int:
    if not 1 <= keep <= MAX_DECISION_HISTORY:
        raise ValueError(f"decisions to keep per job must be 1..{MAX_DECISION_HISTORY}, got {keep}")
    return keep


class MemoryDecisions:
    """A job's last ``keep`` decisions, in this process (the daemon's own view, tests)."""

    def __init__(self, keep: int = DECISION_HISTORY) -> None:
        self.keep = _checked(keep)
        self._records: dict[str, tuple[DecisionRecord, ...]] = {}
        self._lock = threading.Lock()

    def save_decision(self, record: DecisionRecord) -> None:
        with self._lock:
            key = record.job_key
            self._records[key] = add_decision(self._records.get(key, ()), record, self.keep)

    def load_decisions(self) -> dict[str, DecisionRecord]:
        with self._lock:
            return {key: records[-1] for key, records in self._records.items()}

    def load_history(self, job_key: str) -> list[DecisionRecord]:
        with self._lock:
            return list(self._records.get(job_key, ()))


def file_stem(job_key: str) -> str:
    """The start of the job's file names in a decisions directory: one name, never a path.

    The key percent-encoded, so that no character of it makes a path or is refused by a filesystem
    ('/', NUL, '..' and '%' itself become ``%2F``, ``%00``, ``..``, ``%25``: a name, never a directory).
    Beyond :data:`_MAX_STEM` characters, which a 10,000-character job name reaches and which the
    filesystem would refuse, it is the encoded key's first characters (readable in a listing), ``+``
    and 32 hex digits of the key's SHA-256. Percent-encoding never leaves a ``+`` (it becomes ``%2B``),
    so a hashed stem cannot be another job's plain one. Readers find the file either way: ``status``
    reads every file's own ``job_key``, ``explain``'s history is found through this function again.
    """
    encoded = quote(job_key, safe="")
    if len(encoded) <= _MAX_STEM:
        return encoded
    prefix = encoded[: _MAX_STEM - _DIGEST_HEX - 1]
    escape = prefix.rfind("%", len(prefix) - 2)  # never end inside a %XX escape
    if escape >= 0:
        prefix = prefix[:escape]
    digest = hashlib.sha256(job_key.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    return f"{prefix}+{digest}"


class JsonDecisionDir:
    """Per job in ``directory`` (named by :func:`file_stem` of its key): ``<stem>.json``, the newest
    decision, rewritten after each of the job's ticks as it always was (so a reader of an older version
    still reads it), and ``<key>.history.jsonl``, the kept decisions before it, one JSON line each,
    rewritten only when they change (a new decision, a verification, pruning to ``keep``).

    Each file is replaced whole. The earlier decisions are written first, so a reader between the two
    writes may find the newest decision in both: it takes the earlier ones only up to the newest's
    start. A directory written before the history file existed reads as one decision per job.

    A write that fails (a full or read-only disk, a directory taken away) costs the tick nothing: the
    decisions stay kept in this process and are all written at the job's next write that succeeds. It
    is logged once per job (``decision_write_failed``, then ``decision_write_recovered``), not at every
    tick, and each failed write is counted through ``on_write_failed``.
    """

    def __init__(
        self,
        directory: str | Path,
        keep: int = DECISION_HISTORY,
        *,
        on_write_failed: Callable[[], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.keep = _checked(keep)
        self._on_write_failed = on_write_failed
        self._kept: dict[str, tuple[DecisionRecord, ...]] = {}  # what this process wrote, per job
        self._failing: set[str] = set()  # jobs whose last write failed (logged once)
        self._lock = threading.Lock()

    def save_decision(self, record: DecisionRecord) -> None:
        key = record.job_key
        with self._lock:
            before = self._kept.get(key)
            if before is None:  # first decision of the job in this process: continue what is on disk
                before = tuple(self.load_history(key)) if self.directory.is_dir() else ()
            after = add_decision(before, record, self.keep)
            self._kept[key] = after
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                if after[:-1] != before[:-1] or key in self._failing:
                    self._replace(self._path(key, _EARLIER), "".join(f"{r.to_json()}\n" for r in after[:-1]))
                self._replace(self._path(key, _LATEST), after[-1].to_json())
            except OSError as exc:
                self._write_failed(key, exc)
                return
            if key in self._failing:
                self._failing.discard(key)
                log.info("decision_write_recovered", job=key, directory=str(self.directory))

    def _write_failed(self, key: str, exc: OSError) -> None:
        if self._on_write_failed is not None:
            self._on_write_failed()
        if key in self._failing:
            return
        self._failing.add(key)
        log.error(
            "decision_write_failed",
            job=key,
            directory=str(self.directory),
            error=f"{exc.strerror or exc} ({type(exc).__name__})",
            detail="status and explain show the job's earlier decisions until a write succeeds; "
            "further failures are counted in flink_autoscaler_decision_write_failures_total",
        )

    def load_decisions(self) -> dict[str, DecisionRecord]:
        if not self.directory.is_dir():
            raise FileNotFoundError(f"no decisions directory at {self.directory}")
        out = {}
        for path in sorted(self.directory.glob(f"*{_LATEST}")):
            record = self._read(path)
            if record is not None:
                out[record.job_key] = record
        return out

    def load_history(self, job_key: str) -> list[DecisionRecord]:
        """The job's kept decisions, oldest first; unreadable lines are skipped (and logged)."""
        latest = self._read(self._path(job_key, _LATEST))
        earlier: list[DecisionRecord] = []
        path = self._path(job_key, _EARLIER)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            log.warning("decision_file_unreadable", path=str(path), error=str(exc))
            lines = []
        for number, line in enumerate(lines, 1):
            record = self._parse(line, path, number)
            if record is not None and (latest is None or record.ts_ms < latest.first_ms):
                earlier.append(record)
        records = [*earlier, latest] if latest is not None else earlier
        return records[-self.keep :]

    def _path(self, job_key: str, suffix: str) -> Path:
        return self.directory / f"{file_stem(job_key)}{suffix}"

    def _read(self, path: Path) -> DecisionRecord | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:  # none yet, or replaced between glob and read: the next call sees it
            return None
        except OSError as exc:
            log.warning("decision_file_unreadable", path=str(path), error=str(exc))
            return None
        return self._parse(text, path)

    @staticmethod
    def _parse(text: str, path: Path, line: int | None = None) -> DecisionRecord | None:
        try:
            return DecisionRecord.from_json(text)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:  # not ours, or newer: skip it
            log.warning("decision_file_unreadable", path=str(path), line=line, error=str(exc))
            return None

    def _replace(self, target: Path, text: str) -> None:
        # A name of this process's own (writes are under the lock): mkstemp's random names and retries
        # cost more than the write, and every job's file is written every tick.
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)  # readers see the old file or the new one, never half of one
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def open_reader(
    state_url: str, decisions_dir: str | Path, keep: int = DECISION_HISTORY
) -> tuple[StoreReader, list[str], Callable[[], None]]:
    """The CLI's reader: decisions from ``decisions_dir``, states and events from the state database.

    Returns the reader, notes for the operator on what cannot be shown, and a function that closes the
    database. The database is opened without migrating and never created: a reader must not change it.
    """
    decisions = JsonDecisionDir(decisions_dir, keep)
    state, events, close, notes = _open_state(state_url)
    return StoreReader(decisions, state, events), notes, close


def _open_state(
    url: str,
) -> tuple[StateSource | None, EventSource | None, Callable[[], None], list[str]]:
    import sqlalchemy as sa

    from autoscaler.state.db import Database, current_revision
    from autoscaler.state.events import SqlEventSink
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
