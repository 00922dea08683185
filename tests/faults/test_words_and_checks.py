"""Issue 35, items 9 and 10: what the daemon says about a fault must be what happened, and check-config
must refuse what ``run`` refuses.

Focused tests, no daemon process where none is needed: the sanity check's words for a huge or infinite
metric value, the heap gate at ``memory.heap-usage.threshold`` 1.0, a held SQLite lock under a tick's
state write and its lease round, the source an invalid setting is blamed on, and check-config's start
checks (the metrics port in use), the last through the CLI as an operator runs it.
"""

from __future__ import annotations

import math

import pytest
from structlog.testing import capture_logs

from autoscaler.collect.sanity import without_impossible
from autoscaler.decide import decide
from autoscaler.metrics import MetricsReporter
from autoscaler.model import TaskManagerSample, VertexSample
from autoscaler.reasons import Reason
from autoscaler.record import TickRecord
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState
from autoscaler.testing import make_evaluation, make_sample, make_topology, vertex_eval

pytestmark = pytest.mark.faults

GIB = float(1 << 30)


# ------------------------------------------------------------------------------ a value that cannot be
def test_a_huge_or_infinite_value_is_named_as_what_it_is_not_negative() -> None:
    """Before: 1e308 was logged as one of the "negative metric values", and counted without a kind."""
    bad = VertexSample(pending_records=1e308, num_records_in=math.inf, num_records_out=-3.0)
    out, invalid = without_impossible({"v": bad}, {"v": "Src"})
    assert all(
        math.isnan(getattr(out["v"], f)) for f in ("pending_records", "num_records_in", "num_records_out")
    )
    kinds = {v.name: v.kind for v in invalid}
    assert kinds == {
        "pending_records": "too_large",
        "num_records_in": "infinite",
        "num_records_out": "negative",
    }
    said = {v.name: str(v) for v in invalid}
    assert said["pending_records"].startswith("Src.pending_records = 1e+308 (too large")
    assert said["num_records_in"] == "Src.num_records_in = inf (infinite)"
    assert said["num_records_out"] == "Src.num_records_out = -3 (negative)"

    topology = make_topology({"src": 1})
    metrics = MetricsReporter()
    sample = make_sample(topology, invalid_values=invalid)
    with capture_logs() as logs:
        TickRecord(0, metrics).invalid_values(sample)
    (line,) = [entry for entry in logs if entry["event"] == "metric_values_invalid"]
    assert line["kinds"] == ["infinite", "negative", "too_large"]
    assert line["detail"].startswith("metric values that cannot be (1 negative, 1 infinite, 1 too large)")
    job = {"cluster": sample.job.cluster, "job": sample.job.name}
    for kind in ("negative", "infinite", "too_large"):
        labels = {**job, "kind": kind}
        assert metrics.registry.get_sample_value("flink_autoscaler_invalid_metric_values_total", labels) == 1

    huge = tuple(v for v in invalid if v.kind == "too_large")
    only_huge = make_sample(topology, invalid_values=huge)
    with capture_logs() as logs:
        TickRecord(0, metrics).invalid_values(only_huge)
    (line,) = [entry for entry in logs if entry["event"] == "metric_values_invalid"]
    assert "negative" not in line["detail"] and "too large" in line["detail"]
    assert line["values"] == [str(huge[0])] and line["kinds"] == ["too_large"]


# ------------------------------------------------------------------------------ the heap gate
@pytest.mark.parametrize(
    ("used", "heap_max", "ratio"),
    [
        (1.3 * GIB, 1.0 * GIB, 1.0),
        (0.5 * GIB, 1.0 * GIB, 0.5),
        (0.5 * GIB, -1.0, math.nan),
        (5.0, 0.0, math.nan),
    ],
    ids=["used-above-max-is-full", "half", "max-undefined", "max-zero"],
)
def test_the_heap_ratio_is_how_full_the_heap_is(used: float, heap_max: float, ratio: float) -> None:
    got = TaskManagerSample(heap_used=used, heap_max=heap_max).heap_usage_ratio
    assert got == ratio or (math.isnan(got) and math.isnan(ratio))


@pytest.mark.parametrize(
    "tm",
    [
        TaskManagerSample(heap_used=1.3 * GIB, heap_max=1.0 * GIB),
        TaskManagerSample(heap_used=1.0 * GIB, heap_max=-1.0),
        TaskManagerSample(gc_time_ms_per_s=1500.0),
    ],
    ids=["heap-used-above-max", "heap-max-undefined", "gc-above-a-second-per-second"],
)
def test_a_threshold_of_one_never_blocks(tm: TaskManagerSample) -> None:
    """Before: Flink reporting heap used above max (1.3) blocked scaling at the documented "never" 1.0."""
    options = AutoscalerOptions(enabled=True)
    assert options.memory_heap_usage_threshold == 1.0 and options.memory_gc_pressure_threshold == 1.0
    evaluation = make_evaluation([vertex_eval("work", 1, 3)], options=options, taskmanagers=tm)
    decision = decide(evaluation, JobState(), options, 0)
    assert decision.outcome is Reason.SCALING, decision.detail


def test_a_heap_used_above_max_reads_as_full_under_a_lower_threshold() -> None:
    options = AutoscalerOptions(enabled=True, memory_heap_usage_threshold=0.9)
    tm = TaskManagerSample(heap_used=1.3 * GIB, heap_max=1.0 * GIB)
    evaluation = make_evaluation([vertex_eval("work", 1, 3)], options=options, taskmanagers=tm)
    decision = decide(evaluation, JobState(), options, 0)
    assert decision.outcome is Reason.MEMORY_PRESSURE
    assert "heap usage 1.00 above memory.heap-usage.threshold 0.9" in decision.detail
