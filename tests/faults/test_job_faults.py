"""Faults on one job's REST answers: bodies the daemon cannot read, metric values that cannot be, and a
rescale that never reaches the JobManager.

One simulated cluster runs a dozen copies of the same job, each offered more than its ``Work`` vertex
handles, so each needs Work 1 -> 3 as soon as its metric window is full. All were submitted at once and
are sampled from the daemon's first tick on, so their windows fill together. ``control`` is served
untouched; every other job has its own fault on its own REST paths from the start. When the daemon
rescales ``control``, every other job would be rescaled too if its data were good: from then on, a job
that is not rescaled is held back by its fault alone. Each fault's test checks that the fault is named
(a log line and a Prometheus metric) and that nothing reached the cluster for that job, then heals it;
``test_each_job_is_rescaled_once_its_fault_heals`` then checks, job by job, that the daemon rescales it
to exactly what its load needs (the recoveries overlap: a job whose window emptied needs a new one).

One daemon process serves the whole module (it takes ~20 s to start with its Spark JVM); the tests may
run in any order, each waits for what it needs (a recovery test heals its job's fault if nothing did).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from autoscaler.simulator.server import SimulatorServer

from .harness import (
    Contains,
    Daemon,
    SimJob,
    assert_not_rescaled,
    daemon_config,
    free_port,
    requirement_puts,
    sim_cluster,
    wait_rescaled,
)
from .proxy import (
    Answer,
    DecreasingMetric,
    DropMetric,
    Fault,
    FaultProxy,
    Rule,
    SetMetric,
    Truncate,
    html_error_page,
    job_path,
    malformed_json,
    swallow_put,
)

pytestmark = [pytest.mark.faults, pytest.mark.spark]

CLUSTER = "sim"
CONFIRM_TIMEOUT_S = 6
"""``confirm_timeout``: a real rescale shows in the simulator within ~2 s; a swallowed one never does."""
MAX_PARALLELISM = 4
"""``vertex.max-parallelism``: a job rescaled on bad data cannot take the slots the others need."""
REST_ERRORS = "flink_autoscaler_rest_errors_total"
SUBTASK_METRICS = "/vertices/[0-9a-f]{32}/subtasks/metrics$"

REFUSED = b'{"errors": ["Forbidden: this gateway is read-only"]}'

# job name -> (fault, regex of its paths below /jobs/<jid>, method)
FAULTS: dict[str, tuple[Fault, str, str | None]] = {
    "truncated": (Truncate(0.5), "$", "GET"),  # /jobs/:jid, cut in half
    "malformed": (malformed_json(), SUBTASK_METRICS, "GET"),
    "html": (html_error_page(200), "/jobmanager/config$", "GET"),  # a gateway's page instead of the config
    # a gateway's own JSON where the rescale reads the current requirements: valid JSON, wrong shape
    "wrong-shape": (Answer(200, b'{"status": "ok"}'), "/resource-requirements$", "GET"),
    "nan": (SetMetric(".", math.nan), SUBTASK_METRICS, "GET"),
    "negative": (SetMetric(".", -1000.0), SUBTASK_METRICS, "GET"),
    "huge": (SetMetric(r"\.pendingRecords$", 1e308), SUBTASK_METRICS, "GET"),
    "decreasing": (DecreasingMetric(r"^Source__.*\.numRecords(In|Out)$", 0.9), SUBTASK_METRICS, "GET"),
    "missing-busy": (DropMetric("^busyTimeMsPerSecond$", listing=True), SUBTASK_METRICS, "GET"),
    "missing-lag": (DropMetric(r"\.pendingRecords$", listing=False), SUBTASK_METRICS, "GET"),
    "put-swallowed": (swallow_put(), "/resource-requirements$", "PUT"),
    # a read-only gateway in front of the JobManager: the PUT is refused, with a message
    "put-refused": (Answer(403, REFUSED), "/resource-requirements$", "PUT"),
}


@dataclass
class World:
    daemon: Daemon
    proxy: FaultProxy
    jobs: dict[str, SimJob]
    rules: dict[str, Rule]
    # job name -> (daemon log position, proxy exchange position) at the moment its fault healed
    healed: dict[str, tuple[int, int]] = field(default_factory=dict)

    def heal(self, name: str) -> tuple[int, int]:
        """End the job's fault (once); where the daemon's log and the proxy's record were at that moment."""
        if name not in self.healed:
            self.healed[name] = (self.daemon.mark(), self.proxy.mark())
            self.proxy.heal(self.rules[name])
        return self.healed[name]

    def assert_not_rescaled(self, name: str) -> None:
        assert_not_rescaled(self.daemon, self.jobs[name], self.proxy)

    def wait_rescaled(self, name: str, since: int) -> None:
        wait_rescaled(self.daemon, self.jobs[name], since=since, proxy=self.proxy)

    def rest_errors(self, endpoint: str, error: str, method: str = "GET") -> float:
        return self.daemon.metric(REST_ERRORS, cluster=CLUSTER, method=method, endpoint=endpoint, error=error)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("job-faults")
    sim = sim_cluster()
    jobs = {name: SimJob.submit(CLUSTER, sim, name) for name in ["control", *FAULTS]}
    port = free_port()
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        rules = {
            name: proxy.inject(fault, job_path(jobs[name].job_id, tail), method=method)
            for name, (fault, tail, method) in FAULTS.items()
        }
        config = daemon_config(
            {CLUSTER: proxy.url},
            state_url=f"sqlite:///{workdir / 'state.db'}",
            metrics_port=port,
            confirm_timeout=f"{CONFIRM_TIMEOUT_S} s",
            options={"job.autoscaler.vertex.max-parallelism": str(MAX_PARALLELISM)},
        )
        with Daemon(workdir, config, port) as daemon:
            # The moment every job's window is full: from here on, only its fault holds a job back.
            wait_rescaled(daemon, jobs["control"], proxy=proxy)
            yield World(daemon, proxy, jobs, rules)


# ------------------------------------------------------------------------------------ a PUT never applied
def test_a_rescale_that_never_reaches_flink_is_given_up_and_retried_with_a_doubling_backoff(
    world: World,
) -> None:
    """Flink answers ``200 {}`` to the PUT but never gets it: the job keeps its parallelism. The daemon
    must notice (``RescaleStuck`` after ``confirm_timeout``) and retry only after a backoff that doubles,
    never a PUT per tick."""
    name, daemon = "put-swallowed", world.daemon
    job = world.jobs[name]
    first = daemon.wait_job_log("rescale_stuck", job, in_a_row=1)
    second = daemon.wait_job_log("rescale_stuck", job, in_a_row=2)
    assert f"not before {CONFIRM_TIMEOUT_S} s from now" in first["detail"]
    assert f"not before {2 * CONFIRM_TIMEOUT_S} s from now" in second["detail"]
    assert daemon.metric("flink_autoscaler_rescales_stuck_total", cluster=CLUSTER, job=name) >= 2
    assert daemon.events(job, "RescaleStuck")
    # It waited out the backoff instead of sending a PUT every tick: each PUT was given up before the next.
    assert "RescaleStuck" in daemon.outcomes(job)
    puts = requirement_puts(world.proxy, job)
    stuck = len(daemon.job_logs("rescale_stuck", job))
    assert 2 <= len(puts) <= stuck + 1
    assert not any(put.forwarded for put in puts)
    assert job.work_parallelism() == 1 and job.sim.rescale_count(job.job_id) == 0
    world.heal(name)  # the next retry, after the backoff, gets through (test_each_job_is_rescaled...)


def test_a_rescale_flink_refuses_is_reported_and_retried_only_after_a_doubling_backoff(world: World) -> None:
    """A gateway answers the PUT with 403 and Flink's error shape: ``RescaleRejected`` with its words;
    the next PUT a tick later, then after a backoff doubling per refusal: ticks without a PUT between."""
    name, daemon = "put-refused", world.daemon
    job = world.jobs[name]
    first = daemon.wait_job_log("rescale_rejected", job, in_a_row=1)
    daemon.wait_job_log("rescale_rejected", job, in_a_row=3)
    assert "HTTP 403: Forbidden: this gateway is read-only" in first["detail"]
    assert daemon.metric("flink_autoscaler_rescales_rejected_total", cluster=CLUSTER, job=name) >= 3
    assert daemon.events(job, "RescaleRejected")
    assert not daemon.job_logs("job_tick_failed", job)  # Flink's refusal, handled, not a failure
    puts = requirement_puts(world.proxy, job)
    refused = [line for line in daemon.decisions(job) if line["outcome"] == "RescaleRejected"]
    assert len(refused) > len(puts) >= 3  # waiting ticks (no PUT) among the refused ones
    assert any("no new one before" in line["detail"] for line in refused)
    assert not any(put.forwarded for put in puts)
    assert job.work_parallelism() == 1 and job.sim.rescale_count(job.job_id) == 0
    world.heal(name)  # the next retry, after the backoff, gets through (test_each_job_is_rescaled...)


# ------------------------------------------------------------------------------------ unreadable answers
@pytest.mark.parametrize(
    ("name", "endpoint"),
    [
        ("truncated", "/jobs/:jobid"),  # the job details cut short
        ("malformed", "/jobs/:jobid/vertices/:vertexid/subtasks/metrics"),  # metrics that are not JSON
    ],
)
def test_an_answer_that_is_not_json_is_a_bad_payload(world: World, name: str, endpoint: str) -> None:
    daemon = world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("metrics_failed", job, error=Contains("invalid JSON"))
    assert world.rest_errors(endpoint, "bad_payload") > 0
    world.assert_not_rescaled(name)
    _every_decision_says(daemon, job, "invalid JSON")
    world.heal(name)


def test_an_html_page_with_status_200_instead_of_the_job_configuration_is_a_bad_payload(world: World) -> None:
    """A reverse proxy's error page, sent with 200: the job's options are unknown, so it is not scaled,
    and the daemon says the configuration could not be read (not that it is invalid)."""
    name, daemon = "html", world.daemon
    job = world.jobs[name]
    line = daemon.wait_job_log("job_config_fetch_failed", job, error=Contains("invalid JSON"))
    assert "<!DOCTYPE html>" in line["error"]
    assert world.rest_errors("/jobs/:jobid/jobmanager/config", "bad_payload") > 0
    world.assert_not_rescaled(name)
    assert not daemon.events(job, "AutoScaler Options Validation")

    world.heal(name)


def test_json_of_the_wrong_shape_where_the_rescale_reads_the_requirements_stops_that_rescale(
    world: World,
) -> None:
    """The daemon decides the rescale, then reads the current requirements to send a full body: a
    gateway's ``{"status": "ok"}`` there must stop the PUT, not become an empty or partial body."""
    name, daemon = "wrong-shape", world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("job_tick_failed", job, error=Contains("unexpected payload"))
    assert world.rest_errors("/jobs/:jobid/resource-requirements", "bad_payload") > 0
    assert not requirement_puts(world.proxy, job), "a PUT was sent without the current requirements"
    world.assert_not_rescaled(name)

    world.heal(name)


# ------------------------------------------------------------------------------------ values that cannot be
def test_nan_metric_values_are_unknown_and_scale_nothing(world: World) -> None:
    """Flink writes an unknown value as ``"NaN"``; every value of the job so: nothing can be judged."""
    name, daemon = "nan", world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("metrics_unknown", job)
    assert daemon.metric("flink_autoscaler_metrics_unknown_total", cluster=CLUSTER, job=name) > 0
    world.assert_not_rescaled(name)

    world.heal(name)


def test_negative_metric_values_are_read_as_unknown_and_leave_no_trace_in_the_rescale(world: World) -> None:
    """Every value of the job comes back -1000: each is named and counted, read as unknown, nothing is
    scaled; after the fault the rescale is exactly what the load needs (no negative point in a rate)."""
    name, daemon = "negative", world.daemon
    job = world.jobs[name]
    line = daemon.wait_job_log("metric_values_invalid", job)
    assert any("pending_records = -1000 (negative)" in value for value in line["values"])
    assert line["kinds"] == ["negative"]
    labels = {"cluster": CLUSTER, "job": name, "kind": "negative"}
    assert daemon.metric("flink_autoscaler_invalid_metric_values_total", **labels) > 0
    daemon.wait_job_log("metrics_unknown", job)
    world.assert_not_rescaled(name)

    world.heal(name)


def test_huge_metric_values_are_rejected_not_scaled_on(world: World) -> None:
    """``pendingRecords`` is a Java long gauge: 1e308 cannot be. It must be named and counted as invalid,
    as too large (issue 35: it was called negative), and never sized for (a catch-up rate of 1e305
    records/s)."""
    name, daemon = "huge", world.daemon
    job = world.jobs[name]
    world.assert_not_rescaled(name)
    line = daemon.wait_job_log("metric_values_invalid", job)
    assert any("pending_records = 1e+308 (too large" in value for value in line["values"])
    assert line["kinds"] == ["too_large"] and "negative" not in line["detail"]
    labels = {"cluster": CLUSTER, "job": name, "kind": "too_large"}
    assert daemon.metric("flink_autoscaler_invalid_metric_values_total", **labels) > 0

    world.heal(name)


def test_a_counter_that_runs_backwards_restarts_the_window_and_is_counted(world: World) -> None:
    """The source's record counters fall on every answer (a reset without a restart, or a proxy serving
    old answers): no rate may span a fall, so the window starts over each time and never fills."""
    name, daemon = "decreasing", world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("metric_counters_fell", job)
    world.assert_not_rescaled(name)
    assert daemon.outcomes(job) <= {"Stabilizing", "WindowNotFull"}
    assert daemon.metric("flink_autoscaler_metric_counter_resets_total", cluster=CLUSTER, job=name) > 0
    world.heal(name)


def test_a_required_metric_missing_from_the_answers_skips_the_job(world: World) -> None:
    """``busyTimeMsPerSecond`` neither listed nor answered: the job cannot be sampled at all."""
    name, daemon = "missing-busy", world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("metrics_partial", job, detail=Contains("no busyTimeMsPerSecond"))
    assert daemon.metric("flink_autoscaler_errors_total", cluster=CLUSTER, reason="PartialMetrics") > 0
    world.assert_not_rescaled(name)
    _every_decision_says(daemon, job, "no busyTimeMsPerSecond")

    world.heal(name)


def test_a_listed_metric_missing_from_the_answers_is_unknown_not_zero(world: World) -> None:
    """The source lists ``pendingRecords`` but its answers leave it out: the backlog is unknown, not 0
    (which would size the job for the records it reads, not for those that arrive)."""
    name, daemon = "missing-lag", world.daemon
    job = world.jobs[name]
    daemon.wait_job_log("metrics_unknown", job)
    assert daemon.metric("flink_autoscaler_metrics_unknown_total", cluster=CLUSTER, job=name) > 0
    world.assert_not_rescaled(name)

    world.heal(name)


def _every_decision_says(daemon: Daemon, job: SimJob, text: str) -> None:
    """Each tick's ``decision`` line for the job names the fault that kept it from being judged."""
    decisions = daemon.decisions(job)
    assert decisions and all(text in line["detail"] for line in decisions), decisions[-3:]


# ------------------------------------------------------------------------------------ after the faults
@pytest.mark.parametrize("name", FAULTS)
def test_each_job_is_rescaled_once_its_fault_heals(world: World, name: str) -> None:
    """After its fault, each job gets the rescale its load needed all along, Work 1 -> 3 and nothing
    else: no trace of the bad data in it, and no extra rescale."""
    job = world.jobs[name]
    since, healed_at = world.heal(name)
    early = [put for put in requirement_puts(world.proxy, job) if put.forwarded and put.seq < healed_at]
    assert not early, f"{job.key} was rescaled while its fault was on: {early}"
    world.wait_rescaled(name, since=since)
    assert job.sim.rescale_count(job.job_id) == 1


def test_the_daemon_stops_cleanly_after_the_faults(world: World) -> None:
    """SIGTERM ends it with exit code 0, and no fault made it fail in a way it did not expect (an
    exception that is not a Flink REST error is logged with a traceback as ``collect_failed`` or
    ``tick_failed``)."""
    daemon = world.daemon
    daemon.assert_running()
    assert not daemon.find("tick_failed") and not daemon.find("collect_failed"), daemon.tail()
    assert daemon.stop() == 0
