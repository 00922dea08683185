"""The offered rate each tick recorded: the sources' evaluated target rates summed at the sample's time,
the first tick of a reading only, NaN where a source's rate is unknown; a failed read is logged,
counted, and gives nothing."""

from __future__ import annotations

import math
from pathlib import Path

import structlog
from archive_values import JOB, OTHER, T0, sample

from autoscaler.archive import ArchiveWriter
from autoscaler.archive.offered import ArchivedLoad, offered_rates
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.state import JobState
from autoscaler.testing import make_evaluation, vertex_eval
from autoscaler.tick.steps import Decision, JobOutcome

SECOND = JobRef("c1", "c" * 32, "orders")  # the same job name resubmitted under another JobID


def outcome(now_ms: int, sample_ts: int, src: float, work: float = 7.0, job: JobRef = JOB) -> JobOutcome:
    evaluation = make_evaluation(
        [vertex_eval("src", 2, tdr=src), vertex_eval("work", 4, tdr=work)], ts_ms=sample_ts, job=job
    )
    decision = Decision(job, Reason.IN_BAND, "in band", {}, JobState(), evaluation)
    return JobOutcome(job, now_ms, Reason.IN_BAND, "in band", decision)


def write(root: Path, ticks: list[tuple[int, list, list]]) -> None:
    writer = ArchiveWriter(root, flush_interval_ms=3_600_000, metrics=MetricsReporter())
    for now, samples, outcomes in ticks:
        writer.add(now, samples, outcomes)
    writer.flush(T0 + 3_600_000)


def test_each_reading_gives_its_sources_target_rates_at_its_sample_time(tmp_path: Path) -> None:
    write(
        tmp_path,
        [
            (T0 + 500, [sample(T0)], [outcome(T0 + 500, T0, 100.0), outcome(T0 + 500, T0, 5.0, job=OTHER)]),
            (T0 + 10_500, [sample(T0)], [outcome(T0 + 10_500, T0, 999.0)]),  # stale: the same reading
            (T0 + 20_500, [sample(T0 + 20_000)], [outcome(T0 + 20_500, T0 + 20_000, 150.0)]),
            (T0 + 30_500, [sample(T0 + 30_000)], [outcome(T0 + 30_500, T0 + 30_000, math.nan)]),
        ],
    )
    rates = offered_rates(tmp_path, ["c1/orders", "c1/absent"])
    assert set(rates) == {"c1/orders"}, "only the jobs asked for, and those the archive holds"
    got = rates["c1/orders"]
    assert got[:2] == [(T0, 100.0), (T0 + 20_000, 150.0)], "work is no source; a stale tick adds nothing"
    assert got[2][0] == T0 + 30_000 and math.isnan(got[2][1]), "an unknown source rate: NaN, as live"
    assert offered_rates(tmp_path, []) == {}


def test_a_resubmitted_job_reads_each_job_ids_sources(tmp_path: Path) -> None:
    write(
        tmp_path,
        [
            (T0 + 500, [sample(T0)], [outcome(T0 + 500, T0, 100.0)]),
            (
                T0 + 10_500,
                [sample(T0 + 10_000, SECOND)],
                [outcome(T0 + 10_500, T0 + 10_000, 200.0, job=SECOND)],
            ),
        ],
    )
    assert offered_rates(tmp_path, ["c1/orders"]) == {"c1/orders": [(T0, 100.0), (T0 + 10_000, 200.0)]}


def test_an_archive_that_cannot_be_read_is_logged_counted_and_gives_nothing(tmp_path: Path) -> None:
    metrics = MetricsReporter()
    broken = tmp_path / "decisions" / "cluster=c1" / "job=x" / "day=2025-11-27"
    broken.mkdir(parents=True)
    (broken / "part-1.parquet").write_bytes(b"not parquet")
    (tmp_path / "samples").mkdir()
    write(tmp_path, [(T0 + 500, [sample(T0)], [outcome(T0 + 500, T0, 100.0)])])
    with structlog.testing.capture_logs() as logs:
        assert ArchivedLoad(tmp_path, metrics)(["c1/orders"]) == {}
        assert ArchivedLoad(tmp_path / "gone", metrics)(["c1/orders"]) == {}
    assert [e["event"] for e in logs] == ["archive_read_failed"] * 2
    assert metrics.archive_failures.labels("read")._value.get() == 2


def test_since_leaves_older_ticks_and_their_days_out(tmp_path: Path) -> None:
    day = 86_400_000
    write(
        tmp_path,
        [
            (T0 + 500, [sample(T0)], [outcome(T0 + 500, T0, 100.0)]),
            (T0 + day + 500, [sample(T0 + day)], [outcome(T0 + day + 500, T0 + day, 200.0)]),
        ],
    )
    assert offered_rates(tmp_path, ["c1/orders"], since_ms=T0 + 1000) == {"c1/orders": [(T0 + day, 200.0)]}
