"""The values the engine hands out and the constants it shares with the REST layer.

A module of its own so that ``job``, ``reporting`` and ``cluster`` (and the REST handlers) can share a
job state, the checkpoint cadence or the metric-store snapshot without importing one another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = [
    "CHECKPOINT_DURATION_MS",
    "CHECKPOINT_INTERVAL_MS",
    "JOB_STATES",
    "TICK_MS",
    "CheckpointSummary",
    "JobMetrics",
    "LazyMapping",
    "MetricStore",
    "MetricValue",
    "ResourceRequirementsError",
    "UnknownJobError",
]

TICK_MS = 5000
"""Flink's metric registry updates every View (meters, timer gauges) every 5 s."""
CHECKPOINT_INTERVAL_MS = 2000
"""A checkpoint every 2 s while running: the lab's setting, served as execution.checkpointing.interval."""
CHECKPOINT_DURATION_MS = 150

JOB_STATES = (
    "CREATED",
    "FAILING",
    "RESTARTING",
    "INITIALIZING",
    "RECONCILING",
    "FAILED",
    "RUNNING",
    "CANCELED",
    "SUSPENDED",
    "CANCELLING",
    "FINISHED",
)

MetricValue = int | float | bool | str
"""A metric as a TaskManager reports it (REST turns it into Java's string form)."""


class UnknownJobError(KeyError):
    """No job with this id was ever submitted to the cluster."""


class ResourceRequirementsError(ValueError):
    """A resource-requirements change Flink would reject; the message is Flink's own wording."""


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """Checkpoint counts so far; ids run 1, 2, ... over the job's life, so ``completed`` is the latest id."""

    completed: int
    in_progress: int
    latest_trigger_ms: int  # -1 if none completed in the current run
    restored_id: int  # -1 if never restored


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """What the metric store holds for one job: job-level metrics and, per vertex id, one dict per subtask.

    A vertex is absent while its tasks are not running (they unregister their metrics on cancel).
    """

    job: Mapping[str, MetricValue]
    vertices: Mapping[str, tuple[Mapping[str, MetricValue], ...]]


_V = TypeVar("_V")


class LazyMapping(Mapping[str, _V]):
    """A mapping whose values are made on first read, then kept: a metric fetch's jobs, each reported
    only when a request asks for it (a fleet's fetch would otherwise build every job's at once)."""

    def __init__(self, makers: Mapping[str, Callable[[], _V]]) -> None:
        self._makers = dict(makers)
        self._made: dict[str, _V] = {}

    def __getitem__(self, key: str) -> _V:
        try:
            return self._made[key]
        except KeyError:
            value = self._made[key] = self._makers[key]()  # KeyError for a key it never had
            return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


@dataclass(frozen=True, slots=True)
class MetricStore:
    """One fetch of every metric in the cluster, like the JobManager's ``MetricStore``."""

    taken_ms: int
    jobs: Mapping[str, JobMetrics] = field(default_factory=dict)
    taskmanagers: Mapping[str, Mapping[str, MetricValue]] = field(default_factory=dict)
    jobmanager: Mapping[str, MetricValue] = field(default_factory=dict)
