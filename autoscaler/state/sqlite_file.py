"""A SQLite state file deleted or replaced under a running daemon: put it back, or keep ours beside it.

An open SQLite connection keeps the file it opened even after the path is unlinked: the daemon goes on
reading and writing a file nobody else can see, while a second daemon (or ``autoscaler status``)
opening the path finds no database, or makes a new empty one, and takes the lease too. Two daemons
both acting on one cluster is the worst outcome the lease exists to prevent, so the daemon checks
the path before it takes its leases (:meth:`SqliteFile.check`, once per tick):

- **deleted** (nothing at the path): the daemon copies the database its connections still see (the
  SQLite backup API: one consistent snapshot) back to the path; nothing is lost, the lease holds.
- **replaced** (another file at the path, say a new daemon's fresh database): the daemon keeps its own
  copy beside it (``<name>.orphaned-<UTC time>``), for the operator to inspect or restore, and moves
  to the file at the path, where the lease decides who acts.

Either way the event is logged at error level and returned, and the daemon counts it
(``flink_autoscaler_errors_total{reason="StateStoreError"}``).

The connection that saw the old file (the *anchor*, opened at start) is never closed: SQLite's last
connection to a WAL database checkpoints and deletes ``<path>-wal`` by name on close, which would now
be the new file's log. Its write-ahead files, if still at the path, are moved aside before a copy is
put back, for the same reason.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

__all__ = ["FileEvent", "SqliteFile"]

log = structlog.get_logger("autoscaler.state")

_BUSY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class FileEvent:
    """What :meth:`SqliteFile.check` found and did: ``restored`` or ``replaced``, and where our copy is."""

    kind: str
    path: Path
    copy: Path | None = None

    def describe(self) -> str:
        if self.kind == "restored":
            return f"the state database {self.path} was deleted while the daemon ran; restored from its copy"
        return (
            f"the state database {self.path} was replaced while the daemon ran; this daemon's copy was "
            f"kept as {self.copy} and it now uses the file at the path"
        )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class SqliteFile:
    """The database file of a file-backed SQLite engine, and the one connection that holds it open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._anchor = self._open_anchor()
        self._identity = _identity(path)
        self._retired: list[sqlite3.Connection] = []  # anchors of files we left: never closed (module doc)

    def check(self) -> FileEvent | None:
        """Whether the path still holds the file we opened; if not, put ours back or keep it aside.

        The caller disposes its connection pool after an event, so that new connections open the path.
        """
        now = _identity(self.path)
        if now == self._identity:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        copy = self.path.with_name(f".{self.path.name}.copy-{os.getpid()}-{stamp}")
        self._backup(copy)
        event: FileEvent | None = None
        if now is None:
            for suffix in ("-wal", "-shm"):  # the old file's log and index, if they were left behind
                side = self.path.with_name(self.path.name + suffix)
                with contextlib.suppress(FileNotFoundError):
                    side.rename(self.path.with_name(f"{self.path.name}.orphaned-{stamp}{suffix}"))
            try:
                os.link(copy, self.path)  # only if nothing is there yet: never over another daemon's file
            except FileExistsError:
                pass
            else:
                copy.unlink()
                event = FileEvent("restored", self.path)
        if event is None:
            kept = self.path.with_name(f"{self.path.name}.orphaned-{stamp}")
            copy.rename(kept)
            event = FileEvent("replaced", self.path, kept)
        self._retired.append(self._anchor)
        self._anchor = self._open_anchor()
        self._identity = _identity(self.path)
        log.error(f"state_database_{event.kind}", path=str(self.path), copy=str(event.copy or ""))
        return event

    def _open_anchor(self) -> sqlite3.Connection:
        """A connection that has read the file once: it then holds the file, its write-ahead log and
        index open, and can still read them all after they are unlinked (unread, it could not)."""
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn

    def _backup(self, target: Path) -> None:
        """A consistent snapshot of what our connections see, written to ``target`` and synced."""
        with contextlib.closing(sqlite3.connect(target)) as out:
            self._anchor.backup(out)
        with open(target, "rb") as f:
            os.fsync(f.fileno())

    def close(self) -> None:
        """At the end of the process: the anchor of the file in use closes like any connection."""
        with contextlib.suppress(Exception):
            self._anchor.close()
