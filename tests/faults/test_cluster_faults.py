"""Faults of a whole Flink cluster's REST endpoint: unreachable (from the start, or mid-run), answers slower
than the daemon's REST timeout, bursts of 4xx and 5xx answers, and a JobManager that restarts and
resubmits its jobs under new JobIDs.

One daemon watches seven simulated clusters, each with one copy of the same job, offered more than its
``Work`` vertex handles (it needs Work 1 -> 3 once its metric window is full). ``steady`` is reached
directly; each of the others sits behind its own fault proxy and gets its own fault, so the faults run
side by side and are told apart by the ``cluster`` label of every metric and log line. The jobs were
submitted together and sampled from the daemon's first tick on (all but ``down-at-start``'s), so
when the daemon rescales ``steady``'s job, every other job would be rescaled too if its cluster
answered: from then on, a job that is not rescaled is held back by its cluster's fault alone.

Each fault's test checks that the fault is named (a log line and a Prometheus metric) and that no
rescale reached the cluster while it lasted, then heals it (a burst heals by itself);
``test_each_cluster_recovers_once_its_fault_heals`` then checks that every job gets the rescale its load
needs (the recoveries overlap: a job whose cluster was never read needs a whole window first).

``slow`` has its own ``request_timeout`` (0.5 s), shorter than the daemon-wide
``job.autoscaler.flink.rest-client.timeout``: a tick waits for its slowest cluster, so the timeouts that
test it would otherwise slow every cluster's ticks down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.server import SimulatorServer

from .harness import (
    WAIT_S,
    Contains,
    Daemon,
    LogLine,
    SimJob,
    assert_not_rescaled,
    daemon_config,
    free_port,
    needs_more_work,
    requirement_puts,
    sim_cluster,
    wait_rescaled,
)
from .proxy import (
    ANY_PATH,
    JOBS_OVERVIEW,
    RESOURCE_REQUIREMENTS,
    Delay,
    Disconnect,
    Exchange,
    Fault,
    FaultProxy,
    Rule,
    error_status,
    job_path,
    swallow_put,
)

pytestmark = [pytest.mark.faults, pytest.mark.spark]

JOB = "load-job"
STEADY = "steady"
FLAKY = ("down-at-start", "down-mid-run", "slow", "rejects-put", "overloaded", "restarted")
SLOW_TIMEOUT_S = 0.5
"""The ``slow`` cluster's ``request_timeout`` (which overrides ``job.autoscaler.flink.rest-client.timeout``,
``REST_TIMEOUT_S`` for the others): every tick waits for its timeouts, so they are kept short."""
PUT_REJECTIONS = 2
OVERLOADED_ANSWERS = 5
REST_ERRORS = "flink_autoscaler_rest_errors_total"
ERRORS = "flink_autoscaler_errors_total"


@dataclass
class Flaky:
    """One cluster behind its fault proxy, its job, and its fault."""

    name: str
    sim: SimCluster
    proxy: FaultProxy
    job: SimJob
    rule: Rule | None = None
    healed: tuple[int, int] | None = None  # (daemon log, proxy record) positions at the heal

    def rest_errors(self, daemon: Daemon, **labels: str) -> float:
        return daemon.metric(REST_ERRORS, cluster=self.name, **labels)


@dataclass
class World:
    daemon: Daemon
    steady: SimJob
    clusters: dict[str, Flaky]
    injected: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> positions at injection

    def inject_after_first_sample(
        self, name: str, fault: Fault, path: str = ANY_PATH, count: int | None = None
    ) -> None:
        """Once the cluster's job has its first sample in its window, start its fault."""
        flaky = self.clusters[name]
        self.daemon.wait_decision(flaky.job, "WindowNotFull")
        logged = self.daemon.mark()
        flaky.rule = flaky.proxy.inject(fault, path, count=count)
        self.injected[name] = (logged, flaky.proxy.mark())

    def heal(self, name: str) -> tuple[int, int]:
        """End the cluster's faults (once); where the daemon's log and the proxy's record were then."""
        flaky = self.clusters[name]
        if flaky.healed is None:
            flaky.healed = (self.daemon.mark(), flaky.proxy.mark())  # a request in between still met it
            flaky.proxy.heal()
        return flaky.healed


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("cluster-faults")
    port = free_port()
    with ExitStack() as stack:
        steady_sim = sim_cluster()
        steady = SimJob.submit(STEADY, steady_sim, JOB)
        urls = {STEADY: stack.enter_context(SimulatorServer(steady_sim)).url}
        clusters: dict[str, Flaky] = {}
        for name in FLAKY:
            sim = sim_cluster()
            job = SimJob.submit(name, sim, JOB)
            server = stack.enter_context(SimulatorServer(sim))
            proxy = stack.enter_context(FaultProxy(server.url))
            clusters[name] = Flaky(name, sim, proxy, job)
            urls[name] = proxy.url
        # Faults on from the start.
        clusters["down-at-start"].rule = clusters["down-at-start"].proxy.inject(Disconnect())
        clusters["rejects-put"].rule = clusters["rejects-put"].proxy.inject(
            error_status(400, "The request is incomplete, missing job vertex resource requirements."),
            RESOURCE_REQUIREMENTS,
            method="PUT",
            count=PUT_REJECTIONS,
        )
        # The JobManager accepts the rescale, then dies before applying it (test_jobmanager_restart...).
        clusters["restarted"].rule = clusters["restarted"].proxy.inject(
            swallow_put(), RESOURCE_REQUIREMENTS, method="PUT"
        )
        config = daemon_config(urls, state_url=f"sqlite:///{workdir / 'state.db'}", metrics_port=port)
        slow = f"    rest_url: {urls['slow']}\n"
        config = config.replace(slow, f"{slow}    request_timeout: {SLOW_TIMEOUT_S} s\n")
        assert "request_timeout" in config
        daemon = stack.enter_context(Daemon(workdir, config, port))
        world = World(daemon, steady, clusters)
        # Faults that start once the job's window has its first sample.
        world.inject_after_first_sample("down-mid-run", Disconnect())
        world.inject_after_first_sample("slow", Delay(10 * SLOW_TIMEOUT_S))
        overloaded = error_status(503, "JobManager overloaded")
        world.inject_after_first_sample("overloaded", overloaded, JOBS_OVERVIEW, count=OVERLOADED_ANSWERS)
        # The proof every test leans on: the untouched twin is rescaled once its window is full. (Its
        # confirmation is checked later: while "slow" times out, every tick takes seconds longer.)
        daemon.wait_decision(steady, "Scaling")
        yield world


def _no_rescale_reached(world: World, name: str) -> None:
    flaky = world.clusters[name]
    assert_not_rescaled(world.daemon, flaky.job, flaky.proxy)


def _no_rescale_reached_before(world: World, name: str, seq: int) -> None:
    """No PUT reached the cluster before its proxy's exchange ``seq`` (the fault's last answer)."""
    flaky = world.clusters[name]
    early = [put for put in requirement_puts(flaky.proxy, flaky.job) if put.forwarded and put.seq < seq]
    assert not early, f"{flaky.job.key}: a rescale reached the cluster during the fault: {early}"


# ------------------------------------------------------------------------------------ slow answers
def test_answers_slower_than_the_rest_timeout(world: World) -> None:
    """Every answer comes ten timeouts late: each call gives up after the cluster's REST timeout (and is
    not asked again), so the tick ends instead of hanging, and the error says it timed out. (First in
    the module: while it lasts, every tick waits for these timeouts.)"""
    name, daemon = "slow", world.daemon
    flaky = world.clusters[name]
    since, seq = world.injected[name]
    line = daemon.wait_log("cluster_unavailable", since=since, cluster=name)
    assert f"timed out after {SLOW_TIMEOUT_S:g}s" in line["error"]
    assert flaky.rest_errors(daemon, method="GET", endpoint="/jobs/overview", error="unreachable") > 0
    assert not flaky.proxy.forwarded(since=seq, method="PUT")
    _no_rescale_reached(world, name)
    world.heal(name)


# ------------------------------------------------------------------------------------ unreachable
def test_a_cluster_unreachable_from_the_start(world: World) -> None:
    """Every connection is reset: the daemon says which cluster, counts it, and acts on nothing there."""
    name, daemon = "down-at-start", world.daemon
    flaky = world.clusters[name]
    daemon.wait_log("cluster_unavailable", cluster=name)
    assert flaky.rest_errors(daemon, method="GET", endpoint="/jobs/overview", error="unreachable") > 0
    daemon.wait_metric(ERRORS, 1, cluster=name, reason="ClusterUnreachable")
    assert not flaky.proxy.forwarded(), "a request reached a cluster the daemon could not reach"
    assert not daemon.decisions(flaky.job)
    _no_rescale_reached(world, name)
    world.heal(name)


def test_a_cluster_unreachable_mid_run(world: World) -> None:
    name, daemon = "down-mid-run", world.daemon
    flaky = world.clusters[name]
    since, seq = world.injected[name]
    daemon.wait_log("cluster_unavailable", since=since, cluster=name)
    assert flaky.rest_errors(daemon, method="GET", endpoint="/jobs/overview", error="unreachable") > 0
    daemon.wait_metric(ERRORS, 1, cluster=name, reason="ClusterUnreachable")
    assert not flaky.proxy.forwarded(since=seq)
    _no_rescale_reached(world, name)
    world.heal(name)


# ------------------------------------------------------------------------------------ error bursts
def test_a_burst_of_4xx_answers_to_the_rescale(world: World) -> None:
    """Flink rejects the PUT twice (400, as for an incomplete body), then takes it: no rescale is recorded
    as made while it is rejected (no pending rescale, no stuck one later), each refused tick says why
    (``RescaleRejected``), and the daemon asks again: the next tick, then after a doubling backoff."""
    name, daemon = "rejects-put", world.daemon
    flaky = world.clusters[name]

    def rejected() -> list[Exchange]:
        return [put for put in requirement_puts(flaky.proxy, flaky.job) if put.status == 400]

    def failures() -> list[LogLine]:
        return daemon.job_logs("rescale_rejected", flaky.job, detail=Contains("HTTP 400"))

    def rejected_ticks() -> list[LogLine]:  # logged right after the tick's rescale_rejected line
        return [line for line in daemon.decisions(flaky.job) if "HTTP 400" in line["detail"]]

    _wait(daemon, lambda: len(rejected()) >= PUT_REJECTIONS, "the 400 burst")
    burst = rejected()
    assert len(burst) == PUT_REJECTIONS and not any(put.forwarded for put in burst)
    _no_rescale_reached_before(world, name, burst[-1].seq)
    flaky.healed = (0, burst[-1].seq + 1)  # the burst healed itself after its last answer

    # The proxy records an answer before the daemon has read it: wait for the daemon to tell them all.
    endpoint = "/jobs/:jobid/resource-requirements"
    labels = {"cluster": name, "method": "PUT", "endpoint": endpoint, "error": "400"}
    assert daemon.wait_metric(REST_ERRORS, PUT_REJECTIONS, **labels) == PUT_REJECTIONS
    _wait(daemon, lambda: len(rejected_ticks()) >= PUT_REJECTIONS, "a decision line per rejected PUT")
    assert len(failures()) == len(rejected_ticks()) == PUT_REJECTIONS
    assert all(line["outcome"] == "RescaleRejected" for line in rejected_ticks())
    assert not daemon.job_logs("rescale_stuck", flaky.job)
    assert not daemon.job_logs("job_tick_failed", flaky.job)


def test_a_burst_of_5xx_answers_while_listing_jobs(world: World) -> None:
    """The JobManager answers ``/jobs/overview`` with 503 five times, then heals by itself: each answer is
    counted once, each of those ticks says the cluster was unavailable and why, nothing is rescaled."""
    name, daemon = "overloaded", world.daemon
    flaky = world.clusters[name]
    since, _ = world.injected[name]

    def answered() -> list[Exchange]:
        return [e for e in flaky.proxy.exchanges(path=JOBS_OVERVIEW) if e.status == 503]

    def unavailable() -> list[LogLine]:
        return daemon.find("cluster_unavailable", since=since, cluster=name, error=Contains("HTTP 503"))

    _wait(daemon, lambda: len(answered()) >= OVERLOADED_ANSWERS, "the 503 burst")
    burst = answered()
    assert len(burst) == OVERLOADED_ANSWERS
    _no_rescale_reached_before(world, name, burst[-1].seq)
    flaky.healed = (since, burst[-1].seq + 1)

    overview = {"cluster": name, "method": "GET", "endpoint": "/jobs/overview", "error": "503"}
    assert daemon.wait_metric(REST_ERRORS, OVERLOADED_ANSWERS, **overview) == OVERLOADED_ANSWERS
    _wait(daemon, lambda: len(unavailable()) >= OVERLOADED_ANSWERS, "a cluster_unavailable line per 503")
    assert len(unavailable()) == OVERLOADED_ANSWERS
    daemon.wait_metric(ERRORS, OVERLOADED_ANSWERS, cluster=name)


# ------------------------------------------------------------------------------------ JobManager restart
def test_a_jobmanager_restart_that_resubmits_the_job_under_a_new_job_id(world: World) -> None:
    """The JobManager accepts a rescale (200), dies before applying it, and comes back with the job
    resubmitted under the same name and a new JobID. The daemon must see the new JobID for what it is:
    drop the rescale pending for the old one (never confirm it, never call it stuck, never send anything
    to the old JobID) and judge the new job from its own metrics."""
    name, daemon = "restarted", world.daemon
    flaky = world.clusters[name]
    old = flaky.job
    daemon.wait_decision(old, "Scaling")  # the PUT went out, and was swallowed
    swallowed = requirement_puts(flaky.proxy, old)
    assert swallowed and not any(put.forwarded for put in swallowed)

    down = daemon.mark()
    flaky.proxy.inject(Disconnect())
    daemon.wait_log("cluster_unavailable", since=down, cluster=name)
    flaky.sim.cancel(old.job_id)
    new = SimJob(name, flaky.sim, flaky.sim.submit(needs_more_work(JOB)), JOB)
    assert new.job_id != old.job_id
    flaky.job = new
    since, healed_at = world.heal(name)

    line = daemon.wait_log("job_resubmitted", since=since, cluster=name, job=JOB)
    assert (line["old_job_id"], line["job_id"]) == (old.job_id, new.job_id)
    assert daemon.wait_metric("flink_autoscaler_job_resubmissions_total", 1, cluster=name, job=JOB) == 1
    assert flaky.rest_errors(daemon, method="GET", endpoint="/jobs/overview", error="unreachable") > 0
    # The old JobID's pending rescale is neither confirmed on the new job (as a capped one) nor stuck.
    assert not daemon.events(new, "ScalingLimited") and not daemon.job_logs("rescale_stuck", new)
    after = flaky.proxy.forwarded(since=healed_at, path=job_path(old.job_id, "/"))
    assert not after, f"requests went to the old JobID after the restart: {after}"
    assert not any(put.forwarded for put in requirement_puts(flaky.proxy, old))


# ------------------------------------------------------------------------------------ after the faults
@pytest.mark.parametrize("name", FLAKY)
def test_each_cluster_recovers_once_its_fault_heals(world: World, name: str) -> None:
    """After its fault, each cluster's job gets the rescale its load needed all along (Work 1 -> 3), one
    PUT, and only after the fault ended. For ``restarted`` that is the job under its new JobID
    (``test_a_jobmanager_restart...`` restarts it)."""
    flaky = world.clusters[name]
    since, healed_at = world.heal(name)
    puts = [put for put in requirement_puts(flaky.proxy, flaky.job) if put.forwarded]
    assert all(put.seq >= healed_at for put in puts), f"{flaky.job.key} was rescaled during the fault"
    wait_rescaled(world.daemon, flaky.job, since=since, proxy=flaky.proxy)
    assert flaky.sim.rescale_count(flaky.job.job_id) == 1
    assert len([put for put in requirement_puts(flaky.proxy, flaky.job) if put.forwarded]) == 1


def test_the_untouched_twin_runs_the_rescale_its_load_needs(world: World) -> None:
    """The proof the other tests lean on was a real rescale: ``steady``'s job runs Work at 3."""
    wait_rescaled(world.daemon, world.steady)
    assert world.steady.sim.rescale_count(world.steady.job_id) == 1


def test_the_daemon_stops_cleanly_after_the_faults(world: World) -> None:
    """SIGTERM ends it with exit code 0, and no fault made it fail in a way it did not expect."""
    daemon = world.daemon
    daemon.assert_running()
    assert not daemon.find("tick_failed") and not daemon.find("collect_failed"), daemon.tail()
    assert daemon.stop() == 0


def _wait(daemon: Daemon, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        daemon.assert_running()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
