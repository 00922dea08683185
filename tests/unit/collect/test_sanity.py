"""Values that cannot be never become rates (issue 12, defect 1): a negative metric value is read as
unknown, and a counter that falls within one job run starts the metric window over.

The defect: a vertex whose ``accumulateBusyTimeMs`` came back negative for 15 s was scaled Work 4 -> 18
once the fault had ended, the window's busy rate spanning from the negative point to a good one.
"""

from __future__ import annotations

import math
from datetime import timedelta

from collect_flink import SRC, WORK, FakeFlink, sample_job
from told import told
from window_feed import RUNNING, S, feed

from autoscaler.collect import MetricNameCache
from autoscaler.collect.sanity import without_impossible
from autoscaler.evaluate.aggregates import aggregate_window
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.evaluate.window.readings import counters_fell
from autoscaler.flink.client import FlinkClient
from autoscaler.metrics import MetricsReporter
from autoscaler.model import VertexSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.testing import make_sample, make_topology
from autoscaler.tick.steps import JobEvaluated, JobStep

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


async def test_a_negative_busy_time_counter_is_read_as_unknown_and_named(
    fake: FakeFlink, client: FlinkClient
) -> None:
    fake.values[WORK]["accumulateBusyTimeMs"] = {"min": -5e6, "max": -5e6, "avg": -5e6, "sum": -5e6}
    sample = await sample_job(client, MetricNameCache())
    assert math.isnan(sample.vertices[WORK].accumulated_busy_time_agg_ms)
    assert [str(v) for v in sample.invalid_values] == [
        "Work.accumulated_busy_time_agg_ms = -5e+06 (negative)"
    ]
    assert sample.vertices[SRC] == (await sample_job(client, MetricNameCache())).vertices[SRC]


async def test_every_negative_value_is_unknown_the_rest_is_kept(fake: FakeFlink, client: FlinkClient) -> None:
    for metric in ("busyTimeMsPerSecond", "numRecordsInPerSecond"):
        fake.values[WORK][metric] = {k: -1.0 for k in ("min", "max", "avg", "sum")}
    work = (await sample_job(client, MetricNameCache())).vertices[WORK]
    assert math.isnan(work.busy_time_ms_per_s) and math.isnan(work.num_records_in_per_s)
    assert work.accumulated_busy_time_agg_ms == 89002.0


def test_without_impossible_leaves_nan_and_the_derived_infinity_alone() -> None:
    fine = VertexSample(busy_time_ms_per_s=math.nan, observed_tpr=math.inf, num_records_in=0.0)
    out, invalid = without_impossible({"v": fine}, {"v": "V"})
    assert out["v"] is fine and invalid == ()
    out, invalid = without_impossible({"v": VertexSample(pending_records=-math.inf)}, {})
    assert math.isnan(out["v"].pending_records) and [str(v) for v in invalid] == [
        "v.pending_records = -inf (infinite)"
    ]


def test_values_no_flink_metric_can_hold_are_unknown_too() -> None:
    """Fault matrix: a pendingRecords of 1e300 took every vertex to its maximum parallelism."""
    huge = VertexSample(
        pending_records=1e300,
        num_records_in=math.inf,
        busy_time_ms_per_s=5000.0,
        backpressured_ms_per_s=1000.0,
        num_records_out=9.2e18,
    )
    out, invalid = without_impossible({"v": huge}, {"v": "Src"})
    assert math.isnan(out["v"].pending_records) and math.isnan(out["v"].num_records_in)
    assert math.isnan(out["v"].busy_time_ms_per_s) and out["v"].backpressured_ms_per_s == 1000.0
    assert out["v"].num_records_out == 9.2e18  # large, but a Java long can hold it
    assert [str(v) for v in invalid] == [
        "Src.busy_time_ms_per_s = 5000 (too large: a share of a second above 1100 ms/s)",
        "Src.num_records_in = inf (infinite)",
        "Src.pending_records = 1e+300 (too large: at or above 2^63, beyond any Java long Flink reports)",
    ]


def test_a_negative_point_is_a_hole_the_rate_spans_the_good_points_around_it() -> None:
    """Before: the first point's busy counter at -5e6 made the busy rate ~170x the true one over 30 s.
    As NaN, the rate is taken between the good points: 800 busy ms/s."""
    good = [(0, 0.0), (10_000, 8_000.0), (20_000, 16_000.0), (30_000, 24_000.0)]
    points = [
        (ts, VertexSample(accumulated_busy_time_agg_ms=busy, num_records_in=ts / 1.0)) for ts, busy in good
    ]
    bad = VertexSample(accumulated_busy_time_agg_ms=-5e6, num_records_in=-1.0)
    cleaned, _ = without_impossible({"v": bad}, {})
    window = [(-10_000, cleaned["v"]), *points]
    assert aggregate_window(window).accumulated_busy_agg_rate == 800.0


def test_a_counter_that_falls_in_one_run_starts_the_window_over() -> None:
    """No rate may span a reset: the window restarts at the sample after it, in a new epoch."""
    book = WindowBook()
    first = RUNNING + 5 * 60 * S
    kw = {"metrics_window_ms": 30 * S}
    before = [feed(book, first + i * 5 * S, counters=(100.0 * i, 50.0 * i), **kw) for i in range(8)]
    assert before[-1].full and before[-1].samples >= 7
    reset = feed(book, first + 8 * 5 * S, counters=(3.0, 400.0), **kw)  # the first counter fell
    assert reset.counters_fell and reset.reset and reset.epoch != before[-1].epoch
    assert reset.samples == 1 and not reset.full and reset.not_ready is not None
    later = [
        feed(book, first + (9 + i) * 5 * S, counters=(3.0 + 100 * i, 400 + 50.0 * i), **kw) for i in range(7)
    ]
    assert not any(s.counters_fell for s in later) and later[-1].full
    assert later[-1].epoch == reset.epoch


def _restarted_run(book: WindowBook, kw: dict[str, int]) -> int:
    """A run with counters up to (700, 350), then a restart at RESTART whose first sample still shows
    them (Flink's metric store serves the old tasks' values until its next fetch). Returns RESTART."""
    first = RUNNING + 5 * 60 * S
    for i in range(8):
        feed(book, first + i * 5 * S, counters=(100.0 * i, 50.0 * i), **kw)
    restart = first + 60 * S
    st = feed(book, restart + 2 * S, running_since_ms=restart, counters=(700.0, 350.0), **kw)
    assert st.reset and not st.counters_fell and not st.counters_restarted
    return restart


def test_counters_falling_one_fetch_after_a_restart_are_the_restart_not_a_reset() -> None:
    """Issue 36: every rescale logged metric_counters_fell ("a reset without a restart") and started the
    window at the fall, skipping the restart's stabilization interval."""
    book = WindowBook()
    kw = {"metrics_window_ms": 30 * S, "stabilization_ms": 20 * S}
    restart = _restarted_run(book, kw)
    st = feed(book, restart + 7 * S, running_since_ms=restart, counters=(40.0, 20.0), **kw)
    assert st.counters_restarted and not st.counters_fell and st.reset
    assert st.stabilizing  # the restart's stabilization interval still holds
    assert feed(book, restart + 22 * S, running_since_ms=restart, counters=(200.0, 100.0), **kw).kept


def test_a_counter_that_started_over_at_the_restart_falling_later_is_a_reset() -> None:
    book = WindowBook()
    kw = {"metrics_window_ms": 30 * S, "stabilization_ms": 20 * S}
    restart = _restarted_run(book, kw)
    feed(book, restart + 7 * S, running_since_ms=restart, counters=(40.0, 20.0), **kw)  # the restart's
    feed(book, restart + 12 * S, running_since_ms=restart, counters=(90.0, 45.0), **kw)
    st = feed(book, restart + 17 * S, running_since_ms=restart, counters=(10.0, 50.0), **kw)
    assert st.counters_fell and not st.counters_restarted


def test_only_the_counters_still_showing_the_run_before_may_fall_as_the_restart() -> None:
    """On real Flink /jobs/:id sums a new task's counters from its own attempt's metrics (0 until
    fetched) while the aggregated subtask metrics keep the old tasks' values: one counter starts over at
    the restart's first sample, the other a fetch later."""
    book = WindowBook()
    kw = {"metrics_window_ms": 30 * S, "stabilization_ms": 20 * S}
    first = RUNNING + 5 * 60 * S
    for i in range(8):
        feed(book, first + i * 5 * S, counters=(100.0 * i, 50.0 * i), **kw)
    restart = first + 60 * S
    feed(book, restart + 2 * S, running_since_ms=restart, counters=(700.0, 0.0), **kw)
    st = feed(book, restart + 7 * S, running_since_ms=restart, counters=(40.0, 20.0), **kw)
    assert st.counters_restarted and not st.counters_fell
    st = feed(book, restart + 12 * S, running_since_ms=restart, counters=(80.0, 5.0), **kw)
    assert st.counters_fell and not st.counters_restarted  # that one had started over: a reset


def test_unknown_counters_never_count_as_falling() -> None:
    assert counters_fell((5.0, 7.0), (6.0, 7.0)) is False
    assert counters_fell((5.0, 7.0), (4.0, 7.0)) is True
    assert counters_fell((math.nan, 7.0), (0.0, 8.0)) is False
    assert counters_fell((5.0, 7.0), (math.nan, 8.0)) is False
    assert counters_fell((), (1.0,)) is False  # the first sample, or another topology


def test_the_busy_time_counter_may_fall_and_restarts_nothing() -> None:
    """Flink's accumulated busy time falls back when an idle period ends (idle is added at its end):
    not a reset. Only the record counters are held to never falling."""
    from autoscaler.evaluate.window.readings import COUNTERS

    assert COUNTERS == ("num_records_in", "num_records_out")


def test_a_counter_reset_reaches_the_evaluation_and_is_counted() -> None:
    """Fault matrix: the reset was only logged; an operator saw WindowNotFull and no metric saying why."""
    topology = make_topology({"src": 1, "w": 2}, [("src", "w", "HASH")])
    evaluator = PythonEvaluator()
    metrics = MetricsReporter()
    fell = []
    for i, count in enumerate((100.0, 200.0, 300.0, 5.0, 105.0)):
        vertices = {
            vid: VertexSample(num_records_in=count, num_records_out=count) for vid in topology.vertices
        }
        sample = make_sample(topology, ts_ms=RUNNING + 5 * 60 * S + i * 10 * S, vertices=vertices)
        (evaluation,) = evaluator.evaluate([sample], sample.ts_ms).values()
        told([JobStep(sample, notices=(JobEvaluated(evaluation),))], now_ms=sample.ts_ms, metrics=metrics)
        fell.append(evaluation.counters_fell)
    assert fell == [False, False, False, True, False]
    labels = {"cluster": sample.job.cluster, "job": sample.job.name}
    assert metrics.registry.get_sample_value("flink_autoscaler_metric_counter_resets_total", labels) == 1


def test_a_metric_that_came_back_must_span_half_the_window_before_it_is_judged() -> None:
    """Fault matrix: after all-NaN subtask metrics healed, the window was full by the clock at once, and
    a busy rate over the one second since, against a records rate over the whole window, sized Work
    1 -> 2 instead of 1 -> 3. A metric known now must have been known within the window's first half."""
    book = WindowBook()
    first = RUNNING + 5 * 60 * S
    kw = {"metrics_window_ms": 60 * S}
    unknown = [feed(book, first + i * 5 * S, known=0b01, **kw) for i in range(13)]  # 60 s: full by the clock
    assert unknown[-1].full and unknown[-1].not_ready is None  # what is unknown stays so: MetricsUnknown
    healed_at = first + 13 * 5 * S
    waiting = [feed(book, healed_at + i * 5 * S, known=0b11, **kw) for i in range(7)]  # 0 .. 30 s after
    assert all(s.full and s.metrics_returned for s in waiting[:-1])
    assert {s.not_ready for s in waiting[:-1]} == {Reason.WINDOW_NOT_FULL}
    assert "came back" in waiting[0].detail
    # 30 s after it came back it spans half of the 60 s window: judged again.
    assert waiting[-1].not_ready is None and waiting[-1].detail == ""


def test_a_hole_in_the_middle_of_the_window_delays_nothing() -> None:
    """A metric unknown for a while inside the window: its rate spans the good points around the hole."""
    book = WindowBook()
    first = RUNNING + 5 * 60 * S
    kw = {"metrics_window_ms": 60 * S}
    masks = [0b11] * 5 + [0b01] * 4 + [0b11] * 20
    statuses = [feed(book, first + i * 5 * S, known=m, **kw) for i, m in enumerate(masks)]
    assert not any(s.metrics_returned for s in statuses)
    assert all(s.not_ready is None for s in statuses[12:])


def test_a_healed_fault_keeps_the_evaluation_waiting_with_a_reason_in_words() -> None:
    """The evaluator passes the window's words on: an operator sees why a full window is not judged."""
    topology = make_topology({"src": 1, "w": 1}, [("src", "w", "HASH")])
    evaluator = PythonEvaluator()
    options = AutoscalerOptions(enabled=True, metrics_window=timedelta(seconds=60))
    first = RUNNING + 5 * 60 * S
    outcomes = []
    for i in range(20):
        t = i * 5.0
        healed = i >= 13
        busy = 800.0 * t if healed else math.nan
        vertices = {
            "src": VertexSample(num_records_in=1000 * t, num_records_out=1000 * t, busy_time_ms_per_s=100.0),
            "w": VertexSample(
                num_records_in=1000 * t,
                num_records_out=1000 * t,
                busy_time_ms_per_s=800.0 if healed else math.nan,
                accumulated_busy_time_ms=busy,
                accumulated_busy_time_agg_ms=busy,
            ),
        }
        sample = make_sample(
            topology, ts_ms=first + i * 5 * S, running_since_ms=RUNNING, options=options, vertices=vertices
        )
        (evaluation,) = evaluator.evaluate([sample], sample.ts_ms).values()
        outcomes.append((evaluation.not_ready, evaluation.not_ready_detail))
    assert outcomes[13][0] is Reason.WINDOW_NOT_FULL and "came back" in outcomes[13][1]
    assert outcomes[-1] == (None, "")
