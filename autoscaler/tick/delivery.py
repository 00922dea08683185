"""Each tick's outcomes handed to the daemon's ``on_outcome`` callback (the decision files that
``status`` and ``explain`` read) in a worker thread, behind the tick rather than inside it.

Writing a record per job is file I/O and JSON: about 0.6 s of a 1,000-job tick, on the tick's
critical path while the state it describes was already committed. So the tick hands its outcomes
over and ends; the next hand-over waits for the previous batch, so batches are delivered one at a
time and in tick order, and a disk slower than the ticks slows the ticks down instead of piling up
batches. :meth:`OutcomeDelivery.drain` waits for the batch in flight: the daemon drains before it
stops, and ``Daemon.run_tick`` drains unless the scheduler asks it not to (tests and one-off ticks
see the files when the tick returns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from autoscaler.offload import offload
from autoscaler.tick.steps import JobOutcome

__all__ = ["OutcomeDelivery"]

log = structlog.get_logger(__name__)


class OutcomeDelivery:
    """At most one tick's outcomes in delivery at a time; ``on_outcome`` None delivers nothing."""

    def __init__(self, on_outcome: Callable[[JobOutcome], None] | None) -> None:
        self.on_outcome = on_outcome
        self._in_flight: asyncio.Task[None] | None = None

    async def hand_over(self, outcomes: Sequence[JobOutcome]) -> None:
        """Start delivering ``outcomes`` once the previous batch is delivered; return without waiting."""
        if self.on_outcome is None or not outcomes:
            return
        await self.drain()
        self._in_flight = asyncio.create_task(offload(_deliver, self.on_outcome, tuple(outcomes)))

    async def drain(self) -> None:
        """Wait until every handed-over outcome is delivered."""
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            await in_flight


def _deliver(on_outcome: Callable[[JobOutcome], None], outcomes: Sequence[JobOutcome]) -> None:
    for outcome in outcomes:
        try:
            on_outcome(outcome)
        except Exception as exc:  # one job's record must not cost the others theirs
            log.error("outcome_callback_failed", job=outcome.job.key, error=str(exc))
