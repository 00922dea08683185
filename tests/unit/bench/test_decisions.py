"""The decision bench's scores (``bench/decisions.py``): a run's cost comes from the cluster's readings,
and its regret from the best plan in hindsight for the trace, both priced by one function. No run here:
the readings are written out, as the runner would have taken them."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from autoscaler.foresight.cost import CostModel
from autoscaler.simulator.spec import Steps

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The benchmark's runner, imported the way the script imports it (from ``bench/``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("decisions")


def _step_run(decisions: ModuleType, restart_at: int) -> object:
    """1500 -> 3000 rec/s at 10 s: Work at 2 slots until a 10 s restart at ``restart_at`` takes it to 3."""
    trace = decisions.Trace("step", "1500 -> 3000", Steps([(0, 1500), (10, 3000)]), 60, 1500, change_at_s=10)
    run = decisions.JobRun(trace, "p", "step.p", "id")
    backlog = 0.0
    for t in range(61):
        rate = trace.rate.rate_at(t)
        restarting = restart_at <= t < restart_at + 10
        slots = 2 if t < restart_at + 10 else 3
        capacity = 0.0 if restarting else slots * decisions.WORK_CAPACITY
        if t > 0:
            backlog = max(0.0, backlog + rate - capacity)
        run.readings.append(decisions.Reading(float(t), rate, slots, 3, backlog, capacity))
    run.rescales.append(decisions.Rescale(float(restart_at + 10), 2, 3, 3))
    return run


def test_a_run_is_priced_from_its_readings_and_divided_by_the_best_plan(decisions: ModuleType) -> None:
    model = CostModel(restart=100.0, lag_second=10.0)
    run = _step_run(decisions, restart_at=20)
    best = decisions.hindsight(run.trace, model)

    quality = decisions.score(run, model, best)

    # Scored from 10 s to 60 s: 2 slots for 20 s, 3 for 30 s; the lag is above target from the step
    # (2 slots are slower than 3000 rec/s) until the new run drains it within 30 min.
    assert quality.cost.slot_seconds == 2 * 20 + 3 * 30
    assert quality.cost.restarts == 1
    assert quality.cost.lag_seconds == quality.backlog_s > 0
    assert quality.cost.total == 130 + 100 + 10 * quality.backlog_s
    # The best plan restarts at the step (its pause at 2 slots), so the late restart costs more.
    assert best.exact and best.plan.restarts == ((0, 3),)
    assert quality.regret == pytest.approx(quality.cost.total / best.cost.total)
    assert quality.regret > 1


def test_without_a_best_plan_there_is_no_regret(decisions: ModuleType) -> None:
    quality = decisions.score(_step_run(decisions, restart_at=10))
    assert quality.regret is None and quality.cost.restarts == 1


def test_the_new_traces_stay_within_the_slots_a_job_has(decisions: ModuleType) -> None:
    """Every trace's peak fits in the lab's slots at full use, so the best plan can always keep up."""
    for trace in (*decisions.TRACES.values(), *decisions.QUICK_TRACES.values()):
        peak = max(trace.rate.rate_at(float(t)) for t in range(int(trace.duration_s)))
        assert peak <= decisions.SLOTS_PER_JOB * decisions.WORK_CAPACITY, trace.name
