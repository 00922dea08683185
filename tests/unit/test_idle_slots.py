"""Slots a scale-down leaves idle for a while (Flink keeps them slot.idle.timeout after the restart), and
the budget a rescale that needs them promises them from."""

from __future__ import annotations

from autoscaler.act import JobStep
from autoscaler.decide import Decision, VertexChange
from autoscaler.flink.jobmanager_config import slot_idle_timeout_ms
from autoscaler.idle_slots import RELEASE_MARGIN_MS, idle_slots
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.slot_fit import IdleSlots, SlotBudget, fit_slots
from autoscaler.state import JobState, ScalingRecord
from autoscaler.testing import make_sample, make_topology

NOW = 1_000_000
TIMEOUT = {"c": 50_000}


def step(name: str, work: int, *, to: int | None = None, history: tuple[ScalingRecord, ...] = ()) -> JobStep:
    """A job of cluster ``c`` running Work at ``work``; ``to``: this tick's rescale of it."""
    job = JobRef("c", name.ljust(32, "0"), name)
    sample = make_sample(make_topology({"src": 1, "w": work}), job=job)
    changes = {} if to is None else {"w": VertexChange("w", work, to)}
    outcome = Reason.SCALING if to is not None else Reason.IN_BAND
    return JobStep(sample, Decision(job, outcome, "", changes, JobState(history=history)))


def test_this_ticks_scale_down_leaves_its_slots_idle_until_the_timeout_and_the_margin() -> None:
    idle = idle_slots([step("down", 5, to=2), step("up", 1, to=4), step("steady", 3)], NOW, TIMEOUT)
    assert idle == {"c": [IdleSlots("c/down", 3, NOW + 50_000 + RELEASE_MARGIN_MS)]}


def test_a_confirmed_scale_down_counts_until_its_slots_are_back_and_not_after() -> None:
    confirmed = ScalingRecord(ts_ms=NOW - 20_000, changes={"w": (6, 2)}, confirmed_ms=NOW - 10_000)
    until = NOW - 10_000 + 50_000 + RELEASE_MARGIN_MS
    assert idle_slots([step("shrunk", 2, history=(confirmed,))], NOW, TIMEOUT) == {
        "c": [IdleSlots("c/shrunk", 4, until)]
    }
    assert idle_slots([step("shrunk", 2, history=(confirmed,))], until, TIMEOUT) == {}
    grown = ScalingRecord(ts_ms=NOW - 20_000, changes={"w": (2, 6)}, confirmed_ms=NOW - 10_000)
    assert idle_slots([step("grown", 6, history=(grown,))], NOW, TIMEOUT) == {}
    assert idle_slots([JobStep(step("none", 2).sample)], NOW, TIMEOUT) == {}  # not decided: unknown


def test_a_rescale_that_waits_for_idle_slots_keeps_the_free_ones_and_takes_the_soonest_idle_ones() -> None:
    budget = SlotBudget(
        16, 2, idle=[IdleSlots("c/late", 4, NOW + 90_000), IdleSlots("c/soon", 3, NOW + 60_000)]
    )
    assert budget.coming == 7
    topology = make_topology({"src": 1, "w": 1})
    whole = fit_slots(topology, {"w": 5}, budget.free + budget.coming)  # 4 more: 2 free, 2 idle
    assert whole.fits
    assert budget.promise(whole) == [IdleSlots("c/soon", 3, NOW + 60_000)]
    assert (budget.free, budget.claimed, budget.coming) == (0, 2, 4)  # a later rescale finds neither


def test_slot_idle_timeout_is_read_in_either_spelling_and_defaults_to_flinks() -> None:
    assert slot_idle_timeout_ms({}) == 50_000
    assert slot_idle_timeout_ms({"slot.idle.timeout": "120000"}) == 120_000  # Flink 1.x: milliseconds
    assert slot_idle_timeout_ms({"slot.idle.timeout": "2 min"}) == 120_000
    assert slot_idle_timeout_ms({"slot.idle.timeout": "soon"}) == 50_000
