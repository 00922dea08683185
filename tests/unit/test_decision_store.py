"""The reader the CLI uses: decisions from the files a running daemon writes, states and events from
the state database, opened read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.decision_store import JsonDecisionDir, MemoryDecisions, StoreReader, open_reader
from autoscaler.events import Event, EventLog, EventType
from autoscaler.explain import record_from_outcome
from autoscaler.model import JobRef
from autoscaler.outcome import JobOutcome
from autoscaler.reasons import Reason
from autoscaler.state import JobState, MemoryStateStore, PendingRescale, open_stores

NOW = 1_800_000_000_000
PENDING = JobState(last_rescale_ms=NOW - 60_000, pending=PendingRescale("a", NOW, {"v": 3}, {"v": 1}))


def record(job: JobRef, reason: Reason = Reason.IN_BAND, ts_ms: int = NOW):
    return record_from_outcome(JobOutcome(job, ts_ms, reason, "detail"))


def test_decision_files_are_replaced_whole_and_read_back(tmp_path):
    writer = JsonDecisionDir(tmp_path / "decisions")
    orders = JobRef("prod", "a" * 32, "orders")
    odd = JobRef("prod", "b" * 32, "ETL / nightly: v2")  # slashes and spaces in a job name
    writer.save_decision(record(orders, Reason.SCALING))
    writer.save_decision(record(odd))
    writer.save_decision(record(orders, Reason.COOLDOWN_DEFERRED, NOW + 10_000))  # replaces the first

    decisions = JsonDecisionDir(tmp_path / "decisions").load_decisions()
    assert set(decisions) == {"prod/orders", "prod/ETL / nightly: v2"}
    assert decisions["prod/orders"].outcome == Reason.COOLDOWN_DEFERRED
    assert not list((tmp_path / "decisions").glob(".*.tmp"))  # no temporary file left behind


def test_unreadable_files_are_skipped_not_fatal(tmp_path):
    JsonDecisionDir(tmp_path).save_decision(record(JobRef("c", "a" * 32, "good")))
    (tmp_path / "c%2Fbroken.json").write_text("{not json")
    (tmp_path / "c%2Fold.json").write_text('{"unexpected": 1}')
    assert set(JsonDecisionDir(tmp_path).load_decisions()) == {"c/good"}


def test_a_missing_directory_is_an_error_the_cli_can_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="no decisions directory"):
        JsonDecisionDir(tmp_path / "nope").load_decisions()


def test_store_reader_combines_decisions_states_and_recent_events():
    state, events, decisions = MemoryStateStore(), EventLog(), MemoryDecisions()
    state.save("prod/orders", PENDING)
    for i in range(30):
        events.emit(Event("prod/orders", Reason.SCALING_REPORT, EventType.NORMAL, f"report {i}", NOW + i))
    r = record(JobRef("prod", "a" * 32, "orders"))
    decisions.save_decision(r)
    reader = StoreReader(decisions, state, events, max_events=20)
    assert reader.load_decisions() == {"prod/orders": r}
    assert reader.load_states() == {"prod/orders": PENDING}
    assert [e.message for e in reader.events("prod/orders")] == [f"report {i}" for i in range(10, 30)]
    bare = StoreReader(decisions)
    assert bare.load_states() == {} and bare.events("prod/orders") == []


def test_open_reader_reads_the_daemons_sqlite_database_without_changing_it(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    daemon_side = open_stores(url)  # what `run` opens: creates and migrates the schema
    try:
        daemon_side.state.save("prod/orders", PENDING)
        daemon_side.events.emit(Event("prod/orders", Reason.SCALING, EventType.NORMAL, "PUT sent", NOW))
    finally:
        daemon_side.close()
    JsonDecisionDir(tmp_path / "decisions").save_decision(record(JobRef("prod", "a" * 32, "orders")))

    reader, notes, close = open_reader(url, tmp_path / "decisions")
    try:
        assert notes == []
        assert reader.load_states() == {"prod/orders": PENDING}
        assert [e.message for e in reader.events("prod/orders")] == ["PUT sent"]
        assert set(reader.load_decisions()) == {"prod/orders"}
    finally:
        close()


def test_open_reader_says_what_it_cannot_show(tmp_path):
    reader, notes, close = open_reader(f"sqlite:///{tmp_path / 'missing.db'}", tmp_path)
    close()
    assert "no state database at" in notes[0] and not (tmp_path / "missing.db").exists()
    assert reader.load_states() == {}
    _, notes, close = open_reader("memory://", tmp_path)
    close()
    assert "memory://" in notes[0]
