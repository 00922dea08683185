"""A restarted daemon's evaluator, given the stored samples, evaluates exactly as if it had seen them."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from autoscaler.evaluate.spark import SparkEvaluator
from autoscaler.model import VertexSample
from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import make_sample, make_topology

pytestmark = pytest.mark.spark

OPTIONS = AutoscalerOptions(enabled=True, metrics_window="1 min", stabilization_interval="10 s")
TOPOLOGY = make_topology({"src": 1, "work": 2}, [("src", "work", "REBALANCE")])
S = 1000


def tick(i: int, running_since_ms: int = 0):
    ts = 20 * S + i * 10 * S
    src = VertexSample(
        busy_time_ms_per_s=100.0,
        backpressured_ms_per_s=0.0,
        num_records_in=1000.0 * ts / S,
        num_records_out=1000.0 * ts / S,
        accumulated_busy_time_ms=100.0 * ts / S,
        accumulated_busy_time_agg_ms=100.0 * ts / S,
        num_records_in_per_s=1000.0,
        pending_records=0.0,
        observed_tpr=float("nan"),
    )
    work = VertexSample(
        busy_time_ms_per_s=500.0,
        backpressured_ms_per_s=0.0,
        num_records_in=1000.0 * ts / S,
        num_records_out=1000.0 * ts / S,
        accumulated_busy_time_ms=1000.0 * ts / S,
        accumulated_busy_time_agg_ms=500.0 * ts / S,
        num_records_in_per_s=1000.0,
    )
    return make_sample(
        TOPOLOGY,
        ts_ms=ts,
        running_since_ms=running_since_ms,
        options=OPTIONS,
        vertices={"src": src, "work": work},
    )


def _comparable(evaluation):
    """Vertex evaluations as plain values, NaN made comparable (NaN == NaN here means "both unknown")."""
    return {
        vid: {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(ev).items()}
        for vid, ev in evaluation.vertices.items()
    }


def test_restored_window_evaluates_like_the_live_one(spark):
    live = SparkEvaluator(spark)
    for i in range(7):
        expected = live.evaluate([tick(i)], tick(i).ts_ms)["c1/job"]
    restarted = SparkEvaluator(spark)
    got = restarted.evaluate([tick(6)], tick(6).ts_ms, restored={"c1/job": [tick(i) for i in range(6)]})[
        "c1/job"
    ]
    assert got.window_full and got.not_ready is None
    assert (got.window_samples, got.window_full) == (expected.window_samples, expected.window_full)
    assert _comparable(got) == _comparable(expected)


def test_samples_from_before_a_restart_are_not_reused(spark):
    evaluator = SparkEvaluator(spark)
    restarted_at = tick(5).ts_ms - 1
    got = evaluator.evaluate(
        [tick(6, running_since_ms=restarted_at)],
        tick(6).ts_ms,
        restored={"c1/job": [tick(i) for i in range(6)]},
    )["c1/job"]
    assert got.window_samples <= 1 and not got.window_full
