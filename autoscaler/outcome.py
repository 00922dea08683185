"""What a tick produced: one :class:`JobOutcome` per job and the :class:`TickReport` that holds them.

They sit apart from the daemon so that whoever reads outcomes (``explain``, the decision store, the
demo, tests) depends on the values, not on the control loop that makes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.decide import Decision
from autoscaler.model import JobRef
from autoscaler.plugins.chain import ChainResult
from autoscaler.realize import RealizeResult
from autoscaler.reasons import Reason

__all__ = ["JobOutcome", "TickReport"]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What happened to one job in one tick (the demo prints these; tests assert on them)."""

    job: JobRef
    now_ms: int
    outcome: Reason
    detail: str
    decision: Decision | None = None
    chain: ChainResult | None = None
    realized: RealizeResult | None = None


@dataclass(frozen=True, slots=True)
class TickReport:
    """Every job's outcome of one tick, and the clusters that could not be read at all."""

    now_ms: int
    outcomes: tuple[JobOutcome, ...]
    cluster_errors: Mapping[str, str] = field(default_factory=dict)

    def for_job(self, name: str) -> JobOutcome | None:
        return next((o for o in self.outcomes if o.job.name == name), None)
