"""Whether a rescale pays for itself: changing now against waiting, priced by the cost model."""

from __future__ import annotations

import pytest

from autoscaler.foresight.cost import CostModel
from autoscaler.foresight.worth import JobQueue, weigh

MODEL = CostModel()  # 1 per slot-second, 600 per restart, 30 per second above the lag target


def queue(
    rate: float, now: float, then: float, slots_now: int, slots_then: int, backlog: float = 0.0
) -> JobQueue:
    return JobQueue(rate, backlog, now, then, slots_now, slots_then)


def test_a_scale_up_for_a_job_slower_than_its_input_pays_for_itself() -> None:
    """Waiting, its backlog grows every second and is above target all along; changing costs one
    restart and a 10 s pause, then the job keeps up."""
    w = weigh(queue(3000, now=2500, then=3750, slots_now=2, slots_then=3), MODEL, 1800, 10)
    assert w.worth_it
    assert w.wait.lag_seconds == pytest.approx(1800) and w.wait.restarts == 0
    assert w.change.restarts == 1 and w.change.total < w.wait.total


def test_a_scale_up_for_a_job_that_keeps_up_does_not_pay() -> None:
    """At 0.8 of its capacity nothing waits: more slots and a restart buy nothing the cost model sees."""
    w = weigh(queue(2000, now=2500, then=3750, slots_now=2, slots_then=3), MODEL, 1800, 10)
    assert not w.worth_it
    assert w.wait.total == pytest.approx(2 * 1800)
    assert w.change.total > w.wait.total


def test_a_scale_down_pays_when_the_slots_it_saves_over_the_horizon_exceed_the_restart() -> None:
    """Four slots to one for half an hour saves 5,400 slot-seconds against a 600 restart and a pause;
    one slot for five minutes saves 300, less than the restart alone."""
    big = weigh(queue(750, now=5000, then=1250, slots_now=4, slots_then=1), MODEL, 1800, 10)
    assert big.worth_it
    small = weigh(queue(750, now=2500, then=1250, slots_now=2, slots_then=1), MODEL, 300, 10)
    assert not small.worth_it


def test_a_forecast_peak_above_the_capacity_makes_a_scale_up_pay_ahead_of_it() -> None:
    """The same job as above that keeps up now, priced at the forecast's peak instead of the rate now."""
    q = queue(2000, now=2500, then=3750, slots_now=2, slots_then=3)
    assert not weigh(q, MODEL, 1800, 10).worth_it
    ahead = weigh(q, MODEL, 1800, 10, rate=3000)
    assert ahead.worth_it and ahead.rate == 3000


def test_a_forecast_lower_than_now_is_not_used_to_price_a_scale_down() -> None:
    q = queue(2000, now=5000, then=2500, slots_now=4, slots_then=2)
    assert weigh(q, MODEL, 1800, 10, rate=100).rate == 2000


def test_the_horizon_covers_the_pause_and_a_step_of_the_new_capacity() -> None:
    w = weigh(queue(3000, now=2500, then=3750, slots_now=2, slots_then=3), MODEL, 1, 60)
    assert w.horizon_s >= 65


def test_a_backlog_already_waiting_weighs_on_waiting() -> None:
    """A job that keeps up but carries a backlog it would not drain within catch-up.duration."""
    q = queue(2000, now=2100, then=3000, slots_now=2, slots_then=3, backlog=1_000_000)
    w = weigh(q, MODEL, 1800, 10)
    assert w.wait.lag_seconds > 0 and w.worth_it


def test_the_text_says_both_costs() -> None:
    w = weigh(queue(3000, now=2500, then=3750, slots_now=2, slots_then=3), MODEL, 1800, 10)
    text = w.text()
    assert "changing now costs" in text and "waiting costs" in text and "30 min" in text
    assert "3 slots" in text and "2 slots" in text


def test_a_rise_far_ahead_is_met_by_changing_later_not_now() -> None:
    """The peak comes in 25 min: holding the third slot from now costs more than changing just before
    the load outgrows the job, so waiting (and changing then) is cheaper; a peak that is here is not
    waited for. The daemon weighs again every tick, so "later" comes."""
    q = queue(2000, now=2500, then=3750, slots_now=2, slots_then=3)
    far = weigh(q, MODEL, 1800, 10, rate=3000, rise_in_s=1500)
    assert not far.worth_it
    assert far.wait.restarts == 1  # waiting is changing later
    here = weigh(q, MODEL, 1800, 10, rate=3000, rise_in_s=0)
    assert here.worth_it


def test_a_rise_the_new_capacity_would_not_carry_does_not_make_a_change_pay() -> None:
    q = queue(2000, now=2500, then=2600, slots_now=2, slots_then=3)
    w = weigh(q, MODEL, 1800, 10, rate=5000, rise_in_s=60)
    assert w.change.lag_seconds > 0 and w.wait.lag_seconds > 0


def test_the_horizon_reads_in_minutes_and_seconds() -> None:
    """A lasting drop's horizon is no round number of minutes: the text says it as a person would."""
    q = JobQueue(
        rate=1000.0, backlog=0.0, capacity_now=4000.0, capacity_then=2000.0, slots_now=4, slots_then=2
    )
    assert "over 22 min 40 s at 1000 rec/s" in weigh(q, CostModel(), 1360.0, 10.0).text()
    assert "over 15 min at" in weigh(q, CostModel(), 900.0, 10.0).text()
