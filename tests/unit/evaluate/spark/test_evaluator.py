"""The Spark backend equals the plain-Python oracle: windows across ticks, evaluations.

The aggregation query alone is tested in ``test_frames.py``, the session's settings in
``test_session.py``. Spark inputs stay tiny; every Spark action costs tens of milliseconds even
when warm.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from evaluator_parity import assert_same
from evaluator_samples import FAST, T0, TOPOLOGIES, S, job_sample, noisy_vertex, topology

from autoscaler.evaluate import SparkEvaluator
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.evaluate.spark.phases import EvaluationPhases
from autoscaler.model import JobEvaluation, VertexSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import ScalingRecord


# ---------------------------------------------------------------------------------------------- Spark
@pytest.mark.spark
@pytest.mark.parametrize("single_task_rows", [500_000, 0], ids=["one-partition", "broadcast-and-shuffle"])
def test_window_appends_and_drops_across_ticks(
    spark: Any, monkeypatch: pytest.MonkeyPatch, single_task_rows: int
) -> None:
    """Append + slide; a restarted job's old rows vanish; an absent job ages out; forget() drops at once.
    Both ways of keeping the window: in one partition (small windows) and spread out (large ones)."""
    monkeypatch.setattr("autoscaler.evaluate.spark.evaluator.SINGLE_TASK_ROWS", single_task_rows)
    rng = random.Random(11)
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    slow = AutoscalerOptions(
        metrics_window=timedelta(seconds=30), stabilization_interval=timedelta(seconds=15)
    )
    b_running = T0
    sizes = []
    for tick in range(9):
        now = T0 + tick * 10 * S
        if tick == 4:
            b_running = now - 5 * S  # job b restarted (e.g. rescaled) 5 s ago
        samples = []
        for name in ("a", "b", "c", "d"):
            if (name == "c" and tick >= 5) or (name == "a" and tick >= 7):
                continue  # c stops reporting; a is forgotten after tick 6
            vs = {
                vid: noisy_vertex(rng, tick * 10.0, 100.0 * (i + 1))
                for i, vid in enumerate(TOPOLOGIES[name].vertices)
            }
            samples.append(
                job_sample(
                    name,
                    now,
                    vs,
                    running_since_ms=b_running if name == "b" else T0,
                    options=slow if name == "d" else FAST,
                )
            )
        got, want = ours.evaluate(samples, now), oracle.evaluate(samples, now)
        assert_same(got, want)
        assert ours.window_size() == oracle.window_size()
        sizes.append(ours.window_size())
        if tick == 6:
            ours.forget(["c1/a"])
            oracle.forget(["c1/a"])
            assert ours.window_size() == sizes[-1] - 8  # a: 4 samples x 2 vertices, gone at once
        if tick in (0, 1):
            assert got["c1/d"].not_ready is Reason.STABILIZING and got["c1/d"].vertices == {}
        if tick == 1:
            assert (
                got["c1/a"].not_ready is Reason.WINDOW_NOT_FULL and got["c1/a"].vertices
            )  # evaluated upfront
        if tick == 3:
            assert got["c1/a"].not_ready is None and got["c1/a"].window_samples == 4
        if tick == 4:
            assert got["c1/b"].window_samples == 1 and got["c1/b"].not_ready is Reason.WINDOW_NOT_FULL
    # a: 2 vertices, b: 3, c: 1, d: 1 (stabilizing until 15 s, so from tick 2); window = 4 samples.
    # tick 4: b restarted -> 1 sample; tick 5+: c absent and ageing out; tick 7+: a forgotten.
    assert sizes == [6, 12, 19, 26, 18, 21, 23, 17, 16]


@pytest.mark.spark
def test_evaluate_end_to_end_integration_case(spark: Any) -> None:
    """Work does 1250 rec/s per subtask at p=1; the source reads 1250/s and its lag grows 750/s -> 3."""
    topo = topology({"src": 1, "work": 1}, [("src", "work", "REBALANCE")])
    ev = SparkEvaluator(spark)
    evs: dict[str, JobEvaluation] = {}
    for tick in range(4):
        t = tick * 10.0
        vertices = {
            "src": VertexSample(
                busy_time_ms_per_s=100.0,
                num_records_in=1250.0 * t,
                num_records_out=1250.0 * t,
                num_records_in_per_s=1250.0,
                pending_records=1000.0 + 750.0 * t,
            ),
            "work": VertexSample(
                busy_time_ms_per_s=1000.0, num_records_in=1250.0 * t, num_records_in_per_s=1250.0
            ),
        }
        evs = ev.evaluate([job_sample("e2e", T0 + tick * 10 * S, vertices, topo=topo)], T0 + tick * 10 * S)
    job = evs["c1/e2e"]
    assert job.not_ready is None and job.window_full and job.window_samples == 4
    work = job.vertices["work"]
    assert work.target_data_rate == pytest.approx(2000.0)
    assert work.true_processing_rate == pytest.approx(1250.0)
    assert (work.target_parallelism, work.outside_band) == (3, True)


@pytest.mark.spark
def test_a_back_pressured_vertex_is_sized_for_the_offered_load_as_the_oracle_does(spark: Any) -> None:
    """Issue 36 item 5: the source reads and emits 2,600 rec/s with no lag while Work at p = 2 reads its
    2,500 (the rest waits in the network buffers). Spark and the oracle: Work must process 2,600 -> 4."""
    topo = topology({"src": 1, "work": 2}, [("src", "work", "REBALANCE")])
    opts = AutoscalerOptions(
        metrics_window=timedelta(seconds=30),
        stabilization_interval=timedelta(0),
        restart_time=timedelta(minutes=1),
        prefer_counter_rates=True,
    )
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    got: dict[str, JobEvaluation] = {}
    for tick in range(4):
        t = tick * 10.0
        vertices = {
            "src": VertexSample(
                busy_time_ms_per_s=26.0,
                accumulated_busy_time_ms=26.0 * t,
                accumulated_busy_time_agg_ms=26.0 * t,
                num_records_in=2600.0 * t,
                num_records_out=2600.0 * t,
                num_records_in_per_s=2600.0,
                pending_records=0.0,
            ),
            "work": VertexSample(
                busy_time_ms_per_s=1000.0,
                accumulated_busy_time_ms=2000.0 * t,
                accumulated_busy_time_agg_ms=1000.0 * t,
                num_records_in=2500.0 * t,
                num_records_out=2500.0 * t,
                num_records_in_per_s=2500.0,
            ),
        }
        samples = [job_sample("bp", T0 + tick * 10 * S, vertices, topo=topo, options=opts)]
        got = ours.evaluate(samples, T0 + tick * 10 * S)
        assert_same(got, oracle.evaluate(samples, T0 + tick * 10 * S))
    work = got["c1/bp"].vertices["work"]
    assert work.true_processing_rate == pytest.approx(2500.0)
    assert work.target_data_rate == pytest.approx(2600.0)  # not its own 2,500
    assert (work.target_parallelism, work.outside_band) == (4, True)


@pytest.mark.spark
def test_a_tick_is_timed_in_its_three_phases(spark: Any) -> None:
    """Each lap of the tick books to its phase: with a clock that moves one second a reading, the tick
    reads as one second of window bookkeeping, two of Spark (the last checkpoint, then the query) and one
    of the driver's arithmetic."""
    seconds = iter(range(1_000))
    ev = SparkEvaluator(spark, clock=lambda: float(next(seconds)))
    assert ev.last_phases is None
    vertices = {vid: VertexSample(busy_time_ms_per_s=500.0) for vid in TOPOLOGIES["a"].vertices}
    ev.evaluate([job_sample("a", T0, vertices)], T0)
    assert ev.last_phases == EvaluationPhases(window=1.0, spark=2.0, driver=1.0)


@pytest.mark.spark
def test_counter_rates_history_and_restart_time_equal_the_oracle(spark: Any) -> None:
    """Counter-delta TPR, an ineffective scale-up and a tracked restart time, through Spark and the oracle.

    Work at p=2 was scaled 1 -> 2 expecting 1250 -> 2500 rec/s; it now reads 1300 rec/s (counters) at
    1000 ms/s busy: TPR 1300, gain 50 of 1250 = 0.04 < 0.1 -> flagged and, with detection on, held at 2.
    The meters say 900 rec/s (still ramping after the rescale); the counters win. Restart: 42.7 s -> 42.
    """
    options = AutoscalerOptions(
        metrics_window=timedelta(seconds=30),
        stabilization_interval=timedelta(0),
        scaling_effectiveness_detection_enabled=True,
        restart_time_tracking_enabled=True,
    )
    topo = topology({"src": 1, "work": 2}, [("src", "work", "REBALANCE")])
    history = {
        "c1/cnt": [
            ScalingRecord(0, {"work": (1, 2)}, restart_duration_ms=42_700, metrics={"work": (1250.0, 2500.0)})
        ]
    }
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    for tick in range(4):
        t = tick * 10.0
        vertices = {
            "src": VertexSample(
                busy_time_ms_per_s=100.0,
                num_records_in=2000.0 * t,
                num_records_out=1300.0 * t,
                num_records_in_per_s=900.0,
                pending_records=1000.0 + 700.0 * t,
                accumulated_busy_time_agg_ms=100.0 * t,
            ),
            "work": VertexSample(
                busy_time_ms_per_s=1000.0,
                num_records_in=1300.0 * t,
                num_records_in_per_s=900.0,
                accumulated_busy_time_agg_ms=1000.0 * t,
            ),
        }
        sample = job_sample("cnt", T0 + tick * 10 * S, vertices, options=options, topo=topo)
        got = ours.evaluate([sample], sample.ts_ms, history=history)
        want = oracle.evaluate([sample], sample.ts_ms, history=history)
        assert_same(got, want)
    job = got["c1/cnt"]
    work = job.vertices["work"]
    assert job.restart_time_s == 42.0
    assert work.rates_from_counters and work.true_processing_rate == pytest.approx(1300.0)
    assert work.ineffective_scale_up and work.target_parallelism == 2
    assert job.ineffective_scale_ups == ("work",)


@pytest.mark.spark
def test_warm_up_and_empty_ticks(spark: Any) -> None:
    ev = SparkEvaluator(spark)
    ev.warm_up()
    assert ev.window_size() == 0
    assert ev.evaluate([], T0) == {}
    assert ev.window_size() == 0


@pytest.mark.spark
def test_superseded_checkpoints_are_released(spark: Any) -> None:
    """A months-long loop must not pile up one stored window per tick."""
    storage = spark.sparkContext._jsc.sc()
    before = len(storage.getRDDStorageInfo())
    ev = SparkEvaluator(spark)
    for tick in range(5):
        now = T0 + tick * 10 * S
        ev.evaluate([job_sample("c", now, {"src": VertexSample(num_records_in=float(tick))})], now)
    ev.settle()  # the last tick's checkpoint, taken in the background, supersedes the one before
    assert len(storage.getRDDStorageInfo()) <= before + 1


def _plan_root(frame: Any) -> str:
    return frame._jdf.queryExecution().analyzed().getClass().getSimpleName()


@pytest.mark.spark
def test_each_tick_reads_the_window_its_predecessor_checkpointed_in_the_background(spark: Any) -> None:
    """The tick aggregates the window as a plan; the next tick finds it checkpointed (lineage cut)."""
    ev = SparkEvaluator(spark)
    for tick in range(3):
        now = T0 + tick * 10 * S
        sample = job_sample("c", now, {"src": VertexSample(num_records_in=100.0 * tick, pending_records=0.0)})
        got = ev.evaluate([sample], now)
        assert _plan_root(ev._frames.window) != "LogicalRDD"  # this tick's rows, not checkpointed yet
        ev.settle()
        assert _plan_root(ev._frames.window) == "LogicalRDD"
    assert got["c1/c"].window_samples == 3
    assert got["c1/c"].vertices["src"].target_data_rate == pytest.approx(10.0)


@pytest.mark.spark
def test_a_small_window_is_one_partition_that_no_tick_shuffles(spark: Any) -> None:
    """The join that slides a small window and the aggregation run in its one partition: no exchange,
    and no broadcast (a job of its own); the checkpoint keeps the partitioning for the next tick."""
    ev = SparkEvaluator(spark)
    for tick in range(3):
        now = T0 + tick * 10 * S
        ev.evaluate([job_sample(n, now, {"src": VertexSample(num_records_in=1.0 * tick)}) for n in "cd"], now)
        plan = ev._frames.window._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "Broadcast" not in plan, plan
        ev.settle()
        partitioning = ev._frames.window._jdf.queryExecution().executedPlan().outputPartitioning().toString()
        assert partitioning == "SinglePartition"


@pytest.mark.spark
def test_a_failed_background_checkpoint_keeps_the_window_and_is_taken_again(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint that fails loses nothing: the window stays a plan over the last checkpoint, the
    ticks go on with every row, and the next checkpoint that succeeds releases what the plan read."""
    import autoscaler.evaluate.spark.checkpointing as checkpointing
    from autoscaler.evaluate.spark.checkpointing import BackgroundCheckpoint

    class Failing(BackgroundCheckpoint):
        def _run(self) -> None:
            self._future.set_exception(RuntimeError("executor lost"))

    storage = spark.sparkContext._jsc.sc()
    before = len(storage.getRDDStorageInfo())
    ev = SparkEvaluator(spark)

    def tick(i: int) -> Any:
        now = T0 + i * 10 * S
        sample = job_sample("c", now, {"src": VertexSample(num_records_in=100.0 * i, pending_records=0.0)})
        return ev.evaluate([sample], now)["c1/c"]

    tick(0)
    with monkeypatch.context() as m:
        m.setattr(checkpointing, "BackgroundCheckpoint", Failing)
        for i in range(1, 4):
            job = tick(i)
            assert job.window_samples == i + 1
            assert job.vertices["src"].target_data_rate == pytest.approx(10.0)
        ev.settle()
        assert _plan_root(ev._frames.window) != "LogicalRDD"  # still the plan over tick 0's checkpoint
    job = tick(4)
    ev.settle()
    assert job.vertices["src"].target_data_rate == pytest.approx(10.0)
    assert _plan_root(ev._frames.window) == "LogicalRDD"
    assert len(storage.getRDDStorageInfo()) <= before + 1


@pytest.mark.spark
def test_failed_tick_rolls_back_the_window_book(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark failure must not leave the bookkeeping ahead of the rows Spark holds: the retry counts."""
    ev = SparkEvaluator(spark)
    tick = [
        job_sample("c", T0 + i * 10 * S, {"src": VertexSample(num_records_in=i * 100.0, pending_records=0.0)})
        for i in range(2)
    ]
    ev.evaluate([tick[0]], T0)

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("executor lost")

    with monkeypatch.context() as m:
        m.setattr(ev, "_extend", broken)
        with pytest.raises(RuntimeError):
            ev.evaluate([tick[1]], T0 + 10 * S)
    job = ev.evaluate([tick[1]], T0 + 10 * S)["c1/c"]  # the retry of the same sample is kept
    assert job.window_samples == 2 and ev.window_size() == 2
    assert job.vertices["src"].target_data_rate == pytest.approx(10.0)


@pytest.mark.spark
def test_duplicate_job_key_in_one_tick_keeps_the_newest_sample(spark: Any) -> None:
    ev = SparkEvaluator(spark)
    old = job_sample("c", T0 - 5 * S, {"src": VertexSample(num_records_in=1.0)})
    new = job_sample("c", T0, {"src": VertexSample(num_records_in=2.0)})
    evs = ev.evaluate([new, old], T0)
    assert list(evs) == ["c1/c"] and evs["c1/c"].sample is new and ev.window_size() == 1
