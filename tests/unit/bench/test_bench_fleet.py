"""The fleet benchmark's pieces that decide what it reports: the fleet it simulates and what it reads off
the daemon's ``/metrics``. The benchmark itself is a script (``bench/bench_fleet.py``); no timings here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import SimCluster, handle

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The benchmark, imported the way the script runs (from ``bench/``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("bench_fleet")


def test_the_fleet_is_mostly_in_band_with_some_jobs_to_scale(fleet: ModuleType) -> None:
    """Each vertex runs at the utilization its job's kind asks for (the simulator's own rates, after a
    minute of steady load), through a DAG whose joins double what they receive."""
    jobs = [fleet.fleet_job(j, 10) for j in range(40)]
    assert len({job.name for job in jobs}) == 40 and all(len(job.vertices) == 10 for job in jobs)
    kinds = [fleet.job_kind(j) for j in range(40)]
    assert kinds.count("hot") == 4 and kinds.count("cold") == 2 and kinds.count("in-band") == 34
    assert len(jobs[0].edges) == 9 + 3  # the chain, and a second input for vertices 3, 6 and 9
    clock = FakeClock()
    cluster = SimCluster(fleet.fleet_cluster(40, 0, 1.0), clock)  # fresh metrics on every query
    ids = [cluster.submit(job) for job in jobs]
    clock.advance(120)
    for j, job_id in enumerate(ids):
        vertices = cluster.vertex_ids(job_id)
        busy = []
        for vid in vertices.values():
            path = f"/jobs/{job_id}/vertices/{vid}/subtasks/metrics"
            status, body = handle(cluster, "GET", path, {"get": "busyTimeMsPerSecond", "agg": "max"}, None)
            assert status == 200
            busy.append(body[0]["max"] / 1000)
        if kinds[j] == "cold":
            assert max(busy) < 0.3
        elif kinds[j] == "hot":
            assert max(busy) == pytest.approx(1.0)  # saturated: its backlog grows
        else:
            assert min(busy) >= 0.4 and max(busy) <= 0.95, busy  # +-10 % noise around 0.45..0.85
    heap = cluster.metric_store().taskmanagers
    assert (
        max(m["Status.JVM.Memory.Heap.Used"] / m["Status.JVM.Memory.Heap.Max"] for m in heap.values()) < 0.5
    )


def test_only_the_series_it_reports_are_read_off_metrics(fleet: ModuleType) -> None:
    text = "\n".join(
        [
            "# HELP flink_autoscaler_ticks_total Control-loop ticks run",
            "flink_autoscaler_ticks_total 5.0",
            "flink_autoscaler_ticks_skipped_total 1.0",
            'flink_autoscaler_tick_duration_seconds_bucket{le="5.0"} 4.0',
            "flink_autoscaler_tick_duration_seconds_count 5.0",
            "flink_autoscaler_tick_duration_seconds_sum 12.5",
            'flink_autoscaler_rest_requests_total{cluster="fleet",method="GET",endpoint="/jobs/:jobid",'
            'status="200"} 40.0',
            'flink_autoscaler_rest_requests_total{cluster="fleet",method="GET",endpoint="/jobs/:jobid",'
            'status="503"} 2.0',
            'flink_autoscaler_rest_requests_created{cluster="fleet",method="GET",endpoint="/x"} 1.7e9',
            'flink_autoscaler_tick_stage_duration_seconds_sum{stage="collect"} 9.5',
            'flink_autoscaler_tick_stage_duration_seconds_count{stage="collect"} 5.0',
            'flink_autoscaler_tick_stage_duration_seconds_sum{stage="evaluate"} 2.0',
            'flink_autoscaler_metric_fetch_wait_seconds_count{cluster="a",outcome="landed"} 3.0',
            'flink_autoscaler_metric_fetch_wait_seconds_sum{cluster="a",outcome="landed"} 0.75',
            'flink_autoscaler_metric_fetch_wait_seconds_count{cluster="b",outcome="landed"} 1.0',
            'flink_autoscaler_metric_fetch_wait_seconds_sum{cluster="b",outcome="landed"} 0.25',
            'flink_autoscaler_metric_fetch_wait_seconds_bucket{cluster="b",outcome="landed",le="1.0"} 1.0',
        ]
    )
    scrape = fleet.Scrape.parse(text, at_s=3.0)
    assert (scrape.ticks, scrape.tick_sum_s, scrape.skipped) == (5.0, 12.5, 1.0)
    assert scrape.requests == {"GET /jobs/:jobid": 42.0}  # every status counts: each was a request
    assert scrape.stage_sums_s == {"collect": 9.5, "evaluate": 2.0}  # in the daemon's order
    assert scrape.fetch_waits == {"landed": (4.0, 1.0)}  # summed over the clusters
