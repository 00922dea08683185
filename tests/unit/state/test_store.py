"""One contract for every state store and event sink: memory, SQLite and (when
``FLINK_AUTOSCALER_TEST_POSTGRES_URL`` is set, see ``tests/postgres.sh``) PostgreSQL.

Durable backends are re-read through a fresh store instance on the same database, so a test passes only
if the data really went to the database. Each PostgreSQL test runs in a schema of its own.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from structlog.testing import capture_logs

from autoscaler.model import NAN, VertexSample
from autoscaler.reasons import Reason
from autoscaler.state import (
    CustomWindowRow,
    DelayedScaleDown,
    HistoryChunk,
    HistoryWrite,
    JobState,
    MemoryStateStore,
    PendingRescale,
    Recommendation,
    ScalingRecord,
    ScalingVerification,
    StateStore,
    VertexVerification,
    WindowRow,
    custom_window_rows,
    group_window,
    window_rows,
)
from autoscaler.state.codec import (
    STATE_VERSION,
    CodecError,
    decode_record,
    decode_state,
    encode_record,
    encode_state,
)
from autoscaler.state.db import (
    Database,
    SchemaError,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    migrate,
)
from autoscaler.state.events import Event, EventLog, EventStore, EventType, SqlEventSink, dedup_key
from autoscaler.state.sql import SqlStateStore
from autoscaler.state.store import SAMPLE_FIELDS, Lease
from autoscaler.state.tables import JOB_STATE, METADATA, SCALING_HISTORY, VERSION_TABLE, WINDOW_SAMPLE_COLUMNS
from autoscaler.testing import make_sample, make_topology

POSTGRES_URL = os.environ.get("FLINK_AUTOSCALER_TEST_POSTGRES_URL")
_needs_postgres = pytest.mark.skipif(
    not POSTGRES_URL, reason="set FLINK_AUTOSCALER_TEST_POSTGRES_URL (bash tests/postgres.sh start)"
)
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=_needs_postgres)]
DURABLE = ["sqlite", pytest.param("postgres", marks=_needs_postgres)]


# -------------------------------------------------------------------------------------------- backends
@dataclass
class Backend:
    """A database (or the memory store) and every store or sink opened on it during one test."""

    name: str
    url: str | None  # None: memory
    _opened: list[Database] = field(default_factory=list)
    _memory: MemoryStateStore = field(default_factory=MemoryStateStore)
    _log: EventLog = field(default_factory=EventLog)

    @property
    def durable(self) -> bool:
        return self.url is not None

    def database(self, *, upgrade: bool = True) -> Database:
        assert self.url is not None
        db = Database.open(self.url, upgrade=upgrade)
        self._opened.append(db)
        return db

    def store(self) -> StateStore:
        """A fresh instance on the same database (the one memory store, which cannot be reopened)."""
        return SqlStateStore(self.database()) if self.url else self._memory

    def sink(self) -> EventStore:
        return SqlEventSink(self.database()) if self.url else self._log

    def engine(self) -> sa.Engine:
        assert self.url is not None
        engine = make_engine(self.url)
        self._opened.append(Database(engine))
        return engine

    def close(self) -> None:
        for db in self._opened:
            db.close()


def _postgres_schema_url(schema: str) -> str:
    assert POSTGRES_URL is not None
    return (
        sa.make_url(POSTGRES_URL)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )


@pytest.fixture
def make_backend(tmp_path: Any) -> Iterator[Callable[[str], Backend]]:
    made: list[Backend] = []
    schemas: list[str] = []

    def make(name: str) -> Backend:
        if name == "memory":
            backend = Backend(name, None)
        elif name == "sqlite":
            backend = Backend(name, f"sqlite:///{tmp_path}/state-{len(made)}.db")
        else:
            schema = f"t_{uuid.uuid4().hex[:12]}"
            admin = make_engine(POSTGRES_URL or "")
            with admin.begin() as conn:
                conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
            admin.dispose()
            schemas.append(schema)
            backend = Backend(name, _postgres_schema_url(schema))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    if schemas:
        admin = make_engine(POSTGRES_URL or "")
        with admin.begin() as conn:
            for schema in schemas:
                conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, make_backend: Callable[[str], Backend]) -> Backend:
    return make_backend(request.param)


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, make_backend: Callable[[str], Backend]) -> Backend:
    return make_backend(request.param)


# ---------------------------------------------------------------------------------------------- values
def full_state(ts: int = 1_000) -> JobState:
    """Every field set: cooldown timestamp, pending rescale, delayed scale-downs, history, overrides."""
    return JobState(
        last_rescale_ms=ts,
        pending=PendingRescale("a" * 32, ts, {"v1": 4, "v2": 2}, {"v1": 2, "v2": 1}),
        delayed_scale_down={
            "v3": DelayedScaleDown(ts - 500, ((ts - 500, 6, False), (ts - 100, 5, True))),
            "v4": DelayedScaleDown(ts - 50, ((ts - 50, 1),)),  # no band flag: written by an older version
        },
        history=(
            ScalingRecord(
                ts - 900,
                {"v1": (1, 2)},
                confirmed_ms=ts - 850,
                restart_duration_ms=42_000,
                metrics={"v1": (10.5, 20.0)},
                verification=ScalingVerification(ts - 300, 0.9, {"v1": VertexVerification(2, 20.0, 19.0)}),
            ),
            ScalingRecord(ts, {"v1": (2, 4), "v2": (1, 2)}, metrics={"v1": (20.25, 40.5), "v2": (3.0, 6.0)}),
        ),
        overrides={"v1": 4, "v2": 2},
    )


def sample(**values: float) -> VertexSample:
    return VertexSample(**values)


def row(vertex: str, ts: int, since: int = 0, **values: float) -> WindowRow:
    return WindowRow(vertex, ts, since, sample(**values))


def same_rows(a: list[WindowRow], b: list[WindowRow]) -> bool:
    return len(a) == len(b) and all(x.same_values(y) for x, y in zip(a, b, strict=True))


# -------------------------------------------------------------------------------------- state contract
def test_unknown_job_is_a_fresh_state(backend: Backend) -> None:
    store = backend.store()
    assert store.load("c/none") == JobState()
    assert store.load_many(["c/a", "c/b"]) == {"c/a": JobState(), "c/b": JobState()}
    assert list(store.keys()) == []
    assert store.load_window("c/none") == []


def test_full_state_round_trips_through_a_fresh_store(backend: Backend) -> None:
    state = full_state()
    backend.store().save("prod/orders enrichment", state)
    again = backend.store()
    assert again.load("prod/orders enrichment") == state
    assert list(again.keys()) == ["prod/orders enrichment"]


def test_save_replaces_the_state_and_its_history(backend: Backend) -> None:
    store, key = backend.store(), "c/j"
    state = full_state()
    store.save(key, state)
    # the newest record gets confirmed: same length, one changed record
    confirmed = replace(state.history[-1], confirmed_ms=2_000, restart_duration_ms=61_000)
    state = replace(state, pending=None, history=(*state.history[:-1], confirmed))
    store.save(key, state)
    assert backend.store().load(key) == state
    # trimmed to one record, then grown again
    state = replace(state, history=state.history[-1:])
    store.save(key, state)
    assert backend.store().load(key).history == state.history
    state = state.with_scaling(ScalingRecord(3_000, {"v2": (2, 3)}), None)
    store.save(key, state)
    loaded = backend.store().load(key)
    assert loaded == state and loaded.overrides == {"v1": 4, "v2": 3} and loaded.last_rescale_ms == 3_000
    # back to nothing
    store.save(key, JobState())
    assert backend.store().load(key) == JobState()


def test_non_finite_metrics_survive(backend: Backend) -> None:
    record = ScalingRecord(5, {"v": (1, 2)}, metrics={"v": (NAN, math.inf), "w": (-math.inf, 1.0)})
    backend.store().save("c/j", JobState(history=(record,)))
    (loaded,) = backend.store().load("c/j").history
    tpr, epr = loaded.metrics["v"]
    assert math.isnan(tpr) and epr == math.inf and loaded.metrics["w"] == (-math.inf, 1.0)


def test_delete_drops_state_and_window_of_that_job_only(backend: Backend) -> None:
    store = backend.store()
    for key in ("c/a", "c/b"):
        store.save(key, full_state())
        store.append_window(key, [row("v", 1), row("v", 2)])
    store.delete("c/a")
    store.delete("c/never-saved")
    again = backend.store()
    assert again.load("c/a") == JobState() and again.load_window("c/a") == []
    assert again.load("c/b") == full_state() and len(again.load_window("c/b")) == 2
    assert list(again.keys()) == ["c/b"]


def test_save_many_and_load_many(backend: Backend) -> None:
    states = {f"cluster-{i % 3}/job {i}": full_state(1_000 + i) for i in range(25)}
    backend.store().save_many(states)
    again = backend.store()
    assert again.load_many(states) == states
    assert sorted(again.keys()) == sorted(states)
    assert backend.store().save_many({}) is None


def test_a_failed_transaction_writes_nothing(backend: Backend) -> None:
    store = backend.store()
    store.save("c/kept", full_state())
    with pytest.raises(RuntimeError), store.transaction():
        store.save_many({"c/a": full_state(), "c/b": full_state()})
        store.save("c/kept", JobState())
        store.append_window("c/a", [row("v", 1)])
        store.delete("c/kept")
        raise RuntimeError("crash mid-tick")
    again = backend.store()
    assert sorted(again.keys()) == ["c/kept"]
    assert again.load("c/kept") == full_state()
    assert again.load_window("c/a") == []


def test_a_transaction_sees_its_writes_and_nested_ones_join_it(backend: Backend) -> None:
    store = backend.store()
    with store.transaction():
        store.save("c/a", full_state())
        assert store.load("c/a") == full_state()
        with store.transaction():
            store.append_window("c/a", [row("v", 7)])
        assert len(store.load_window("c/a")) == 1
    again = backend.store()
    assert again.load("c/a") == full_state() and len(again.load_window("c/a")) == 1


def test_odd_job_keys(backend: Backend) -> None:
    keys = ["c/with/slashes", "c/ünïcødé ジョブ", "c/" + "x" * 400, "c/'quote\" ; DROP TABLE x;--"]
    backend.store().save_many({k: full_state() for k in keys})
    assert sorted(backend.store().keys()) == sorted(keys)


# ------------------------------------------------------------------------------------- window contract
def test_window_append_load_trim(backend: Backend) -> None:
    store = backend.store()
    store.append_window(
        "c/a",
        [
            row("w", 20, 5, busy_time_ms_per_s=500.0, num_records_in=1e12),
            row("src", 20, 5, pending_records=3.0, observed_tpr=math.inf),
            row("src", 10, 5, busy_time_ms_per_s=100.0),
        ],
    )
    store.append_window("c/b", [row("src", 10, 0, num_records_out=1.0)])
    store.append_window("c/a", [row("src", 10, 5, busy_time_ms_per_s=999.0)])  # a duplicate: ignored
    store.append_window("c/a", [])
    loaded = backend.store().load_window("c/a")
    assert [(r.ts_ms, r.vertex, r.running_since_ms) for r in loaded] == [
        (10, "src", 5),
        (20, "src", 5),
        (20, "w", 5),
    ]
    assert loaded[0].sample.busy_time_ms_per_s == 100.0 and math.isnan(loaded[0].sample.num_records_in)
    assert loaded[1].sample.observed_tpr == math.inf and loaded[2].sample.num_records_in == 1e12

    assert store.trim_window("c/a", 20) == 1
    assert [r.ts_ms for r in backend.store().load_window("c/a")] == [20, 20]
    assert len(backend.store().load_window("c/b")) == 1
    assert store.trim_window(None, 1_000) == 3
    assert backend.store().load_window("c/a") == [] and backend.store().load_window("c/b") == []


def test_window_batches_for_many_jobs(backend: Backend) -> None:
    store = backend.store()
    store.append_windows({f"c/j{i}": [row("v", ts) for ts in (10, 20, 30)] for i in range(3)})
    store.append_windows({"c/j0": [row("v", 30), row("v", 40)], "c/j9": []})  # 30 is a duplicate
    assert store.trim_windows({}) == 0
    assert store.trim_windows({"c/j0": 30, "c/j1": 11, "c/none": 99}) == 3
    again = backend.store()
    assert [[r.ts_ms for r in again.load_window(f"c/j{i}")] for i in range(3)] == [
        [30, 40],
        [20, 30],
        [10, 20, 30],
    ]


def test_custom_window_append_load_trim_delete(backend: Backend) -> None:
    store = backend.store()
    topology = make_topology({"src": 1, "w": 2}, [("src", "w", "HASH")])

    def tick(ts: int, lag: float) -> Any:
        return make_sample(
            topology,
            ts_ms=ts,
            custom_vertex_metrics={"w": {"lag": lag, "unread": math.nan}},  # NaN: not measured, not kept
            custom_job_metrics={"autoscaler.heapUsageRatio": ts / 100_000},
        )

    ticks = [tick(ts, float(ts)) for ts in (10_000, 20_000, 30_000)]
    key = ticks[0].job.key
    for t in ticks:
        store.append_windows({key: window_rows(t)})
        store.append_custom_windows({key: custom_window_rows(t), "c/other": []})
    store.append_custom_windows({key: custom_window_rows(tick(10_000, -1.0))})  # a duplicate: ignored
    loaded = backend.store().load_custom_window(key)
    assert [(r.ts_ms, r.scope, r.name, r.value) for r in loaded] == [
        (ts, scope, name, value)
        for ts in (10_000, 20_000, 30_000)
        for scope, name, value in (("", "autoscaler.heapUsageRatio", ts / 100_000), ("w", "lag", float(ts)))
    ]
    regrouped = group_window(backend.store().load_window(key), reversed(loaded))
    assert [
        (t.ts_ms, dict(t.custom_job_metrics), {v: dict(m) for v, m in t.custom_vertex_metrics.items()})
        for t in regrouped
    ] == [
        (ts, {"autoscaler.heapUsageRatio": ts / 100_000}, {"w": {"lag": float(ts)}})
        for ts in (10_000, 20_000, 30_000)
    ]
    assert store.trim_windows({key: 20_000}) == 2  # the metric window's rows (src and w); custom go too
    assert [r.ts_ms for r in backend.store().load_custom_window(key)] == [20_000, 20_000, 30_000, 30_000]
    assert store.trim_window(key, 30_000) == 2
    assert [r.ts_ms for r in backend.store().load_custom_window(key)] == [30_000, 30_000]
    store.delete(key)
    assert backend.store().load_custom_window(key) == []


def test_a_failed_transaction_keeps_the_custom_window(backend: Backend) -> None:
    store = backend.store()
    store.append_custom_windows({"c/a": [CustomWindowRow("", "m", 10, 1.0)]})
    with pytest.raises(RuntimeError), store.transaction():
        store.append_custom_windows({"c/a": [CustomWindowRow("", "m", 20, 2.0)]})
        store.trim_window(None, 15)
        raise RuntimeError("the tick failed")
    assert backend.store().load_custom_window("c/a") == [CustomWindowRow("", "m", 10, 1.0)]


def test_a_restored_window_is_full_again(backend: Backend) -> None:
    """The hook the evaluator restores through: replaying stored ticks into a new ``WindowBook`` gives
    the window it had before the restart, and a restart of the job since then still resets it."""
    from autoscaler.evaluate.window.book import WindowBook
    from autoscaler.settings import AutoscalerOptions

    options = AutoscalerOptions(
        enabled=True, metrics_window=timedelta(minutes=1), stabilization_interval=timedelta(0)
    )
    topology = make_topology({"src": 1, "w": 2}, [("src", "w", "HASH")])
    store, before = backend.store(), WindowBook()
    for ts in range(0, 70_001, 10_000):
        s = make_sample(topology, ts_ms=ts, running_since_ms=0, options=options)
        status = before.observe_sample(s, ts)
        store.append_windows({s.job.key: window_rows(s)})
        store.trim_windows({s.job.key: status.start_ms})
    key = s.job.key
    assert status.full

    restored = WindowBook()
    for tick in group_window(backend.store().load_window(key)):
        replay = make_sample(
            topology,
            ts_ms=tick.ts_ms,
            running_since_ms=tick.running_since_ms,
            vertices=tick.vertices,
            options=options,
        )
        restored.observe_sample(replay, tick.ts_ms)
    now = 80_000
    new = make_sample(topology, ts_ms=now, running_since_ms=0, options=options)
    expected, after = before.observe_sample(new, now), restored.observe_sample(new, now)
    assert after.full and not after.reset
    assert (after.samples, after.start_ms) == (expected.samples, expected.start_ms)
    restarted = WindowBook()
    for tick in group_window(backend.store().load_window(key)):
        replay = make_sample(
            topology, ts_ms=tick.ts_ms, running_since_ms=tick.running_since_ms, options=options
        )
        restarted.observe_sample(replay, tick.ts_ms)
    moved = restarted.observe_sample(
        make_sample(topology, ts_ms=now, running_since_ms=75_000, options=options), now
    )
    assert moved.reset and not moved.full


def test_window_rows_from_a_sample_round_trip_and_regroup(backend: Backend) -> None:
    topology = make_topology({"src": 1, "w": 4}, [("src", "w", "HASH")])
    samples = [
        make_sample(
            topology,
            ts_ms=ts,
            running_since_ms=100,
            vertices={"src": sample(pending_records=float(ts)), "w": sample(busy_time_ms_per_s=ts / 10)},
        )
        for ts in (1_000, 11_000, 21_000)
    ]
    store = backend.store()
    for s in samples:
        store.append_window(s.job.key, window_rows(s))
    loaded = backend.store().load_window(samples[0].job.key)
    expected = sorted((r for s in samples for r in window_rows(s)), key=lambda r: (r.ts_ms, r.vertex))
    assert same_rows(loaded, expected)
    ticks = group_window(reversed(loaded))
    assert [t.ts_ms for t in ticks] == [1_000, 11_000, 21_000]
    assert all(t.running_since_ms == 100 and set(t.vertices) == {"src", "w"} for t in ticks)
    assert ticks[1].vertices["src"].pending_records == 11_000.0


# ------------------------------------------------------------------------------- load history contract
def chunk(
    n: int, first: int | None = None, rates: bytes = b"\x00\x00\x80?", bucket_ms: int = 300_000
) -> HistoryChunk:
    return HistoryChunk(n, bucket_ms, n * 288 if first is None else first, rates, None)


def test_load_history_writes_read_back_oldest_first(backend: Backend) -> None:
    store = backend.store()
    assert store.read_load_history(["c/a"]) == {}
    scored = replace(chunk(3, 3 * 288 + 5, b"\x00" * 8), scores='{"v":1}')
    store.write_load_history(
        {"c/a": HistoryWrite((scored, chunk(2)), 300_000, 2), "c/b": HistoryWrite((chunk(7),), 300_000, 7)}
    )
    store.write_load_history({})
    again = backend.store()
    assert again.read_load_history(["c/a", "c/b", "c/none"]) == {"c/a": [chunk(2), scored], "c/b": [chunk(7)]}


def test_load_history_chunks_are_replaced_and_what_is_not_kept_is_dropped(backend: Backend) -> None:
    store = backend.store()
    store.write_load_history({"c/a": HistoryWrite((chunk(1), chunk(2), chunk(3)), 300_000, 1)})
    newer = chunk(3, rates=b"\x00" * 12)
    store.write_load_history({"c/a": HistoryWrite((newer,), 300_000, None)})  # nothing leaves
    assert backend.store().read_load_history(["c/a"]) == {"c/a": [chunk(1), chunk(2), newer]}
    store.write_load_history({"c/a": HistoryWrite((newer,), 300_000, 2)})  # chunk 1 leaves the history
    assert backend.store().read_load_history(["c/a"]) == {"c/a": [chunk(2), newer]}
    minute = chunk(9000, bucket_ms=60_000)
    store.write_load_history({"c/a": HistoryWrite((minute,), 60_000, 9000)})  # other buckets: all dropped
    assert backend.store().read_load_history(["c/a"]) == {"c/a": [minute]}


def test_load_history_goes_with_the_job_and_with_a_failed_transaction(backend: Backend) -> None:
    store = backend.store()
    store.write_load_history({key: HistoryWrite((chunk(1),), 300_000, 1) for key in ("c/a", "c/b")})
    with pytest.raises(RuntimeError), store.transaction():
        store.write_load_history({"c/a": HistoryWrite((chunk(2),), 300_000, 2)})
        raise RuntimeError("the tick failed")
    assert backend.store().read_load_history(["c/a"]) == {"c/a": [chunk(1)]}
    store.delete("c/a")
    assert backend.store().read_load_history(["c/a", "c/b"]) == {"c/b": [chunk(1)]}


# ---------------------------------------------------------------------------------------- durable only
def test_two_store_instances_on_one_database_see_each_others_writes(durable: Backend) -> None:
    a, b = durable.store(), durable.store()
    a.save("c1/job", full_state())
    assert b.load("c1/job") == full_state()
    b.save("c2/job", full_state(5))
    b.save("c1/job", replace(full_state(), pending=None))
    assert a.load("c2/job") == full_state(5) and a.load("c1/job").pending is None
    a.append_window("c1/job", [row("v", 1)])
    assert len(b.load_window("c1/job")) == 1
    b.delete("c1/job")
    assert a.load("c1/job") == JobState() and list(a.keys()) == ["c2/job"]


def test_concurrent_writers_do_not_lose_or_fail(durable: Backend) -> None:
    """Two daemons (stores with their own engines), each saving its own cluster's jobs every tick."""
    stores = [durable.store(), durable.store()]
    errors: list[BaseException] = []

    def daemon(n: int) -> None:
        store = stores[n]
        try:
            for tick in range(15):
                with store.transaction():
                    store.save_many({f"c{n}/job-{j}": full_state(tick) for j in range(20)})
                    store.append_window(f"c{n}/job-0", [row("v", tick)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=daemon, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    again = durable.store()
    assert len(list(again.keys())) == 40
    assert again.load("c1/job-7") == full_state(14)
    assert len(again.load_window("c0/job-0")) == 15


# ---------------------------------------------------------------------------------------------- leases
def test_a_lease_goes_to_the_first_asker_and_stays_while_renewed(backend: Backend) -> None:
    store = backend.store()
    assert store.acquire_lease("prod", "a", 1_000, 30_000) == Lease("prod", "a", 31_000, 1_000)
    assert store.acquire_lease("prod", "b", 2_000, 30_000) == Lease("prod", "a", 31_000, 1_000)
    renewed = store.acquire_lease("prod", "a", 11_000, 30_000)
    assert renewed == Lease("prod", "a", 41_000, 1_000)  # renewing keeps when it was taken
    assert renewed.held_by("a", 40_999) and not renewed.held_by("a", 41_000)
    assert not renewed.held_by("b", 11_000)
    assert store.acquire_lease("other", "b", 11_000, 30_000).owner == "b"  # one lease per name
    assert [(lease.name, lease.owner) for lease in store.leases()] == [("other", "b"), ("prod", "a")]


def test_an_expired_lease_is_taken_over(backend: Backend) -> None:
    store = backend.store()
    store.acquire_lease("prod", "a", 0, 30_000)
    assert store.acquire_lease("prod", "b", 29_999, 30_000).owner == "a"
    assert store.acquire_lease("prod", "b", 30_000, 30_000) == Lease("prod", "b", 60_000, 30_000)
    assert store.acquire_lease("prod", "a", 31_000, 30_000).owner == "b"  # the old holder stands by


def test_a_released_lease_is_free_at_once_and_only_its_owner_releases_it(backend: Backend) -> None:
    store = backend.store()
    store.acquire_lease("prod", "a", 0, 30_000)
    store.release_lease("prod", "b")
    assert store.acquire_lease("prod", "b", 1_000, 30_000).owner == "a"
    store.release_lease("prod", "a")
    assert store.acquire_lease("prod", "b", 1_000, 30_000).owner == "b"


def test_racing_daemons_get_one_lease_holder(durable: Backend) -> None:
    """Daemons with their own engines ask at the same instant, again and again: one holder each time."""
    stores = [durable.store() for _ in range(4)]
    seen: list[list[str]] = [[] for _ in stores]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def daemon(n: int) -> None:
        try:
            for round_ in range(10):
                barrier.wait(timeout=60)
                # Each round starts after the previous lease expired, so it is free for everyone.
                lease = stores[n].acquire_lease("prod", f"d{n}", round_ * 100_000, 50_000)
                seen[n].append(lease.owner)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=daemon, args=(n,)) for n in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    for round_ in range(10):
        assert len({seen[n][round_] for n in range(len(stores))}) == 1  # every daemon saw the same holder


def test_unreadable_values_are_logged_and_discarded(durable: Backend) -> None:
    store = durable.store()
    state = full_state()
    store.save_many({"c/bad-state": state, "c/bad-record": state, "c/newer": state, "c/ok": state})
    engine = durable.engine()
    with engine.begin() as conn:
        conn.execute(
            sa.update(JOB_STATE).where(JOB_STATE.c.job_key == "c/bad-state").values(data="{not json")
        )
        conn.execute(
            sa.update(SCALING_HISTORY)
            .where(SCALING_HISTORY.c.job_key == "c/bad-record", SCALING_HISTORY.c.seq == 0)
            .values(data='{"ts_ms": "yesterday"}')
        )
        conn.execute(sa.update(JOB_STATE).where(JOB_STATE.c.job_key == "c/newer").values(schema_version=99))
    with capture_logs() as logs:
        loaded = durable.store().load_many(["c/bad-state", "c/bad-record", "c/newer", "c/ok"])
    assert loaded["c/ok"] == state
    assert loaded["c/bad-state"] == JobState(history=state.history)  # the readable part stays
    assert loaded["c/bad-record"] == replace(state, history=state.history[1:])
    assert loaded["c/newer"] == JobState(history=state.history)
    discarded = [e for e in logs if e["event"] == "stored_state_discarded"]
    assert {(e["job"], e["part"]) for e in discarded} == {
        ("c/bad-state", "state"),
        ("c/bad-record", "history"),
        ("c/newer", "state"),
    }
    # discarded means gone: the rows now hold what was read, and the next load reports nothing
    reader = durable.store()
    with capture_logs() as logs:
        assert reader.load_many(loaded) == loaded
    assert logs == []


def test_events_commit_and_roll_back_with_the_tick(durable: Backend) -> None:
    db = durable.database()
    store, sink = SqlStateStore(db), SqlEventSink(db)
    with pytest.raises(RuntimeError), store.transaction():
        store.save("c/j", full_state())
        sink.emit(Event("c/j", Reason.SCALING, EventType.NORMAL, "scaled", 1))
        raise RuntimeError("crash")
    assert durable.sink().events() == []
    with store.transaction():
        store.save("c/j", full_state())
        sink.emit(Event("c/j", Reason.SCALING, EventType.NORMAL, "scaled", 1))
    assert [e.reason for e in durable.sink().events()] == [Reason.SCALING]


# ------------------------------------------------------------------------------------------ migrations
def test_schema_matches_the_newest_migration(durable: Backend) -> None:
    durable.database()
    engine = durable.engine()
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
        )
        assert compare_metadata(context, METADATA) == []


def test_window_columns_are_the_vertex_sample_fields() -> None:
    assert WINDOW_SAMPLE_COLUMNS == SAMPLE_FIELDS, "a VertexSample field changed: add a migration"


def test_upgrade_from_the_first_revision_keeps_the_data(durable: Backend) -> None:
    engine = durable.engine()
    migrate(engine, "0001")
    assert current_revision(engine) == "0001"
    with engine.begin() as conn:  # a state written by a daemon at revision 0001
        conn.execute(
            sa.text(
                "INSERT INTO autoscaler_job_state (job_key, schema_version, data, history_digest,"
                " last_rescale_ms, updated_at_ms) VALUES (:k, 1, :d, '', 7, 0)"
            ),
            {"k": "c/old", "d": encode_state(JobState(last_rescale_ms=7, overrides={"v": 3}))},
        )
        conn.execute(
            sa.text(
                "INSERT INTO autoscaler_scaling_history (job_key, seq, ts_ms, schema_version, data)"
                " VALUES (:k, 0, 7, 1, :d)"
            ),
            {"k": "c/old", "d": encode_record(ScalingRecord(7, {"v": (1, 3)}))},
        )
        assert not sa.inspect(conn).has_table("autoscaler_metric_window")
    store = durable.store()  # opening upgrades to the newest revision
    assert current_revision(engine) == head_revision()
    assert store.load("c/old") == JobState(
        last_rescale_ms=7, overrides={"v": 3}, history=(ScalingRecord(7, {"v": (1, 3)}),)
    )
    store.append_window("c/old", [row("v", 1)])
    assert len(durable.store().load_window("c/old")) == 1


def test_downgrade_to_base_and_up_again(durable: Backend) -> None:
    engine = durable.engine()
    migrate(engine)
    downgrade(engine, "base")
    assert current_revision(engine) is None
    with engine.connect() as conn:
        assert not [
            t
            for t in sa.inspect(conn).get_table_names()
            if t.startswith("autoscaler_") and "alembic" not in t
        ]
    migrate(engine)
    assert current_revision(engine) == head_revision()


def test_a_schema_newer_than_this_version_is_refused(durable: Backend) -> None:
    engine = durable.engine()
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(SchemaError, match="9999"):
        Database.open(durable.url or "")


def test_daemons_starting_together_migrate_once(durable: Backend) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            durable.database()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, [f"{type(e).__name__}: {e}" for e in errors]
    assert current_revision(durable.engine()) == head_revision()


def test_a_new_sqlite_file_locked_by_another_daemon_is_waited_for(tmp_path: Any) -> None:
    """Switching a new file to WAL needs it alone, and SQLite refuses at once rather than wait (CI flake)."""
    path = tmp_path / "state.db"
    other = sqlite3.connect(path, isolation_level=None)  # a daemon mid-way through creating the file
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE held (x)")
    opened: list[Database] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(Database.open(f"sqlite:///{path}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(timeout=0.3)  # let it run into the lock
    other.execute("COMMIT")
    other.close()
    thread.join(timeout=60)
    assert not errors, [f"{type(e).__name__}: {e}" for e in errors]
    assert current_revision(opened[0].engine) == head_revision()
    with opened[0].engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    opened[0].close()


def test_unsupported_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        make_engine("mysql://u@h/db")


def test_in_memory_sqlite_is_one_database() -> None:
    db = Database.open("sqlite://")
    try:
        a, b = SqlStateStore(db), SqlStateStore(db)
        a.save("c/j", full_state())
        assert b.load("c/j") == full_state()
    finally:
        db.close()


# ----------------------------------------------------------------------------------------------- codec
@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"last_rescale_ms": "soon"}',
        '{"last_rescale_ms": true}',
        '{"pending": {"job_id": 1, "issued_ms": 1, "target": {}, "previous": {}}}',
        '{"delayed_scale_down": {"v": {"first_trigger_ms": 1, "recommendations": []}}}',
        '{"delayed_scale_down": {"v": {"first_trigger_ms": 1, "recommendations": [[1, 2, 3]]}}}',
        '{"overrides": {"v": 1.5}}',
    ],
)
def test_codec_rejects_what_it_cannot_trust(text: str) -> None:
    with pytest.raises(CodecError):
        decode_state(1, text)


def test_codec_rejects_other_versions_and_bad_records() -> None:
    with pytest.raises(CodecError, match="version"):
        decode_state(2, encode_state(full_state()))
    with pytest.raises(CodecError):
        decode_record(1, '{"ts_ms": 1, "changes": {"v": [1]}}')
    with pytest.raises(CodecError):
        decode_record(1, '{"ts_ms": 1, "changes": {}, "metrics": {"v": [null, 1]}}')


def test_state_written_before_the_band_flags_loads_with_unknown_flags() -> None:
    """Version 1 state from before the delayed scale-downs kept their band flags: still read, whole."""
    old = (
        '{"last_rescale_ms":5,"pending":null,"overrides":{"v":4},'
        '"delayed_scale_down":{"v":{"first_trigger_ms":10,"recommendations":[[10,3],[20,2]]}}}'
    )
    state = decode_state(1, old)
    assert state.last_rescale_ms == 5 and state.overrides == {"v": 4}
    assert state.delayed_scale_down["v"] == DelayedScaleDown(
        10, (Recommendation(10, 3, None), Recommendation(20, 2, None))
    )


def test_band_flags_round_trip_beside_the_pairs_an_older_reader_expects() -> None:
    """The flags go in a list of their own: the pairs keep version 1's shape, so a daemon not yet
    upgraded (sharing the database) still reads the state instead of discarding it."""
    state = full_state()
    text = encode_state(state)
    v3 = json.loads(text)["delayed_scale_down"]["v3"]
    assert v3["recommendations"] == [[500, 6], [900, 5]] and v3["outside_band"] == [False, True]
    assert decode_state(STATE_VERSION, text) == replace(state, history=())


@pytest.mark.parametrize(
    "flags",
    ["[true]", '[true, "yes"]', '{"a": true}', "[1, 0]"],
)
def test_codec_rejects_band_flags_it_cannot_trust(flags: str) -> None:
    text = (
        '{"delayed_scale_down": {"v": {"first_trigger_ms": 1, "recommendations": [[1, 3], [2, 2]], '
        f'"outside_band": {flags}}}}}}}'
    )
    with pytest.raises(CodecError, match="outside_band"):
        decode_state(1, text)


def test_a_record_stored_before_verification_existed_loads_unverified_and_encodes_as_before() -> None:
    """A history row written by a version without verification (and one not verified yet) has no key
    for it: it reads as not verified, and encodes to the same text, so its row is not rewritten."""
    old = (
        '{"ts_ms":7,"changes":{"v":[1,3]},"confirmed_ms":9,"restart_duration_ms":2,"metrics":{"v":[1.5,4.5]}}'
    )
    record = decode_record(1, old)
    assert record == ScalingRecord(7, {"v": (1, 3)}, 9, 2, {"v": (1.5, 4.5)}) and record.verification is None
    assert encode_record(record) == old


def test_needed_capacity_round_trips_and_a_record_without_it_reads_empty() -> None:
    """The capacity a scale-up's load needed (scale-down.keep-last-peak.enabled): written only when
    there is some, so older rows and records of scale-downs encode as before."""
    record = ScalingRecord(7, {"v": (2, 4), "w": (3, 2)}, needed_capacity={"v": 3100.5})
    text = encode_record(record)
    assert json.loads(text)["needed_capacity"] == {"v": 3100.5}
    assert decode_record(1, text) == record
    down = ScalingRecord(7, {"w": (3, 2)})
    assert "needed_capacity" not in encode_record(down) and decode_record(1, encode_record(down)) == down
    with pytest.raises(CodecError, match="needed_capacity"):
        decode_record(1, '{"ts_ms":7,"changes":{"v":[2,4]},"needed_capacity":{"v":"x"}}')


def test_a_verification_round_trips_beside_what_an_older_reader_expects() -> None:
    verification = ScalingVerification(50, 0.9, {"v": VertexVerification(3, 4.5, 2.25), "w": (2, 8.0, NAN)})
    record = ScalingRecord(7, {"v": (1, 3), "w": (1, 2)}, 9, 2, {"v": (1.5, 4.5)}, verification)
    text = encode_record(record)
    assert json.loads(text)["verification"]["vertices"]["v"] == [3, 4.5, 2.25]
    again = decode_record(1, text)
    assert again.verification is not None and again.verification.vertices["v"].ratio == 0.5
    assert math.isnan(again.verification.vertices["w"].measured)
    assert replace(again, verification=verification) == record
    assert not again.verification.as_expected and again.verification.short == ("v",)


@pytest.mark.parametrize(
    "verification",
    [
        "[]",
        '{"ts_ms": 1, "threshold": 0.9, "vertices": {"v": [3, 1.0]}}',
        '{"ts_ms": 1, "threshold": 0.9, "vertices": {"v": [3.5, 1.0, 1.0]}}',
        '{"ts_ms": 1, "threshold": "high", "vertices": {}}',
        '{"threshold": 0.9, "vertices": {}}',
    ],
)
def test_codec_rejects_a_verification_it_cannot_trust(verification: str) -> None:
    with pytest.raises(CodecError, match="verification"):
        decode_record(1, f'{{"ts_ms": 1, "changes": {{}}, "verification": {verification}}}')


def test_codec_writes_strict_json() -> None:
    text = encode_record(ScalingRecord(1, {"v": (1, 2)}, metrics={"v": (NAN, math.inf)}))
    assert "NaN" not in text and '"nan"' in text and '"inf"' in text


# -------------------------------------------------------------------------------------- event contract
def ev(
    message: str = "msg",
    ts: int = 0,
    *,
    job: str = "c/j",
    reason: Reason = Reason.MEMORY_PRESSURE,
    type_: EventType = EventType.NORMAL,
    key: str = "",
) -> Event:
    return Event(job, reason, type_, message, ts, key=key)


def test_new_events_are_stored_and_logged(backend: Backend) -> None:
    sink = backend.sink()
    with capture_logs() as logs:
        assert sink.emit(ev("first", 10)) is True
        assert sink.emit(ev("other", 11, type_=EventType.WARNING)) is True
    (a, b) = backend.sink().events()
    assert (a.message, a.ts_ms, a.count, a.last_ms, a.type) == ("first", 10, 1, None, EventType.NORMAL)
    assert b.type is EventType.WARNING and b.reason is Reason.MEMORY_PRESSURE
    assert [(e["event"], e["log_level"]) for e in logs] == [("event", "info"), ("event", "warning")]


def test_a_repeat_within_the_interval_is_counted(backend: Backend) -> None:
    sink = backend.sink()
    assert sink.emit(ev("blocked", 0), interval_ms=1_000) is True
    with capture_logs() as logs:
        assert sink.emit(ev("blocked", 400), interval_ms=1_000) is False
        assert sink.emit(ev("blocked", 999), interval_ms=1_000) is False
    assert [e["event"] for e in logs] == ["event_repeated", "event_repeated"]
    (only,) = backend.sink().events()
    assert (only.count, only.ts_ms, only.last_ms, only.last_seen_ms) == (3, 0, 999, 999)
    # the interval counts from the first occurrence: the next one opens a new row
    assert sink.emit(ev("blocked", 1_000), interval_ms=1_000) is True
    assert [e.count for e in backend.sink().events()] == [3, 1]


def test_interval_zero_never_deduplicates(backend: Backend) -> None:
    sink = backend.sink()
    assert sink.emit(ev("report", 0)) and sink.emit(ev("report", 0))
    assert [e.count for e in backend.sink().events()] == [1, 1]


def test_the_dedup_key_is_job_type_reason_and_message_key(backend: Backend) -> None:
    sink, interval = backend.sink(), 60_000
    assert sink.emit(ev("veto A", 0, key="ScalingVetoed:p"), interval)
    assert not sink.emit(ev("veto B", 1, key="ScalingVetoed:p"), interval)  # same key, new text
    assert sink.emit(ev("veto B", 2, key="ScalingVetoed:q"), interval)
    assert sink.emit(ev("veto A", 3, key="ScalingVetoed:p", job="c/other"), interval)
    assert sink.emit(ev("veto A", 4, key="ScalingVetoed:p", type_=EventType.WARNING), interval)
    assert sink.emit(ev("veto A", 5, key="ScalingVetoed:p", reason=Reason.SCALING_VETOED), interval)
    assert sink.emit(ev("no key", 6), interval) and not sink.emit(ev("no key", 7), interval)
    events = backend.sink().events()
    assert [(e.message, e.count) for e in events] == [
        ("veto B", 2),  # the row keeps the latest text
        ("veto B", 1),
        ("veto A", 1),
        ("veto A", 1),
        ("veto A", 1),
        ("no key", 2),
    ]
    assert events[0].key == "ScalingVetoed:p" and events[-1].key == ""
    assert events[0].dedup_key == dedup_key(
        "c/j", EventType.NORMAL, Reason.MEMORY_PRESSURE, "ScalingVetoed:p"
    )


def test_every_reason_round_trips(backend: Backend) -> None:
    sink = backend.sink()
    for i, reason in enumerate(Reason):
        sink.emit(ev(f"m{i}", i, reason=reason))
    assert backend.sink().reasons("c/j") == list(Reason)
    assert all(type(r) is Reason for r in backend.sink().reasons())


def test_event_queries(backend: Backend) -> None:
    sink = backend.sink()
    for i in range(10):
        sink.emit(ev(f"a{i}", i * 100, job="c/a"))
        sink.emit(ev(f"b{i}", i * 100 + 50, job="c/b"))
    sink.emit(ev("a0", 10, job="c/a"), interval_ms=1_000)  # counts into a0 and moves its last_ms to 10
    reader = backend.sink()
    assert len(reader.events()) == 20
    assert [e.message for e in reader.events("c/a", limit=3)] == ["a7", "a8", "a9"]
    assert [e.message for e in reader.events("c/b", since_ms=750)] == ["b7", "b8", "b9"]
    assert [e.message for e in reader.events(since_ms=850, limit=2)] == ["a9", "b9"]
    assert [e.message for e in reader.events("c/a", since_ms=10, limit=100)][:2] == ["a0", "a1"]
    assert reader.events("c/none") == []


def test_cleanup_deletes_what_is_older_than_the_retention(backend: Backend) -> None:
    sink = backend.sink()
    for i in range(10):
        sink.emit(ev(f"old{i}", i))
    sink.emit(ev("old0", 500), interval_ms=1_000)  # a repeat keeps its row alive
    sink.emit(ev("recent", 1_000))
    assert sink.cleanup(now_ms=1_100, retention_ms=0) == 0  # 0 disables the cleanup
    assert sink.cleanup(now_ms=1_100, retention_ms=700, batch_size=3) == 9
    assert [e.message for e in backend.sink().events()] == ["old0", "recent"]
    assert sink.cleanup(now_ms=1_100, retention_ms=700) == 0


def test_memory_log_is_bounded() -> None:
    log = EventLog(max_events=3)
    for i in range(5):
        log.emit(ev(f"m{i}", i), interval_ms=10)
    assert [e.message for e in log.events()] == ["m2", "m3", "m4"]
    assert log.emit(ev("m0", 6), interval_ms=10) is True  # its row is gone: a new one


def test_open_stores_memory_and_sqlite(tmp_path: Any) -> None:
    from autoscaler.state import Stores, open_stores

    memory = open_stores("memory://")
    assert (
        isinstance(memory, Stores) and isinstance(memory.state, MemoryStateStore) and memory.database is None
    )
    url = f"sqlite:///{tmp_path}/deep/dir/state.db"  # the directory is created
    stores = open_stores(url)
    try:
        assert isinstance(stores.state, SqlStateStore) and isinstance(stores.events, EventStore)
        stores.state.save("c/j", full_state())
        stores.events.emit(ev("hello", 1))
    finally:
        stores.close()
    again = open_stores(url)
    try:
        assert again.state.load("c/j") == full_state() and [e.message for e in again.events.events()] == [
            "hello"
        ]
    finally:
        again.close()


def test_stuck_rescales_round_trip_and_are_absent_when_none() -> None:
    """RescaleStuck backoff (issue 12, defect 8): written only while stuck; other states encode as before."""
    stuck = JobState(last_rescale_ms=1, stuck_rescales=2, stuck_ms=5)
    text = encode_state(stuck)
    assert json.loads(text)["stuck"] == [2, 5] and decode_state(1, text) == stuck
    assert "stuck" not in encode_state(JobState(last_rescale_ms=1))
    assert decode_state(1, encode_state(JobState(last_rescale_ms=1))).stuck_rescales == 0


def test_refused_rescales_round_trip_and_are_absent_when_none() -> None:
    """RescaleRejected backoff: written only after a refused PUT; other states encode as before."""
    refused = JobState(last_rescale_ms=1, refused_rescales=3, refused_ms=7)
    text = encode_state(refused)
    assert json.loads(text)["refused"] == [3, 7] and decode_state(1, text) == refused
    assert "refused" not in encode_state(JobState(last_rescale_ms=1))
