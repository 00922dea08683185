"""Every job of a tick evaluated at once from the window's aggregates: ``evaluate_graph`` for a fleet.

The Spark backend's driver side (issue 13: 10,000 jobs x 10 vertices in at most 2 s per tick). It takes
the aggregation query's result as one Arrow table (a row per vertex) and computes every vertex's rates,
thresholds and recommendation in numpy arrays over the whole tick
(:mod:`~autoscaler.evaluate.fleet.vector_formulas`, each function the twin of an oracle formula), propagating
rates along all job graphs at once (:mod:`~autoscaler.evaluate.fleet.plan`). Before, the same formulas
ran as Python calls per vertex, and those calls, not Spark, took most of a tick. Python still runs per
vertex only where a rule is Python by nature:

- key-group alignment of a vertex whose parallelism changes (the scaler's integer search, cached),
- the rules that read a job's scaling history (observed scalability, ineffective scale-ups),
- custom evaluators (FLIP-514 plugins called per vertex): such a job is evaluated by the oracle's own
  graph walk (``formulas.evaluate_graph``), as is a graph whose vertices are not in topological order,
- and building the :class:`~autoscaler.model.VertexEvaluation` values the later stages read.

The results equal the oracle's: ``tests/unit/evaluate/fleet/test_evaluator.py`` compares them job by
job on random fleets, and the Spark tests compare the whole backend with the plain-Python evaluator.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

import autoscaler.evaluate.fleet.vector_formulas as vf
from autoscaler.evaluate.custom import ConfiguredEvaluator
from autoscaler.evaluate.fleet.columns import job_aggregates, laid_out_columns
from autoscaler.evaluate.fleet.plan import FleetLayout, PlanCache, propagate
from autoscaler.evaluate.fleet.terms import aligned_parallelism, job_options, term_columns
from autoscaler.evaluate.fleet.vertex_rows import vertex_evaluation
from autoscaler.evaluate.history import (
    VertexScaling,
    ineffective_scale_up,
    scalability_coefficient,
    vertex_history,
)
from autoscaler.evaluate.oracle.formulas import GraphEvaluation, evaluate_graph
from autoscaler.model import AlignmentBounds, JobSample, ScaleUpGain
from autoscaler.settings import AlignmentMode
from autoscaler.state import ScalingRecord

__all__ = ["FleetEvaluator", "FleetJob"]


@dataclass(frozen=True, slots=True)
class FleetJob:
    """One job to evaluate this tick, with what its evaluation reads besides the window."""

    sample: JobSample
    restart_s: float
    history: Sequence[ScalingRecord] = ()
    evaluators: Sequence[ConfiguredEvaluator] = ()
    custom_metrics: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)


class FleetEvaluator:
    """Evaluates a tick's jobs; keeps the job-graph plans between ticks. One thread at a time."""

    def __init__(self) -> None:
        self._plans = PlanCache()

    def evaluate(self, jobs: Sequence[FleetJob], aggregates: pa.Table) -> list[GraphEvaluation]:
        """``formulas.evaluate_graph`` of each job, in order, from the aggregation query's rows.

        ``aggregates`` holds a row per (job_key, vertex_id) with :data:`AGGREGATE_FIELDS`; a vertex
        without a row has the all-unknown aggregates (``aggregates.aggregates_of``), rows of other jobs
        are ignored.
        """
        self._plans.next_tick()
        plans = [self._plans.plan(job.sample.topology) for job in jobs]
        layout = FleetLayout(plans)
        columns, matched = laid_out_columns(aggregates, [job.sample.job.key for job in jobs], layout)
        with np.errstate(all="ignore"):  # IEEE's x/0 = inf and NaN are the semantics wanted (vf's doc)
            vertices = _Vertices(jobs, layout, columns)
        walked = {
            j: evaluate_graph(
                job.sample,
                job_aggregates(layout, j, columns, matched),
                job.sample.target.options,
                job.restart_s,
                job.history,
                evaluators=job.evaluators,
                custom_metrics=job.custom_metrics,
            )
            for j, job in enumerate(jobs)
            if job.evaluators or not plans[j].ordered
        }
        return vertices.graphs(walked)


class _Vertices:
    """Every laid-out vertex's evaluation as columns: ``formulas.evaluate_graph`` step by step, each
    step for all vertices at once (the oracle's function each mirrors is named in its docstring)."""

    def __init__(self, jobs: Sequence[FleetJob], layout: FleetLayout, agg: Mapping[str, np.ndarray]) -> None:
        self.jobs, self.layout, self.agg = jobs, layout, agg
        self.options, group, terms = job_options([job.sample for job in jobs])
        self.terms = term_columns(terms, group[layout.job_of_vertex])
        self.restart_s = np.asarray([job.restart_s for job in jobs], dtype=np.float64)[layout.job_of_vertex]
        self.parallelism = layout.parallelism
        self.pasts: dict[int, tuple[VertexScaling, ...]] = {}
        self.alpha = np.ones(layout.size)
        self.limited_by: dict[int, AlignmentBounds] = {}
        self._processing_rates()
        self._target_rates()
        self._history_rules()
        self._recommendation(*self._thresholds())

    def _processing_rates(self) -> None:
        """``rates.processing_rates`` and the TPR of ``formulas._builtin_metrics``."""
        agg, t = self.agg, self.terms
        busy_average = vf.get_average(agg["busy_sum"], agg["busy_count"], agg["busy_infinite"])
        busy, self.input_rate, self.counters = vf.busy_tpr_inputs(
            prefer_counters=t["prefer_counters"],
            average_aggregator=t["average_aggregator"],
            parallelism=self.parallelism,
            accumulated_busy_rate=agg["accumulated_busy_rate"],
            accumulated_busy_agg_rate=agg["accumulated_busy_agg_rate"],
            records_in_rate=agg["records_in_rate"],
            records_in_per_s_avg=agg["records_in_per_s_avg"],
            busy_average=busy_average,
        )
        self.load = busy / 1000.0
        observed = vf.get_average(
            agg["observed_tpr_sum"],
            agg["observed_tpr_count"],
            agg["observed_tpr_infinite"],
            t["min_observations"],
        )
        # Ours (formulas._builtin_metrics): with counter rates the observed TPR only stands in for an
        # unknown or infinite busy-time TPR.
        switch = np.where(self.counters, np.inf, t["switch_threshold"])
        self.tpr = vf.true_processing_rate(busy, self.input_rate, observed, switch)
        self.lag = agg["lag_latest"]

    def _target_rates(self) -> None:
        """The job's processing-backlog flag, then TARGET_DATA_RATE and CATCH_UP_DATA_RATE along every
        graph (``formulas.evaluate_graph``); busy-time-only mode takes the vertex's own input rate."""
        agg, t, layout = self.agg, self.terms, self.layout
        by_job = layout.job_of_vertex
        source_backlog = layout.is_source & vf.is_processing_backlog(
            agg["lag_latest"], agg["records_in_rate"], t["backlog_s"]
        )
        self.backlog_by_job = np.bincount(by_job[source_backlog], minlength=len(self.jobs)) > 0
        self.backlog = self.backlog_by_job[by_job]
        tdr, catch_up = propagate(
            layout,
            records_in_rate=agg["records_in_rate"],
            records_out_rate=agg["records_out_rate"],
            source_target_rate=vf.target_data_rate(agg["records_in_rate"], agg["lag_rate"]),
            source_catch_up_rate=vf.catch_up_rate(agg["lag_latest"], t["catch_up_s"]),
        )
        self.tdr = np.where(t["busy_only"], self.input_rate, tdr)
        self.catch_up = np.where(t["busy_only"], 0.0, catch_up)

    def _thresholds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``formulas._recommend`` up to the scaler: the thresholds, and (scale factor, outside the band,
        rates unknown). The reference's capacities, or in busy-time-only mode the rates at which the
        load crosses the band and the load over the target (``rates.busy_time_thresholds``,
        ``scaler.compute_busy_time_parallelism``)."""
        t, tdr, tpr, load, backlog = self.terms, self.tdr, self.tpr, self.load, self.backlog
        rates = {
            "target_data_rate": tdr,
            "catch_up_data_rate": self.catch_up,
            "catch_up_s": t["catch_up_s"],
            "restart_s": self.restart_s,
        }
        up = vf.capacity(np.where(backlog, 1.0, t["upper"]), with_restart=False, **rates)
        down = vf.capacity(np.where(backlog, 0.0, t["lower"]), with_restart=True, **rates)
        target_capacity = vf.capacity(t["target"], with_restart=True, **rates)
        band_upper = np.where(backlog, 1.0, t["busy_upper"])
        band_lower = np.where(backlog, 0.0, t["busy_lower"])
        busy_only = t["busy_only"]
        self.scale_up = np.where(busy_only, tdr / band_upper, up)
        self.scale_down = np.where(busy_only, tdr / band_lower, down)
        factor = np.where(busy_only, load / t["target"], target_capacity / tpr)
        outside = np.where(
            busy_only,
            (load >= 1.0) | (load > band_upper) | (load < band_lower),
            (tpr < up) | (tpr > down),
        )
        unknown = np.where(busy_only, np.isnan(load), np.isnan(tpr) | np.isnan(target_capacity))
        return factor, outside, unknown

    def _recommendation(self, factor: np.ndarray, outside: np.ndarray, unknown: np.ndarray) -> None:
        """``scaler.scale_by_factor``: / alpha, clamps, limits, alignment, the expected rate; NaN factors
        and unknown rates keep the parallelism and are never outside the band."""
        t, p = self.terms, self.parallelism
        factor = factor / self.alpha
        no_change = unknown | np.isnan(factor)
        _, raw = vf.scaled_parallelism(factor, p, t["low"], t["high"])
        new_p, lower, upper = vf.limit_parallelism(
            raw,
            current=p,
            max_parallelism=self.layout.max_parallelism,
            vertex_min=t["vertex_min"],
            vertex_max=t["vertex_max"],
        )
        self.unaligned = new_p.copy()
        self._align(new_p, lower, upper, no_change)
        self.recommended = np.where(no_change, p, new_p)
        self.expected = np.where(no_change, self.tpr, self.tpr / p * new_p)
        self.outside = np.where(no_change, False, outside)

    def _history_rules(self) -> None:
        """Observed scalability (§1.10) for the vertices of jobs with a scaling history; per vertex in
        Python, as those jobs are few and the rule reads their records."""
        for j, job in enumerate(self.jobs):
            if not job.history:
                continue
            options = self.options[j]
            start = int(self.layout.offsets[j])
            for k, vid in enumerate(self.layout.plans[j].vertex_ids):
                past = vertex_history(job.history, vid)
                self.pasts[start + k] = past
                if options.observed_scalability_enabled:
                    self.alpha[start + k] = scalability_coefficient(past, options)

    def _align(self, new_p: np.ndarray, lower: np.ndarray, upper: np.ndarray, no_change: np.ndarray) -> None:
        """Key-group alignment (§1.7) of the vertices whose parallelism changes and whose source
        reports partitions or whose input is HASH-partitioned; ``new_p`` is updated in place."""
        layout = self.layout
        partitions = np.zeros(layout.size, dtype=np.int64)
        for j, job in enumerate(self.jobs):
            reported = job.sample.num_source_partitions
            if reported:
                plan, start = layout.plans[j], int(layout.offsets[j])
                for vid, count in reported.items():
                    if vid in plan.position:
                        partitions[start + plan.position[vid]] = count
        self.partitions = partitions
        due = ~no_change & (new_p != self.parallelism) & ((partitions > 0) | layout.hash_input)
        for i in np.flatnonzero(due).tolist():
            options = self.options[int(layout.job_of_vertex[i])]
            legacy = options.key_group_partitions_adjust_mode
            aligned, bounds = aligned_parallelism(
                int(self.parallelism[i]),
                int(new_p[i]),
                int(layout.max_parallelism[i]),
                int(upper[i]),
                int(lower[i]),
                int(partitions[i]),
                options.alignment_mode or AlignmentMode.BALANCED,
                legacy if options.parallelism_alignment_mode is None else None,
            )
            new_p[i] = aligned
            if bounds is not None:
                self.limited_by[i] = bounds

    def graphs(self, walked: Mapping[int, GraphEvaluation]) -> list[GraphEvaluation]:
        """Each job's result: the oracle's walk where it was walked, else built from the columns."""
        unknown = np.isnan(self.tpr) | np.isnan(self.tdr)
        gains: dict[int, ScaleUpGain] = {}
        blocked = np.zeros(self.layout.size, dtype=np.bool_)
        for i, past in self.pasts.items():
            if past and not unknown[i] and self.recommended[i] > self.parallelism[i]:
                options = self.options[int(self.layout.job_of_vertex[i])]
                gain = ineffective_scale_up(
                    past[-1],
                    parallelism=int(self.parallelism[i]),
                    true_processing_rate=float(self.tpr[i]),
                    threshold=options.scaling_effectiveness_threshold,
                )
                if gain is not None:
                    gains[i] = gain
                    blocked[i] = options.scaling_effectiveness_detection_enabled
        keep = unknown | blocked
        target = np.where(keep, self.parallelism, self.recommended)
        expected = np.where(blocked, self.tpr, self.expected)
        outside = np.where(unknown, False, self.outside)
        size = self.layout.size
        limited_from: list[int | None] = [None] * size
        limited_by: list[AlignmentBounds | None] = [None] * size
        for i, bounds in self.limited_by.items():
            if not unknown[i]:
                limited_from[i], limited_by[i] = int(self.unaligned[i]), bounds
        scale_up_gain: list[ScaleUpGain | None] = [None] * size
        ineffective = [False] * size
        for i, gain in gains.items():
            scale_up_gain[i], ineffective[i] = gain, True
        layout = self.layout
        # One VertexEvaluation per laid-out vertex, in layout order; map() calls the builder with a value
        # of each column, no row tuple in between.
        evaluations = map(
            vertex_evaluation,
            itertools.chain.from_iterable(plan.vertex_ids for plan in layout.plans),
            self.parallelism.tolist(),
            layout.max_parallelism.tolist(),
            self.load.tolist(),
            self.tpr.tolist(),
            self.tdr.tolist(),
            self.catch_up.tolist(),
            self.lag.tolist(),
            self.scale_up.tolist(),
            self.scale_down.tolist(),
            target.tolist(),
            expected.tolist(),
            outside.tolist(),
            ineffective,
            self.counters.tolist(),
            self.alpha.tolist(),
            limited_from,
            limited_by,
            scale_up_gain,
        )
        backlog = self.backlog_by_job.tolist()
        out = []
        for j, plan in enumerate(layout.plans):
            job_vertices = itertools.islice(evaluations, len(plan.vertex_ids))
            graph = walked.get(j)
            if graph is None:
                graph = GraphEvaluation(dict(zip(plan.vertex_ids, job_vertices, strict=True)), backlog[j])
            else:
                for _ in job_vertices:  # walked by the oracle: its columns are not used
                    pass
            out.append(graph)
        return out
