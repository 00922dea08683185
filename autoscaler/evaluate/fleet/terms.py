"""What the fleet evaluation reads of each job's options, as columns over the vertices, and the cached
key-group alignment.

Apart from :mod:`autoscaler.evaluate.fleet.evaluator` because both are about *inputs* to the vectorised
formulas rather than the formulas: options are read once per options object (a handful of attribute reads and
properties, which done per vertex cost more than the arithmetic), and alignment is an integer search
that stays the scaler's own code, asked once per distinct question.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from autoscaler.evaluate.javamath import whole_seconds
from autoscaler.evaluate.oracle.rates import busy_time_bounds
from autoscaler.evaluate.scaler import aligned_parallelism as _aligned_parallelism
from autoscaler.model import JobSample
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator

__all__ = ["Terms", "aligned_parallelism", "job_options", "term_columns"]


class Terms(NamedTuple):
    """A job's options as the formulas use them (each the value the oracle's formula reads)."""

    prefer_counters: bool  # metrics.prefer-counter-rates
    average_aggregator: bool  # metrics.busy-time.aggregator is AVG
    min_observations: int  # observed-true-processing-rate.min-observations
    switch_threshold: float  # observed-true-processing-rate.switch-threshold
    busy_only: bool  # scaling.busy-time-only.enabled
    backlog_s: int  # backlog-processing.lag-threshold, whole seconds
    catch_up_s: int  # catch-up.duration, whole seconds
    upper: float  # utilization upper bound (rates.thresholds)
    lower: float  # utilization lower bound
    target: float  # utilization.target
    busy_upper: float  # busy-time-only band (rates.busy_time_bounds, no backlog)
    busy_lower: float
    low: float  # 1 - scale-down.max-factor (scaler.clamp_scale_factor)
    high: float  # 1 + scale-up.max-factor
    vertex_min: int  # vertex.min-parallelism
    vertex_max: int  # vertex.max-parallelism

    @classmethod
    def of(cls, options: AutoscalerOptions) -> Terms:
        busy_upper, busy_lower = busy_time_bounds(False, options)
        return cls(
            options.prefer_counter_rates,
            options.busy_time_aggregator is BusyTimeAggregator.AVG,
            options.observed_tpr_min_observations,
            options.observed_tpr_switch_threshold,
            options.busy_time_only_enabled,
            whole_seconds(options.backlog_processing_lag_threshold),
            whole_seconds(options.catch_up_duration),
            options.utilization_upper,
            options.utilization_lower,
            options.utilization_target,
            busy_upper,
            busy_lower,
            1.0 - options.scale_down_max_factor,
            1.0 + options.scale_up_max_factor,
            options.vertex_min_parallelism,
            options.vertex_max_parallelism,
        )


_BOOLS = frozenset({"prefer_counters", "average_aggregator", "busy_only"})
_INTS = frozenset({"min_observations", "backlog_s", "catch_up_s", "vertex_min", "vertex_max"})


def job_options(samples: Sequence[JobSample]) -> tuple[list[AutoscalerOptions], np.ndarray, list[Terms]]:
    """Each job's options, the index of its terms, and the terms, read once per options object (the
    daemon gives each job its own object; tests and the benchmark share one)."""
    seen: dict[int, int] = {}
    options: list[AutoscalerOptions] = []
    group: list[int] = []
    terms: list[Terms] = []
    for sample in samples:
        o = sample.target.options
        index = seen.get(id(o))
        if index is None:
            index = seen[id(o)] = len(terms)
            terms.append(Terms.of(o))
        options.append(o)
        group.append(index)
    return options, np.asarray(group, dtype=np.int64), terms


def term_columns(terms: Sequence[Terms], group: np.ndarray) -> dict[str, np.ndarray]:
    """Each term as a column over the vertices (``group``: each vertex's index into ``terms``).

    One float matrix for all terms is exact: the ints are parallelisms and whole seconds, far below
    2^53, and the bools are 0 and 1.
    """
    names = Terms._fields
    matrix = np.array(terms, dtype=np.float64).reshape(len(terms), len(names))
    columns: dict[str, np.ndarray] = {}
    for k, name in enumerate(names):
        column = matrix[group, k]
        if name in _BOOLS:
            column = column.astype(np.bool_)
        elif name in _INTS:
            column = column.astype(np.int64)
        columns[name] = column
    return columns


aligned_parallelism = functools.lru_cache(maxsize=1 << 16)(_aligned_parallelism)
"""``scaler.aligned_parallelism``, cached: a pure function of a few integers that searches up to
max-parallelism candidates, and a fleet asks the same few questions every tick."""
