"""What an operator scrapes: the HTTP endpoint serves /metrics, /healthz and /readyz, and every metric
the shipped Grafana dashboard and Prometheus alert rules query exists, with the labels they filter on.

The reporter is fed what a real tick feeds it: an evaluation of a three-vertex job, outcomes, plugin
vetoes, errors, and the Flink client's request hook making real calls against the simulator.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.clock import FakeClock
from autoscaler.evaluate.spark.phases import EvaluationPhases
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.health import Health, serve_http
from autoscaler.metrics import MetricsReporter
from autoscaler.model import Edge, JobEvaluation, JobRef, JobTopology, VertexInfo
from autoscaler.reasons import Reason
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import SimClusterSpec
from autoscaler.testing import make_sample, vertex_eval

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "flink-autoscaler.json"
RULES = DEPLOY / "prometheus" / "flink-autoscaler-rules.yaml"
JOB = JobRef("prod", "a" * 32, "orders")


def realistic_evaluation() -> JobEvaluation:
    """Kafka source (8 partitions, lagging) -> an overloaded enrich map -> an idle sink."""
    topology = JobTopology.build(
        [
            VertexInfo("src", "Source: Kafka orders", 4, 128),
            VertexInfo("enrich", "Map: enrich", 6, 128),
            VertexInfo("sink", "Sink: Iceberg", 2, 128),
        ],
        [Edge("src", "enrich", "REBALANCE"), Edge("enrich", "sink", "HASH")],
    )
    sample = make_sample(topology, job=JOB, num_source_partitions={"src": 8})

    def v(vid: str, p: int, target: int, load: float, tpr: float, tdr: float, lag: float) -> Any:
        return replace(
            vertex_eval(vid, p, target, tpr=tpr, tdr=tdr),
            load=load,
            lag=lag,
            catch_up_data_rate=lag / 1800,
            scale_up_threshold=tdr / 1.0,
            scale_down_threshold=tdr / 0.4,
        )

    vertices = {
        "src": v("src", 4, 4, 0.35, 40_000.0, 12_000.0, 250_000.0),
        "enrich": v("enrich", 6, 9, 0.98, 11_000.0, 12_000.0, float("nan")),
        "sink": v("sink", 2, 2, 0.20, 30_000.0, 12_000.0, float("nan")),
    }
    return JobEvaluation(sample, vertices, processing_backlog=False, window_samples=90, window_full=True)


async def feed(metrics: MetricsReporter) -> None:
    """Everything a tick reports, including REST calls made through the client's hook."""
    metrics.report_spark(True, duration_s=0.8, phases=EvaluationPhases(window=0.2, spark=0.5, driver=0.1))
    metrics.report_evaluation(realistic_evaluation())
    metrics.report_outcome(JOB, Reason.SCALING, scaled=True)
    metrics.report_outcome(JOB, Reason.IN_BAND, scaled=False)
    metrics.report_outcome(JOB, Reason.AUTOSCALER_ERROR, scaled=False)
    metrics.plugin_outcomes.labels(JOB.cluster, JOB.name, "cpu-gate", str(Reason.SCALING_VETOED)).inc()
    metrics.plugin_outcomes.labels(JOB.cluster, JOB.name, "budget", str(Reason.PLUGIN_FAILED)).inc()
    metrics.deferred.labels(JOB.cluster, JOB.name).inc()
    metrics.forced.labels(JOB.cluster, JOB.name).inc()
    metrics.report_error(JOB.cluster, Reason.CLUSTER_UNREACHABLE)
    metrics.jobs.labels(JOB.cluster).set(1)
    metrics.lease_held.labels(JOB.cluster).set(1)
    metrics.shards_held.labels(JOB.cluster).set(1)
    metrics.shards.labels(JOB.cluster).set(1)
    metrics.ticks_skipped.inc()
    sim = SimCluster(SimClusterSpec(), FakeClock())
    sim.submit(work_job(name="orders"))
    client = FlinkClient(
        "http://sim", cluster=JOB.cluster, transport=transport(sim), on_request=metrics.report_request
    )
    async with client:
        await client.jobs_overview()
        with pytest.raises(FlinkHTTPError):
            await client.job_details("0" * 32)  # unknown job: 404
    metrics.report_fetch_wait(JOB.cluster, 0.2, landed=True)
    metrics.report_tick(1.7, {"collect": 0.6, "evaluate": 0.8, "record": 0.3})


# ------------------------------------------------------------------------------ PromQL, lightly parsed
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
_KEYWORDS |= {"offset", "inf", "nan", "time"}
_SELECTOR = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are not functions, keywords, label
    names in grouping clauses or matchers, numbers, durations or Grafana variables."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "", text)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    words = re.findall(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", text)
    return {w for w in words if w.lower() not in _KEYWORDS}


def selector_labels(expr: str) -> dict[str, set[str]]:
    """metric name -> the label names its ``{...}`` matchers use."""
    out: dict[str, set[str]] = {}
    for name, body in _SELECTOR.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
        out.setdefault(name, set()).update(_MATCHER.findall(body))
    return out


def grouping_labels(expr: str) -> set[str]:
    return {
        label.strip()
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
        for label in group.split(",")
        if label.strip()
    }


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        found = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", text)
        if found:
            exprs.append(found.group(1))
    return exprs


def rule_queries() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [r["expr"] for group in rules["groups"] for r in group["rules"]]


def test_the_promql_reader_finds_names_and_skips_everything_else():
    expr = (
        'histogram_quantile(0.95, sum by (le, job) (rate(a_bucket{cluster=~"$cluster", x="y{z}"}'
        "[$__rate_interval] offset 5m))) / ignoring(le) b_total > 1e3 and on(job) c"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert selector_labels(expr) == {"a_bucket": {"cluster", "x"}}
    assert grouping_labels(expr) == {"le", "job"}


# ------------------------------------------------------------------------------ the scrape
@pytest.fixture
async def endpoint() -> Any:
    now = [1000.0]
    health = Health(10.0, clock=lambda: now[0])
    metrics = MetricsReporter(health=health)
    with serve_http("127.0.0.1:0", metrics.registry, health) as server:
        yield server, metrics, health, now


def scrape(url: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets it was exported with."""
    response = httpx.get(f"{url}/metrics", timeout=5)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


async def test_every_metric_the_dashboard_and_alerts_query_is_exported(endpoint):
    server, metrics, _, _ = endpoint
    await feed(metrics)
    exported = scrape(server.url)

    queries = {"dashboard": dashboard_queries(), "alert rules": rule_queries()}
    for where, exprs in queries.items():
        assert exprs, f"no queries found in the {where}"
        for expr in exprs:
            names = metric_names(expr)
            assert names, f"{where}: no metric in {expr!r}"
            missing = names - set(exported)
            assert not missing, f"{where} query {expr!r} uses metrics that are not exported: {missing}"
            # "instance" is the label Prometheus adds to every scraped series (which daemon said it).
            labels_exported = set().union(*(set(ls) for n in names for ls in exported[n]))
            labels_exported |= {"le", "instance"}
            for name, labels in selector_labels(expr).items():
                have = set().union(*(set(ls) for ls in exported[name]))
                assert labels <= have, f"{where}: {name} has no label {labels - have} ({expr!r})"
            unknown = grouping_labels(expr) - labels_exported
            assert not unknown, f"{where}: grouping by labels no metric has: {unknown} ({expr!r})"

    # The reference's reported vertex metrics, per vertex with the four labels.
    for metric in (
        "load",
        "true_processing_rate",
        "target_data_rate",
        "catch_up_data_rate",
        "lag",
        "parallelism",
        "recommended_parallelism",
        "max_parallelism",
        "num_source_partitions",
        "scale_up_rate_threshold",
        "scale_down_rate_threshold",
        "expected_processing_rate",
    ):
        series = exported[f"flink_autoscaler_vertex_{metric}"]
        assert {s["vertex_name"] for s in series} == {"Source: Kafka orders", "Map: enrich", "Sink: Iceberg"}
    assert (
        metrics.registry.get_sample_value(
            "flink_autoscaler_vertex_recommended_parallelism",
            {"cluster": "prod", "job": "orders", "vertex": "enrich", "vertex_name": "Map: enrich"},
        )
        == 9
    )
    requests = {(s["endpoint"], s["status"]) for s in exported["flink_autoscaler_rest_requests_total"]}
    assert requests == {("/jobs/overview", "200"), ("/jobs/:jobid", "404")}
    assert [s["error"] for s in exported["flink_autoscaler_rest_errors_total"]] == ["404"]


async def test_healthz_is_200_and_readyz_goes_from_503_to_200_and_back(endpoint):
    server, metrics, _, now = endpoint

    def get(path: str) -> tuple[int, dict[str, Any]]:
        response = httpx.get(f"{server.url}{path}", timeout=5)
        return response.status_code, response.json()

    assert get("/healthz")[:1] == (200,) and get("/healthz")[1]["alive"] is True
    status, body = get("/readyz")
    assert (status, body["reason"]) == (503, "starting")  # no Spark session yet
    metrics.report_spark(True)
    assert get("/readyz")[1]["reason"] == "starting"  # no tick yet
    metrics.report_tick(0.5)
    status, body = get("/readyz")
    assert (status, body["ready"]) == (200, True)
    now[0] += 29  # within 3 intervals of 10 s
    assert get("/readyz")[0] == 200
    now[0] += 2
    status, body = get("/readyz")
    assert (status, body["reason"]) == (503, "not_ticking") and "31 s ago" in body["detail"]
    metrics.report_tick(0.5)
    assert get("/readyz")[0] == 200
    metrics.report_spark(False, "evaluation failed: Py4JError")
    status, body = get("/readyz")
    assert (status, body["reason"]) == (503, "spark_unavailable") and "Py4JError" in body["detail"]
    assert get("/healthz")[0] == 200  # alive all along: only readiness says something is wrong
    assert get("/nope")[0] == 404


async def test_healthz_turns_503_when_the_event_loop_stops_beating(endpoint):
    """Issue 12: a plugin blocking the event loop left /healthz at 200 for ever, so no liveness probe
    restarted the wedged daemon. The loop beats every second; a minute (or 6 intervals) without a beat
    is a wedged loop."""
    server, _, health, now = endpoint

    def get(path: str) -> tuple[int, dict[str, Any]]:
        response = httpx.get(f"{server.url}{path}", timeout=5)
        return response.status_code, response.json()

    assert get("/healthz")[1]["reason"] == "alive"  # not beating yet: starting up
    health.beat()
    now[0] += 60
    assert get("/healthz")[0] == 200
    now[0] += 1
    status, body = get("/healthz")
    assert (status, body["alive"], body["reason"]) == (503, False, "loop_wedged")
    assert "has not run for 61 s" in body["detail"]
    health.beat()
    assert get("/healthz")[0] == 200  # it recovers when the loop runs again


async def test_the_heartbeat_beats_while_the_loop_runs():
    import asyncio

    from autoscaler.health import heartbeat

    beats = []
    health = Health(10.0, clock=lambda: float(len(beats)))
    health.beat = lambda at_s=None: beats.append(1)  # type: ignore[method-assign]
    task = asyncio.create_task(heartbeat(health, every_s=0.001))
    while len(beats) < 3:
        await asyncio.sleep(0.001)
    task.cancel()
    assert len(beats) >= 3
