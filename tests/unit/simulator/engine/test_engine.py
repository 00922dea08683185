"""The simulator's physics: flow, back-pressure, Flink-like meters, the adaptive scheduler's rescale rules.

The task and operator metrics the TaskManagers report are in test_reporting.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from autoscaler.clock import FakeClock
from autoscaler.simulator import (
    SCENARIOS,
    Bursts,
    Constant,
    Noise,
    Product,
    Ramp,
    RateSchedule,
    ResourceRequirementsError,
    SimCluster,
    SimClusterSpec,
    SimEdgeSpec,
    SimJobSpec,
    SimVertexSpec,
    Sine,
    Steps,
    UnknownJobError,
    demo_job,
    load_scenario,
    work_job,
)

SOURCE, WORK, SINK = "Source: BacklogSource", "Work", "Aggregate -> Sink: Writer"


def metric(cluster: SimCluster, job_id: str, vertex: str, name: str, agg: str = "avg") -> float:
    """One aggregated task metric as the REST layer would compute it (all subtasks are uniform)."""
    vid = cluster.vertex_ids(job_id)[vertex]
    subtasks = cluster.metric_store().jobs[job_id].vertices[vid]
    values = [float(s[name]) for s in subtasks]
    return {"avg": sum(values) / len(values), "sum": sum(values), "max": max(values)}[agg]


def rescale(cluster: SimCluster, job_id: str, vertex: str, upper: int, lower: int = 1) -> None:
    requirements = cluster.resource_requirements(job_id)
    requirements[cluster.vertex_ids(job_id)[vertex]] = (lower, upper)
    cluster.set_resource_requirements(job_id, requirements)


def elapsed_s(clock: FakeClock, cluster: SimCluster) -> float:
    return (clock.now_ms() - cluster.epoch_ms) / 1000


@pytest.fixture
def cluster(clock: FakeClock) -> SimCluster:
    return SimCluster(SimClusterSpec(), clock)


# ---- flow and back-pressure ---------------------------------------------------------------------


def test_saturated_work_back_pressures_the_source_and_the_backlog_grows(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(60)

    assert metric(cluster, job_id, WORK, "busyTimeMsPerSecond") == pytest.approx(1000, rel=0.01)
    assert metric(cluster, job_id, SOURCE, "backPressuredTimeMsPerSecond") > 900
    assert metric(cluster, job_id, SINK, "backPressuredTimeMsPerSecond") == 0
    assert metric(cluster, job_id, SINK, "idleTimeMsPerSecond") > 900
    assert metric(cluster, job_id, WORK, "numRecordsInPerSecond", "sum") == pytest.approx(1250, rel=0.01)
    assert cluster.backlog(job_id) == pytest.approx(750 * 60, rel=0.01)

    before = cluster.backlog(job_id)
    clock.advance(10)
    assert (cluster.backlog(job_id) - before) / 10 == pytest.approx(750, rel=0.01)
    pending = metric(cluster, job_id, SOURCE, "Source__BacklogSource.pendingRecords", "sum")
    assert pending == pytest.approx(cluster.backlog(job_id), abs=1)


def test_rescale_restarts_after_the_pause_and_drains_the_backlog(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(60)
    rescale(cluster, job_id, WORK, 3)

    assert cluster.state(job_id) == "RESTARTING"  # 60 s since start: the 30 s cooldown is over
    backlog_at_put = cluster.backlog(job_id)
    clock.advance(1.9)
    assert cluster.state(job_id) == "RESTARTING"
    assert cluster.backlog(job_id) == pytest.approx(backlog_at_put + 2000 * 1.9, rel=0.001)
    clock.advance(0.1)
    assert cluster.state(job_id) == "RUNNING"
    assert cluster.parallelism(job_id) == {SOURCE: 1, WORK: 3, SINK: 1}
    assert cluster.rescale_count(job_id) == 1
    job = cluster.job(job_id)
    assert job.timestamps["RUNNING"] == cluster.epoch_ms + 62_000
    assert job.timestamps["RESTARTING"] == cluster.epoch_ms + 60_000

    clock.advance(40)  # 49.5k records drain at 3750 - 2000 = 1750/s in about 28 s
    assert cluster.backlog(job_id) == 0
    clock.advance(65)  # a full meter window after the drain
    assert metric(cluster, job_id, WORK, "busyTimeMsPerSecond") == pytest.approx(1000 * 2000 / 3750, rel=0.01)
    assert metric(cluster, job_id, WORK, "numRecordsInPerSecond", "sum") == pytest.approx(2000, rel=0.01)
    assert metric(cluster, job_id, SOURCE, "backPressuredTimeMsPerSecond") == 0


def test_meters_ramp_for_a_minute_after_a_restart_and_busy_reads_1000_at_first(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job(input_rate=Constant(1000)))
    clock.advance(60)
    rescale(cluster, job_id, WORK, 2)
    clock.advance(2)  # restart pause: the tasks are back, before their first 5 s view update
    assert cluster.state(job_id) == "RUNNING"
    for vertex in (SOURCE, WORK, SINK):
        assert metric(cluster, job_id, vertex, "busyTimeMsPerSecond") == 1000  # Flink's start-up artifact
        assert metric(cluster, job_id, vertex, "numRecordsOutPerSecond") == 0

    rates = []
    for _ in range(5):
        clock.advance(10)
        rates.append(metric(cluster, job_id, WORK, "numRecordsInPerSecond", "sum"))
    assert rates == sorted(rates) and rates[-1] < 950
    assert rates[0] == pytest.approx(1000 * 10 / 60, rel=0.25)
    clock.advance(15)
    assert metric(cluster, job_id, WORK, "numRecordsInPerSecond", "sum") == pytest.approx(1000, rel=0.01)
    assert metric(cluster, job_id, SINK, "busyTimeMsPerSecond") < 100


def test_counters_are_monotonic_between_restarts_and_reset_at_one(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job())
    names = ("numRecordsIn", "numRecordsOut", "accumulateBusyTimeMs", "accumulateIdleTimeMs")
    previous = dict.fromkeys(names, -1.0)
    for _ in range(30):
        clock.advance(2.5)
        for name in names:
            value = metric(cluster, job_id, WORK, name, "sum")
            assert value >= previous[name]
            previous[name] = value
    source_read = metric(cluster, job_id, SOURCE, "Source__BacklogSource.numRecordsIn", "sum")
    assert source_read == pytest.approx(1250 * 75, rel=0.01)
    assert metric(cluster, job_id, SOURCE, "numRecordsIn", "sum") == 0  # a source task reads no network input

    rescale(cluster, job_id, WORK, 2)
    clock.advance(3)
    assert metric(cluster, job_id, WORK, "numRecordsIn", "sum") < previous["numRecordsIn"]


def test_cooldown_counts_from_job_start_and_from_each_rescale(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(10)
    rescale(cluster, job_id, WORK, 3)
    clock.advance(19.9)
    assert (cluster.state(job_id), cluster.parallelism(job_id)[WORK]) == ("RUNNING", 1)
    clock.advance(0.1)
    assert cluster.state(job_id) == "RESTARTING"
    clock.advance(2)
    assert cluster.parallelism(job_id)[WORK] == 3

    clock.advance(1)
    rescale(cluster, job_id, WORK, 2)  # 1 s after the restart: waits until 30 s after it
    clock.advance(28.9)
    assert (cluster.state(job_id), cluster.parallelism(job_id)[WORK]) == ("RUNNING", 3)
    clock.advance(0.1 + 2)
    assert (cluster.state(job_id), cluster.parallelism(job_id)[WORK]) == ("RUNNING", 2)
    assert cluster.rescale_count(job_id) == 2


def test_a_change_reverted_during_the_cooldown_never_restarts(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(5)
    rescale(cluster, job_id, WORK, 3)
    clock.advance(5)
    rescale(cluster, job_id, WORK, 1)
    clock.advance(60)
    assert cluster.rescale_count(job_id) == 0


def test_lower_bound_changes_alone_do_not_restart(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job(work_parallelism=2))
    clock.advance(60)
    rescale(cluster, job_id, WORK, 2, lower=2)
    clock.advance(60)
    assert cluster.rescale_count(job_id) == 0
    assert cluster.resource_requirements(job_id)[cluster.vertex_ids(job_id)[WORK]] == (2, 2)


def test_upper_bound_above_the_slots_is_capped_without_restart_loops(clock: FakeClock) -> None:
    cluster = SimCluster(SimClusterSpec(slots=4, taskmanagers=2), clock)
    job_id = cluster.submit(work_job())
    clock.advance(60)
    rescale(cluster, job_id, WORK, 12)
    clock.advance(5)
    assert cluster.parallelism(job_id)[WORK] == 8
    assert cluster.resource_requirements(job_id)[cluster.vertex_ids(job_id)[WORK]] == (1, 12)
    clock.advance(120)
    assert cluster.rescale_count(job_id) == 1
    assert cluster.slots_used() == 8
    assert cluster.tasks_per_taskmanager() == [6, 4]  # slot 0 holds all three vertices


def test_requirements_are_validated_with_flinks_messages(cluster: SimCluster) -> None:
    job_id = cluster.submit(work_job())
    ids = cluster.vertex_ids(job_id)
    full = cluster.resource_requirements(job_id)

    partial = {ids[SOURCE]: (1, 1), ids[WORK]: (1, 3)}
    with pytest.raises(ResourceRequirementsError, match=rf"missing job vertex \[{ids[SINK]}\]"):
        cluster.set_resource_requirements(job_id, partial)
    with pytest.raises(ResourceRequirementsError, match=r"lower bound \[3\] .* upper bound \[2\]"):
        cluster.set_resource_requirements(job_id, {**full, ids[WORK]: (3, 2)})
    with pytest.raises(ResourceRequirementsError, match=r"parallelism 200 .* maximum parallelism 128"):
        cluster.set_resource_requirements(job_id, {**full, ids[WORK]: (1, 200)})
    with pytest.raises(ResourceRequirementsError, match="was not found in the JobGraph"):
        cluster.set_resource_requirements(job_id, {**full, "0" * 32: (1, 1)})
    assert cluster.resource_requirements(job_id) == full
    with pytest.raises(UnknownJobError):
        cluster.set_resource_requirements("f" * 32, full)


# ---- schedules and topology ---------------------------------------------------------------------


def test_rate_schedules() -> None:
    steps = Steps([(10, 800), (120, 2000), (420, 500)])
    assert [steps.rate_at(t) for t in (0, 10, 119.9, 120, 419, 420, 10_000)] == [
        0,
        800,
        800,
        2000,
        2000,
        500,
        500,
    ]
    sine = Sine(base=1500, amplitude=1000, period_s=600)
    assert sine.rate_at(0) == pytest.approx(1500)
    assert sine.rate_at(150) == pytest.approx(2500)
    assert sine.rate_at(450) == pytest.approx(500)
    assert Sine(base=100, amplitude=500, period_s=60).rate_at(45) == 0  # never negative
    assert Constant(7).rate_at(1e9) == 7
    with pytest.raises(ValidationError):
        Steps([(120, 1), (10, 2)])


def test_ramp_is_linear_between_its_points_and_flat_outside() -> None:
    ramp = Ramp([(300, 800), (1500, 3200), (1800, 3200)])
    assert [ramp.rate_at(t) for t in (0, 300, 900, 1500, 1700, 10_000)] == pytest.approx(
        [800, 800, 2000, 3200, 3200, 3200]
    )
    assert Ramp([(60, 500)]).rate_at(0) == Ramp([(60, 500)]).rate_at(600) == 500
    with pytest.raises(ValidationError):
        Ramp([(120, 1), (10, 2)])


def test_noise_stays_within_its_spread_holds_each_draw_and_repeats_with_its_seed() -> None:
    noise = Noise(base=2000, spread=0.15, hold_s=10, seed=7)
    rates = [noise.rate_at(t) for t in range(0, 7200, 10)]
    assert all(1700 <= r <= 2300 for r in rates)
    assert sum(rates) / len(rates) == pytest.approx(2000, rel=0.02)  # stationary around base
    assert min(rates) < 1750 and max(rates) > 2250  # and it uses the whole spread
    assert noise.rate_at(10) == noise.rate_at(19.99) != noise.rate_at(20)  # one draw per hold_s
    assert [Noise(base=2000, spread=0.15, hold_s=10, seed=7).rate_at(t) for t in range(0, 7200, 10)] == rates
    assert Noise(base=2000, spread=0.15, hold_s=10, seed=8).rate_at(0) != rates[0]
    assert Noise(base=2000, spread=0.0, seed=3).rate_at(1234.5) == 2000


def test_bursts_repeat_from_their_start() -> None:
    bursts = Bursts(base=1500, peak=3000, every_s=600, duration_s=30, start_s=300)
    assert [bursts.rate_at(t) for t in (0, 299, 300, 329, 330, 899, 900, 929.9, 930)] == [
        1500,
        1500,
        3000,
        3000,
        1500,
        1500,
        3000,
        3000,
        1500,
    ]
    with pytest.raises(ValidationError):
        Bursts(base=1, peak=2, every_s=10, duration_s=20)


def test_a_product_multiplies_its_factors_at_each_instant() -> None:
    cycle = Sine(base=1, amplitude=0.5, period_s=600)
    week = Steps([(0, 2000), (3000, 1000)])
    noisy = Product([cycle, week, Noise(base=1, spread=0.1, hold_s=10, seed=4)])
    for t in (0, 150, 450, 2999, 3000, 3150):
        expected = cycle.rate_at(t) * week.rate_at(t)
        assert expected * 0.9 <= noisy.rate_at(t) <= expected * 1.1
    assert Product([cycle, week]).rate_at(150) == pytest.approx(3000)  # the peak of a weekday
    assert Product([cycle, week]).rate_at(3150) == pytest.approx(1500)  # of the weekend
    with pytest.raises(ValidationError):
        Product([])


def test_new_schedules_load_from_yaml_without_a_kind() -> None:
    rate = TypeAdapter(RateSchedule)
    assert rate.validate_python({"points": [[0, 800], [60, 1600]]}) == Ramp([(0, 800), (60, 1600)])
    assert rate.validate_python({"base": 2000, "spread": 0.15, "seed": 1}) == Noise(
        base=2000, spread=0.15, seed=1
    )
    assert rate.validate_python({"base": 1, "peak": 2, "every_s": 60, "duration_s": 5}) == Bursts(
        base=1, peak=2, every_s=60, duration_s=5
    )
    assert rate.validate_python({"base": 1500, "amplitude": 1000, "period_s": 600}) == Sine(
        base=1500, amplitude=1000, period_s=600
    )
    assert rate.validate_python({"factors": [{"rate": 2}, {"steps": [[0, 3]]}]}) == Product(
        [Constant(2), Steps([(0, 3)])]
    )


def test_steps_drive_the_job_over_time(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(demo_job())
    clock.advance(110)
    assert cluster.backlog(job_id) == 0
    assert metric(cluster, job_id, WORK, "busyTimeMsPerSecond") == pytest.approx(1000 * 800 / 1250, rel=0.01)
    clock.advance(70)  # 60 s at 2000 rec/s against 1250
    assert cluster.backlog(job_id) == pytest.approx(750 * 60, rel=0.02)


def test_set_input_rate_changes_the_load_from_now_on(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job(input_rate=Constant(1000)))
    clock.advance(30)
    assert cluster.backlog(job_id) == 0
    assert cluster.input_rate(job_id) == 1000
    cluster.set_input_rate(job_id, Constant(3000))
    assert cluster.input_rate(job_id) == 3000
    clock.advance(10)
    assert cluster.backlog(job_id) == pytest.approx(1750 * 10, rel=0.01)


def test_gains_follow_output_ratios_and_paths(clock: FakeClock) -> None:
    """source -> A (x2) -> C and source -> B -> C: C receives 3 records per source record."""
    spec = SimJobSpec(
        name="diamond",
        vertices=[
            SimVertexSpec(name="Source: S", capacity_per_subtask=10_000),
            SimVertexSpec(name="A", capacity_per_subtask=10_000, output_ratio=2),
            SimVertexSpec(name="B", capacity_per_subtask=10_000),
            SimVertexSpec(name="C", capacity_per_subtask=900, parallelism=2),
        ],
        edges=[
            SimEdgeSpec(source="Source: S", target="A"),
            SimEdgeSpec(source="Source: S", target="B", ship_strategy="FORWARD"),
            SimEdgeSpec(source="A", target="C", ship_strategy="HASH"),
            SimEdgeSpec(source="B", target="C", ship_strategy="HASH"),
        ],
        input_rate=Constant(500),
    )
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(spec)
    clock.advance(65)
    assert cluster.job(job_id).gains == {"Source: S": 1, "A": 1, "B": 1, "C": 3}
    assert cluster.job(job_id).max_emission_rate == pytest.approx(600)  # C: 2 x 900 / 3
    assert cluster.backlog(job_id) == 0
    assert metric(cluster, job_id, "C", "numRecordsInPerSecond", "sum") == pytest.approx(1500, rel=0.01)
    assert metric(cluster, job_id, "A", "numRecordsOutPerSecond", "sum") == pytest.approx(1000, rel=0.01)
    assert metric(cluster, job_id, "C", "busyTimeMsPerSecond") == pytest.approx(1000 * 1500 / 1800, rel=0.01)


def test_broadcast_multiplies_by_the_target_parallelism(clock: FakeClock) -> None:
    spec = SimJobSpec(
        name="broadcast",
        vertices=[
            SimVertexSpec(name="Source: Rules", capacity_per_subtask=10_000),
            SimVertexSpec(name="Match", capacity_per_subtask=10_000, parallelism=4),
        ],
        edges=[SimEdgeSpec(source="Source: Rules", target="Match", ship_strategy="BROADCAST")],
        input_rate=Constant(100),
    )
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(spec)
    clock.advance(65)
    assert metric(cluster, job_id, "Match", "numRecordsInPerSecond", "sum") == pytest.approx(400, rel=0.01)


# ---- lifecycle ----------------------------------------------------------------------------------


def test_restarting_jobs_have_no_task_metrics_but_keep_job_metrics(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(40)
    rescale(cluster, job_id, WORK, 2)
    store = cluster.metric_store()
    assert store.jobs[job_id].vertices == {}
    assert store.jobs[job_id].job["numRescales"] == 0
    clock.advance(2)
    assert cluster.metric_store().jobs[job_id].job["numRescales"] == 1


def test_cancel_stops_processing_and_frees_the_slots(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job(work_parallelism=3))
    clock.advance(30)
    cluster.cancel(job_id)
    backlog = cluster.backlog(job_id)
    clock.advance(30)
    assert cluster.state(job_id) == "CANCELED"
    assert cluster.backlog(job_id) == backlog
    assert cluster.slots_used() == 0
    assert cluster.job(job_id).end_ms == cluster.epoch_ms + 30_000
    with pytest.raises(UnknownJobError):
        cluster.state("0" * 32)


def test_a_job_run_below_its_request_scales_up_when_slots_come_free(clock: FakeClock) -> None:
    """Flink's adaptive scheduler keeps the request and takes freed slots after its cooldown."""
    cluster = SimCluster(SimClusterSpec(slots=8, cooldown_after_rescaling_s=30), clock)
    big = cluster.submit(work_job(name="big", work_parallelism=5))
    small = cluster.submit(work_job(name="small"))
    clock.advance(60)
    rescale(cluster, small, "Work", 8)  # 2 free + its own 1: it restarts at 3 and keeps asking for 8
    clock.advance(60)
    assert cluster.parallelism(small)["Work"] == 3 and cluster.rescale_count(small) == 1
    rescale(cluster, big, "Work", 2)  # big restarts smaller; its 3 idle slots go back 70 s later
    clock.advance(60)
    assert cluster.parallelism(big)["Work"] == 2
    assert cluster.parallelism(small)["Work"] == 3 and cluster.slots_used() == 8
    clock.advance(60)
    assert cluster.parallelism(small)["Work"] == 6 and cluster.rescale_count(small) == 2
    cluster.cancel(big)  # and 2 more
    clock.advance(60)
    assert cluster.parallelism(small)["Work"] == 8 and cluster.rescale_count(small) == 3
    clock.advance(120)
    assert cluster.rescale_count(small) == 3  # at its request: no more restarts
    assert cluster.slots_used() == 8


def test_the_simulation_is_deterministic_and_step_size_independent() -> None:
    def run(step_s: float, hops: int) -> tuple[str, float, float]:
        clock = FakeClock()
        cluster = SimCluster(SimClusterSpec(step_s=step_s), clock)
        job_id = cluster.submit(work_job(input_rate=Sine(base=1500, amplitude=1000, period_s=120)))
        for _ in range(hops):
            clock.advance(120 / hops)
        return job_id, cluster.backlog(job_id), metric(cluster, job_id, WORK, "accumulateBusyTimeMs", "sum")

    fine = run(0.1, 1)
    assert run(0.1, 1) == fine
    assert run(0.1, 37)[0] == fine[0]
    assert run(0.1, 37)[1] == pytest.approx(fine[1], rel=0.01)
    assert run(0.5, 1)[1] == pytest.approx(fine[1], rel=0.02)


def test_job_ids_are_deterministic_and_vertex_ids_stable_across_submissions(clock: FakeClock) -> None:
    first = SimCluster(SimClusterSpec(), clock)
    second = SimCluster(SimClusterSpec(), clock)
    a, b = first.submit(work_job()), first.submit(work_job())
    assert a != b and second.submit(work_job()) == a
    assert first.vertex_ids(a) == first.vertex_ids(b)
    assert len(a) == 32 and int(a, 16) >= 0
    generated = first.submit(
        SimJobSpec(name="x", vertices=[SimVertexSpec(name="v", capacity_per_subtask=1)], input_rate=1)
    )
    assert len(first.vertex_ids(generated)["v"]) == 32


# ---- specs and scenarios ------------------------------------------------------------------------


def test_job_spec_validation() -> None:
    vertex = SimVertexSpec(name="a", capacity_per_subtask=1)
    other = SimVertexSpec(name="b", capacity_per_subtask=1)
    with pytest.raises(ValidationError, match="cycle"):
        SimJobSpec(
            name="j",
            vertices=[vertex, other],
            edges=[SimEdgeSpec(source="a", target="b"), SimEdgeSpec(source="b", target="a")],
            input_rate=1,
        )
    with pytest.raises(ValidationError, match="unknown vertex"):
        SimJobSpec(name="j", vertices=[vertex], edges=[SimEdgeSpec(source="a", target="z")], input_rate=1)
    with pytest.raises(ValidationError, match="unique"):
        SimJobSpec(name="j", vertices=[vertex, vertex], input_rate=1)
    with pytest.raises(ValidationError, match="32 lowercase hex"):
        SimVertexSpec(name="a", capacity_per_subtask=1, vertex_id="xyz")
    with pytest.raises(ValidationError, match="exceeds max_parallelism"):
        SimVertexSpec(name="a", capacity_per_subtask=1, parallelism=9, max_parallelism=8)
    hot = SimVertexSpec(name="b", capacity_per_subtask=1, hot_key_share=0.5)
    with pytest.raises(ValidationError, match=r"'b' is a source .* cannot set hot_key_share"):
        SimJobSpec(name="j", vertices=[vertex, hot], input_rate=1)  # b has no inputs
    assert SimJobSpec(
        name="j", vertices=[vertex, hot], edges=[SimEdgeSpec(source="a", target="b")], input_rate=1
    )
    with pytest.raises(ValidationError, match="less than 1"):
        SimVertexSpec(name="b", capacity_per_subtask=1, hot_key_share=1.0)


def test_named_scenarios_build(clock: FakeClock) -> None:
    assert {"demo", "steady"} <= set(SCENARIOS)
    for name, build in SCENARIOS.items():
        spec, jobs = build()
        cluster = SimCluster(spec, clock)
        for job in jobs:
            cluster.submit(job)
        assert jobs, name
    spec, (job,) = SCENARIOS["demo"]()
    assert job.input_rate == Steps([(0, 800), (120, 2000), (420, 500)])


def test_load_scenario_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        """
cluster: {slots: 4, cooldown_after_rescaling_s: 10, metric_fetch_interval_s: 5}
jobs:
  - template: work_job
    name: lab
    work_parallelism: 2
    input_rate: {steps: [[0, 1000], [60, 3000]]}
  - name: custom
    input_rate: 250
    vertices:
      - {name: "Source: S", capacity_per_subtask: 1000, source_partitions: 4}
      - {name: Map, capacity_per_subtask: 200, parallelism: 2}
    edges:
      - {source: "Source: S", target: Map, ship_strategy: FORWARD}
    job_config: {job.autoscaler.enabled: "true"}
""",
        encoding="utf-8",
    )
    cluster, (lab, custom) = load_scenario(path)
    assert (cluster.slots, cluster.cooldown_after_rescaling_s, cluster.metric_fetch_interval_s) == (4, 10, 5)
    assert lab.name == "lab" and lab.vertices[1].parallelism == 2
    assert lab.input_rate == Steps([(0, 1000), (60, 3000)])
    assert custom.input_rate == Constant(250)
    assert custom.edges[0].ship_strategy == "FORWARD"
    assert custom.job_config == {"job.autoscaler.enabled": "true"}

    path.write_text("jobs: [{template: nope}]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"jobs\[0\].*unknown template"):
        load_scenario(path)


def test_a_job_read_alone_matches_one_integrated_with_every_read() -> None:
    """Jobs catch up to the clock when read, not at every request: a job nobody reads for a while ends
    where one integrated at every other job's read would (a constant load cuts the same either way)."""

    def run(read_all_each_hop: bool) -> list[tuple[float, float, dict[str, int]]]:
        clock = FakeClock()
        cluster = SimCluster(SimClusterSpec(), clock)
        busy = cluster.submit(work_job(name="busy", input_rate=Constant(2000)))
        quiet = cluster.submit(work_job(name="quiet", input_rate=Constant(900)))
        for hop in range(73):
            clock.advance(0.37)
            cluster.backlog(busy)  # the busy job is read at every hop
            if read_all_each_hop:
                cluster.now_ms()  # what every request did before: integrate every job
            if hop == 40:
                body = {vid: (1, 3) for vid in cluster.vertex_ids(busy).values()}
                cluster.set_resource_requirements(busy, body)
        return [
            (
                cluster.backlog(job),
                metric(cluster, job, WORK, "accumulateBusyTimeMs", "sum"),
                cluster.parallelism(job),
            )
            for job in (busy, quiet)
        ]

    lazy, eager = run(False), run(True)
    for (backlog, busy_ms, parallelism), (backlog_e, busy_ms_e, parallelism_e) in zip(
        lazy, eager, strict=True
    ):
        assert parallelism == parallelism_e
        assert backlog == pytest.approx(backlog_e, rel=1e-9, abs=1e-6)
        assert busy_ms == pytest.approx(busy_ms_e, rel=1e-9)


def test_a_rest_request_integrates_only_the_jobs_it_reads(clock: FakeClock) -> None:
    """What makes a request cost the same whatever the fleet: serving a job's details moves that job
    alone; a metric fetch, the job list and the TaskManagers move every job."""
    from autoscaler.simulator import handle
    from autoscaler.simulator.scenarios import LAB_VERTEX_IDS

    cluster = SimCluster(SimClusterSpec(metric_fetch_interval_s=10), clock)
    a, b = cluster.submit(work_job(name="a")), cluster.submit(work_job(name="b"))
    clock.advance(3)
    assert handle(cluster, "GET", f"/jobs/{a}", {}, None)[0] == 200  # the first metric fetch: all jobs
    fetched_ms = clock.now_ms()
    clock.advance(1)
    assert handle(cluster, "GET", f"/jobs/{a}", {}, None)[0] == 200  # served from that fetch
    assert (
        handle(cluster, "GET", f"/jobs/{a}/vertices/{LAB_VERTEX_IDS[WORK]}/subtasks/metrics", {}, None)[0]
        == 200
    )
    positions = {job.job_id: job.t_ms for job in cluster._jobs.values()}
    assert positions == {a: clock.now_ms(), b: fetched_ms}
    clock.advance(1)
    assert handle(cluster, "GET", "/jobs/overview", {}, None)[0] == 200
    assert {job.t_ms for job in cluster._jobs.values()} == {clock.now_ms()}


def test_a_fetch_reports_each_job_as_it_was_when_fetched_however_late_it_is_read() -> None:
    """A fetch freezes every job and reports one only when first asked (a fleet's fetch would hold the
    cluster for seconds otherwise): read late, after the job moved on and even restarted, a job's
    metrics are still those of the fetch's instant."""

    def fetched(read_late: bool) -> dict[str, object]:
        clock = FakeClock()
        cluster = SimCluster(SimClusterSpec(metric_fetch_interval_s=10, cooldown_after_rescaling_s=0), clock)
        job_id = cluster.submit(work_job(input_rate=Constant(2000)))
        clock.advance(40)
        store = cluster._fetch(cluster.now_ms())
        if read_late:
            cluster.set_resource_requirements(
                job_id, {vid: (1, 2) for vid in cluster.vertex_ids(job_id).values()}
            )
            clock.advance(25)
            assert cluster.rescale_count(job_id) == 1 and cluster.parallelism(job_id)["Work"] == 2
        metrics = store.jobs[job_id]
        return {
            "job": dict(metrics.job),
            **{vid: list(subtasks) for vid, subtasks in metrics.vertices.items()},
        }

    assert fetched(read_late=True) == fetched(read_late=False)


def test_a_raised_request_takes_the_free_slots_at_once_and_runs_on_them_after_the_cooldown(
    clock: FakeClock,
) -> None:
    """Flink 2.3 (docs/e2e.md, "Slots"): the slots leave the free ones within a second of the PUT,
    while the job runs on at its old parallelism until the cooldown ends; another job's PUT in between
    gets only what is left."""
    cluster = SimCluster(SimClusterSpec(slots=8, cooldown_after_rescaling_s=30), clock)
    first = cluster.submit(work_job(name="first"))
    second = cluster.submit(work_job(name="second"))
    clock.advance(10)  # both in their cooldown since the start
    rescale(cluster, first, WORK, 4)
    clock.advance(1)
    assert cluster.parallelism(first)[WORK] == 1 and cluster.slots_used() == 5
    rescale(cluster, second, WORK, 6)  # 3 free + its own
    clock.advance(1)
    assert cluster.slots_used() == 8
    clock.advance(30)
    assert cluster.parallelism(first)[WORK] == 4 and cluster.parallelism(second)[WORK] == 4
    assert cluster.resource_requirements(second)[cluster.vertex_ids(second)[WORK]] == (1, 6)


def test_a_smaller_run_keeps_its_idle_slots_until_they_are_released(clock: FakeClock) -> None:
    """Flink 2.3: after a restart to fewer slots the idle ones stay the job's for about 70 s (measured
    69-78 s with the default slot.idle.timeout), then go back; so do the slots of a raised request
    lowered again before its restart."""
    cluster = SimCluster(SimClusterSpec(slots=8, cooldown_after_rescaling_s=120, restart_pause_s=1), clock)
    job = cluster.submit(work_job(work_parallelism=4))
    clock.advance(130)
    rescale(cluster, job, WORK, 2)
    clock.advance(2)  # restarted at 2 a second after the PUT
    assert cluster.parallelism(job)[WORK] == 2 and cluster.slots_used() == 4
    clock.advance(67)
    assert cluster.slots_used() == 4
    clock.advance(3)
    assert cluster.slots_used() == 2

    rescale(cluster, job, WORK, 5)  # in the cooldown: takes 3 slots at once, runs on at 2
    clock.advance(1)
    assert cluster.slots_used() == 5
    rescale(cluster, job, WORK, 2)  # lowered again: nothing to restart for
    clock.advance(68)
    assert cluster.slots_used() == 5 and cluster.rescale_count(job) == 1
    clock.advance(3)
    assert cluster.slots_used() == 2 and cluster.rescale_count(job) == 1
