"""The reader the CLI uses: decisions from the files a running daemon writes, states and events from
the state database, opened read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from autoscaler.decision_store import JsonDecisionDir, MemoryDecisions, StoreReader, file_stem, open_reader
from autoscaler.explain import record_from_outcome
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.state import JobState, MemoryStateStore, PendingRescale, open_stores
from autoscaler.state.events import Event, EventLog, EventType
from autoscaler.tick.steps import JobOutcome

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


# ---------------------------------------------------------------------------------------- last decisions
ORDERS = JobRef("prod", "a" * 32, "orders")
KEY = "prod%2Forders"


class Counting(JsonDecisionDir):
    """Counts the files each save replaces, by suffix."""

    def __init__(self, directory: Path, keep: int = 20) -> None:
        super().__init__(directory, keep)
        self.writes: list[str] = []

    def _replace(self, target: Path, text: str) -> None:
        self.writes.append(target.name.removeprefix(KEY))
        super()._replace(target, text)


def alternating(n: int, start: int = 0) -> list:
    """n decisions that each differ from the one before (so none extends a run)."""
    reasons = (Reason.IN_BAND, Reason.SCALE_DOWN_DELAYED)
    return [record(ORDERS, reasons[i % 2], NOW + (start + i) * 10_000) for i in range(n)]


def test_the_last_n_decisions_are_kept_and_older_ones_pruned(tmp_path):
    writer = JsonDecisionDir(tmp_path, keep=3)
    for r in alternating(5):
        writer.save_decision(r)
    kept = JsonDecisionDir(tmp_path, keep=3).load_history("prod/orders")
    assert [r.ts_ms for r in kept] == [NOW + 20_000, NOW + 30_000, NOW + 40_000]
    assert len((tmp_path / f"{KEY}.history.jsonl").read_text().splitlines()) == 2  # the newest is apart
    assert JsonDecisionDir(tmp_path).load_decisions()["prod/orders"] == kept[-1]
    memory = MemoryDecisions(keep=3)
    for r in alternating(5):
        memory.save_decision(r)
    assert memory.load_history("prod/orders") == kept
    assert StoreReader(memory).history("prod/orders") == kept
    assert memory.load_decisions() == {"prod/orders": kept[-1]}


def test_a_run_of_the_same_decision_rewrites_only_the_newest_file(tmp_path):
    writer = Counting(tmp_path)
    writer.save_decision(record(ORDERS, Reason.SCALING, NOW))
    for i in range(1, 6):
        writer.save_decision(record(ORDERS, Reason.IN_BAND, NOW + i * 10_000))
    # the rescale; the in-band decision after it (the rescale joins the earlier ones); 4 more ticks of it
    assert writer.writes == [".json", ".history.jsonl", ".json", *[".json"] * 4]
    scaled, in_band = JsonDecisionDir(tmp_path).load_history("prod/orders")
    assert scaled.outcome == Reason.SCALING
    assert (in_band.first_ms, in_band.ts_ms, in_band.ticks) == (NOW + 10_000, NOW + 50_000, 5)


def test_a_restarted_daemon_continues_the_decisions_on_disk(tmp_path):
    JsonDecisionDir(tmp_path).save_decision(record(ORDERS, Reason.SCALING, NOW))
    JsonDecisionDir(tmp_path).save_decision(record(ORDERS, Reason.IN_BAND, NOW + 10_000))
    again = JsonDecisionDir(tmp_path)  # a new process
    again.save_decision(record(ORDERS, Reason.IN_BAND, NOW + 20_000))
    kept = again.load_history("prod/orders")
    assert [(r.outcome, r.ticks) for r in kept] == [(Reason.SCALING, 1), (Reason.IN_BAND, 2)]


def test_a_directory_written_before_the_history_reads_as_one_decision_per_job(tmp_path):
    """What an older daemon wrote (``<key>.json`` alone) is the job's only decision, and is continued."""
    old = record(ORDERS, Reason.SCALING, NOW)
    (tmp_path / f"{KEY}.json").write_text(old.to_json())
    assert JsonDecisionDir(tmp_path).load_history("prod/orders") == [old]
    writer = JsonDecisionDir(tmp_path)
    writer.save_decision(record(ORDERS, Reason.IN_BAND, NOW + 10_000))
    assert [r.ts_ms for r in writer.load_history("prod/orders")] == [NOW, NOW + 10_000]
    assert JsonDecisionDir(tmp_path).load_history("prod/nothing") == []


def test_a_reader_between_the_two_writes_sees_each_decision_once(tmp_path):
    """The earlier decisions are replaced first: for a moment they hold the newest file's decision too."""
    first, second = alternating(2)
    lines = f"{first.to_json()}\n{second.to_json()}\n"
    (tmp_path / f"{KEY}.history.jsonl").write_text(lines)
    (tmp_path / f"{KEY}.json").write_text(second.to_json())  # not replaced by the third one yet
    assert JsonDecisionDir(tmp_path).load_history("prod/orders") == [first, second]


def test_unreadable_earlier_decisions_are_skipped(tmp_path):
    first, second = alternating(2)
    (tmp_path / f"{KEY}.history.jsonl").write_text(f"{{broken\n[]\n{first.to_json()}\n")
    (tmp_path / f"{KEY}.json").write_text(second.to_json())
    assert JsonDecisionDir(tmp_path).load_history("prod/orders") == [first, second]


@pytest.mark.parametrize("keep", [0, -1, 1001])
def test_the_number_of_decisions_to_keep_is_bounded(tmp_path, keep):
    with pytest.raises(ValueError, match=r"decisions to keep per job must be 1\.\.1000"):
        JsonDecisionDir(tmp_path, keep=keep)
    with pytest.raises(ValueError, match="decisions to keep"):
        MemoryDecisions(keep=keep)


# ------------------------------------------------------------------------------------ names a job brings
ODD_NAMES = [
    "n" * 10_000,  # over any filesystem's 255 bytes once encoded
    "€" * 3_000,  # 9 characters each encoded
    "..",
    "../../etc/passwd",
    "a\x00b",
    "50%+done",
    "ETL / nightly: v2",
]


def test_file_names_of_any_job_name_are_names_within_filesystem_limits_and_read_back(tmp_path):
    stems = {name: file_stem(f"prod/{name}") for name in ODD_NAMES}
    for name, stem in stems.items():
        assert len(stem) <= 200 and "/" not in stem and "\x00" not in stem, name
        assert stem.startswith("prod%2F")  # readable: the cluster and the start of the name
    assert ("+" in stems["n" * 10_000]) and not any("+" in s for n, s in stems.items() if len(n) < 20)
    assert file_stem(f"prod/{'n' * 9_999}A") != file_stem(f"prod/{'n' * 9_999}B")

    writer = JsonDecisionDir(tmp_path / "decisions")
    for i, name in enumerate(ODD_NAMES):
        job = JobRef("prod", f"{i:032x}", name)
        writer.save_decision(record(job, Reason.SCALING))
        writer.save_decision(record(job, Reason.IN_BAND, NOW + 10_000))
    assert {p.parent for p in tmp_path.rglob("*") if p.is_file()} == {tmp_path / "decisions"}
    reader = JsonDecisionDir(tmp_path / "decisions")
    assert set(reader.load_decisions()) == {f"prod/{name}" for name in ODD_NAMES}
    for name in ODD_NAMES:  # what explain --last reads
        assert [r.outcome for r in reader.load_history(f"prod/{name}")] == [Reason.SCALING, Reason.IN_BAND]


def test_a_failing_write_is_logged_once_counted_each_time_and_caught_up_when_it_works(tmp_path):
    directory = tmp_path / "decisions"
    failures = []
    writer = JsonDecisionDir(directory, on_write_failed=lambda: failures.append(1))
    job = JobRef("prod", "a" * 32, "orders")
    writer.save_decision(record(job, Reason.SCALING))
    directory.rename(tmp_path / "away")
    directory.write_text("a file where the directory was")
    outcomes = [Reason.IN_BAND, Reason.COOLDOWN_DEFERRED, Reason.IN_BAND]
    with capture_logs() as logs:
        for i, reason in enumerate(outcomes, 1):
            writer.save_decision(record(job, reason, NOW + i * 10_000))
    assert [line["event"] for line in logs] == ["decision_write_failed"]
    assert logs[0]["job"] == "prod/orders" and logs[0]["log_level"] == "error"
    assert len(failures) == 3

    directory.unlink()
    (tmp_path / "away").rename(directory)
    with capture_logs() as logs:
        writer.save_decision(record(job, Reason.IN_BAND, NOW + 40_000))  # extends the last IN_BAND run
    assert [line["event"] for line in logs] == ["decision_write_recovered"]
    history = JsonDecisionDir(directory).load_history("prod/orders")
    assert [r.outcome for r in history] == [Reason.SCALING, *outcomes]  # nothing lost while it failed
