"""The per-vertex series budget: ``vertex_metrics`` (all, scaling, off) and ``vertex_metrics_max_series``.

Each mode exports exactly its series, the cap holds and is counted, a vanished job leaves nothing behind,
the shipped dashboard and alert rules read only what the default exports, and a 1,000-job daemon's
``/metrics`` page stays within its budget (series are counted, so the bound is exact, not timed).

Run as a script to print the page of 1,000 jobs x 10 vertices in every mode (docs/operations.md):

    .venv/bin/python tests/unit/test_vertex_series.py
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from autoscaler.evaluate.spark.phases import EvaluationPhases
from autoscaler.metrics import MetricsReporter
from autoscaler.model import Edge, JobEvaluation, JobRef, JobTopology, VertexInfo
from autoscaler.reasons import Reason
from autoscaler.settings import Settings
from autoscaler.state import ScalingVerification, VertexVerification
from autoscaler.testing import make_sample, vertex_eval
from autoscaler.vertex_series import SCALING_SOURCE_GAUGES, SCALING_VERTEX_GAUGES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "flink-autoscaler.json"
RULES = DEPLOY / "prometheus" / "flink-autoscaler-rules.yaml"

ALL_GAUGES = frozenset(
    {
        "parallelism",
        "recommended_parallelism",
        "max_parallelism",
        "num_source_partitions",
        "load",
        "true_processing_rate",
        "target_data_rate",
        "catch_up_data_rate",
        "lag",
        "scale_up_rate_threshold",
        "scale_down_rate_threshold",
        "expected_processing_rate",
        "busy_skew",
        "slow_subtasks",
    }
)
DEFAULT_MODE = Settings.model_fields["vertex_metrics"].default
DEFAULT_CAP = Settings.model_fields["vertex_metrics_max_series"].default


def default_reporter() -> MetricsReporter:
    """A reporter as the daemon builds it from default settings."""
    return MetricsReporter(vertex_metrics=DEFAULT_MODE, vertex_metrics_max_series=DEFAULT_CAP)


def pipeline(index: int, vertices: int = 3, cluster: str = "prod") -> JobEvaluation:
    """A chain: one Kafka source, then ``vertices - 1`` operators; Flink-like 32-hex vertex ids."""
    job = JobRef(cluster, f"{index:032x}", f"team-{index % 20:02d}-pipeline-{index:04d}")
    ids = [f"{index:016x}{k:016x}" for k in range(vertices)]
    names = ["Source: Kafka orders", *(f"Map: enrich step {k}" for k in range(1, vertices))]
    topology = JobTopology.build(
        [VertexInfo(vid, name, 4, 128) for vid, name in zip(ids, names, strict=True)],
        [Edge(a, b, "HASH") for a, b in itertools.pairwise(ids)],
    )
    sample = make_sample(topology, job=job, num_source_partitions={ids[0]: 8})
    evaluated = {
        vid: replace(
            vertex_eval(vid, 4, 6, tpr=11_000.0, tdr=12_000.0), lag=250_000.0 if k == 0 else math.nan
        )
        for k, vid in enumerate(ids)
    }
    return JobEvaluation(sample, evaluated, processing_backlog=False, window_samples=90, window_full=True)


def exported(metrics: MetricsReporter) -> dict[str, set[tuple[str, str]]]:
    """Per-vertex gauge suffix -> the (job, vertex) pairs it has a series for."""
    out: dict[str, set[tuple[str, str]]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name.startswith("flink_autoscaler_vertex_") and "vertex" in sample.labels:
                suffix = sample.name.removeprefix("flink_autoscaler_vertex_")
                out.setdefault(suffix, set()).add((sample.labels["job"], sample.labels["vertex"]))
    return out


def value(metrics: MetricsReporter, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def vertex_series(metrics: MetricsReporter) -> int:
    return sum(len(pairs) for pairs in exported(metrics).values())


def job_labels(metrics: MetricsReporter) -> set[str]:
    return {s.labels["job"] for f in metrics.registry.collect() for s in f.samples if "job" in s.labels}


# ------------------------------------------------------------------------------ the modes
@pytest.mark.parametrize("mode", ["all", "scaling", "off"])
def test_each_mode_exports_exactly_its_series_and_every_mode_the_per_job_counters(mode):
    metrics = MetricsReporter(vertex_metrics=mode)
    evaluation = pipeline(1, vertices=3)
    metrics.report_evaluation(evaluation)
    metrics.report_outcome(evaluation.job, Reason.SCALING, scaled=True)
    name = evaluation.job.name
    src = next(iter(evaluation.vertices))
    every = {(name, vid) for vid in evaluation.vertices}
    expected = {
        "all": dict.fromkeys(ALL_GAUGES, every),
        "scaling": {
            **dict.fromkeys(SCALING_VERTEX_GAUGES, every),
            **{gauge: {(name, src)} for gauge in SCALING_SOURCE_GAUGES},
        },
        "off": {},
    }[mode]
    assert exported(metrics) == expected
    assert value(metrics, "flink_autoscaler_vertex_series_exported") == sum(len(p) for p in expected.values())
    job = {"cluster": "prod", "job": name}
    assert value(metrics, "flink_autoscaler_scalings_total", **job) == 1
    assert value(metrics, "flink_autoscaler_decisions_total", **job, outcome="Scaling") == 1
    # A gauge the mode does not export is not even registered: no empty family on the page.
    families = {f.name for f in metrics.registry.collect()}
    assert ("flink_autoscaler_vertex_max_parallelism" in families) == (mode == "all")
    assert ("flink_autoscaler_vertex_load" in families) == (mode != "off")


def test_the_scaling_set_is_what_the_dashboard_rows_decide_on():
    assert SCALING_VERTEX_GAUGES | SCALING_SOURCE_GAUGES < ALL_GAUGES
    assert {"load", "true_processing_rate", "target_data_rate", "parallelism"} <= SCALING_VERTEX_GAUGES
    assert "lag" in SCALING_SOURCE_GAUGES  # the StuckBacklog alert


@pytest.mark.parametrize("mode", ["all", "scaling"])
def test_a_verification_ratio_is_exported_with_all_only_and_its_result_counted_in_every_mode(mode):
    metrics = MetricsReporter(vertex_metrics=mode)
    evaluation = pipeline(1)
    metrics.report_evaluation(evaluation)
    work = list(evaluation.vertices)[1]
    verification = ScalingVerification(1, 0.9, {work: VertexVerification(4, 3000.0, 1500.0)})
    metrics.report_verification(evaluation.job, {work: "Map"}, verification)
    labels = {"cluster": "prod", "job": evaluation.job.name, "vertex": work, "vertex_name": "Map"}
    ratio = value(metrics, "flink_autoscaler_scaling_verification_ratio", **labels)
    assert ratio == (0.5 if mode == "all" else None)
    job = {"cluster": "prod", "job": evaluation.job.name}
    assert value(metrics, "flink_autoscaler_scaling_verifications_total", **job, result="below_expected") == 1


# ------------------------------------------------------------------------------ the cap
def test_the_cap_holds_withholds_whole_jobs_and_counts_and_logs_them_once():
    per_job = 5 * 3 + 1  # scaling: five gauges on three vertices, and the source's catch-up rate
    metrics = MetricsReporter(vertex_metrics="scaling", vertex_metrics_max_series=2 * per_job + per_job // 2)
    jobs = [pipeline(i) for i in range(4)]
    with capture_logs() as logs:
        for _tick in range(3):
            for evaluation in jobs:
                metrics.report_evaluation(evaluation)

    series = exported(metrics)
    names = [e.job.name for e in jobs]
    for gauge in SCALING_VERTEX_GAUGES | {"catch_up_data_rate"}:  # the first two, whole; the others none
        assert {job for job, _ in series[gauge]} == set(names[:2]), gauge
    assert {job for job, _ in series["lag"]} == set(names)  # the sources' lag is outside the cap
    capped = vertex_series(metrics) - len(series["lag"])
    assert capped == 2 * per_job <= metrics.vertex_metrics_max_series
    assert value(metrics, "flink_autoscaler_vertex_series_exported") == vertex_series(metrics)
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == 2
    assert value(metrics, "flink_autoscaler_vertex_series_dropped_total") == 2 * per_job  # once per job
    reached = [e for e in logs if e["event"] == "vertex_series_limit_reached"]
    assert len(reached) == 1 and reached[0]["job"] == jobs[2].job.key

    # A job that vanishes hands its share to the next one that did not fit, at that one's next report.
    metrics.forget([jobs[0].job.key])
    for evaluation in jobs[1:]:
        metrics.report_evaluation(evaluation)
    assert {job for job, _ in exported(metrics)["load"]} == set(names[1:3])
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == 1
    assert value(metrics, "flink_autoscaler_vertex_series_dropped_total") == 2 * per_job


def test_a_job_that_grows_past_the_cap_is_withheld_whole_and_its_old_series_removed():
    per_vertex = len(ALL_GAUGES)
    metrics = MetricsReporter(vertex_metrics="all", vertex_metrics_max_series=per_vertex * 3)
    metrics.report_evaluation(pipeline(1, vertices=3))
    assert vertex_series(metrics) == per_vertex * 3
    metrics.report_evaluation(pipeline(1, vertices=4))  # a new operator: 4 vertices' series, 3 allowed
    assert set(exported(metrics)) == {"lag"}
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == 1


def test_the_cap_counts_verification_ratios_and_drops_those_that_do_not_fit():
    metrics = MetricsReporter(vertex_metrics="all", vertex_metrics_max_series=len(ALL_GAUGES) * 2 - 1)  # full
    evaluation = pipeline(1, vertices=2)
    metrics.report_evaluation(evaluation)
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == 0  # the source's lag is free
    work = list(evaluation.vertices)[1]
    verification = ScalingVerification(1, 0.9, {work: VertexVerification(4, 3000.0, 3000.0)})
    metrics.report_verification(evaluation.job, {}, verification)
    assert value(metrics, "flink_autoscaler_vertex_series_dropped_total") == 1
    assert "flink_autoscaler_scaling_verification_ratio" not in {
        s.name for f in metrics.registry.collect() for s in f.samples
    }


@pytest.mark.parametrize(
    ("mode", "cap"), [("all", 0), ("scaling", 0), ("off", 0), ("all", 45), ("scaling", 20)]
)
def test_every_series_of_a_vanished_job_is_removed_in_every_mode(mode, cap):
    metrics = MetricsReporter(vertex_metrics=mode, vertex_metrics_max_series=cap)
    jobs = [pipeline(i) for i in range(2)]  # with a cap, room for the first job only
    for evaluation in jobs:
        metrics.report_evaluation(evaluation)
        metrics.report_outcome(evaluation.job, Reason.IN_BAND, scaled=False)
        metrics.report_verification(
            evaluation.job,
            {},
            ScalingVerification(1, 0.9, {list(evaluation.vertices)[1]: VertexVerification(4, 1, 1)}),
        )
    assert metrics.known_jobs() == {e.job.key for e in jobs}
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == (1 if cap else 0)

    metrics.forget(e.job.key for e in jobs)
    assert job_labels(metrics) == set()
    assert metrics.known_jobs() == set()
    assert value(metrics, "flink_autoscaler_vertex_series_exported") == 0
    assert value(metrics, "flink_autoscaler_vertex_series_withheld_jobs") == 0


def test_a_vertex_that_leaves_the_job_takes_its_series_along():
    metrics = MetricsReporter(vertex_metrics="scaling")
    metrics.report_evaluation(pipeline(1, vertices=3))
    metrics.report_evaluation(pipeline(1, vertices=2))
    assert vertex_series(metrics) == 5 * 2 + 2
    assert value(metrics, "flink_autoscaler_vertex_series_exported") == 5 * 2 + 2


# ------------------------------------------------------------------------------ the setting
def test_the_settings_default_is_scaling_with_a_cap_and_both_come_from_yaml_or_the_environment(
    tmp_path, monkeypatch
):
    assert (DEFAULT_MODE, DEFAULT_CAP) == ("scaling", 10_000)
    config = tmp_path / "config.yaml"
    config.write_text("vertex_metrics: off\nvertex-metrics-max-series: 0\n")
    settings = Settings.load(config)
    assert (settings.vertex_metrics, settings.vertex_metrics_max_series) == ("off", 0)
    monkeypatch.setenv("FLINK_AUTOSCALER_VERTEX_METRICS", "all")
    monkeypatch.setenv("FLINK_AUTOSCALER_VERTEX_METRICS_MAX_SERIES", "500")
    settings = Settings.load(config)
    assert (settings.vertex_metrics, settings.vertex_metrics_max_series) == ("all", 500)


def test_a_bad_mode_or_cap_is_refused_at_load_time():
    from autoscaler.settings import ConfigError

    with pytest.raises(ConfigError, match="vertex_metrics"):
        Settings.load(vertex_metrics="some")
    with pytest.raises(ConfigError, match="vertex_metrics_max_series"):
        Settings.load(vertex_metrics_max_series=-1)
    with pytest.raises(ValueError, match="vertex_metrics"):
        MetricsReporter(vertex_metrics="some")  # type: ignore[arg-type]


def test_a_restart_with_another_mode_exports_only_the_new_modes_series():
    evaluation = pipeline(1)
    before = MetricsReporter(vertex_metrics="all")
    before.report_evaluation(evaluation)
    assert set(exported(before)) == ALL_GAUGES
    for mode in ("off", "scaling", "all"):
        settings = Settings.load(vertex_metrics=mode)  # a new process: a new reporter and registry
        after = MetricsReporter(
            vertex_metrics=settings.vertex_metrics,
            vertex_metrics_max_series=settings.vertex_metrics_max_series,
        )
        after.report_evaluation(evaluation)
        assert (
            set(exported(after))
            == {
                "off": set(),
                "scaling": SCALING_VERTEX_GAUGES | SCALING_SOURCE_GAUGES,
                "all": ALL_GAUGES,
            }[mode]
        )


# ------------------------------------------------------------------------------ dashboard and rules
_NAME = re.compile(r"flink_autoscaler_[a-z_]+")


def dashboard_panels() -> Iterator[dict]:
    def walk(panels: list[dict]) -> Iterator[dict]:
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels", []))

    yield from walk(json.loads(DASHBOARD.read_text())["panels"])


def variable_queries() -> list[str]:
    out = []
    for var in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        query = var.get("query")
        out.append(query.get("query", "") if isinstance(query, dict) else str(query or ""))
    return out


def fed_default_reporter() -> MetricsReporter:
    """Every kind of report a tick makes, once, under the default settings."""
    metrics = default_reporter()
    evaluation = pipeline(1)
    job = evaluation.job
    metrics.report_evaluation(evaluation)
    metrics.report_outcome(job, Reason.SCALING, scaled=True)
    metrics.report_outcome(job, Reason.AUTOSCALER_ERROR, scaled=False)
    for plugin_outcome in (Reason.SCALING_VETOED, Reason.PLUGIN_FAILED):
        metrics.plugin_outcomes.labels(job.cluster, job.name, "cpu-gate", str(plugin_outcome)).inc()
    metrics.deferred.labels(job.cluster, job.name).inc()
    metrics.forced.labels(job.cluster, job.name).inc()
    metrics.report_error(job.cluster, Reason.CLUSTER_UNREACHABLE)
    metrics.jobs.labels(job.cluster).set(1)
    metrics.lease_held.labels(job.cluster).set(1)
    metrics.shards_held.labels(job.cluster).set(1)
    metrics.shards.labels(job.cluster).set(1)
    metrics.ticks_skipped.inc()
    metrics.report_request(job.cluster, "GET", "/jobs/:jobid", 404)
    metrics.report_spark(True, duration_s=0.8, phases=EvaluationPhases(window=0.2, spark=0.5, driver=0.1))
    metrics.report_fetch_wait(job.cluster, 0.2, landed=True)
    metrics.report_tick(1.7, {"collect": 0.6, "evaluate": 0.8, "record": 0.3})
    return metrics


def test_every_metric_the_dashboard_and_the_rules_read_is_exported_under_the_default_settings():
    metrics = fed_default_reporter()
    names = {s.name for f in metrics.registry.collect() for s in f.samples}

    for query in variable_queries():
        assert set(_NAME.findall(query)) <= names, query
    for panel in dashboard_panels():
        used = {n for t in panel.get("targets", []) for n in _NAME.findall(t["expr"])}
        missing = used - names
        description = panel.get("description", "")
        # A line that needs the full set is allowed only where the panel says so, naming the metric.
        if missing:
            assert "vertex_metrics: all" in description, (panel["title"], missing)
            assert all(m.removeprefix("flink_autoscaler_vertex_") in description for m in missing), panel[
                "title"
            ]
        # Every panel keeps at least one line under the default.
        assert not used or used - missing, panel["title"]

    rules = yaml.safe_load(RULES.read_text())
    for rule in (r for group in rules["groups"] for r in group["rules"]):
        used = set(_NAME.findall(rule["expr"]))
        assert used and used <= names, (rule["alert"], used - names)


# ------------------------------------------------------------------------------ the page
def page(mode: str, cap: int, jobs: int = 1000, vertices: int = 10) -> tuple[int, int, int]:
    """(series on the page, of which per-vertex, bytes) after one tick of ``jobs`` jobs."""
    metrics = MetricsReporter(vertex_metrics=mode, vertex_metrics_max_series=cap)  # type: ignore[arg-type]
    for i in range(jobs):
        evaluation = pipeline(i, vertices)
        metrics.report_evaluation(evaluation)
        metrics.report_outcome(evaluation.job, Reason.IN_BAND, scaled=False)
    metrics.report_tick(1.0)
    text = generate_latest(metrics.registry)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return series, vertex_series(metrics), len(text)


def test_a_1000_job_daemon_page_stays_within_its_budget_under_the_default_settings():
    series, per_vertex, size = page(DEFAULT_MODE, DEFAULT_CAP)
    per_job = 5 * 10 + 1  # five gauges per vertex, the source's catch-up rate (lag is outside the cap)
    shown = DEFAULT_CAP // per_job  # 196 jobs whole, the others withheld
    assert per_vertex == shown * per_job + 1000  # every source's lag
    # Per job: decisions and balanced counters, each with its _created sample.
    assert series == per_vertex + 4 * 1000 + 38  # and 38 daemon-wide
    assert series < 16_000 and size < 2_500_000  # was 124,000 series, 17 MB


if __name__ == "__main__":
    print("mode     cap     series  per-vertex      bytes")
    for mode, cap in (("all", 0), ("scaling", 0), ("scaling", DEFAULT_CAP), ("all", DEFAULT_CAP), ("off", 0)):
        series, per_vertex, size = page(mode, cap)
        print(f"{mode:8} {cap:<6} {series:8,} {per_vertex:10,} {size:11,}")
