"""The plain-Python evaluator: the same windows and evaluation as ``SparkEvaluator``, without a JVM.

It keeps each job's window as a list of samples in the driver and reduces it with
:func:`autoscaler.evaluate.aggregates.aggregate_window`, the oracle the Spark aggregation query is
tested against (``tests/unit/evaluate/spark/test_evaluator.py`` compares the two tick by tick). The window
bookkeeping is the shared :class:`~autoscaler.evaluate.window.book.WindowBook`, so a sample counts, ages out
or starts a new epoch exactly as it does in Spark.

Why a second backend: the decisions are the same, and a benchmark or a test that replays thousands of
ticks (``bench/bench_decisions.py``) should not pay Spark's tens of milliseconds per action for a
handful of jobs. The daemon still evaluates on Spark: one batched query scales to fleets this does not.
The assembly of a job's result is written out here on purpose rather than shared with ``spark.py``:
as the oracle, it must not inherit a mistake from the code it checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from autoscaler.evaluate.aggregates import VertexAggregates, aggregate_custom_window, aggregate_window
from autoscaler.evaluate.custom import ConfiguredEvaluator, unavailable
from autoscaler.evaluate.history import restart_time_s
from autoscaler.evaluate.oracle.formulas import evaluate_graph
from autoscaler.evaluate.oracle.sliding import SlidingWindows
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.evaluate.window.job_window import WindowStatus
from autoscaler.model import JOB_SCOPE, NAN, JobEvaluation, JobSample, VertexEvaluation, VertexId
from autoscaler.reasons import Reason
from autoscaler.state import ScalingRecord

__all__ = ["PythonEvaluator", "windowed_custom_metrics"]

_Rows = list[tuple[int, JobSample]]  # (epoch, sample), oldest first


def windowed_custom_metrics(
    sample: JobSample, window: Sequence[JobSample]
) -> dict[str, dict[str, tuple[float, float]]]:
    """scope -> name -> (current, average): this tick's declared names as (NaN, NaN), then every series
    measured at least once in the window, aggregated by ``aggregate_custom_window``."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for scope, names in [*sample.custom_vertex_metrics.items(), (JOB_SCOPE, sample.custom_job_metrics)]:
        for name in names:
            out.setdefault(scope, {})[name] = (NAN, NAN)
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for s in window:
        for scope, values in [*s.custom_vertex_metrics.items(), (JOB_SCOPE, s.custom_job_metrics)]:
            for name, value in values.items():
                series.setdefault((scope, name), []).append((s.ts_ms, value))
    for (scope, name), points in series.items():
        if any(not math.isnan(v) for _, v in points):
            out.setdefault(scope, {})[name] = aggregate_custom_window(points).pair
    return out


class PythonEvaluator:
    """Keeps every job's window in the driver; implements the daemon's ``Evaluator`` protocol.

    ``evaluate`` must be called from one thread at a time (the daemon's tick), like ``SparkEvaluator``.
    """

    def __init__(self, *, incremental: bool = False) -> None:
        self.book = WindowBook()
        self.rows: dict[str, _Rows] = {}
        # A backtest's many ticks: window aggregates slid a sample at a time, equal to the oracle's.
        self.sliding = SlidingWindows() if incremental else None

    # -- the tick ------------------------------------------------------------------------------
    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        restart_times_s: Mapping[str, float] | None = None,
        history: Mapping[str, Sequence[ScalingRecord]] | None = None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        """Append this tick's samples, slide every window, evaluate each job (``SparkEvaluator.evaluate``'s
        contract). ``reload`` is accepted and never called: windows held in this process cannot be lost
        without the process."""
        del reload
        self._replay(restored or {})
        statuses = self._observe(samples, now_ms)
        keep = self.book.retain(now_ms, present=statuses)
        self.rows = {
            key: [(e, s) for e, s in rows if e == keep[key][0] and s.ts_ms >= keep[key][1]]
            for key, rows in self.rows.items()
            if key in keep
        }
        return {
            key: self._job(
                sample,
                status,
                (restart_times_s or {}).get(key),
                (history or {}).get(key, ()),
                (evaluators or {}).get(key, ()),
            )
            for key, (sample, status) in statuses.items()
        }

    def _replay(self, restored: Mapping[str, Sequence[JobSample]]) -> None:
        """Fold stored samples into the windows as their own ticks did (a restarted daemon's windows)."""
        for past in restored.values():
            for sample in sorted(past, key=lambda s: s.ts_ms):
                status = self.book.observe_sample(sample, sample.ts_ms)
                if status.kept:
                    self.rows.setdefault(sample.job.key, []).append((status.epoch, sample))

    def _observe(
        self, samples: Sequence[JobSample], now_ms: int
    ) -> dict[str, tuple[JobSample, WindowStatus]]:
        """Fold each job's sample into its window; of two samples with one job key the newest wins."""
        latest: dict[str, JobSample] = {}
        for sample in samples:
            seen = latest.get(sample.job.key)
            if seen is None or sample.ts_ms > seen.ts_ms:
                latest[sample.job.key] = sample
        statuses: dict[str, tuple[JobSample, WindowStatus]] = {}
        for key, sample in latest.items():
            status = self.book.observe_sample(sample, now_ms)
            statuses[key] = (sample, status)
            if status.kept:
                self.rows.setdefault(key, []).append((status.epoch, sample))
        return statuses

    def _job(
        self,
        sample: JobSample,
        status: WindowStatus,
        restart_override_s: float | None,
        past: Sequence[ScalingRecord],
        configured: Sequence[ConfiguredEvaluator],
    ) -> JobEvaluation:
        """One job's evaluation, upfront whenever its window has samples; ``not_ready``: does it count."""
        rows = self.rows.get(sample.job.key, [])
        aggregates: dict[VertexId, VertexAggregates] = {}
        if rows and self.sliding is not None:
            aggregates = self.sliding.aggregates(
                sample.job.key, [s for _, s in rows], sample.topology.vertices
            )
        elif rows:
            aggregates = {
                vid: aggregate_window([(s.ts_ms, s.vertices[vid]) for _, s in rows])
                for vid in sample.topology.vertices
            }
        options = sample.target.options
        restart_s = restart_override_s if restart_override_s is not None else restart_time_s(past, options)
        custom = windowed_custom_metrics(sample, [s for _, s in rows])
        missing = unavailable(configured)
        vertices: dict[VertexId, VertexEvaluation] = {}
        backlog = False
        failures: tuple[str, ...] = ()
        evaluated = bool(rows) and not status.stabilizing and not missing
        if evaluated:
            graph = evaluate_graph(
                sample, aggregates, options, restart_s, past, evaluators=configured, custom_metrics=custom
            )
            vertices, backlog, failures = graph.vertices, graph.processing_backlog, graph.evaluator_failures
        return JobEvaluation(
            sample,
            vertices,
            backlog,
            len(rows),
            status.full,
            Reason.PLUGIN_FAILED if missing else status.not_ready,
            restart_s if evaluated else NAN,
            custom_metrics=custom,
            not_ready_detail="; ".join(missing) or status.detail,
            evaluator_failures=failures,
            load_change_ms=status.load_change_ms,
            level_since_ms=status.level_since_ms,
            counters_fell=status.counters_fell,
        )

    # -- lifecycle -----------------------------------------------------------------------------
    def check(self) -> None:
        """Plain Python can always evaluate."""

    def forget(self, job_keys: Iterable[str]) -> None:
        """Drop jobs (stopped or removed) at once."""
        keys = list(job_keys)
        self.book.forget(keys)
        for key in keys:
            self.rows.pop(key, None)
        if self.sliding is not None:
            self.sliding.forget(keys)

    def window_size(self) -> int:
        """Rows the window holds, counted as Spark counts them: one per sample and vertex."""
        return sum(len(rows) * len(rows[0][1].topology.vertices) for rows in self.rows.values() if rows)

    def custom_window_size(self) -> int:
        """Measured custom values in the window (Spark keeps one row per value, none for NaN)."""
        return sum(
            1
            for rows in self.rows.values()
            for _, s in rows
            for values in [*s.custom_vertex_metrics.values(), s.custom_job_metrics]
            for v in values.values()
            if not math.isnan(v)
        )
