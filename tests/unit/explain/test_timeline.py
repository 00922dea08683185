"""A job's timeline from plain values: decision records alone, or the archive's samples."""

from __future__ import annotations

from dataclasses import replace

import pytest
from timeline_values import JOB, T0, record, sample

from autoscaler.explain import DecisionRecord
from autoscaler.explain.timeline import (
    ARCHIVE,
    RECORDS,
    TimelinePoint,
    job_timeline,
    points_from_samples,
    thin,
)
from autoscaler.reasons import Reason


def test_without_samples_the_points_are_the_records_and_each_decision_is_marked():
    records = [
        record(T0 + 20_000, Reason.SCALING, decided=2, scaled=True),
        record(T0, Reason.WINDOW_NOT_FULL),
        record(T0 + 80_000, Reason.IN_BAND, work=2, capacity=2500.0, lag=0.0),
    ]
    t = job_timeline(records)
    assert t.source == RECORDS and t.job_key == "c1/orders"
    # Sorted by time; after the rescale, the parallelism it asked for.
    assert [p.ts_ms for p in t.points] == [T0, T0 + 20_000, T0 + 20_001, T0 + 80_000]
    assert t.points[2].parallelism["Work"] == 2 and t.points[2].offered is None
    first = t.points[0]
    assert first.offered == 2000.0 and first.lag == 5000.0
    assert first.capacity == pytest.approx(1250.0)  # the tightest vertex: work at 1250 of 2000
    assert first.parallelism == {"Source: orders": 1, "Work": 1}
    assert t.points[-1].capacity == pytest.approx(2500.0) and t.points[-1].parallelism["Work"] == 2
    marks = {m.outcome: m for m in t.marks}
    scaled = marks[str(Reason.SCALING)]
    assert scaled.scaled and scaled.scale_up and scaled.changes == (("Work", 1, 2),)
    assert not marks[str(Reason.IN_BAND)].changes and not marks[str(Reason.IN_BAND)].held
    assert t.vertices == ("Source: orders", "Work")
    assert t.span_ms == (T0, T0 + 80_000)


def test_a_change_wanted_and_not_made_is_held():
    t = job_timeline([record(T0, Reason.NOT_WORTH_IT, decided=2)])
    assert t.marks[0].held and not t.marks[0].scaled


def test_a_record_without_an_evaluation_is_marked_but_has_no_point():
    bare = DecisionRecord(
        JOB.key, JOB.cluster, JOB.name, JOB.job_id, T0, str(Reason.CLUSTER_UNREACHABLE), "down"
    )
    t = job_timeline([bare, record(T0 + 10_000, Reason.IN_BAND)])
    assert [p.ts_ms for p in t.points] == [T0 + 10_000]
    assert [m.outcome for m in t.marks] == [str(Reason.CLUSTER_UNREACHABLE), str(Reason.IN_BAND)]


def test_no_records_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        job_timeline([])


def test_from_samples_offered_is_arrivals_and_capacity_is_read_over_the_busiest_fraction():
    samples = [
        sample(0, read=0, pending=0, busy_ms=0),
        sample(10, read=12_500, pending=7_500, busy_ms=10_000),  # 2,000/s arrive, 1,250/s read, busy 100 %
        sample(10, read=12_500, pending=7_500, busy_ms=10_000, stale=1),  # a stale repeat: skipped
        sample(20, read=25_000, pending=15_000, busy_ms=20_000),
    ]
    points = points_from_samples(samples)
    assert [p.ts_ms for p in points] == [T0, T0 + 10_000, T0 + 20_000]
    assert points[0].offered is None and points[0].capacity is None  # no earlier reading
    assert points[1].offered == pytest.approx(2000.0) and points[1].capacity == pytest.approx(1250.0)
    assert points[2].lag == 15_000 and points[2].parallelism == {"src": 1, "work": 1}


def test_a_vertex_busy_half_the_time_could_carry_twice_what_it_read():
    points = points_from_samples(
        [sample(0, read=0, pending=0, busy_ms=0), sample(10, read=10_000, pending=0, busy_ms=5_000)]
    )
    assert points[1].offered == pytest.approx(1000.0) and points[1].capacity == pytest.approx(2000.0)


def test_an_idle_job_has_no_capacity_and_a_restart_starts_the_rates_again():
    idle = points_from_samples(
        [sample(0, read=0, pending=0, busy_ms=0), sample(10, read=10, pending=0, busy_ms=1)]
    )
    assert idle[1].offered == pytest.approx(1.0) and idle[1].capacity is None
    restarted = points_from_samples(
        [
            sample(0, read=0, pending=0, busy_ms=0),
            sample(10, read=5_000, pending=0, busy_ms=10_000, work=2, since_s=5),  # a rescale: counters anew
        ]
    )
    assert restarted[1].offered is None and restarted[1].parallelism["work"] == 2


def test_samples_win_over_records_and_the_records_still_mark():
    samples = [sample(0, read=0, pending=0, busy_ms=0), sample(10, read=10_000, pending=0, busy_ms=5_000)]
    t = job_timeline([record(T0 + 10_000, Reason.IN_BAND)], samples)
    assert t.source == ARCHIVE and len(t.points) == 2 and len(t.marks) == 1


def test_a_long_history_is_thinned_keeping_every_rescale_and_each_stretchs_highest_backlog():
    points = [
        TimelinePoint(T0 + i * 10_000, 100.0, 200.0, float(i % 50), {"work": 1 if i < 777 else 2})
        for i in range(10_000)
    ]
    kept = thin(points, 200)
    assert len(kept) <= 210 and kept[0] == points[0] and kept[-1] == points[-1]
    assert points[777] in kept  # the rescale, exactly
    assert all(p.lag == 49.0 for p in kept[1:-1] if p is not points[777])  # each stretch's peak
    assert thin(points[:5], 200) == tuple(points[:5])


def test_the_timeline_says_when_it_was_thinned():
    samples = [sample(s, read=s * 100, pending=0, busy_ms=s * 500) for s in range(0, 300, 10)]
    t = job_timeline([record(T0, Reason.IN_BAND)], samples, max_points=10)
    assert len(t.points) <= 12 and t.thinned_from == 30
    assert job_timeline([record(T0, Reason.IN_BAND)], samples).thinned_from is None


def test_a_run_of_ticks_is_drawn_flat_from_its_first_tick():
    run = replace(record(T0 + 60_000, Reason.IN_BAND), since_ms=T0, ticks=7)
    t = job_timeline([run])
    assert [p.ts_ms for p in t.points] == [T0, T0 + 60_000]
    assert t.points[0].offered == t.points[1].offered and t.points[0].parallelism == t.points[1].parallelism
