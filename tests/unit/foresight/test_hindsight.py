"""The best plan in hindsight against brute force over every plan, and the plans it finds."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.foresight.cost import CostModel
from autoscaler.foresight.hindsight import Plan, best_plan, pause_steps, plan_cost, run_plan

PER_SUBTASK = 1000.0


def linear(p: int) -> float:
    return p * PER_SUBTASK


def every_plan(steps: int, levels: Sequence[int], start: int, k: int) -> Iterator[Plan]:
    """Every plan: at each step the job runs on, or begins a restart to another level that ends in time."""

    def walk(t: int, p: int, restarts: tuple[tuple[int, int], ...]) -> Iterator[Plan]:
        if t >= steps:
            yield Plan(start, restarts)
            return
        yield from walk(t + 1, p, restarts)
        if t + k <= steps:
            for q in levels:
                if q != p:
                    yield from walk(t + k, q, (*restarts, (t, q)))

    yield from walk(0, start, ())


def brute_force(
    rates: Sequence[float],
    capacity: Callable[[int], float],
    levels: Sequence[int],
    start: int,
    pause_s: float,
    model: CostModel,
    backlog: float,
    slots: Callable[[int], int] | None,
) -> float:
    k = pause_steps(pause_s, 1.0)
    return min(
        plan_cost(plan, rates, 1.0, capacity, pause_s, model, backlog, slots).total
        for plan in every_plan(len(rates), levels, start, k)
    )


instances = st.fixed_dictionaries(
    {
        "rates": st.lists(
            st.sampled_from([0.0, 500.0, 1000.0, 1800.0, 2500.0, 3000.0]), min_size=1, max_size=7
        ),
        "levels": st.sampled_from([(1, 2), (1, 2, 3), (1, 3)]),
        "start": st.sampled_from([1, 2, 3]),
        "pause_s": st.sampled_from([1.0, 2.0]),
        "backlog": st.sampled_from([0.0, 800.0, 5000.0]),
        "model": st.builds(
            CostModel,
            slot_second=st.sampled_from([0.5, 1.0]),
            restart=st.sampled_from([0.0, 2.0, 10.0]),
            lag_second=st.sampled_from([0.5, 3.0, 30.0]),
            lag_target_s=st.sampled_from([None, 0.5, 2.0]),
            catch_up_s=st.sampled_from([1.0, 3.0]),
        ),
        "capacity": st.sampled_from([linear, lambda p: 1000.0 * p**0.8]),
        "slots": st.sampled_from([None, lambda p: 2 * p + 1]),
    }
)


@settings(max_examples=300, deadline=None)
@given(instances)
def test_the_search_finds_the_true_optimum_whenever_it_says_it_is_exact(case: dict) -> None:
    truth = brute_force(**case)

    best = best_plan(**case, step_s=1.0)

    assert best.exact  # fronts this small are never cut
    assert best.cost.total == pytest.approx(truth, rel=1e-9, abs=1e-9)
    again = plan_cost(
        best.plan,
        case["rates"],
        1.0,
        case["capacity"],
        case["pause_s"],
        case["model"],
        case["backlog"],
        case["slots"],
    )
    assert again == best.cost  # the cost it reports is its plan's, priced as any run is


@settings(max_examples=300, deadline=None)
@given(instances)
def test_a_cut_search_is_never_below_the_optimum_and_says_when_it_was_cut(case: dict) -> None:
    truth = brute_force(**case)

    for keep in (1, 2):
        approx = best_plan(**case, step_s=1.0, max_labels=keep)

        assert approx.cost.total >= truth - 1e-9  # a real plan's cost, so never below the optimum
        if approx.exact:
            assert approx.cost.total == pytest.approx(truth, rel=1e-9, abs=1e-9)


def test_a_step_up_is_met_by_one_restart_as_the_load_rises() -> None:
    rates = [1000.0] * 20 + [2500.0] * 40
    model = CostModel(slot_second=1.0, restart=50.0, lag_second=30.0)

    best = best_plan(rates, 1.0, linear, levels=range(1, 5), start=2, pause_s=3.0, model=model)

    # The pause costs 3 lag-seconds wherever it falls (no capacity, records waiting); begun at the step
    # it holds the 2 old slots, not 3 new ones, and 3 drains the 7,500 records in 15 s, within the
    # catch-up bound. A step later, 2 would run a second slower than its input: a lag-second more.
    assert best.plan == Plan(2, ((20, 3),))
    assert best.cost.restarts == 1 and best.exact


def test_a_burst_shorter_than_a_restart_is_worth_is_absorbed() -> None:
    rates = [1500.0] * 30 + [3000.0] * 5 + [1500.0] * 30
    model = CostModel()

    best = best_plan(rates, 1.0, lambda p: 1250.0 * p, levels=range(1, 9), start=2, pause_s=10.0, model=model)

    assert best.plan == Plan(2)
    assert best.cost.restarts == 0 and best.cost.lag_seconds > 0


def test_a_level_may_hold_another_number_of_slots() -> None:
    """A job whose levels are sizes of the whole job (each vertex sized for it) holds its slot-sharing
    groups' slots, not the level's number."""
    best = best_plan(
        [500.0] * 10,
        1.0,
        linear,
        levels=[1, 2],
        start=1,
        pause_s=1.0,
        model=CostModel(),
        slots=lambda p: 3 * p,
    )
    assert best.plan == Plan(1) and best.cost.slot_seconds == 30


def test_no_steps_no_cost() -> None:
    best = best_plan([], 1.0, linear, levels=[1, 2], start=2, pause_s=1.0, model=CostModel())
    assert best.plan == Plan(2) and best.cost.total == 0.0


def test_a_plan_that_cannot_run_is_refused() -> None:
    with pytest.raises(ValueError, match="does not end"):
        run_plan(Plan(1, ((3, 2),)), [1.0] * 4, 1.0, linear, pause_s=2.0)
    with pytest.raises(ValueError, match="runs at"):
        run_plan(Plan(1, ((0, 1),)), [1.0] * 4, 1.0, linear, pause_s=1.0)
    with pytest.raises(ValueError, match="does not run"):
        run_plan(Plan(1, ((0, 2), (1, 3))), [1.0] * 4, 1.0, linear, pause_s=2.0)


def test_bad_input_is_refused_with_a_message() -> None:
    with pytest.raises(ValueError, match="slots"):
        best_plan([1.0], 1.0, linear, [1, 2], 1, 1.0, CostModel(), slots=lambda p: p - 2)
    with pytest.raises(ValueError, match="rates"):
        best_plan([math.nan], 1.0, linear, [1], 1, 1.0, CostModel())
    with pytest.raises(ValueError, match="step"):
        pause_steps(1.0, 0.0)
    with pytest.raises(ValueError, match="max_labels"):
        best_plan([1.0], 1.0, linear, [1], 1, 1.0, CostModel(), max_labels=0)
