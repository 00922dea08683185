"""What the record stage makes of a stage's steps, for tests of one stage: the events it would emit,
the states it would write and the metrics it would set (``autoscaler.tick.record``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.cluster import Collected
from autoscaler.metrics import MetricsReporter
from autoscaler.state import JobState
from autoscaler.tick import record
from autoscaler.tick.record import TickEvent
from autoscaler.tick.steps import JobStep


@dataclass(frozen=True)
class Told:
    events: list[TickEvent]  # (event, deduplication interval ms), in the order they would be emitted
    states: dict[str, JobState]
    metrics: MetricsReporter


def told(
    steps: Sequence[JobStep] = (),
    *,
    collected: Collected | None = None,
    slots: Mapping[str, tuple[int, int]] | None = None,
    now_ms: int = 0,
    metrics: MetricsReporter | None = None,
) -> Told:
    """The record stage's events, states and metrics for ``steps`` (and what was ``collected``)."""
    collected = collected or Collected()
    metrics = metrics or MetricsReporter()
    record.report(metrics, collected, steps, slots or {}, now_ms)
    return Told(record.tick_events(collected, steps, now_ms), record.next_states(steps), metrics)
