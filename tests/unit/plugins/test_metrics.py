"""Custom metric providers: declared names collected in the same tick, windowed in Spark like the
standard metrics (Spark == oracle), and read by executor plugins and evaluators without I/O."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import httpx
import pytest
import respx
from collect_flink import AGG, BASE, NOW_MS, SRC, TARGET, WORK, FakeFlink
from evaluator_parity import assert_same, close
from evaluator_samples import T0, TOPOLOGIES, job_sample, noisy_vertex
from flink_autoscaler_cpu_gate import CPU_LOAD, CpuGatePlugin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.clock import FakeClock
from autoscaler.collect import MetricNameCache, collect
from autoscaler.evaluate import SparkEvaluator, aggregate_window
from autoscaler.evaluate.custom import CustomEvaluator, EvaluatorContext
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.evaluate.oracle.formulas import aggregate_custom_window
from autoscaler.evaluate.spark.evaluator import (
    CUSTOM_DDL,
    ROW_DDL,
    SeriesNames,
    collect_tick_aggregates,
    custom_rows_frame,
    rows_frame,
)
from autoscaler.flink.client import FlinkClient
from autoscaler.model import (
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    TaskManagerSample,
    VertexChange,
    VertexSample,
)
from autoscaler.plugins import (
    JOB_SCOPE,
    ConfiguredProvider,
    CustomMetricProvider,
    ExternalMetricsContext,
    PluginContext,
    ScalingExecutorPlugin,
    metric_providers,
    run_chain,
)
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.evaluators import EvaluatorInstances
from autoscaler.plugins.metrics import (
    MetricRef,
    declared_taskmanager_names,
    declared_vertex_names,
    external_metrics,
)
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, work_job
from autoscaler.simulator import transport as sim_transport
from autoscaler.testing import JOB, make_topology

pytest_plugins = ("collect_flink",)  # its client fixture (the fake is this module's own)

NAN = math.nan
S = 1000
FAST = AutoscalerOptions(
    enabled=True, metrics_window=timedelta(seconds=30), stabilization_interval=timedelta(0)
)


class Provider(CustomMetricProvider):
    """A metric provider with canned declarations and an external system that answers ``external``."""

    def __init__(
        self,
        tm: list[str] | None = None,
        vertex: Mapping[str, list[str]] | None = None,
        external: Mapping[str, Any] | None = None,
        *,
        declared_external: list[str] | None = None,
        fail: BaseException | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.tm, self.vertex, self.external = tm or [], dict(vertex or {}), dict(external or {})
        self.declared_external = declared_external or []
        self.fail, self.delay_s = fail, delay_s
        self.contexts: list[ExternalMetricsContext] = []

    def taskmanager_metric_names(self) -> list[str]:
        return self.tm

    def vertex_metric_names(self, topology: JobTopology) -> Mapping[str, list[str]]:
        return self.vertex

    def external_metric_names(self) -> list[str]:
        return self.declared_external

    async def collect_external_metrics(self, context: ExternalMetricsContext) -> Mapping[str, float]:
        self.contexts.append(context)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        return self.external


def provided(*providers: CustomMetricProvider, config: Mapping[str, str] | None = None) -> list[Any]:
    return [ConfiguredProvider(f"p{i}", p, config or {}) for i, p in enumerate(providers)]


# ---------------------------------------------------------------------------------------------- the SPI
@pytest.mark.parametrize(
    ("declared", "flink_name", "aggregate"),
    [
        ("Status.JVM.CPU.Load", "Status.JVM.CPU.Load", "avg"),
        ("busyTimeMsPerSecond:max", "busyTimeMsPerSecond", "max"),
        ("numRecordsOut:sum", "numRecordsOut", "sum"),
        ("weird:name", "weird:name", "avg"),  # not an aggregate: the colon is part of the name
        (":min", ":min", "avg"),
    ],
)
def test_a_declared_name_may_pick_its_aggregate(declared: str, flink_name: str, aggregate: str) -> None:
    assert MetricRef.parse(declared) == MetricRef(declared, flink_name, aggregate)


def test_declarations_are_unioned_in_order_and_a_broken_one_costs_only_its_provider() -> None:
    class Broken(CustomMetricProvider):
        def taskmanager_metric_names(self) -> list[str]:
            raise RuntimeError("bug")

        def vertex_metric_names(self, topology: JobTopology) -> Mapping[str, list[str]]:
            raise RuntimeError("bug")

    class Sloppy(CustomMetricProvider):
        def taskmanager_metric_names(self) -> list[str]:
            return None  # type: ignore[return-value]

        def vertex_metric_names(self, topology: JobTopology) -> Mapping[str, list[str]]:
            return {"w": None}  # type: ignore[dict-item]

    topo = make_topology({"src": 1, "w": 1}, [("src", "w", "HASH")])
    providers = provided(
        Provider(tm=["a", "b"], vertex={"w": ["x"], "gone": ["y"]}),
        Broken(),
        Sloppy(),
        Provider(tm=["b", "c"], vertex={"w": ["x", "z"], "src": "lag"}),  # type: ignore[dict-item]
    )
    assert declared_taskmanager_names(providers) == ("a", "b", "c")
    assert declared_vertex_names(providers, topo) == {"w": ("x", "z"), "src": ("lag",)}


async def test_external_metrics_failures_are_nan_for_the_tick_never_fatal() -> None:
    ctx = ExternalMetricsContext(JOB, FAST, {"url": "http://prom"}, NOW_MS)
    ok = ConfiguredProvider("ok", Provider(external={"q": 3, "bad": "n/a"}, declared_external=["q", "r"]))
    assert _nan_equal(await external_metrics(ok, ctx), {"q": 3.0, "r": NAN, "bad": NAN})
    raising = ConfiguredProvider("x", Provider(declared_external=["q"], fail=ConnectionError("refused")))
    assert _nan_equal(await external_metrics(raising, ctx), {"q": NAN})
    slow = ConfiguredProvider("s", Provider(external={"q": 1.0}, declared_external=["q"], delay_s=5))
    assert _nan_equal(await external_metrics(slow, ctx, budget_s=0.01), {"q": NAN})

    class Sync(CustomMetricProvider):
        def collect_external_metrics(self, context: ExternalMetricsContext) -> Mapping[str, float]:  # type: ignore[override]
            return {"s": 1.5}

    assert await external_metrics(ConfiguredProvider("sync", Sync()), ctx) == {"s": 1.5}


def _nan_equal(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


class GateWithMetrics(ScalingExecutorPlugin, CustomMetricProvider):
    def taskmanager_metric_names(self) -> list[str]:
        return [CPU_LOAD]

    def apply(self, context: PluginContext, changes: Any) -> Any:
        return changes


class PlainGate(ScalingExecutorPlugin):
    def apply(self, context: PluginContext, changes: Any) -> Any:
        return changes


class EvaluatorWithMetrics(CustomEvaluator, CustomMetricProvider):
    def external_metric_names(self) -> list[str]:
        return ["queue.depth"]

    def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
        return {}


def test_metric_providers_are_the_jobs_plugins_and_evaluators_that_provide() -> None:
    gate, plain, evaluator = GateWithMetrics(), PlainGate(), EvaluatorWithMetrics()
    gate.name, evaluator.name = "gate", "eval"
    plugins = PluginInstances(fixed=[gate, plain])
    evaluators = EvaluatorInstances(fixed=[(evaluator, {"k": "v"}), (evaluator, {"k": "again"})])
    found = metric_providers(FAST, plugins=plugins, evaluators=evaluators)
    assert [(p.name, p.provider, dict(p.config)) for p in found] == [
        ("gate", gate, {}),
        ("eval", evaluator, {"k": "v"}),  # one instance is asked once
    ]
    assert metric_providers(FAST) == ()
    # A configured plugin that is not installed provides nothing (the chain vetoes it anyway).
    missing = AutoscalerOptions.from_flink_conf(
        {
            "job.autoscaler.scaling.custom-executors": "nope",
            "job.autoscaler.scaling.custom-executor.nope.class": "nope",
            "job.autoscaler.metrics.custom-evaluators": "gone",
            "job.autoscaler.metrics.custom-evaluator.gone.class": "gone",
        }
    )
    assert metric_providers(missing, plugins=PluginInstances(), evaluators=EvaluatorInstances()) == ()


# ---------------------------------------------------------------------------------------------- collect
class Router:
    """Serves a FakeFlink; ``intercept`` answers chosen requests itself (None: let Flink answer)."""

    def __init__(self, fake: FakeFlink) -> None:
        self.fake = fake
        self.intercept: Any = lambda request: None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return self.intercept(request) or self.fake.handle(request)


@pytest.fixture
def router() -> Iterator[Router]:
    router = Router(FakeFlink())
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        mock.route().mock(side_effect=router)
        yield router


@pytest.fixture
def fake(router: Router) -> FakeFlink:
    return router.fake


async def _collect(client: FlinkClient, providers: Any, cache: MetricNameCache | None = None) -> JobSample:
    result = await collect(
        client, TARGET, NOW_MS, cache or MetricNameCache(), TaskManagerSample(), providers=providers
    )
    assert isinstance(result, JobSample), result
    return result


async def test_taskmanager_vertex_and_external_metrics_come_with_the_standard_sample(
    fake: FakeFlink, client: FlinkClient
) -> None:
    external = Provider(external={"kafka.lag": 1200.0}, declared_external=["kafka.lag"])
    flink = Provider(
        tm=[CPU_LOAD, "Status.JVM.CPU.Load:max", "Status.Unknown"],
        vertex={
            WORK: ["idleTimeMsPerSecond", "numRecordsOutPerSecond:sum", "myGauge"],
            SRC: ["Source__BacklogSource.numRecordsOutPerSecond:max"],
        },
    )
    sample = await _collect(client, provided(flink, external, config={"url": "http://prom"}))

    # The standard sample is exactly what it is without providers.
    assert (
        sample.vertices[WORK].busy_time_ms_per_s == 1000.0 and sample.vertices[SRC].pending_records == 66945.0
    )
    # TaskManager metrics aggregated over TaskManagers (avg by default) and external ones, job-level.
    assert sample.custom_job_metrics[CPU_LOAD] == pytest.approx(0.01971557853910795)
    assert sample.custom_job_metrics["Status.JVM.CPU.Load:max"] == pytest.approx(0.01971557853910795)
    assert math.isnan(sample.custom_job_metrics["Status.Unknown"])  # declared, not listed: NaN
    assert sample.custom_metric("kafka.lag") == 1200.0
    # Vertex metrics over subtasks; a name this vertex does not list is NaN.
    work = fake.values[WORK]
    assert sample.custom_metric("idleTimeMsPerSecond", WORK) == work["idleTimeMsPerSecond"]["avg"]
    assert sample.custom_metric("numRecordsOutPerSecond:sum", WORK) == work["numRecordsOutPerSecond"]["sum"]
    assert math.isnan(sample.custom_metric("myGauge", WORK))
    src_max = fake.values[SRC]["Source__BacklogSource.numRecordsOutPerSecond"]["max"]
    assert sample.custom_metric("Source__BacklogSource.numRecordsOutPerSecond:max", SRC) == src_max
    assert AGG not in sample.custom_vertex_metrics
    # The external system was asked for this tick, with the provider's own config.
    (ctx,) = external.contexts
    assert (ctx.job, ctx.now_ms, dict(ctx.config)) == (TARGET.job, NOW_MS, {"url": "http://prom"})


async def test_only_listed_names_are_queried_and_custom_names_never_join_the_standard_query(
    fake: FakeFlink, client: FlinkClient
) -> None:
    flink = Provider(tm=[CPU_LOAD, "Status.Unknown"], vertex={WORK: ["idleTimeMsPerSecond", "myGauge"]})
    await _collect(client, provided(flink))
    queried = [(key, set(names)) for key, names in fake.queried]
    standard_work = {"busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "accumulateBusyTimeMs"}
    standard_work.add("numRecordsInPerSecond")
    assert (WORK, standard_work) in queried  # unchanged by the custom names
    assert (WORK, {"idleTimeMsPerSecond"}) in queried  # its own request, listed names only
    assert ("tm", {CPU_LOAD}) in queried
    assert all("myGauge" not in names and "Status.Unknown" not in names for _, names in queried)


async def test_without_providers_nothing_extra_is_requested(fake: FakeFlink, client: FlinkClient) -> None:
    sample = await _collect(client, ())
    assert dict(sample.custom_job_metrics) == {} and dict(sample.custom_vertex_metrics) == {}
    assert "tm" not in {key for key, _ in fake.queried} and fake.listed["tm"] == 0


async def test_a_failing_custom_query_is_nan_and_keeps_the_sample(
    router: Router, client: FlinkClient
) -> None:
    """A 500 on the custom vertex request and on the TaskManagers: NaN, the standard sample stands."""

    def flaky(request: httpx.Request) -> httpx.Response | None:
        custom = request.url.params.get("get") == "idleTimeMsPerSecond"
        if custom or request.url.path == "/taskmanagers/metrics":
            return httpx.Response(500, json={"errors": ["boom"]})
        return None

    router.intercept = flaky
    sample = await _collect(client, provided(Provider(tm=[CPU_LOAD], vertex={WORK: ["idleTimeMsPerSecond"]})))
    assert math.isnan(sample.custom_metric("idleTimeMsPerSecond", WORK))
    assert math.isnan(sample.custom_metric(CPU_LOAD))
    assert sample.vertices[WORK].busy_time_ms_per_s == 1000.0


async def test_an_empty_custom_answer_is_nan_and_not_a_partial_job(
    router: Router, client: FlinkClient
) -> None:
    """The lazy fetcher's ``[]`` on the custom request costs only the custom value, even for a warm job
    (where an incomplete standard answer would skip the tick)."""
    cache = MetricNameCache()
    await _collect(client, (), cache)
    answered: list[str] = []

    def empty_custom(request: httpx.Request) -> httpx.Response | None:
        if request.url.params.get("get") == "idleTimeMsPerSecond":
            answered.append("[]")
            return httpx.Response(200, json=[])
        return None

    router.intercept = empty_custom
    sample = await _collect(client, provided(Provider(vertex={WORK: ["idleTimeMsPerSecond"]})), cache)
    assert answered == ["[]"] and math.isnan(sample.custom_metric("idleTimeMsPerSecond", WORK))
    assert sample.vertices[WORK].busy_time_ms_per_s == 1000.0


async def test_a_cached_listing_is_refreshed_for_a_declared_name_that_appears_later(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """User metrics register lazily: a declared name missing from the cached listing re-lists the vertex."""
    cache = MetricNameCache()
    declared = provided(Provider(vertex={WORK: ["lateGauge"]}))
    first = await _collect(client, declared, cache)
    assert math.isnan(first.custom_metric("lateGauge", WORK))
    fake.listings[WORK].append("lateGauge")
    fake.values[WORK]["lateGauge"] = {"min": 1.0, "max": 3.0, "avg": 2.0, "sum": 4.0}
    second = await _collect(client, declared, cache)
    assert second.custom_metric("lateGauge", WORK) == 2.0


async def test_a_finished_vertex_has_nan_custom_metrics_and_is_not_queried(
    fake: FakeFlink, client: FlinkClient
) -> None:
    fake.set_vertex(AGG, status="FINISHED")
    sample = await _collect(client, provided(Provider(vertex={AGG: ["numRecordsInPerSecond"]})))
    assert math.isnan(sample.custom_metric("numRecordsInPerSecond", AGG))
    assert AGG not in {key for key, _ in fake.queried}


async def test_a_skipped_job_does_not_wait_for_its_external_metrics(client: FlinkClient) -> None:
    slow = Provider(external={"q": 1.0}, delay_s=30)
    with respx.mock(base_url=BASE) as router:
        router.get(path__regex=r"/jobs/.*").mock(return_value=httpx.Response(404, json={"errors": ["gone"]}))
        result = await asyncio.wait_for(
            collect(client, TARGET, NOW_MS, MetricNameCache(), TaskManagerSample(), providers=provided(slow)),
            timeout=5,
        )
    assert result.reason is Reason.NOT_RUNNING  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- Spark
def _custom_rows(windows: Mapping[tuple[str, str, str], list[tuple[int, float]]]) -> list[Any]:
    return [
        (job, 0, scope, name, ts, value)
        for (job, scope, name), points in windows.items()
        for ts, value in points
        if not math.isnan(value)  # as the evaluator ships them
    ]


@pytest.mark.spark
def test_spark_custom_aggregates_equal_the_oracle_in_the_same_query_as_the_standard_ones(spark: Any) -> None:
    """NaN holes, infinite values, unordered timestamps; the union keeps the standard aggregates exact."""
    rng = random.Random(5)
    windows: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for job, scope, name in (("x", "", "cpu"), ("x", "w", "idle"), ("y", "", "cpu"), ("y", "s", "lag:max")):
        times = rng.sample(range(0, 120_000, 10_000), 6)
        windows[(job, scope, name)] = [
            (T0 + t, rng.choice([NAN, math.inf, -math.inf, rng.uniform(-5, 5), rng.uniform(0, 1)]))
            for t in times
        ]
    windows[("y", "", "only-inf")] = [(T0, math.inf), (T0 + 1, NAN)]
    standard = {
        ("x", "w"): [(T0 + t * S, noisy_vertex(rng, t, 100.0)) for t in range(0, 40, 10)],
        ("y", "s"): [(T0 + t * S, noisy_vertex(rng, t, 50.0)) for t in range(0, 30, 10)],
    }
    table, names = rows_frame([(j, 0, v, ts, s) for (j, v), w in standard.items() for ts, s in w])
    window = spark.createDataFrame(table, ROW_DDL)
    custom = spark.createDataFrame(custom_rows_frame(_custom_rows(windows)), CUSTOM_DDL)
    got_standard, got_custom = collect_tick_aggregates(window, custom, names)
    for (job, vid), w in standard.items():
        assert close(got_standard[job][vid], aggregate_window(w)), (job, vid)
    for (job, scope, name), points in windows.items():
        assert close(got_custom[job][scope][name], aggregate_custom_window(points)), (job, scope, name)
    alone = collect_tick_aggregates(None, custom, names)[1]
    assert all(
        close(alone[j][s][n], m)
        for j, sc in got_custom.items()
        for s, ms in sc.items()
        for n, m in ms.items()
    )


_value = st.one_of(
    st.sampled_from([NAN, math.inf, -math.inf, 0.0]),
    st.integers(-4_000_000, 4_000_000).map(lambda i: i / 4),  # exact in binary: sums are order-free
)


@pytest.mark.spark
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(
        st.tuples(st.sampled_from("jk"), st.sampled_from(["", "v"]), st.sampled_from(["a", "b:max"])),
        st.lists(st.tuples(st.integers(0, 10**6), _value), min_size=1, max_size=6, unique_by=lambda x: x[0]),
        min_size=1,
        max_size=4,
    )
)
def test_spark_custom_aggregates_equal_the_oracle_on_random_windows(
    spark: Any, windows: dict[tuple[str, str, str], list[tuple[int, float]]]
) -> None:
    rows = _custom_rows(windows)
    _, got = collect_tick_aggregates(
        None, spark.createDataFrame(custom_rows_frame(rows), CUSTOM_DDL), SeriesNames({})
    )
    for (job, scope, name), points in windows.items():
        want = aggregate_custom_window(points)
        if want.points == 0:
            assert name not in got.get(job, {}).get(scope, {})  # never measured: no row at all
        else:
            assert close(got[job][scope][name], want)


def _with_custom(sample: JobSample, tick: int, cpu: float) -> JobSample:
    """The sample plus a TaskManager CPU load, a vertex gauge with holes, a declared-but-unknown name."""
    first = next(iter(sample.topology.vertices))
    return JobSample(
        sample.target,
        sample.ts_ms,
        sample.running_since_ms,
        sample.topology,
        sample.vertices,
        custom_vertex_metrics={first: {"gauge": NAN if tick % 3 == 2 else float(tick)}},
        custom_job_metrics={CPU_LOAD: cpu, "unknown": NAN},
    )


@pytest.mark.spark
def test_custom_metrics_are_windowed_and_dropped_with_the_window(spark: Any) -> None:
    """Append + slide across ticks, a restart drops the old epoch's values, forget() drops a job: Spark
    and the oracle agree on every tick, and the averages are over exactly the window's samples."""
    rng = random.Random(3)
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    b_running = T0
    for tick in range(8):
        now = T0 + tick * 10 * S
        if tick == 5:
            b_running = now - 5 * S  # job b restarted: its window, custom values included, starts over
        samples = []
        for name in ("a", "b"):
            if name == "a" and tick >= 7:
                continue
            vs = {vid: noisy_vertex(rng, tick * 10.0, 100.0) for vid in job_sample_topology(name)}
            plain = job_sample(name, now, vs, running_since_ms=b_running if name == "b" else T0)
            samples.append(_with_custom(plain, tick, 0.1 * tick))
        got, want = ours.evaluate(samples, now), oracle.evaluate(samples, now)
        assert_same(got, want)
        assert ours.custom_window_size() == oracle.custom_window_size()
        if tick == 4:
            # window 30 s at t = 40 s: ticks 1..4; cpu 0.1..0.4; gauge 1, NaN (tick 2), 3, 4
            cpu = got["c1/a"].custom_metric(CPU_LOAD)
            assert cpu == pytest.approx((0.4, 0.25))
            assert got["c1/a"].custom_metric("gauge", "src") == pytest.approx((4.0, (1 + 3 + 4) / 3))
            unknown = got["c1/a"].custom_metric("unknown")
            assert math.isnan(unknown[0]) and math.isnan(unknown[1])  # declared, never measured
        if tick == 5:
            assert got["c1/b"].custom_metric(CPU_LOAD) == pytest.approx((0.5, 0.5))  # only the new epoch
        if tick == 6:
            ours.forget(["c1/a"])
            oracle.forget(["c1/a"])
    assert ours.custom_window_size() == oracle.custom_window_size() > 0


def job_sample_topology(name: str) -> list[str]:
    return list(TOPOLOGIES[name].vertices)


@pytest.mark.spark
def test_one_aggregation_query_per_tick_for_every_job_and_no_custom_frame_without_custom_metrics(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame_type = type(spark.createDataFrame([(1,)], "a int"))
    real = frame_type.toArrow  # how the evaluator collects the aggregation's rows
    calls: list[int] = []

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(frame_type, "toArrow", counting)
    ev = SparkEvaluator(spark)
    for tick in range(3):
        now = T0 + tick * 10 * S
        samples = [
            _with_custom(
                job_sample(
                    n, now, {v: VertexSample(num_records_in=1.0 * tick) for v in job_sample_topology(n)}
                ),
                tick,
                0.5,
            )
            for n in ("a", "b", "c")
        ]
        calls.clear()
        evs = ev.evaluate(samples, now)
        assert len(calls) == 1  # standard and custom aggregates of all three jobs in one query
        assert all(e.custom_metric(CPU_LOAD)[1] == pytest.approx(0.5) for e in evs.values())
    # Once no job reports custom metrics any more and they age out, the custom frame goes away.
    for tick in range(3, 8):
        now = T0 + tick * 10 * S
        ev.evaluate([job_sample("c", now, {"src": VertexSample(num_records_in=1.0 * tick)})], now)
    assert ev.custom_window_size() == 0 and ev._frames.custom is None


# ---------------------------------------------------------------------------------------------- end to end
def _sim_target(job_id: str) -> JobTarget:
    return JobTarget(JobRef("sim", job_id, "load-job"), FAST)


@pytest.mark.spark
async def test_simulator_tick_to_plugin_and_evaluator_without_io(spark: Any, clock: FakeClock) -> None:
    """collect (simulated Flink, in-process) -> Spark window -> the cpu-gate plugin and an evaluator read
    the windowed CPU load from the evaluation: the plugin needs no client, the evaluator no I/O."""
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(work_job(input_rate=Constant(rate=2000.0), work_parallelism=1))
    work = cluster.vertex_ids(job_id)["Work"]
    clock.advance(120)
    gate = CpuGatePlugin()
    gate.name = "gate"
    seen: list[tuple[float, float]] = []

    class ReadsCpu(CustomEvaluator):
        def evaluate(self, vertex: str, context: EvaluatorContext) -> Mapping[str, tuple[float, float]]:
            seen.append(context.custom_metric(CPU_LOAD))
            return {}

    providers = metric_providers(FAST, plugins=PluginInstances(fixed=[gate]))
    assert [p.provider for p in providers] == [gate]
    providers = (*providers, ConfiguredProvider("vtx", Provider(vertex={work: ["idleTimeMsPerSecond:max"]})))
    ev, cache = SparkEvaluator(spark), MetricNameCache()
    async with FlinkClient("http://flink", cluster="sim", transport=sim_transport(cluster)) as client:
        for _ in range(4):
            sample = await collect(
                client, _sim_target(job_id), clock.now_ms(), cache, TaskManagerSample(), providers=providers
            )
            assert isinstance(sample, JobSample), sample
            assert 0 < sample.custom_metric(CPU_LOAD) <= 1
            assert sample.custom_metric("idleTimeMsPerSecond:max", work) >= 0
            evaluation = ev.evaluate(
                [sample], clock.now_ms(), evaluators={sample.job.key: [(ReadsCpu(), {})]}
            )[sample.job.key]
            clock.advance(10)
    current, average = evaluation.custom_metric(CPU_LOAD)
    assert 0 < average <= 1 and seen[-1] == (current, average)
    src = next(v.id for v in sample.topology if sample.topology.is_source(v.id))
    ctx = PluginContext(sample.job, FAST, evaluation, {"threshold": str(average)}, client=None)
    approved = await run_chain([gate], ctx, {src: VertexChange(src, 1, 2)})
    assert approved.changes is not None and approved.changes[src].target == 2  # windowed value, no client
    ctx = PluginContext(sample.job, FAST, evaluation, {"threshold": str(average + 0.01)}, client=None)
    assert (await run_chain([gate], ctx, {src: VertexChange(src, 1, 2)})).changes is None
    assert set(evaluation.custom_metrics) == {JOB_SCOPE, work}
