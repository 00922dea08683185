"""One database for the state store and the event sink: the engine, its transactions, its migrations.

SQLite (a file, zero setup) is the default; PostgreSQL (``postgresql+psycopg://``) serves teams that run
several daemons on one database. Opening a ``Database`` brings the schema to the newest revision with
Alembic, under a lock, so daemons that start together do not migrate twice.

SQLite needs two adjustments to behave like a database server here:
- pysqlite's own transaction handling is switched off and every transaction starts with our ``BEGIN``,
  so DDL is transactional (a failed migration leaves nothing behind) and writers start with
  ``BEGIN IMMEDIATE``: a writer takes the write lock up front and waits for it (busy timeout), instead
  of failing half-way with "database is locked" when two writers upgrade their read locks.
- WAL journaling, so readers (the CLI) never block the daemon's writes; ``synchronous=NORMAL`` keeps
  every commit safe from a process crash and gives up only the last commits on a power loss.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import structlog
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from autoscaler.state.sqlite_file import FileEvent, SqliteFile
from autoscaler.state.tables import VERSION_TABLE

__all__ = [
    "Database",
    "SchemaError",
    "current_revision",
    "downgrade",
    "head_revision",
    "make_engine",
    "migrate",
]

log = structlog.get_logger("autoscaler.state")

MIGRATIONS = Path(__file__).parent / "migrations"
_WRITE = "autoscaler_write"  # execution option: begin this transaction as a writer
_MIGRATION_LOCK = 0x466C696E6B4153  # PostgreSQL advisory lock id ("FlinkAS")
_SQLITE_BUSY_TIMEOUT_S = 30.0


class SchemaError(RuntimeError):
    """The database's schema is one this version cannot use (e.g. written by a newer daemon)."""


# ---------------------------------------------------------------------------------------------- engine
def make_engine(url: str, *, echo: bool = False) -> Engine:
    """An engine for ``url``: ``sqlite:///path.db``, ``sqlite://`` (in memory) or ``postgresql[+psycopg]://``.

    A bare ``postgresql://`` URL gets the psycopg (3) driver, the one this package installs; its
    password may be left out of the URL and come from ``PGPASSWORD`` or ``~/.pgpass`` (libpq).
    """
    parsed = sa.make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, echo=echo)
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return sa.create_engine(
            parsed,
            echo=echo,
            pool_pre_ping=True,  # a daemon runs for months; connections die under it
            pool_size=5,
            max_overflow=5,
            connect_args={"application_name": "flink-autoscaler", "connect_timeout": 10},
        )
    raise ValueError(
        f"unsupported state database {backend!r}: use sqlite:///FILE or postgresql+psycopg://..."
    )


def _sqlite_engine(url: sa.URL, *, echo: bool) -> Engine:
    memory = url.database in (None, "", ":memory:")
    connect_args: dict[str, Any] = {"timeout": _SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
    if memory:  # one shared connection, or every checkout would see a new empty database
        engine = sa.create_engine(url, echo=echo, connect_args=connect_args, poolclass=StaticPool)
    else:
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)  # type: ignore[arg-type]
        engine = sa.create_engine(url, echo=echo, connect_args=connect_args)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see the module docstring)
        cursor = dbapi_connection.cursor()
        if not memory:
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (once; the mode is stored in the file).

    The switch needs the database alone, and SQLite answers it "database is locked" at once instead of
    waiting out the busy timeout, so daemons opening a new file together retry here within that timeout.
    """
    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_S
    pause = 0.01
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


# ---------------------------------------------------------------------------------------------- database
class Database:
    """The engine plus the transaction helpers the store and the sink share.

    ``write()`` reuses the transaction a ``transaction()`` block opened in this thread, so everything a
    tick writes inside one block commits together or not at all.
    """

    def __init__(self, engine: Engine, file: SqliteFile | None = None) -> None:
        self.engine = engine
        self.file = file  # a file-backed SQLite database's file, watched for deletion (sqlite_file.py)
        self._local = threading.local()

    @classmethod
    def open(cls, url: str, *, upgrade: bool = True, echo: bool = False) -> Database:
        """Connect and (by default) migrate to the newest revision; raises ``SchemaError`` if it cannot."""
        engine = make_engine(url, echo=echo)
        if upgrade:
            try:
                migrate(engine)
            except BaseException:
                engine.dispose()
                raise
        log.info("state_database_opened", url=engine.url.render_as_string(hide_password=True))
        path = engine.url.database if engine.dialect.name == "sqlite" else None
        # Watched when this process owns the file (it migrated it): a reader (the CLI) creates nothing.
        file = SqliteFile(Path(path).expanduser()) if upgrade and path not in (None, "", ":memory:") else None
        return cls(engine, file)

    def check_file(self) -> FileEvent | None:
        """A SQLite file deleted or replaced under us is put back or set aside (``SqliteFile.check``);
        the pool is then emptied so that every new connection opens the file at the path."""
        if self.file is None:
            return None
        event = self.file.check()
        if event is not None:
            self.engine.dispose()
            if event.kind == "replaced":
                migrate(self.engine)  # whatever is there now gets our schema (a no-op on a daemon's file)
        return event

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction for this thread; nested blocks (and ``write()``) join it."""
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.write_alone() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def write(self) -> contextlib.AbstractContextManager[Connection]:
        return self.transaction()

    @contextlib.contextmanager
    def write_alone(self) -> Iterator[Connection]:
        """A write transaction of its own that commits at once, never joining this thread's open one
        (a lease must not wait for, or roll back with, the tick's writes)."""
        with self.engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """This thread's open transaction if there is one (it must see its own writes), else a new one."""
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.engine.connect() as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()
        if self.file is not None:
            self.file.close()


# ---------------------------------------------------------------------------------------------- migrations
def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


@contextlib.contextmanager
def _migration_lock(conn: Connection) -> Iterator[None]:
    """PostgreSQL: a session advisory lock. SQLite: the writer's BEGIN IMMEDIATE is the lock."""
    if conn.dialect.name != "postgresql":
        yield
        return
    conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK})
    conn.commit()
    try:
        yield
    finally:
        conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK})
        conn.commit()


def _run(engine: Engine, revision: str, *, down: bool = False) -> None:
    with engine.connect() as conn, _migration_lock(conn):
        conn.execution_options(**{_WRITE: True})
        with conn.begin():  # Alembic sees an external transaction and leaves commit to us
            config = _config(conn)
            current = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            found = current.get_current_revision()
            script = ScriptDirectory.from_config(config)
            try:
                if found is not None:
                    script.get_revision(found)
            except CommandError as exc:
                raise SchemaError(
                    f"the state database is at schema revision {found!r}, which this flink-autoscaler does "
                    f"not know (newest known: {script.get_current_head()!r}); was it upgraded by a newer "
                    "version? Upgrade this daemon or point it at another database."
                ) from exc
            if down:
                command.downgrade(config, revision)
            else:
                command.upgrade(config, revision)
            now = current.get_current_revision()
    if now != found:
        log.info("state_database_migrated", from_revision=found, to_revision=now)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` (the newest by default) in one transaction."""
    _run(engine, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Downgrade the schema to ``revision`` ("base" drops everything); for tests and operators."""
    _run(engine, revision, down=True)
