"""The simulator's network buffers: a vertex that cannot keep up back-pressures its input only once the
buffers in front of it are full (issue 36 item 5).

Until then real Flink reports the source reading and emitting the whole offered load, its
``pendingRecords`` at 0 and no back-pressure, while the slow vertex reads its capacity at 100 % busy;
afterwards the source is back-pressured and the backlog grows by the difference.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, work_job
from autoscaler.simulator.engine.job import LAB_IN_FLIGHT_RECORDS
from autoscaler.simulator.engine.store import MetricValue

SOURCE, WORK = "Source: BacklogSource", "Work"
OFFERED, CAPACITY = 2700.0, 2500.0  # Work at 2 x 1,250 rec/s
BUFFERED = 2 * LAB_IN_FLIGHT_RECORDS  # in front of Work's two subtasks: full after 110 s


def total(subtasks: Sequence[dict[str, MetricValue]], name: str) -> float:
    return sum(float(s[name]) for s in subtasks)


@pytest.fixture
def started(clock: FakeClock) -> tuple[SimCluster, str]:
    cluster = SimCluster(SimClusterSpec(), clock)
    job = work_job(input_rate=Constant(OFFERED), work_parallelism=2, in_flight_records=LAB_IN_FLIGHT_RECORDS)
    return cluster, cluster.submit(job)


def reported(cluster: SimCluster, job_id: str, vertex: str) -> Sequence[dict[str, MetricValue]]:
    return cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)[vertex]]


def test_until_the_buffers_are_full_the_source_reads_the_whole_offered_load(
    started: tuple[SimCluster, str], clock: FakeClock
) -> None:
    cluster, job_id = started
    clock.advance(60)
    source, work = reported(cluster, job_id, SOURCE), reported(cluster, job_id, WORK)
    assert total(source, "numRecordsOut") == pytest.approx(60 * OFFERED, abs=2)
    assert total(work, "numRecordsIn") == pytest.approx(60 * CAPACITY, abs=2)
    assert total(source, "Source__BacklogSource.pendingRecords") == 0
    assert total(source, "backPressuredTimeMsPerSecond") == 0
    assert all(s["busyTimeMsPerSecond"] == 1000 for s in work)
    assert cluster.job(job_id).in_flight[WORK] == pytest.approx(60 * (OFFERED - CAPACITY))


def test_once_the_buffers_are_full_the_source_is_back_pressured(
    started: tuple[SimCluster, str], clock: FakeClock
) -> None:
    cluster, job_id = started
    clock.advance(200)  # full after 22,000 / 200 = 110 s
    source = reported(cluster, job_id, SOURCE)
    assert total(source, "numRecordsOut") == pytest.approx(BUFFERED + 200 * CAPACITY, abs=2)
    assert total(source, "Source__BacklogSource.pendingRecords") == pytest.approx(
        200 * OFFERED - BUFFERED - 200 * CAPACITY, abs=2
    )
    assert total(source, "backPressuredTimeMsPerSecond") > 900
    assert cluster.job(job_id).in_flight[WORK] == pytest.approx(BUFFERED)


def test_without_buffers_the_source_is_back_pressured_at_once(clock: FakeClock) -> None:
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(work_job(input_rate=Constant(OFFERED), work_parallelism=2))
    clock.advance(60)
    source = reported(cluster, job_id, SOURCE)
    assert total(source, "numRecordsOut") == pytest.approx(60 * CAPACITY, abs=2)
    assert cluster.backlog(job_id) == pytest.approx(60 * (OFFERED - CAPACITY))


def test_the_buffered_records_survive_a_restart(started: tuple[SimCluster, str], clock: FakeClock) -> None:
    """An unaligned checkpoint persists them: Work at 3 reads them first, then keeps up."""
    cluster, job_id = started
    clock.advance(60)
    ids = cluster.vertex_ids(job_id)
    cluster.set_resource_requirements(
        job_id, {vid: (1, 3 if name == WORK else 1) for name, vid in ids.items()}
    )
    clock.advance(120)
    job = cluster.job(job_id)
    assert job.parallelism[WORK] == 3
    assert job.in_flight[WORK] == pytest.approx(0, abs=1e-6)
    assert cluster.backlog(job_id) == pytest.approx(0, abs=1e-6)
