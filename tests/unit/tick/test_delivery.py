"""Outcomes are written behind the tick: one batch at a time, in tick order, all of them by drain."""

from __future__ import annotations

import asyncio
import threading

from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.tick.delivery import OutcomeDelivery
from autoscaler.tick.steps import JobOutcome

JOB = JobRef(cluster="c", job_id="0" * 32, name="j")


def outcome(ts_ms: int) -> JobOutcome:
    return JobOutcome(JOB, ts_ms, Reason.IN_BAND, "in band")


async def test_hand_over_returns_before_the_batch_is_written_and_batches_keep_their_order() -> None:
    gate = threading.Event()
    written: list[int] = []

    def slow_disk(o: JobOutcome) -> None:
        gate.wait(5)
        written.append(o.now_ms)

    delivery = OutcomeDelivery(slow_disk)
    await delivery.hand_over([outcome(1), outcome(2)])
    assert written == []  # the tick did not wait for the files
    second = asyncio.create_task(delivery.hand_over([outcome(3)]))
    await asyncio.sleep(0.05)
    assert not second.done()  # the next tick's batch waits for the one in flight
    gate.set()
    await second
    await delivery.drain()
    assert written == [1, 2, 3]


async def test_a_failing_callback_costs_no_other_outcome_and_nothing_to_deliver_is_fine() -> None:
    seen: list[int] = []

    def flaky(o: JobOutcome) -> None:
        seen.append(o.now_ms)
        if o.now_ms == 1:
            raise OSError("disk full")

    delivery = OutcomeDelivery(flaky)
    await delivery.hand_over([outcome(1), outcome(2)])
    await delivery.drain()
    assert seen == [1, 2]
    await OutcomeDelivery(None).hand_over([outcome(3)])
    await delivery.hand_over([])
    await delivery.drain()  # nothing in flight: returns at once
