"""The best plan in hindsight for a job's recorded arrivals: the job's sizes, and the plan over them."""

from __future__ import annotations

import math

import pytest

from autoscaler.backtest.history import JobHistory
from autoscaler.backtest.optimum import best_in_hindsight
from autoscaler.backtest.workload import Workload
from autoscaler.foresight.cost import CostModel
from autoscaler.model import VertexSample
from autoscaler.testing import make_sample, make_topology

EDGES = [("src", "work", "HASH"), ("work", "sink", "FORWARD")]


def job(rates: list[float], work: int = 4, *, backlog: float = 0.0) -> tuple[JobHistory, Workload]:
    """src (10,000 rec/s a subtask) -> work (1,000, emits half) -> sink (never seen busy), read every
    10 s, ``rates`` arriving at the source tick by tick; it starts at Work ``work``."""
    topology = make_topology({"src": 1, "work": work, "sink": 1}, EDGES)
    ticks = tuple(i * 10_000 for i in range(len(rates)))
    first = make_sample(topology, ts_ms=0, vertices={"src": VertexSample(pending_records=backlog)})
    history = JobHistory("c1/job", "c1", ticks, {0: first})
    workload = Workload(
        topology,
        {"src": 10_000.0, "work": 1_000.0, "sink": math.inf},
        {"src": 1.0, "work": 0.5, "sink": 1.0},
        {t: {"src": r} for t, r in zip(ticks, rates, strict=True)},
        restart_ms=10_000,
    )
    return history, workload


def test_the_plan_follows_a_step_up_with_one_restart_to_the_size_that_carries_it() -> None:
    history, workload = job([3000.0] * 60 + [5500.0] * 60)  # 20 min, the load up at 10 min

    found = best_in_hindsight(history, workload, CostModel(lag_target_s=30.0))

    assert found is not None and found.best.exact
    assert found.step_s == pytest.approx(10.0)  # the ticks' interval
    # Work is the bottleneck (1,000 rec/s a subtask); 4 -> 3 for the first 10 min is not worth a
    # restart (10 slot-min saved, 10 slot-min a restart, plus its pause); 6 carries 5,500, and 5 may
    # run behind for a minute first: lag below the 30 s target is free.
    assert [size for _, size in found.best.plan.restarts] == [6]
    assert found.final_slots == 6
    assert found.best.cost.restarts == 1


def test_a_backlog_it_starts_with_is_drained_by_a_larger_size_when_the_lag_costs_more() -> None:
    history, workload = job([3000.0] * 60, work=3, backlog=600_000.0)  # 200 s behind at 3 subtasks

    found = best_in_hindsight(history, workload, CostModel(lag_target_s=30.0, lag_second=50.0))

    assert found is not None
    assert found.best.plan.restarts and found.best.plan.restarts[0][1] > 3  # up, to catch up


def test_nothing_to_plan_is_none() -> None:
    history, workload = job([0.0] * 10)
    assert best_in_hindsight(history, workload, CostModel()) is None  # no arrivals
    history, workload = job([100.0])
    assert best_in_hindsight(history, workload, CostModel()) is None  # one tick: no span


def test_a_long_history_is_planned_in_longer_steps() -> None:
    history, workload = job([3000.0] * 500)

    found = best_in_hindsight(history, workload, CostModel(), max_steps=100)

    assert found is not None and found.step_s == pytest.approx(499 * 10 / 100)
