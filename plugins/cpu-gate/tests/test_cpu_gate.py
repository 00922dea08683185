"""cpu-gate against the proposal's test plan: approve+align, low CPU, no source scale-up, REST failure,
and the boundaries (CPU exactly at the threshold, a single-vertex job, max parallelism caps); and as a
metric provider: the windowed CPU load from the evaluation, REST only as the fallback."""

from __future__ import annotations

import math

import pytest
from flink_autoscaler_cpu_gate import CPU_LOAD, CpuGatePlugin

from autoscaler.flink.errors import FlinkUnreachable
from autoscaler.flink.models import AggregatedMetric
from autoscaler.model import JobEvaluation, VertexChange
from autoscaler.plugins import CustomMetricProvider, PluginContext
from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import JOB, make_sample, make_topology, vertex_eval


class FakeClient:
    def __init__(self, cpu: float | None = None, fail: bool = False) -> None:
        self.cpu, self.fail, self.calls = cpu, fail, 0

    async def taskmanager_metrics(self, names, aggs=("min", "max", "avg", "sum")):
        self.calls += 1
        if self.fail:
            raise FlinkUnreachable(
                "connection refused",
                cluster="c1",
                base_url="http://jm",
                method="GET",
                endpoint="/taskmanagers/metrics",
            )
        return {} if self.cpu is None else {CPU_LOAD: AggregatedMetric(id=CPU_LOAD, avg=self.cpu)}


def context(
    client,
    parallelism=None,
    edges=(("src", "work", "REBALANCE"), ("work", "sink", "HASH")),
    threshold=None,
    max_parallelism=128,
    windowed=None,
):
    parallelism = parallelism or {"src": 2, "work": 4, "sink": 1}
    topology = make_topology(parallelism, edges, max_parallelism=max_parallelism)
    sample = make_sample(topology)
    custom = {} if windowed is None else {"": {CPU_LOAD: windowed}}
    evaluation = JobEvaluation(
        sample,
        {v: vertex_eval(v, p) for v, p in parallelism.items()},
        False,
        10,
        True,
        custom_metrics=custom,
    )
    config = {} if threshold is None else {"threshold": str(threshold)}
    return PluginContext(JOB, AutoscalerOptions(enabled=True), evaluation, config=config, client=client)


def targets(changes):
    return None if changes is None else {v: c.target for v, c in changes.items()}


async def test_busy_cpu_and_source_scale_up_is_approved_and_every_vertex_aligned():
    result = await CpuGatePlugin().apply(context(FakeClient(0.9)), {"src": VertexChange("src", 2, 6)})
    assert targets(result) == {"src": 6, "work": 6, "sink": 6}


@pytest.mark.parametrize(("cpu", "approved"), [(0.79, False), (0.8, True), (0.81, True), (0.0, False)])
async def test_threshold_is_inclusive(cpu, approved):
    result = await CpuGatePlugin().apply(context(FakeClient(cpu)), {"src": VertexChange("src", 2, 3)})
    assert (result is not None) is approved


async def test_configured_threshold_is_used():
    ctx = context(FakeClient(0.5), threshold=0.4)
    assert targets(await CpuGatePlugin().apply(ctx, {"src": VertexChange("src", 2, 3)})) == {
        "src": 3,
        "work": 3,
        "sink": 3,
    }


@pytest.mark.parametrize(
    "changes", [{"work": VertexChange("work", 4, 8)}, {"src": VertexChange("src", 2, 1)}]
)
async def test_no_source_scale_up_is_vetoed_without_querying(changes):
    client = FakeClient(0.99)
    assert await CpuGatePlugin().apply(context(client), changes) is None
    assert client.calls == 0


@pytest.mark.parametrize("client", [FakeClient(fail=True), FakeClient(cpu=None), FakeClient(math.nan), None])
async def test_unreadable_cpu_vetoes(client):
    assert await CpuGatePlugin().apply(context(client), {"src": VertexChange("src", 2, 3)}) is None


async def test_single_vertex_job():
    ctx = context(FakeClient(0.95), parallelism={"src": 1}, edges=())
    assert targets(await CpuGatePlugin().apply(ctx, {"src": VertexChange("src", 1, 2)})) == {"src": 2}


async def test_alignment_respects_max_parallelism_and_skips_unchanged_vertices():
    ctx = context(FakeClient(0.95), parallelism={"src": 2, "work": 8, "sink": 1}, max_parallelism=8)
    result = await CpuGatePlugin().apply(ctx, {"src": VertexChange("src", 2, 8)})
    assert targets(result) == {"src": 8, "sink": 8}  # work already runs at 8


# ---------------------------------------------------------------------------------------------- provider
def test_it_declares_the_taskmanager_cpu_load_and_nothing_else():
    gate = CpuGatePlugin()
    assert isinstance(gate, CustomMetricProvider)
    assert gate.taskmanager_metric_names() == [CPU_LOAD]
    assert gate.vertex_metric_names(make_topology({"src": 1})) == {}
    assert gate.external_metric_names() == []


@pytest.mark.parametrize(
    ("current", "average", "approved"),
    [(0.5, 0.9, True), (0.95, 0.7, False), (0.1, 0.8, True), (math.nan, 0.85, True)],
)
async def test_the_window_average_decides_without_any_query(current, average, approved):
    """The window's average, not the latest value (a spike or a dip does not decide); no REST call."""
    client = FakeClient(cpu=0.0 if approved else 0.99)  # would say the opposite if it were asked
    ctx = context(client, windowed=(current, average))
    result = await CpuGatePlugin().apply(ctx, {"src": VertexChange("src", 2, 3)})
    assert (result is not None) is approved and client.calls == 0


@pytest.mark.parametrize("windowed", [(math.nan, math.nan), None])
async def test_without_a_windowed_value_it_falls_back_to_rest(windowed):
    """Not measured in the window (or a daemon without metric providers): ask Flink, as before."""
    client = FakeClient(cpu=0.9)
    ctx = context(client, windowed=windowed)
    result = await CpuGatePlugin().apply(ctx, {"src": VertexChange("src", 2, 3)})
    assert targets(result) == {"src": 3, "work": 3, "sink": 3} and client.calls == 1
    assert (
        await CpuGatePlugin().apply(context(None, windowed=windowed), {"src": VertexChange("src", 2, 3)})
        is None
    )
