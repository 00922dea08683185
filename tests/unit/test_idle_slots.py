"""Slots a scale-down leaves idle for a while (Flink keeps them slot.idle.timeout after the restart), and
the budget a rescale that needs them promises them from."""

from __future__ import annotations

from autoscaler.flink.jobmanager_config import slot_idle_timeout_ms
from autoscaler.idle_slots import RELEASE_MARGIN_MS, IdleSlotBook, scale_downs
from autoscaler.model import JobRef, VertexChange
from autoscaler.reasons import Reason
from autoscaler.slot_fit import IdleSlots, SlotBudget, fit_slots
from autoscaler.state import JobState
from autoscaler.testing import make_evaluation, make_topology, vertex_eval
from autoscaler.tick.steps import Decision, JobOutcome, JobStep

NOW = 1_000_000
TIMEOUT = {"c": 50_000}
UNTIL = NOW + 50_000 + RELEASE_MARGIN_MS


def decision(name: str, work: int, to: int | None = None, *, job_id: str | None = None) -> Decision:
    """A job of cluster ``c`` running Work at ``work``; ``to``: this tick's rescale of it."""
    job = JobRef("c", job_id or name.ljust(32, "0"), name)
    evaluation = make_evaluation([vertex_eval("w", work, to)], job=job)
    changes = {} if to is None else {"w": VertexChange("w", work, to)}
    outcome = Reason.SCALING if to is not None else Reason.IN_BAND
    return Decision(job, outcome, "", changes, JobState(), evaluation)


def step(name: str, work: int, to: int | None = None, *, job_id: str | None = None) -> JobStep:
    d = decision(name, work, to, job_id=job_id)
    assert d.evaluation is not None
    return JobStep(d.evaluation.sample, d)


def test_this_ticks_scale_downs_leave_their_slots_idle_until_the_timeout_and_the_margin() -> None:
    idle = scale_downs([step("down", 5, 2), step("up", 1, 4), step("steady", 3)], NOW, TIMEOUT)
    assert idle == {"c": [IdleSlots("c/down", 3, UNTIL)]}


def test_the_book_keeps_the_asked_for_scale_downs_until_their_slots_are_back() -> None:
    book = IdleSlotBook()
    down, up = decision("down", 6, 2), decision("up", 1, 3)
    realized = object()  # any RealizeResult: only whether Flink was asked matters
    book.note(
        [
            JobOutcome(down.job, NOW, Reason.SCALING, "", down, realized=realized),  # type: ignore[arg-type]
            JobOutcome(up.job, NOW, Reason.SCALING, "", up, realized=realized),  # type: ignore[arg-type]
            JobOutcome(down.job, NOW, Reason.WAITING_FOR_SLOTS, "", down),
        ],
        TIMEOUT,
    )
    assert book.current(NOW + 10_000) == {"c": [IdleSlots("c/down", 4, UNTIL)]}
    later = book.for_claims([step("other", 4, 1)], NOW + 10_000, TIMEOUT)
    assert later == {"c": [IdleSlots("c/down", 4, UNTIL), IdleSlots("c/other", 3, UNTIL + 10_000)]}
    assert book.current(UNTIL) == {}


def test_a_scale_downs_idle_slots_are_forgotten_once_its_job_runs_under_another_jobid() -> None:
    """Cancelled and submitted again under its name: Flink released the old run's slots with it."""
    book = IdleSlotBook()
    down = decision("down", 6, 2)
    asked = JobOutcome(down.job, NOW, Reason.SCALING, "", down, realized=object())  # type: ignore[arg-type]
    book.note([asked], TIMEOUT)
    same_run = book.for_claims([step("down", 2)], NOW + 10_000, TIMEOUT)
    assert same_run == {"c": [IdleSlots("c/down", 4, UNTIL)]}
    assert book.for_claims([step("down", 1, job_id="f" * 32)], NOW + 20_000, TIMEOUT) == {}
    assert book.current(NOW + 20_000) == {}


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
