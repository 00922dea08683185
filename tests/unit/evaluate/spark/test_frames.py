"""The aggregation query (:mod:`autoscaler.evaluate.spark.frames`) equals the plain-Python oracle.

One row per vertex from Spark, compared with ``aggregate_window`` on hand-picked and random windows.
Spark inputs stay tiny; every Spark action costs tens of milliseconds even when warm.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from evaluator_parity import close
from evaluator_samples import INF, T0, S, noisy_vertex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.evaluate import aggregate_window
from autoscaler.evaluate.fleet.columns import aggregates_by_job
from autoscaler.evaluate.spark.frames import ROW_DDL, aggregate_frame, collect_aggregates, rows_frame
from autoscaler.model import NAN, VertexSample


def spark_aggregates(
    spark: Any, rows: list[tuple[str, int, str, int, VertexSample]]
) -> dict[str, dict[str, Any]]:
    table, names = rows_frame(rows)
    return collect_aggregates(spark.createDataFrame(table, ROW_DDL), names)


@pytest.mark.spark
def test_spark_aggregates_equal_the_oracle(spark: Any) -> None:
    """NaN holes, infinite and negative values, single points, all-NaN columns, unordered timestamps."""
    rng = random.Random(7)
    windows: dict[tuple[str, str], list[tuple[int, VertexSample]]] = {}
    for job, vertices, n in (("x", ("s", "w"), 6), ("y", ("s",), 1), ("z", ("s", "a", "b"), 4)):
        for vid in vertices:
            times = rng.sample(range(0, 120_000, 10_000), n)
            windows[(job, vid)] = [(T0 + t, noisy_vertex(rng, t / 1000, 100.0)) for t in times]
    windows[("y", "empty")] = [(T0, VertexSample()), (T0 + 5, VertexSample())]  # nothing measured
    windows[("y", "inf")] = [
        (T0, VertexSample(observed_tpr=INF, num_records_in_per_s=-INF, busy_time_ms_per_s=INF))
    ]
    windows[("y", "counters")] = [  # only the counter pair: rates from deltas, the gauge path unused
        (T0 + t * S, VertexSample(num_records_in=100.0 * t, accumulated_busy_time_agg_ms=400.0 * t))
        for t in (0, 10, 20)
    ]
    rows = [(job, 0, vid, ts, s) for (job, vid), w in windows.items() for ts, s in w]
    got = spark_aggregates(spark, rows)
    assert {(j, v) for j, per in got.items() for v in per} == set(windows)
    for (job, vid), window in windows.items():
        assert close(got[job][vid], aggregate_window(window)), (job, vid)


@pytest.mark.spark
def test_one_task_aggregates_as_the_shuffled_query_without_an_exchange(spark: Any) -> None:
    """``single_task`` (small windows) gives the oracle's aggregates from a frame of several partitions,
    with no shuffle in the plan."""
    rng = random.Random(3)
    windows = {
        (job, vid): [(T0 + t * S, noisy_vertex(rng, float(t), 100.0)) for t in range(0, 60, 10)]
        for job in ("x", "y", "z")
        for vid in ("s", "w")
    }
    table, names = rows_frame((job, 0, vid, ts, s) for (job, vid), w in windows.items() for ts, s in w)
    frame = spark.createDataFrame(table, ROW_DDL).repartition(3)
    one_task = aggregate_frame(frame, single_task=True)
    plan = one_task._jdf.queryExecution().executedPlan().toString()
    assert "Exchange RoundRobin" in plan and "Exchange hashpartitioning" not in plan  # only the input's
    got = aggregates_by_job(names.name(one_task.toArrow()))
    for (job, vid), window in windows.items():
        assert close(got[job][vid], aggregate_window(window)), (job, vid)


_value = st.one_of(
    st.sampled_from([NAN, INF, -INF, 0.0]),
    st.integers(-4_000_000, 4_000_000).map(lambda i: i / 4),  # exact in binary: sums are order-free
)
_sample = st.builds(VertexSample, *([_value] * 9))
_window = st.lists(
    st.tuples(st.integers(0, 10**6), _sample), min_size=1, max_size=6, unique_by=lambda x: x[0]
)


@pytest.mark.spark
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.tuples(st.sampled_from("jk"), st.sampled_from("uvw")), _window, min_size=1, max_size=4)
)
def test_spark_equals_oracle_on_random_windows(
    spark: Any, windows: dict[tuple[str, str], list[tuple[int, VertexSample]]]
) -> None:
    rows = [(job, 0, vid, ts, s) for (job, vid), w in windows.items() for ts, s in w]
    got = spark_aggregates(spark, rows)
    for (job, vid), window in windows.items():
        assert close(got[job][vid], aggregate_window(window)), (job, vid, window)
