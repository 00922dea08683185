"""A restarted daemon's evaluator, given the stored samples, evaluates exactly as if it had seen them."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

import pytest

from autoscaler.evaluate.spark.evaluator import SparkEvaluator
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


def test_restored_custom_metrics_rejoin_the_window(spark):
    def with_custom(i: int):
        plain = tick(i)
        return replace(
            plain,
            custom_job_metrics={"heap": 0.1 * (i + 1)},
            custom_vertex_metrics={"work": {"lag": float(10 * i)}},
        )

    live = SparkEvaluator(spark)
    for i in range(7):
        expected = live.evaluate([with_custom(i)], with_custom(i).ts_ms)["c1/job"]
    restarted = SparkEvaluator(spark)
    got = restarted.evaluate(
        [with_custom(6)], with_custom(6).ts_ms, restored={"c1/job": [with_custom(i) for i in range(6)]}
    )["c1/job"]
    assert got.custom_metric("heap") == expected.custom_metric("heap")
    assert got.custom_metric("lag", "work") == expected.custom_metric("lag", "work")
    assert got.custom_metric("heap")[1] == pytest.approx(sum(0.1 * (i + 1) for i in range(7)) / 7)
    assert restarted.custom_window_size() == live.custom_window_size() == 14


def test_samples_from_before_a_restart_are_not_reused(spark):
    evaluator = SparkEvaluator(spark)
    restarted_at = tick(5).ts_ms - 1
    got = evaluator.evaluate(
        [tick(6, running_since_ms=restarted_at)],
        tick(6).ts_ms,
        restored={"c1/job": [tick(i) for i in range(6)]},
    )["c1/job"]
    assert got.window_samples <= 1 and not got.window_full


LOST_BLOCKS = "[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_42_0 not found!"
NO_SESSION = "[NO_ACTIVE_SESSION] No active Spark session found. Please create a new Spark session."


def _fail_once(evaluator: SparkEvaluator, monkeypatch: Any, message: str = LOST_BLOCKS) -> None:
    """The next tick's first Spark call fails as when the executor holding the window died (or, with
    ``NO_SESSION``, as when the Connect server restarted)."""
    real = evaluator._extend
    calls = []

    def materialize(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(message)
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluator, "_extend", materialize)


def test_a_lost_window_is_reloaded_from_the_stored_samples(spark, monkeypatch):
    live, expected = SparkEvaluator(spark), None
    for i in range(7):
        expected = live.evaluate([tick(i)], tick(i).ts_ms)["c1/job"]
    evaluator = SparkEvaluator(spark)
    for i in range(6):
        evaluator.evaluate([tick(i)], tick(i).ts_ms)
    _fail_once(evaluator, monkeypatch)
    asked = []

    def reload(samples):
        asked.append([s.job.key for s in samples])
        return {"c1/job": [tick(i) for i in range(6)]}

    got = evaluator.evaluate([tick(6)], tick(6).ts_ms, reload=reload)["c1/job"]
    assert asked == [["c1/job"]]
    assert got.window_full and got.not_ready is None and got.window_samples == expected.window_samples
    assert _comparable(got) == _comparable(expected)
    after = evaluator.evaluate([tick(7)], tick(7).ts_ms)["c1/job"]  # and the next tick goes on from there
    assert after.window_full and after.window_samples == expected.window_samples


@pytest.mark.parametrize("reload", [None, "fails"])
def test_a_lost_window_without_stored_samples_starts_afresh(spark, monkeypatch, reload):
    evaluator = SparkEvaluator(spark)
    for i in range(6):
        evaluator.evaluate([tick(i)], tick(i).ts_ms)
    _fail_once(evaluator, monkeypatch)

    def failing(_samples):
        raise OSError("state database unreachable")

    got = evaluator.evaluate([tick(6)], tick(6).ts_ms, reload=failing if reload else None)["c1/job"]
    assert got.window_samples == 1 and not got.window_full and got.not_ready is not None
    assert evaluator.window_size() == 2  # one sample of each vertex: the lost rows are gone for good


def test_a_session_the_connect_server_lost_is_replaced_and_the_window_reloaded(spark, monkeypatch):
    live, expected = SparkEvaluator(spark), None
    for i in range(7):
        expected = live.evaluate([tick(i)], tick(i).ts_ms)["c1/job"]
    steps = []

    def reconnect():
        steps.append("reconnect")
        return spark  # the server's new session (here: this run's local one again)

    evaluator = SparkEvaluator(spark, reconnect=reconnect)
    for i in range(6):
        evaluator.evaluate([tick(i)], tick(i).ts_ms)
    _fail_once(evaluator, monkeypatch, NO_SESSION)
    # The dead session is stopped first (it stays PySpark's default session otherwise); not the test's.
    monkeypatch.setattr(evaluator, "stop", lambda: steps.append("stop"))
    got = evaluator.evaluate(
        [tick(6)], tick(6).ts_ms, reload=lambda _samples: {"c1/job": [tick(i) for i in range(6)]}
    )["c1/job"]
    assert steps == ["stop", "reconnect"]
    assert got.window_full and got.window_samples == expected.window_samples
    assert _comparable(got) == _comparable(expected)


def test_a_lost_session_fails_the_tick_until_a_reconnect_succeeds(spark, monkeypatch):
    attempts = []

    def reconnect():
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("server still starting")
        return spark

    evaluator = SparkEvaluator(spark, reconnect=reconnect)
    monkeypatch.setattr(evaluator, "stop", lambda: None)  # not the test run's session
    evaluator.evaluate([tick(0)], tick(0).ts_ms)
    _fail_once(evaluator, monkeypatch, NO_SESSION)
    with pytest.raises(ConnectionError):  # the daemon reports evaluation_failed; nothing scales
        evaluator.evaluate([tick(1)], tick(1).ts_ms)
    monkeypatch.delattr(evaluator, "_extend")  # the instance's patch; the class's method again
    _fail_once(evaluator, monkeypatch, NO_SESSION)
    got = evaluator.evaluate([tick(2)], tick(2).ts_ms)["c1/job"]
    assert len(attempts) == 2 and got.window_samples == 1


def test_without_reconnect_a_lost_session_is_an_error(spark, monkeypatch):
    evaluator = SparkEvaluator(spark)
    evaluator.evaluate([tick(0)], tick(0).ts_ms)
    _fail_once(evaluator, monkeypatch, NO_SESSION)
    with pytest.raises(RuntimeError, match="NO_ACTIVE_SESSION"):
        evaluator.evaluate([tick(1)], tick(1).ts_ms)
