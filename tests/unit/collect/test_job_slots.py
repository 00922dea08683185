"""JobSlots: at most n jobs of a cluster are collected at once, and a job's pause frees its place."""

from __future__ import annotations

import asyncio

from autoscaler.collect import JobSlots


async def test_at_most_n_jobs_at_once_and_a_pausing_job_gives_its_place_up() -> None:
    slots = JobSlots(2)
    inside = 0
    most = 0
    order: list[str] = []

    async def job(name: str, pause: bool) -> None:
        nonlocal inside, most
        async with slots:
            inside += 1
            most = max(most, inside)
            order.append(f"{name} in")
            if pause:
                inside -= 1
                await slots.sleep(0.01)  # the warm-up pause: others use the place meanwhile
                inside += 1
                most = max(most, inside)
            await asyncio.sleep(0)
            inside -= 1
            order.append(f"{name} out")

    await asyncio.gather(job("a", True), job("b", False), job("c", False), job("d", False))
    assert most <= 2
    # a paused while holding a place: b and c took both places before a came back in, and d ran too
    assert order.index("c in") < order.index("a out")
    assert sorted(order) == sorted(f"{n} {w}" for n in "abcd" for w in ("in", "out"))


async def test_slots_are_whole_after_a_cancelled_pause() -> None:
    slots = JobSlots(1)

    async def pausing() -> None:
        async with slots:
            await slots.sleep(10)

    task = asyncio.ensure_future(pausing())
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with asyncio.timeout(1):  # the one place is free again: another job gets in
        async with slots:
            pass
