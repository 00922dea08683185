"""Where an evaluation's time went: the phases the Spark evaluator times, and the daemon's metric of them."""

from __future__ import annotations

from collections.abc import Iterator

from autoscaler.evaluate.spark.phases import PHASES, EvaluationPhases, PhaseTimer
from autoscaler.evaluate.stage import Evaluated, evaluate
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobEvaluation
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.state import JobState
from autoscaler.state.tick import Loaded
from autoscaler.testing import make_sample, make_topology

PHASE_METRIC = "flink_autoscaler_evaluation_phase_duration_seconds"


def ticking(*times: float) -> Iterator[float]:
    return iter(times)


def test_each_lap_books_the_time_since_the_last_to_its_phase():
    clock = ticking(10.0, 10.5, 11.75, 12.0, 12.25)
    timer = PhaseTimer(lambda: next(clock))
    timer.lap("spark")  # 0.5
    timer.lap("window")  # 1.25
    timer.lap("spark")  # 0.25
    timer.lap("driver")  # 0.25
    phases = timer.phases()
    assert phases == EvaluationPhases(window=1.25, spark=0.75, driver=0.25)
    assert phases.total == 2.25
    assert [phase for phase, _ in phases.items()] == list(PHASES) == ["window", "spark", "driver"]


def test_a_phase_never_lapped_took_no_time():
    clock = ticking(1.0, 3.0)
    timer = PhaseTimer(lambda: next(clock))
    timer.lap("driver")
    assert timer.phases() == EvaluationPhases(driver=2.0)


def sample_of(metrics: MetricsReporter, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_the_daemon_exports_each_phase_of_an_evaluation():
    metrics = MetricsReporter()
    metrics.report_spark(True, duration_s=1.0, phases=EvaluationPhases(window=0.25, spark=0.5, driver=0.25))
    metrics.report_spark(True, duration_s=2.0, phases=EvaluationPhases(window=0.5, spark=1.25, driver=0.25))
    assert sample_of(metrics, f"{PHASE_METRIC}_count", phase="spark") == 2
    assert sample_of(metrics, f"{PHASE_METRIC}_sum", phase="spark") == 1.75
    assert sample_of(metrics, f"{PHASE_METRIC}_sum", phase="window") == 0.75
    assert sample_of(metrics, f"{PHASE_METRIC}_sum", phase="driver") == 0.5


def test_a_failed_evaluation_or_one_without_phases_books_none():
    metrics = MetricsReporter()
    metrics.report_spark(False, "gone", phases=EvaluationPhases(spark=3.0))
    metrics.report_spark(True, duration_s=0.5)
    assert sample_of(metrics, f"{PHASE_METRIC}_count", phase="spark") is None
    assert sample_of(metrics, "flink_autoscaler_evaluation_duration_seconds_count") == 1


class Backend:
    """A backend that evaluates every job (with no vertex) and may say where its time went."""

    def __init__(self, phases: object = None) -> None:
        self.last_phases = phases

    def evaluate(self, samples, now_ms, **_kwargs) -> dict[str, JobEvaluation]:
        return {s.job.key: JobEvaluation(s, {}, False, 0, False) for s in samples}

    def forget(self, job_keys) -> None: ...

    def check(self) -> None: ...


async def evaluated_with(backend: Backend) -> Evaluated:
    sample = make_sample(make_topology({"src": 1}))
    loaded = Loaded(states={sample.job.key: JobState()})
    result = await evaluate(backend, [sample], loaded, 0, evaluators=EvaluatorInstances())
    assert result.error is None and set(result.evaluations) == {sample.job.key}
    return result


async def test_the_evaluate_stage_carries_the_backends_phases_to_the_daemon():
    phases = EvaluationPhases(window=0.125, spark=0.5, driver=0.25)
    result = await evaluated_with(Backend(phases))
    assert result.phases == phases and result.duration_s is not None
    # what the daemon does with them (Daemon._evaluate)
    metrics = MetricsReporter()
    metrics.report_spark(True, duration_s=result.duration_s, phases=result.phases)
    assert sample_of(metrics, f"{PHASE_METRIC}_sum", phase="spark") == 0.5
    assert sample_of(metrics, f"{PHASE_METRIC}_sum", phase="window") == 0.125


async def test_a_backend_that_does_not_time_its_phases_carries_only_the_whole():
    for backend in (Backend(None), Backend("not phases")):
        result = await evaluated_with(backend)
        assert result.phases is None and result.duration_s is not None
