"""The evaluate stage as the daemon runs it: every job of the tick in one call to the evaluator.

:class:`Evaluator` is what the daemon needs of a backend (``SparkEvaluator``, or a test's stub).
:func:`evaluate` gives it each job's recent scaling history and custom evaluators, runs it off the
event loop, and turns a failure into :class:`Evaluated` with an error: nothing scales on a tick whose
evaluation failed, and the loop goes on. The stage reports nothing itself: how long the evaluation took,
where the time went and why it failed travel in :class:`Evaluated`, and the daemon reports them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from autoscaler.evaluate.custom import ConfiguredEvaluator
from autoscaler.evaluate.history import trim_history
from autoscaler.evaluate.spark.phases import EvaluationPhases
from autoscaler.model import JobEvaluation, JobSample
from autoscaler.offload import offload
from autoscaler.state.model import ScalingRecord
from autoscaler.state.tick import Loaded

__all__ = ["Evaluated", "Evaluator", "JobEvaluators", "evaluate"]

log = structlog.get_logger(__name__)


class Evaluator(Protocol):
    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        history: Mapping[str, Sequence[ScalingRecord]] | None = None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        """Every job of the tick at once.

        ``restored``: stored samples to replay first; ``reload``: how to fetch them all again if Spark
        lost its windows (see ``SparkEvaluator.evaluate``); ``history`` (job key -> records, oldest
        first) feeds the history-dependent rules (restart time, ineffective scale-ups, scalability);
        ``evaluators`` (job key -> configured custom evaluators, in order) refine each vertex's metrics.
        """
        ...

    def forget(self, job_keys: Iterable[str]) -> None: ...

    def check(self) -> None:
        """Raise unless the backend can evaluate now (after repairing what it can, e.g. a new session
        for a dead one); the daemon asks after a failed evaluation before it acts again."""
        ...


class JobEvaluators(Protocol):
    """What the stage needs of the configured custom evaluators: each job's, in order.

    The daemon passes its ``autoscaler.plugins.evaluators.EvaluatorInstances``, which resolves them
    through the plugin registry; the stage names only what it calls, so the evaluate package does not
    depend on the plugin host (which depends on it, for the custom-evaluator SPI in ``custom.py``).
    """

    def for_samples(self, samples: Sequence[JobSample]) -> Mapping[str, Sequence[ConfiguredEvaluator]]: ...


@dataclass(frozen=True, slots=True)
class Evaluated:
    """The tick's evaluations by job key; ``error`` says why there are none when evaluation failed.

    ``duration_s`` is how long a batch that ran took (None when there was nothing to evaluate or it
    failed); ``phases`` where its time went, for a backend that times them (``SparkEvaluator``).
    """

    evaluations: Mapping[str, JobEvaluation] = field(default_factory=dict)
    error: str | None = None
    duration_s: float | None = None
    phases: EvaluationPhases | None = None


async def evaluate(
    evaluator: Evaluator,
    samples: Sequence[JobSample],
    loaded: Loaded,
    now_ms: int,
    *,
    evaluators: JobEvaluators,
    reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
) -> Evaluated:
    """Evaluate every job of the tick in one batched computation, off the event loop."""
    if not samples:
        return Evaluated()
    started = time.perf_counter()
    try:
        # Each job's scaling history feeds restart-time tracking, effectiveness and scalability.
        history = {
            s.job.key: trim_history(loaded.states[s.job.key].history, now_ms, s.target.options)
            for s in samples
        }
        run = functools.partial(
            evaluator.evaluate,
            list(samples),
            now_ms,
            history=history,
            evaluators=evaluators.for_samples(samples),
            **({"restored": loaded.restored} if loaded.restored else {}),
            **({"reload": reload} if reload is not None else {}),
        )
        evaluations = await offload(run)
    except Exception as exc:  # Spark failing must not stop the loop; nothing scales this tick
        log.error("evaluation_failed", error=str(exc), exc_info=True)
        return Evaluated(error=f"evaluation failed: {type(exc).__name__}: {exc}")
    # A backend that times its phases (SparkEvaluator.last_phases) says where the time went.
    phases = getattr(evaluator, "last_phases", None)
    return Evaluated(
        evaluations,
        duration_s=time.perf_counter() - started,
        phases=phases if isinstance(phases, EvaluationPhases) else None,
    )
