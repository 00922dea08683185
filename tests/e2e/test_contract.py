"""The REST contract, checked against a real Flink 2.3 cluster.

1. Every call the daemon (and its plugins) can make goes through ``FlinkClient`` to the real cluster,
   which records each answer: the models must parse all of them.
2. The simulator answers the same calls (same job shape, same vertex ids) and its answers must have
   the real shapes, key by key: top-level and nested key sets, and value types (a string is not a
   number), for the endpoints the daemon uses. The other endpoints' differences are printed.
3. The committed fixtures (tests/fixtures/flink-2.3) must have the shapes of today's answers, and the
   models must parse them too.

The fresh answers are kept in ``<cache>/runs/<run>/contract/`` (to refresh the fixtures from).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import AGGREGATE, SOURCE, WORK, LoadJob, log, wait_until

from autoscaler.clock import FakeClock
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.flink.metric_names import FlinkMetric, matching, source_partitions
from autoscaler.flink.models import ParallelismBounds
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport as simulator_transport
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS, work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3"
JOB_NAME = "e2e-contract"
RATE, COST_US, WORK_P = 1500.0, 800.0, 2

# What the daemon's collect stage asks for (only listed names; see autoscaler/collect/vertices.py).
WORK_METRICS = [
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "accumulateBusyTimeMs",
    "numRecordsInPerSecond",
]
SOURCE_METRICS = [
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "accumulateBusyTimeMs",
    "Source__BacklogSource.numRecordsInPerSecond",
    "Source__BacklogSource.numRecordsIn",
    "Source__BacklogSource.numRecordsOut",
    "Source__BacklogSource.pendingRecords",
]
TM_METRICS = [
    "Status.JVM.Memory.Heap.Used",
    "Status.JVM.Memory.Heap.Max",
    "Status.JVM.CPU.Load",
    "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
]
AGGS = ("min", "max", "avg", "sum")
# Each Work subtask's busy time and records-in rate, by subtask index (autoscaler/collect/skew.py).
SUBTASK_METRICS = [
    f"{i}.{name}" for name in ("busyTimeMsPerSecond", "numRecordsInPerSecond") for i in range(WORK_P)
]


# ============================================================================================ recording
_ENCODING_HEADERS = {"content-encoding", "transfer-encoding", "content-length"}


class Tape(httpx.AsyncBaseTransport):
    """Forwards every request to ``inner`` and keeps each answer under the name of the current call."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.name = ""
        self.answers: dict[str, tuple[int, Any]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = body.decode(errors="replace")
        self.answers[self.name] = (response.status_code, payload)
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _ENCODING_HEADERS}
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Replay(httpx.AsyncBaseTransport):
    """Answers the current call with a stored answer (a committed fixture)."""

    def __init__(self, answers: Mapping[str, tuple[int, Any]]) -> None:
        self.answers = answers
        self.name = ""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        name = self.name
        if request.method == "GET" and request.url.path.endswith("/resource-requirements"):
            name = "resreq"  # the GET before each PUT
        status, payload = self.answers[name]
        return httpx.Response(status, json=payload, request=request)


@dataclass(frozen=True)
class Ids:
    job: str
    source: str
    work: str
    aggregate: str
    taskmanager: str


@dataclass(frozen=True)
class Call:
    name: str
    run: Callable[[FlinkClient, Ids], Awaitable[Any]]
    fixture: str | None = None  # the committed answer of the same call
    daemon: bool = False  # an endpoint the daemon (or a plugin through context.client) uses
    status: int = 200


def _requirements(client_bounds: dict[str, ParallelismBounds], **changes: ParallelismBounds):
    return {**client_bounds, **changes}


async def _put(client: FlinkClient, ids: Ids, body: Callable[[dict[str, ParallelismBounds]], Any]) -> None:
    current = await client.resource_requirements(ids.job)
    await client.set_resource_requirements(ids.job, body(current))


class _RawBounds(ParallelismBounds):
    """Bounds Flink must reject, which ParallelismBounds itself refuses to build."""

    def __post_init__(self) -> None:
        pass


CALLS: tuple[Call, ...] = (
    Call("overview", lambda c, i: c.overview(), "overview.json"),
    Call("config", lambda c, i: c.config(), "config.json"),
    Call("jobmanager_config", lambda c, i: c.jobmanager_config(), "jobmanager_config.json", daemon=True),
    Call("taskmanagers", lambda c, i: c.taskmanagers(), "taskmanagers.json", daemon=True),
    Call("tm_detail", lambda c, i: c.taskmanager(i.taskmanager), "tm_detail.json"),
    Call("tm_metrics_names", lambda c, i: c.taskmanager_metric_names(), "tm_metrics_names.json", daemon=True),
    Call(
        "tm_metrics",
        lambda c, i: c.taskmanager_metrics(TM_METRICS, ("max", "avg")),
        "tm_metrics.json",
        daemon=True,
    ),
    Call(
        "tm_one_metrics_names",
        lambda c, i: c.taskmanager_metric_names(i.taskmanager),
        "tm_one_metrics_names.json",
    ),
    Call("jm_metrics_names", lambda c, i: c.jobmanager_metric_names(), "jm_metrics_names.json"),
    Call("jobs_overview", lambda c, i: c.jobs_overview(), "jobs_overview.json", daemon=True),
    Call("job", lambda c, i: c.job_details(i.job), "job.json", daemon=True),
    Call("plan", lambda c, i: c.job_plan(i.job), "plan.json"),
    Call("job_config", lambda c, i: c.job_execution_config(i.job), "job_config.json"),
    Call("job_jobmanager_config", lambda c, i: c.job_configuration(i.job), None, daemon=True),
    Call("checkpoints", lambda c, i: c.checkpoints(i.job), "checkpoints.json"),
    Call("job_metrics_names", lambda c, i: c.job_metric_names(i.job), "job_metrics_names.json"),
    Call(
        "job_metrics", lambda c, i: c.job_metrics(i.job, ["numRescales", "numRestarts"]), "job_metrics.json"
    ),
    Call("vertex_src", lambda c, i: c.vertex_details(i.job, i.source), "vertex_src.json"),
    Call("vertex_work", lambda c, i: c.vertex_details(i.job, i.work), "vertex_work.json"),
    Call(
        "src_subtask_metric_names",
        lambda c, i: c.vertex_metric_names(i.job, i.source),
        "src_subtask_metric_names.json",
        daemon=True,
    ),
    Call(
        "work_subtask_metric_names",
        lambda c, i: c.vertex_metric_names(i.job, i.work),
        "work_subtask_metric_names.json",
        daemon=True,
    ),
    Call(
        "src_subtasks_metrics",
        lambda c, i: c.vertex_metrics(i.job, i.source, SOURCE_METRICS, AGGS),
        "src_subtasks_metrics.json",
        daemon=True,
    ),
    Call(
        "work_subtasks_metrics",
        lambda c, i: c.vertex_metrics(i.job, i.work, WORK_METRICS, AGGS),
        "work_subtasks_metrics.json",
        daemon=True,
    ),
    Call(
        "mixed_missing",  # one name unknown for the vertex: Flink answers [] for all of them
        lambda c, i: c.vertex_metrics(
            i.job, i.work, ["busyTimeMsPerSecond", "Source__BacklogSource.pendingRecords"]
        ),
        "mixed_missing.json",
        daemon=True,
    ),
    Call(
        "vertex_metrics_names",
        lambda c, i: c.subtask_metric_names(i.job, i.work),
        "vertex_metrics_names.json",
    ),
    Call(  # what autoscaler/collect/skew.py asks of a vertex that can have a slow subtask
        "vertex_metrics",
        lambda c, i: c.subtask_metrics(i.job, i.work, SUBTASK_METRICS),
        "vertex_metrics.json",
        daemon=True,
    ),
    Call("resreq", lambda c, i: c.resource_requirements(i.job), "resreq.json", daemon=True),
    Call(
        "resreq_put_400_incomplete",
        lambda c, i: _put(c, i, lambda cur: {i.work: cur[i.work]}),
        "resreq_put_400_incomplete.json",
        daemon=True,
        status=400,
    ),
    Call(
        "resreq_put_400_bounds",
        lambda c, i: _put(c, i, lambda cur: _requirements(cur, **{i.work: _RawBounds(3, 2)})),
        "resreq_put_400_bounds.json",
        daemon=True,
        status=400,
    ),
    Call(
        "resreq_put_400_max_parallelism",
        lambda c, i: _put(c, i, lambda cur: _requirements(cur, **{i.work: ParallelismBounds(1, 200)})),
        "resreq_put_400_max_parallelism.json",
        daemon=True,
        status=400,
    ),
    Call(
        "resreq_put_400_unknown_vertex",
        lambda c, i: _put(c, i, lambda cur: _requirements(cur, **{"0" * 32: ParallelismBounds(1, 1)})),
        "resreq_put_400_unknown_vertex.json",
        daemon=True,
        status=400,
    ),
    Call("resreq_put_same", lambda c, i: _put(c, i, lambda cur: cur), None, daemon=True),
)


@dataclass
class Session:
    """One pass of CALLS through a client: what it parsed (or raised), and the raw answers."""

    parsed: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)


async def _ids(client: FlinkClient, job_name: str) -> Ids:
    job = next(j for j in await client.jobs_overview() if j.name == job_name and j.state == "RUNNING")
    details = await client.job_details(job.jid)
    by_name = {v.name: v.id for v in details.vertices}

    def vid(prefix: str) -> str:
        return next(v for n, v in by_name.items() if n.startswith(prefix))

    tms = await client.taskmanagers()
    return Ids(job.jid, vid(SOURCE), vid(WORK), vid(AGGREGATE), tms[0].id)


async def _exercise(
    transport: Tape | Replay,
    base_url: str,
    job_name: str,
    ids: Ids | None = None,
    only: set[str] | None = None,
) -> Session:
    session = Session()
    async with FlinkClient(base_url, cluster="contract", transport=transport, timeout_s=30) as client:
        if ids is None:
            transport.name = "_ids"
            ids = await _ids(client, job_name)
        session.parsed["_ids"] = ids
        for call in CALLS:
            if only is not None and call.name not in only:
                continue
            transport.name = call.name
            try:
                session.parsed[call.name] = await call.run(client, ids)
            except FlinkHTTPError as exc:
                session.parsed[call.name] = exc
    if isinstance(transport, Tape):
        session.answers = {k: v for k, v in transport.answers.items() if not k.startswith("_")}
    return session


# ============================================================================================ shapes
def shape(value: Any) -> Any:
    """Keys and value types, recursively; a list's items merged into one shape."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        merged: Any = None
        for item in value:
            merged = _merge(merged, shape(item))
        return [merged]
    if isinstance(value, bool):
        return {"bool"}
    if isinstance(value, int | float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    return {"null"}


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a.get(k), b.get(k)) for k in a.keys() | b.keys()}
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0], b[0])]
    if isinstance(a, set) and isinstance(b, set):
        return a | b
    return {"<mixed>"}


def differences(real: Any, other: Any, path: str = "$") -> list[str]:
    """Where ``other``'s shape departs from ``real``'s: keys missing on either side, other types."""
    if isinstance(real, dict) and isinstance(other, dict):
        out = [f"{path}.{k}: only in the real answer" for k in sorted(real.keys() - other.keys())]
        out += [f"{path}.{k}: not in the real answer" for k in sorted(other.keys() - real.keys())]
        for k in sorted(real.keys() & other.keys()):
            out += differences(real[k], other[k], f"{path}.{k}")
        return out
    if isinstance(real, list) and isinstance(other, list):
        if real[0] is None or other[0] is None:  # an empty list on one side says nothing about items
            return []
        return differences(real[0], other[0], f"{path}[]")
    if real != other:
        return [f"{path}: real {_kind(real)}, other {_kind(other)}"]
    return []


def _kind(s: Any) -> str:
    if isinstance(s, set):
        return "|".join(sorted(s))
    return "object" if isinstance(s, dict) else "array" if isinstance(s, list) else str(s)


def _any_aggregates(payload: Any) -> Any:
    """An aggregated-metrics answer with its aggregates under one key: which ones it has depends on the
    request's ``agg=``, and the fixtures were recorded with other ``agg=`` lists than the daemon's."""
    if not isinstance(payload, list):
        return payload
    return [
        {"id": m.get("id"), "aggregates": [v for k, v in m.items() if k != "id"]}
        if isinstance(m, dict)
        else m
        for m in payload
    ]


AGGREGATED = {"tm_metrics", "src_subtasks_metrics", "work_subtasks_metrics", "mixed_missing"}


# Keys that name things rather than fields (ids, metric names, states): compared as "any key".
def _normalize(name: str, payload: Any, ids: Ids) -> Any:
    if name.startswith("resreq") and isinstance(payload, dict) and "errors" not in payload:
        # keyed by vertex id; both sides use the lab's ids, but say so explicitly
        return {("<vertex>" if k in set(LAB_VERTEX_IDS.values()) else k): v for k, v in payload.items()}
    return payload


# ============================================================================================ fixtures
@pytest.fixture(scope="module")
def contract_job(flink, flink_cluster, run_dir: Path) -> Iterator[LoadJob]:
    """One load job for every contract test of this module (cancelled at its end)."""
    control = run_dir / "contract" / f"{JOB_NAME}.control"
    control.parent.mkdir(exist_ok=True)
    job = flink_cluster.submit(flink.jar, JOB_NAME, control, work_parallelism=WORK_P, cost_us=COST_US)
    try:
        yield job
    finally:
        job.cancel()


@pytest.fixture(scope="module")
def recorded(flink_cluster, contract_job: LoadJob, run_dir: Path) -> dict[str, Any]:
    """Every call against the real cluster, while the load job runs at a steady load."""
    job = contract_job
    job.set_load(rate=RATE)
    src_vid, _ = job.vertex(SOURCE)

    def metrics_ready() -> bool:
        # The lazy fetcher: names appear first, then values, first the ones of the job's first seconds
        # (busy 1000, rates 0); wait until records flow and a checkpoint completed.
        names = job.rest.get(f"/jobs/{job.job_id}/vertices/{src_vid}/subtasks/metrics")
        if not set(SOURCE_METRICS) <= {m["id"] for m in names}:
            return False
        values = job.rest.metric(f"/jobs/{job.job_id}/vertices/{src_vid}/subtasks/metrics", SOURCE_METRICS)
        checkpoints = job.rest.get(f"/jobs/{job.job_id}/checkpoints")["counts"]["completed"]
        return (
            len(values) == len(SOURCE_METRICS)
            and values["Source__BacklogSource.numRecordsIn"] > 0
            and values["Source__BacklogSource.numRecordsInPerSecond"] > 0
            and checkpoints > 0
        )

    wait_until("the job's metrics and a checkpoint", metrics_ready, 180, every_s=2)
    session = asyncio.run(_exercise(Tape(httpx.AsyncHTTPTransport()), flink_cluster.url, JOB_NAME))
    out = run_dir / "contract"
    for name, (_status, payload) in session.answers.items():
        (out / f"{name}.json").write_text(json.dumps(payload))
    log(f"recorded {len(session.answers)} real answers in {out}")
    return {"session": session, "ids": session.parsed["_ids"], "job": job}


@pytest.fixture(scope="module")
def simulated() -> Session:
    """The same calls answered by the simulator, for the same job shape (after 3 simulated minutes)."""
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=10), clock)
    sim.submit(work_job(name=JOB_NAME, input_rate=Constant(RATE), work_parallelism=WORK_P))
    clock.advance(180)
    return asyncio.run(_exercise(Tape(simulator_transport(sim)), "http://simulator", JOB_NAME))


# ============================================================================================ tests
def test_the_models_parse_every_real_answer(recorded):
    session: Session = recorded["session"]
    ids: Ids = recorded["ids"]
    missing = [c.name for c in CALLS if c.name not in session.answers]
    assert missing == [], f"calls without a recorded answer: {missing}"
    for call in CALLS:
        status, payload = session.answers[call.name]
        parsed = session.parsed[call.name]
        assert status == call.status, (call.name, status, payload)
        if call.status != 200:
            assert isinstance(parsed, FlinkHTTPError) and parsed.status == call.status, (call.name, parsed)
        else:
            assert not isinstance(parsed, Exception), (call.name, parsed)

    p = session.parsed
    assert p["overview"].flink_version == "2.3.0" and p["overview"].slots_total == 8
    assert p["jobmanager_config"]["jobmanager.scheduler"] == "adaptive"
    topology = p["job"].topology()
    assert {v.name for v in topology} == {"Source: BacklogSource", "Work", "Aggregate -> Sink: Writer"}
    edges = {(e.source, e.target, e.ship_strategy) for e in p["plan"].edges()}
    assert edges == {(ids.source, ids.work, "REBALANCE"), (ids.work, ids.aggregate, "HASH")}
    assert p["job"].running_since_ms > 0 and p["job"].all_tasks_running
    assert topology.vertices[ids.work].parallelism == WORK_P
    work = p["work_subtasks_metrics"]
    assert set(work) == set(WORK_METRICS) and all(not math.isnan(work[n].max) for n in WORK_METRICS)
    source = p["src_subtasks_metrics"]
    assert set(source) == set(SOURCE_METRICS) and source["Source__BacklogSource.numRecordsIn"].sum > 0
    assert p["mixed_missing"] == {}  # Flink's [] for a query with one unknown name
    # Each subtask's busy time and records in, in one request: what the slow-subtask reading needs.
    assert set(p["vertex_metrics"]) == set(SUBTASK_METRICS)
    assert all(isinstance(v, float) and not math.isnan(v) for v in p["vertex_metrics"].values())
    assert p["resreq"][ids.work] == ParallelismBounds(1, WORK_P)
    assert set(p["tm_metrics"]) == set(TM_METRICS)
    assert p["taskmanagers"][0].slots_number == 8 and p["taskmanagers"][0].cpu_cores > 0
    assert p["checkpoints"].completed > 0
    assert p["resreq_put_same"] is None
    messages = {n: p[n].messages[0] for n in p if n.startswith("resreq_put_400")}
    assert "missing job vertex" in messages["resreq_put_400_incomplete"], messages
    assert "higher than the upper bound" in messages["resreq_put_400_bounds"], messages
    assert "exceeds its maximum parallelism" in messages["resreq_put_400_max_parallelism"], messages
    assert "was not found in the JobGraph" in messages["resreq_put_400_unknown_vertex"], messages


def test_the_simulator_answers_with_the_real_shapes(recorded, simulated):
    real: Session = recorded["session"]
    ids: Ids = recorded["ids"]
    report: dict[str, list[str]] = {}
    for call in CALLS:
        r_status, r_payload = real.answers[call.name]
        s_status, s_payload = simulated.answers[call.name]
        diffs = [] if r_status == s_status else [f"HTTP status: real {r_status}, simulator {s_status}"]
        diffs += differences(
            shape(_normalize(call.name, r_payload, ids)), shape(_normalize(call.name, s_payload, ids))
        )
        if diffs:
            report[call.name] = diffs
    for name, diffs in report.items():
        flag = "DAEMON" if next(c for c in CALLS if c.name == name).daemon else "info"
        log(f"simulator vs real, {name} [{flag}]:\n  " + "\n  ".join(diffs[:40]))
    daemon_diffs = {n: d for n, d in report.items() if next(c for c in CALLS if c.name == n).daemon}
    assert daemon_diffs == {}, json.dumps(daemon_diffs, indent=1)

    # The names the daemon picks from each listing (it only ever queries listed names) are the same.
    for call in ("src_subtask_metric_names", "work_subtask_metric_names", "tm_metrics_names"):
        picked = {
            side: {m.name: matching(m, names) for m in FlinkMetric if matching(m, names)}
            for side, names in (("real", real.parsed[call]), ("simulator", simulated.parsed[call]))
        }
        assert picked["simulator"] == picked["real"], (call, picked)
    # Partitions come from Kafka/Pulsar metric names; the simulator's source poses as Kafka, ours is not.
    partitions = {
        side: source_partitions(session.parsed["src_subtask_metric_names"])
        for side, session in (("real", real), ("simulator", simulated))
    }
    if partitions["real"] != partitions["simulator"]:
        log(f"simulator vs real [info]: source partitions from metric names {partitions}")


def test_the_committed_fixtures_have_todays_shapes_and_parse(recorded):
    real: Session = recorded["session"]
    ids: Ids = recorded["ids"]
    stale: dict[str, list[str]] = {}
    answers: dict[str, tuple[int, Any]] = {}
    for call in CALLS:
        if call.fixture is None:
            continue
        fixture = json.loads((FIXTURES / call.fixture).read_text())
        answers[call.name] = (call.status, fixture)
        _, r_payload = real.answers[call.name]
        r_norm, f_norm = _normalize(call.name, r_payload, ids), _normalize(call.name, fixture, ids)
        if call.name in AGGREGATED:
            r_norm, f_norm = _any_aggregates(r_norm), _any_aggregates(f_norm)
        diffs = differences(shape(r_norm), shape(f_norm))
        if diffs:
            stale[call.fixture] = diffs
    for name, diffs in stale.items():
        log(f"fixture {name} vs today's answer:\n  " + "\n  ".join(diffs[:40]))
    assert stale == {}, json.dumps(stale, indent=1)

    # The fixtures were recorded from the lab job (same vertex ids); replay them through the client.
    fixture_job = json.loads((FIXTURES / "job.json").read_text())
    fixture_tm = json.loads((FIXTURES / "taskmanagers.json").read_text())["taskmanagers"][0]["id"]
    fixture_ids = Ids(fixture_job["jid"], ids.source, ids.work, ids.aggregate, fixture_tm)
    replay = Replay(answers)
    session = asyncio.run(_exercise(replay, "http://fixtures", JOB_NAME, fixture_ids, only=set(answers)))
    for name in answers:
        parsed = session.parsed[name]
        status = next(c.status for c in CALLS if c.name == name)
        if status == 200:
            assert not isinstance(parsed, Exception), (name, parsed)
        else:
            assert isinstance(parsed, FlinkHTTPError) and parsed.status == status, (name, parsed)
