"""The durable ``StateStore``: SQLAlchemy Core over SQLite or PostgreSQL.

Per job, one ``autoscaler_job_state`` row (cooldown timestamp, pending rescale, delayed scale-downs,
overrides: small, rewritten whenever the state changes) and one ``autoscaler_scaling_history`` row per
record (rewritten only when the history changed, which a digest on the state row tells without reading
it). The metric window is one row per (job, tick, vertex) in ``autoscaler_metric_window``.

No cache: every read goes to the database, so two daemons (or the CLI) on one database see each
other's writes as soon as they commit.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
import structlog
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from autoscaler.model import VertexSample
from autoscaler.state.codec import (
    RECORD_VERSION,
    STATE_VERSION,
    decode_record,
    decode_state,
    encode_record,
    encode_state,
    history_digest,
)
from autoscaler.state.db import Database
from autoscaler.state.model import JobState, ScalingRecord
from autoscaler.state.store import (
    SAMPLE_FIELDS,
    CustomWindowRow,
    HistoryChunk,
    HistoryWrite,
    Lease,
    WindowRow,
)
from autoscaler.state.tables import (
    CUSTOM_WINDOW,
    JOB_STATE,
    LEASES,
    LOAD_HISTORY,
    METRIC_WINDOW,
    SCALING_HISTORY,
    WINDOW_SAMPLE_COLUMNS,
)

__all__ = ["SqlStateStore"]

log = structlog.get_logger("autoscaler.state")

_CHUNK = 500  # keys per IN (...) list: well under every database's bound-parameter limit
_STORED_FIELDS = tuple(f for f in SAMPLE_FIELDS if f in WINDOW_SAMPLE_COLUMNS)
_WINDOWS = (METRIC_WINDOW, CUSTOM_WINDOW)  # what the trims and delete cover


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


def _insert(conn: Connection, table: sa.Table) -> Any:
    """The dialect's INSERT, which knows ``ON CONFLICT``."""
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def _nullable(value: float) -> float | None:
    return None if math.isnan(value) else value


class SqlStateStore:
    """``StateStore`` on a ``Database``; ``SqlStateStore.from_url("sqlite:///flink-autoscaler.db")``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def from_url(cls, url: str) -> SqlStateStore:
        return cls(Database.open(url))

    # ------------------------------------------------------------------ state
    def load(self, job_key: str) -> JobState:
        return self.load_many([job_key])[job_key]

    def load_many(self, job_keys: Iterable[str]) -> dict[str, JobState]:
        keys = list(dict.fromkeys(job_keys))
        rows: dict[str, Any] = {}
        history: dict[str, list[Any]] = {}
        with self.db.read() as conn:
            for chunk in _chunks(keys):
                for row in conn.execute(sa.select(JOB_STATE).where(JOB_STATE.c.job_key.in_(chunk))):
                    rows[row.job_key] = row
                query = (
                    sa.select(SCALING_HISTORY)
                    .where(SCALING_HISTORY.c.job_key.in_(chunk))
                    .order_by(SCALING_HISTORY.c.job_key, SCALING_HISTORY.c.seq)
                )
                for row in conn.execute(query):
                    history.setdefault(row.job_key, []).append(row)
        states: dict[str, JobState] = {}
        damaged: dict[str, JobState] = {}
        for key in keys:
            states[key], ok = self._decode(key, rows.get(key), history.get(key, []))
            if not ok:
                damaged[key] = states[key]
        if damaged:
            self._repair(damaged)
        return states

    @staticmethod
    def _decode(job_key: str, row: Any, history_rows: list[Any]) -> tuple[JobState, bool]:
        """The job's state and whether every stored value could be read back.

        A value that cannot is logged and discarded (the job starts partly or wholly fresh), never
        raised: any exception here comes from the stored text, not from a bug the daemon could act on.
        """
        state, ok = JobState(), True
        if row is not None:
            try:
                state = decode_state(row.schema_version, row.data)
            except Exception as exc:
                ok = False
                log.warning("stored_state_discarded", job=job_key, part="state", error=str(exc))
        records: list[ScalingRecord] = []
        for h in history_rows:
            try:
                records.append(decode_record(h.schema_version, h.data))
            except Exception as exc:
                ok = False
                log.warning("stored_state_discarded", job=job_key, part="history", seq=h.seq, error=str(exc))
        return (replace(state, history=tuple(records)) if records else state), ok

    def _repair(self, states: Mapping[str, JobState]) -> None:
        """Overwrite discarded values with what was read, so each is reported once, not every tick."""
        try:
            self.save_many(states)
        except Exception as exc:  # a read must not fail because the repair could not be written
            log.warning("stored_state_repair_failed", jobs=sorted(states), error=str(exc))

    def save(self, job_key: str, state: JobState) -> None:
        self.save_many({job_key: state})

    def save_many(self, states: Mapping[str, JobState]) -> None:
        """All states in one transaction: the state rows upserted, history rows rewritten if changed."""
        if not states:
            return
        now_ms = int(time.time() * 1000)
        encoded = {key: [encode_record(r) for r in s.history] for key, s in states.items()}
        digests = {key: history_digest(texts) for key, texts in encoded.items()}
        keys = list(states)
        with self.db.write() as conn:
            stored: dict[str, str] = {}
            for chunk in _chunks(keys):
                query = sa.select(JOB_STATE.c.job_key, JOB_STATE.c.history_digest).where(
                    JOB_STATE.c.job_key.in_(chunk)
                )
                stored.update({row.job_key: row.history_digest for row in conn.execute(query)})
            insert = _insert(conn, JOB_STATE)
            upsert = insert.on_conflict_do_update(
                index_elements=[JOB_STATE.c.job_key],
                set_={
                    c: insert.excluded[c]
                    for c in ("schema_version", "data", "history_digest", "last_rescale_ms", "updated_at_ms")
                },
            )
            conn.execute(
                upsert,
                [
                    {
                        "job_key": key,
                        "schema_version": STATE_VERSION,
                        "data": encode_state(state),
                        "history_digest": digests[key],
                        "last_rescale_ms": state.last_rescale_ms,
                        "updated_at_ms": now_ms,
                    }
                    for key, state in states.items()
                ],
            )
            changed = [key for key in keys if stored.get(key) != digests[key]]
            for chunk in _chunks(changed):
                conn.execute(sa.delete(SCALING_HISTORY).where(SCALING_HISTORY.c.job_key.in_(chunk)))
            history_rows = [
                {
                    "job_key": key,
                    "seq": seq,
                    "ts_ms": record.ts_ms,
                    "schema_version": RECORD_VERSION,
                    "data": text,
                }
                for key in changed
                for seq, (record, text) in enumerate(zip(states[key].history, encoded[key], strict=True))
            ]
            if history_rows:
                conn.execute(sa.insert(SCALING_HISTORY), history_rows)

    def delete(self, job_key: str) -> None:
        with self.db.write() as conn:
            for table in (JOB_STATE, SCALING_HISTORY, *_WINDOWS, LOAD_HISTORY):
                conn.execute(sa.delete(table).where(table.c.job_key == job_key))

    def keys(self) -> Iterable[str]:
        with self.db.read() as conn:
            return list(conn.scalars(sa.select(JOB_STATE.c.job_key).order_by(JOB_STATE.c.job_key)))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything this thread writes inside commits together (also through a ``SqlEventSink`` on the
        same ``Database``); an exception rolls it all back."""
        with self.db.transaction():
            yield

    # ------------------------------------------------------------------ metric window
    def append_window(self, job_key: str, rows: Iterable[WindowRow]) -> None:
        self.append_windows({job_key: rows})

    def append_windows(self, rows_by_job: Mapping[str, Iterable[WindowRow]]) -> None:
        """Every job's rows of a tick in one statement (one round trip instead of one per job)."""
        values = [
            {
                "job_key": job_key,
                "ts_ms": row.ts_ms,
                "vertex": row.vertex,
                "running_since_ms": row.running_since_ms,
                **{f: _nullable(float(getattr(row.sample, f))) for f in _STORED_FIELDS},
            }
            for job_key, rows in rows_by_job.items()
            for row in rows
        ]
        self._insert_new(METRIC_WINDOW, values)

    def load_window(self, job_key: str) -> list[WindowRow]:
        query = (
            sa.select(METRIC_WINDOW)
            .where(METRIC_WINDOW.c.job_key == job_key)
            .order_by(METRIC_WINDOW.c.ts_ms, METRIC_WINDOW.c.vertex)
        )
        with self.db.read() as conn:
            result = conn.execute(query).mappings().all()
        return [
            WindowRow(
                row["vertex"],
                row["ts_ms"],
                row["running_since_ms"],
                VertexSample(**{f: math.nan if row[f] is None else float(row[f]) for f in _STORED_FIELDS}),
            )
            for row in result
        ]

    def append_custom_windows(self, rows_by_job: Mapping[str, Iterable[CustomWindowRow]]) -> None:
        values = [
            {"job_key": job_key, "ts_ms": r.ts_ms, "scope": r.scope, "name": r.name, "value": r.value}
            for job_key, rows in rows_by_job.items()
            for r in rows
        ]
        self._insert_new(CUSTOM_WINDOW, values)

    def _insert_new(self, table: sa.Table, values: list[dict[str, Any]]) -> None:
        """Rows already stored (a replayed tick) are skipped, not errors."""
        if not values:
            return
        with self.db.write() as conn:
            conn.execute(_insert(conn, table).on_conflict_do_nothing(), values)

    def load_custom_window(self, job_key: str) -> list[CustomWindowRow]:
        c = CUSTOM_WINDOW.c
        query = sa.select(c.scope, c.name, c.ts_ms, c.value).where(c.job_key == job_key)
        with self.db.read() as conn:
            result = conn.execute(query.order_by(c.ts_ms, c.scope, c.name)).all()
        return [CustomWindowRow(scope, name, ts_ms, float(value)) for scope, name, ts_ms, value in result]

    def trim_window(self, job_key: str | None, before_ms: int) -> int:
        """Drop rows older than ``before_ms`` (of one job, or of every job with ``None``); the count is
        of the metric window's rows (custom metrics are dropped alike, not counted)."""
        counts = []
        with self.db.write() as conn:
            for table in _WINDOWS:
                query = sa.delete(table).where(table.c.ts_ms < before_ms)
                if job_key is not None:
                    query = query.where(table.c.job_key == job_key)
                counts.append(conn.execute(query).rowcount)
        return counts[0]  # METRIC_WINDOW's

    def trim_windows(self, before_ms_by_job: Mapping[str, int]) -> int:
        """``trim_window`` for many jobs, each with its own cutoff, in one statement per table."""
        if not before_ms_by_job:
            return 0
        params = [{"k": k, "before": b} for k, b in before_ms_by_job.items()]
        counts = []
        with self.db.write() as conn:
            for table in _WINDOWS:
                query = sa.delete(table).where(
                    table.c.job_key == sa.bindparam("k"), table.c.ts_ms < sa.bindparam("before")
                )
                counts.append(max(0, conn.execute(query, params).rowcount))
        return counts[0]  # METRIC_WINDOW's

    # ------------------------------------------------------------------ load history
    def write_load_history(self, writes: Mapping[str, HistoryWrite]) -> None:
        """Every job's changed chunks in one upsert, and what they no longer keep in one delete (of the
        jobs whose oldest chunk moved on: once a day for 5-minute buckets)."""
        if not writes:
            return
        h = LOAD_HISTORY.c
        rows = [
            {
                "job_key": key,
                "chunk": c.chunk,
                "bucket_ms": c.bucket_ms,
                "first_bucket": c.first,
                "rates": c.rates,
                "scores": c.scores,
            }
            for key, write in writes.items()
            for c in write.chunks
        ]
        cuts = [
            {"k": key, "keep": w.keep_from, "bucket": w.bucket_ms}
            for key, w in writes.items()
            if w.keep_from is not None
        ]
        with self.db.write() as conn:
            if cuts:
                conn.execute(
                    sa.delete(LOAD_HISTORY).where(
                        h.job_key == sa.bindparam("k"),
                        sa.or_(h.chunk < sa.bindparam("keep"), h.bucket_ms != sa.bindparam("bucket")),
                    ),
                    cuts,
                )
            if rows:
                insert = _insert(conn, LOAD_HISTORY)
                upsert = insert.on_conflict_do_update(
                    index_elements=[h.job_key, h.chunk],
                    set_={c: insert.excluded[c] for c in ("bucket_ms", "first_bucket", "rates", "scores")},
                )
                conn.execute(upsert, rows)

    def read_load_history(self, job_keys: Iterable[str]) -> dict[str, list[HistoryChunk]]:
        keys = list(dict.fromkeys(job_keys))
        out: dict[str, list[HistoryChunk]] = {}
        h = LOAD_HISTORY.c
        with self.db.read() as conn:
            for chunk in _chunks(keys):
                query = sa.select(LOAD_HISTORY).where(h.job_key.in_(chunk)).order_by(h.job_key, h.chunk)
                for row in conn.execute(query):
                    out.setdefault(row.job_key, []).append(
                        HistoryChunk(row.chunk, row.bucket_ms, row.first_bucket, bytes(row.rates), row.scores)
                    )
        return out

    # ------------------------------------------------------------------ leases
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> Lease:
        """One UPDATE that only matches a free, expired or own lease, else an INSERT that only lands
        when there is no row: whichever daemon commits first wins, the database decides."""
        with self.db.write_alone() as conn:
            conn.execute(
                sa.update(LEASES)
                .where(
                    LEASES.c.name == name,
                    sa.or_(LEASES.c.owner == owner, LEASES.c.expires_ms <= now_ms),
                )
                .values(
                    owner=owner,
                    expires_ms=now_ms + ttl_ms,
                    acquired_ms=sa.case((LEASES.c.owner == owner, LEASES.c.acquired_ms), else_=now_ms),
                )
            )
            conn.execute(
                _insert(conn, LEASES)
                .values(name=name, owner=owner, expires_ms=now_ms + ttl_ms, acquired_ms=now_ms)
                .on_conflict_do_nothing(index_elements=["name"])
            )
            row = conn.execute(sa.select(LEASES).where(LEASES.c.name == name)).one()
        return Lease(row.name, row.owner, row.expires_ms, row.acquired_ms)

    def release_lease(self, name: str, owner: str) -> None:
        with self.db.write_alone() as conn:
            conn.execute(
                sa.update(LEASES).where(LEASES.c.name == name, LEASES.c.owner == owner).values(expires_ms=0)
            )

    def leases(self) -> list[Lease]:
        with self.db.read() as conn:
            rows = conn.execute(sa.select(LEASES).order_by(LEASES.c.name)).all()
        return [Lease(r.name, r.owner, r.expires_ms, r.acquired_ms) for r in rows]

    def check_storage(self) -> str | None:
        event = self.db.check_file()
        return None if event is None else event.describe()

    def close(self) -> None:
        self.db.close()
