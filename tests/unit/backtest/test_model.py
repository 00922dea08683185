"""The backtest's model of a job: what the history says of its capacity and load (workload), how it runs
at a parallelism it never ran at (world), and how a world is scored."""

from __future__ import annotations

import math

import pytest

from autoscaler.backtest.history import JobHistory
from autoscaler.backtest.score import Scorer, slots_of
from autoscaler.backtest.workload import estimate_workload
from autoscaler.backtest.world import World
from autoscaler.model import JobSample, VertexSample
from autoscaler.testing import make_sample, make_topology

S = 1000  # ms
# src (capacity 10,000 rec/s per subtask) -> work (1,000 rec/s per subtask, emits half) -> sink (unlimited)
CAPACITY = {"src": 10_000.0, "work": 1_000.0}


def recorded(
    ticks: int, rate: float, parallelism: dict[str, int], *, lag_growth: float = 0.0
) -> list[JobSample]:
    """A job fed ``rate`` rec/s at its source, read every 10 s, its backlog growing by ``lag_growth``/s."""
    topology = make_topology(parallelism, [("src", "work", "HASH"), ("work", "sink", "FORWARD")])
    out = []
    for i in range(ticks):
        t = i * 10
        work_in = rate * t
        vertices = {
            "src": VertexSample(
                busy_time_ms_per_s=1000 * rate / (CAPACITY["src"] * parallelism["src"]),
                num_records_in=rate * t,
                num_records_out=rate * t,
                pending_records=100 + lag_growth * t,
            ),
            "work": VertexSample(
                busy_time_ms_per_s=1000 * rate / (CAPACITY["work"] * parallelism["work"]),
                num_records_in=work_in,
                num_records_out=work_in / 2,
            ),
            "sink": VertexSample(busy_time_ms_per_s=0.0, num_records_in=work_in / 2, num_records_out=0.0),
        }
        out.append(make_sample(topology, ts_ms=t * S, vertices=vertices))
    return out


def history_of(samples: list[JobSample], puts: dict[int, dict[str, int]] | None = None) -> JobHistory:
    return JobHistory(
        "c1/job", "c1", tuple(s.ts_ms for s in samples), {s.ts_ms: s for s in samples}, puts or {}
    )


def test_the_workload_is_measured_from_the_counters() -> None:
    history = history_of(recorded(12, 3_000.0, {"src": 1, "work": 4, "sink": 1}, lag_growth=50.0))
    workload = estimate_workload(history, default_restart_ms=60_000)

    assert workload.capacity["src"] == pytest.approx(10_000)
    assert workload.capacity["work"] == pytest.approx(1_000)
    assert math.isinf(workload.capacity["sink"])  # never busy: no known limit
    assert workload.ratio["work"] == pytest.approx(0.5)
    # Arrivals: records read plus the backlog's growth.
    assert workload.arrival(history.ticks[-1]) == {"src": pytest.approx(3_050)}
    assert workload.arrival(history.ticks[0]) == {"src": pytest.approx(3_050)}  # before the first measured
    assert workload.restart_ms == 60_000  # no rescale recorded: the configuration's restart time


def test_the_restart_cost_is_what_the_live_rescales_took() -> None:
    samples = recorded(12, 3_000.0, {"src": 1, "work": 4, "sink": 1})
    put_at = samples[5].ts_ms
    restarted = [s if s.ts_ms <= put_at else _restarted(s, put_at + 25 * S) for s in samples]
    workload = estimate_workload(history_of(restarted, {put_at: {"work": 5}}), default_restart_ms=60_000)
    assert workload.restart_ms == 25_000


def _restarted(sample: JobSample, since_ms: int) -> JobSample:
    from dataclasses import replace

    return replace(sample, running_since_ms=since_ms)


def test_the_world_backs_up_behind_its_bottleneck_and_catches_up_after_a_rescale() -> None:
    samples = recorded(12, 3_000.0, {"src": 1, "work": 4, "sink": 1})
    workload = estimate_workload(history_of(samples), default_restart_ms=20_000)
    start = samples[-1]
    world = World(workload, replace_parallelism(start, work=2), start.ts_ms)  # 2,000 rec/s < 3,000

    t = start.ts_ms + 10 * S
    slow = world.advance(t, start)
    assert slow is not None
    assert slow.vertices["work"].busy_time_ms_per_s == pytest.approx(1000)
    assert slow.vertices["src"].backpressured_ms_per_s > 0  # upstream of the bottleneck
    assert slow.vertices["sink"].backpressured_ms_per_s == 0
    assert world.total_backlog() == pytest.approx(100 + 1_000 * 10)  # 1,000 rec/s short for 10 s

    world.put(t, {"src": 1, "work": 6, "sink": 1})
    assert world.advance(t + 10 * S, start) is None  # restarting: the daemon finds it not running
    assert world.total_backlog() == pytest.approx(100 + 1_000 * 10 + 3_000 * 10)
    back = world.advance(t + 30 * S, start)
    assert back is not None
    assert back.running_since_ms == t + 20 * S
    assert back.topology.vertices["work"].parallelism == 6
    assert back.vertices["src"].num_records_in < 3_000 * 10 + world.total_backlog() + 1  # counters from zero
    for i in range(4, 20):
        world.advance(t + i * 10 * S, start)
    assert world.total_backlog() == 0  # 6,000 rec/s of capacity works the backlog off


def replace_parallelism(sample: JobSample, **parallelism: int) -> JobSample:
    from dataclasses import replace

    vertices = {
        vid: replace(v, parallelism=parallelism.get(vid, v.parallelism))
        for vid, v in sample.topology.vertices.items()
    }
    return replace(sample, topology=replace(sample.topology, vertices=vertices))


def test_a_world_is_scored_for_time_below_capacity_backlog_and_slots() -> None:
    samples = recorded(4, 3_000.0, {"src": 1, "work": 4, "sink": 1})
    workload = estimate_workload(history_of(samples), default_restart_ms=20_000)
    scorer = Scorer(workload, lag_target_s=30.0)
    wide, narrow = {"src": 1, "work": 4, "sink": 1}, {"src": 1, "work": 2, "sink": 1}
    scorer.tick(0, wide, 0.0, 4)
    scorer.tick(10 * S, wide, 1_000.0, 4)  # 1,000 behind 3,050/s: within target
    scorer.tick(20 * S, narrow, 200_000.0, 2)  # 2,000 rec/s < 3,050: below; > 30 s behind
    scorer.restart()
    scorer.tick(30 * S, None)  # restarting: below, backlog as before
    score = scorer.score()
    assert score.restarts == 1
    assert score.below_capacity_s == 20
    assert score.backlog_above_target_s == 20
    assert score.slot_hours == pytest.approx((4 * 10 + 2 * 10 + 2 * 10) / 3600)


def test_slots_are_counted_per_slot_sharing_group() -> None:
    topology = make_topology({"a": 2, "b": 5, "c": 3})
    assert slots_of(topology, {"a": 2, "b": 5, "c": 3}) == 5  # one group: the widest
