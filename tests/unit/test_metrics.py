"""The reporter's series: per-vertex gauges, per-job counters that vanish with their job, REST counts."""

from __future__ import annotations

import math

from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.state import ScalingVerification, VertexVerification
from autoscaler.testing import make_evaluation, vertex_eval
from autoscaler.tick.record import TickTimer

JOB = JobRef("c1", "0" * 32, "job")  # the builders' job


def value(metrics: MetricsReporter, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_vertex_gauges_carry_the_evaluation_and_source_partitions():
    metrics = MetricsReporter()
    evaluation = make_evaluation(
        [vertex_eval("src", 2), vertex_eval("work", 4, 6)], num_source_partitions={"src": 12}
    )
    metrics.report_evaluation(evaluation)
    src = {"cluster": "c1", "job": "job", "vertex": "src", "vertex_name": "src"}
    work = {**src, "vertex": "work", "vertex_name": "work"}
    assert value(metrics, "flink_autoscaler_vertex_num_source_partitions", **src) == 12
    assert math.isnan(value(metrics, "flink_autoscaler_vertex_num_source_partitions", **work))
    assert value(metrics, "flink_autoscaler_vertex_recommended_parallelism", **work) == 6
    assert value(metrics, "flink_autoscaler_vertex_parallelism", **work) == 4


def test_every_series_of_a_vanished_job_is_removed():
    metrics = MetricsReporter()
    metrics.report_evaluation(make_evaluation([vertex_eval("work", 1, 2)]))
    metrics.report_outcome(JOB, Reason.SCALING, scaled=True)
    metrics.plugin_outcomes.labels("c1", "job", "cpu-gate", "ScalingVetoed").inc()
    metrics.deferred.labels("c1", "job").inc()
    other = JobRef("c1", "1" * 32, "other")
    metrics.report_outcome(other, Reason.AUTOSCALER_ERROR, scaled=False)  # never evaluated
    metrics.report_error("c1", Reason.CLUSTER_UNREACHABLE)
    assert metrics.known_jobs() == {"c1/job", "c1/other"}

    metrics.forget(["c1/job", "c1/other"])
    text = "\n".join(f"{s.name}{s.labels}" for family in metrics.registry.collect() for s in family.samples)
    assert "'job': 'job'" not in text and "'job': 'other'" not in text
    assert metrics.known_jobs() == set()
    assert value(metrics, "flink_autoscaler_errors_total", cluster="c1", reason="ClusterUnreachable") == 1


def test_a_verification_sets_each_measured_ratio_counts_once_and_goes_with_its_vertex_or_job():
    metrics = MetricsReporter()
    metrics.report_evaluation(make_evaluation([vertex_eval("work", 3), vertex_eval("idle", 2)]))
    verification = ScalingVerification(
        1, 0.9, {"work": VertexVerification(3, 3000.0, 1500.0), "idle": VertexVerification(2, 80.0, math.nan)}
    )
    metrics.report_verification(JOB, {"work": "Map"}, verification)
    work = {"cluster": "c1", "job": "job", "vertex": "work", "vertex_name": "Map"}
    assert value(metrics, "flink_autoscaler_scaling_verification_ratio", **work) == 0.5
    idle = {**work, "vertex": "idle", "vertex_name": "idle"}
    assert value(metrics, "flink_autoscaler_scaling_verification_ratio", **idle) is None  # not measured
    job = {"cluster": "c1", "job": "job"}
    assert value(metrics, "flink_autoscaler_scaling_verifications_total", **job, result="below_expected") == 1
    metrics.forget(["c1/job"])
    assert value(metrics, "flink_autoscaler_scaling_verification_ratio", **work) is None
    assert (
        value(metrics, "flink_autoscaler_scaling_verifications_total", **job, result="below_expected") is None
    )


def test_rest_requests_and_errors_by_cluster_endpoint_and_status():
    metrics = MetricsReporter()
    metrics.report_request("c1", "GET", "/jobs/overview", 200)
    metrics.report_request("c1", "GET", "/jobs/:jobid", 404)
    metrics.report_request("c1", "GET", "/jobs/:jobid", "FlinkUnreachable")
    metrics.report_request("c1", "PUT", "/jobs/:jobid/resource-requirements", "FlinkBadPayload")
    requests = "flink_autoscaler_rest_requests_total"
    errors = "flink_autoscaler_rest_errors_total"
    assert value(metrics, requests, cluster="c1", method="GET", endpoint="/jobs/overview", status="200") == 1
    assert value(metrics, errors, cluster="c1", method="GET", endpoint="/jobs/:jobid", error="404") == 1
    assert (
        value(metrics, errors, cluster="c1", method="GET", endpoint="/jobs/:jobid", error="unreachable") == 1
    )
    put = "/jobs/:jobid/resource-requirements"
    assert value(metrics, errors, cluster="c1", method="PUT", endpoint=put, error="bad_payload") == 1
    assert value(metrics, errors, cluster="c1", method="GET", endpoint="/jobs/overview", error="200") is None


def test_tick_and_spark_reports_feed_the_health_object():
    class Recorder:
        ticks, spark = 0, []

        def tick_completed(self) -> None:
            self.ticks += 1

        def set_spark(self, ok: bool, detail: str = "") -> None:
            self.spark.append((ok, detail))

    health = Recorder()
    metrics = MetricsReporter(health=health)  # type: ignore[arg-type]
    metrics.report_tick(1.5)
    metrics.report_spark(False, "gone")
    metrics.report_spark(True, duration_s=0.2)
    assert health.ticks == 1 and health.spark == [(False, "gone"), (True, "")]
    assert value(metrics, "flink_autoscaler_ticks_total") == 1
    assert value(metrics, "flink_autoscaler_spark_up") == 1
    assert value(metrics, "flink_autoscaler_evaluation_duration_seconds_count") == 1
    assert value(metrics, "flink_autoscaler_last_tick_timestamp_seconds") > 0


def test_a_ticks_stages_and_its_wait_for_the_metric_fetch_are_timed(monkeypatch):
    ends = iter([11.5, 11.75, 12.5])  # three stages of a tick that started at 10.0 end
    monkeypatch.setattr("autoscaler.tick.record.time.perf_counter", lambda: next(ends))
    rec = TickTimer(started=10.0)
    for stage in ("collect", "load", "evaluate"):
        rec.lap(stage)
    assert rec.stages == {"collect": 1.5, "load": 0.25, "evaluate": 0.75}

    metrics = MetricsReporter()
    metrics.report_tick(2.5, rec.stages)
    metrics.report_fetch_wait("c1", 0.25, landed=True)
    metrics.report_fetch_wait("c1", 1.5, landed=False)
    stage = "flink_autoscaler_tick_stage_duration_seconds"
    assert value(metrics, f"{stage}_count", stage="collect") == 1
    assert value(metrics, f"{stage}_sum", stage="evaluate") == 0.75
    wait = "flink_autoscaler_metric_fetch_wait_seconds"
    assert value(metrics, f"{wait}_sum", cluster="c1", outcome="landed") == 0.25
    assert value(metrics, f"{wait}_sum", cluster="c1", outcome="timed_out") == 1.5


def test_the_children_table_and_the_public_samples_give_the_same_label_sets() -> None:
    """``_label_sets`` reads prometheus_client's table of children (fast); without it, the samples."""
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, Counter

    from autoscaler.metrics import _label_sets

    counter = Counter("t_decisions", "d", ["cluster", "job", "outcome"], registry=CollectorRegistry())
    counter.labels("c1", "a", "InBand").inc()
    counter.labels("c1", "b", "Scaling")
    counter.labels("c2", "a", "InBand").inc(2)
    counter.remove("c1", "b", "Scaling")
    names = ("cluster", "job", "outcome")
    public_only = SimpleNamespace(collect=counter.collect)  # no table of children: the samples are read
    assert (
        _label_sets(counter, names)
        == _label_sets(public_only, names)
        == {("c1", "a", "InBand"), ("c2", "a", "InBand")}
    )  # type: ignore[arg-type]
