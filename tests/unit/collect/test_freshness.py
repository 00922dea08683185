"""Stale readings (``autoscaler/collect/freshness.py``): a tick that finds Flink's lazy metric fetcher
serving its last fetch again must not stretch a rate span; an idle job still reads idle; a fetcher that
stops delivering ends in ``StaleMetrics``; the loop-vs-fetch-interval warning.

The fake lazy fetcher (``lazy_flink.LazyFlink``) answers like Flink's on a fake clock: the same counters
until a query comes more than the fetch interval after the last fetch started.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import httpx
import pytest
import respx
from collect_flink import BASE, JID, SRC, RecordingSleep
from evaluator_parity import assert_same
from lazy_flink import NOW_MS, RUNNING_MS, LazyFlink

from autoscaler.clock import FakeClock
from autoscaler.collect import (
    FetchBook,
    FetchCheck,
    FetchTiming,
    FetchWait,
    MetricNameCache,
    await_fetch,
    collect,
)
from autoscaler.collect.freshness import FETCH_INTERVAL_FACTOR, fetch_interval_warning
from autoscaler.evaluate import SparkEvaluator
from autoscaler.evaluate.aggregates import aggregate_window
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.models import JobDetails
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef, JobSample, JobTarget, TaskManagerSample, Unavailable
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import MemoryStateStore
from autoscaler.state.tick import Loaded, TickStore

pytest_plugins = ("collect_flink",)  # its client fixture

TICK_S = 5
RATE = 2000.0
# 7 ticks: with strict alternation an even window's two ends would be equally stale and cancel out.
# The load-change window is off: these tests isolate what stale readings do to a rate span (with
# them let in, a stale tick's empty interval would also read as a load change and restart the window).
OPTIONS = AutoscalerOptions(
    enabled=True,
    metrics_window=timedelta(seconds=35),
    stabilization_interval=timedelta(0),
    load_change_threshold=0.0,
)
TARGET = JobTarget(JobRef("prod", JID, "autoscaler-load-job"), OPTIONS)
TIMING = FetchTiming(fetch_interval_ms=TICK_S * 1000, loop_interval_ms=TICK_S * 1000)  # Flink's == the loop's


@dataclass(frozen=True, slots=True)
class Tick:
    now_ms: int
    result: JobSample | Unavailable

    @property
    def sample(self) -> JobSample:
        assert isinstance(self.result, JobSample), self.result
        return self.result


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def flink(clock: FakeClock) -> Iterator[LazyFlink]:
    fake = LazyFlink(clock, interval_ms=TICK_S * 1000, rate=RATE)
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.route().mock(side_effect=fake.handle)
        clock.advance(30)  # nobody asked for 30 s: the first tick starts a fetch and sees it land
        yield fake


async def ticks(
    client: FlinkClient, clock: FakeClock, n: int, book: FetchBook | None, timing: FetchTiming = TIMING
) -> list[Tick]:
    """``n`` ticks of the collect stage, one every ``TICK_S`` (the first one now); no wall-clock wait."""
    cache, out = MetricNameCache(), []
    for i in range(n):
        if i:
            clock.advance(TICK_S)
        fetches = FetchCheck(book, timing) if book is not None else None
        await probe(client, book)
        result = await collect(
            client,
            TARGET,
            clock.now_ms(),
            cache,
            TaskManagerSample(),
            fetches=fetches,
            sleep=RecordingSleep(),
        )
        out.append(Tick(clock.now_ms(), result))
    return out


async def probe(client: FlinkClient, book: FetchBook | None) -> None:
    """What the cluster does once before its jobs' reads: wait for the tick's fetch (no wall time here)."""
    last = book.last_reading(TARGET.job.key) if book is not None else None
    await await_fetch(client, JID, last, FetchWait(0.0, RecordingSleep()))


def source_rates(run: list[Tick]) -> list[float]:
    """The source's records-in rate over the window after each tick, as the evaluators reduce it: the
    window bookkeeping decides which samples count, ``aggregate_window`` (the oracle) reduces them."""
    book, kept, rates = WindowBook(), [], []
    for tick in run:
        status = book.observe_sample(tick.sample, tick.now_ms)
        kept = [] if status.reset else kept
        kept = [s for s in [*kept, *([tick.sample] if status.kept else [])] if s.ts_ms >= status.start_ms]
        rates.append(aggregate_window([(s.ts_ms, s.vertices[SRC]) for s in kept]).records_in_rate)
    return rates


# --------------------------------------------------------------------------------------- no stale span
async def test_a_tick_without_a_new_fetch_adds_no_point_and_the_rate_stays_right(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """Fetch interval == loop interval: Flink refreshes only when the last fetch is MORE than an interval
    old, so every other tick reads the last fetch again. Those samples keep their first read's time."""
    run = await ticks(client, clock, 16, FetchBook())
    samples = [t.sample for t in run]
    assert [s.stale_ticks for s in samples] == [0, 1] * 8
    for fresh, stale, tick in zip(samples[::2], samples[1::2], run[1::2], strict=True):
        assert stale.ts_ms == fresh.ts_ms < tick.now_ms  # carried at its fetch time: a duplicate
        assert stale.vertices == fresh.vertices
    rates = source_rates(run)
    assert math.isnan(rates[0]) and math.isnan(rates[1])  # one point (the second tick's is the same)
    assert rates[2:] == pytest.approx([RATE] * 14, rel=1e-12)


async def test_without_the_check_the_same_ticks_stretch_the_span(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The failure the check prevents, reproduced by the fake: a stale reading at the new tick's time
    puts a tick without records at the end of the span (30 s of records over 35 s), or as its first
    point a tick too many (40 s of records over 35 s)."""
    rates = source_rates(await ticks(client, clock, 16, None))
    errors = [r / RATE - 1 for r in rates[7:]]  # the window full
    assert min(errors) == pytest.approx(30 / 35 - 1)
    assert max(errors) == pytest.approx(40 / 35 - 1)


@pytest.mark.spark
async def test_spark_and_the_oracle_agree_tick_by_tick_on_windows_with_stale_samples(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock, spark: Any
) -> None:
    """Stale ticks append nothing and leave the window as it was (it ends at its newest sample): Spark's
    frame and the oracle's list agree on every tick, and the source's rate is the offered load."""
    run = await ticks(client, clock, 18, FetchBook())
    ours, oracle = SparkEvaluator(spark), PythonEvaluator()
    sizes, key = [], TARGET.job.key
    for tick in run:
        got, want = ours.evaluate([tick.sample], tick.now_ms), oracle.evaluate([tick.sample], tick.now_ms)
        assert_same(got, want)
        assert ours.window_size() == oracle.window_size()
        sizes.append(ours.window_size() // 3)  # 3 vertices per sample
        if got[key].window_full:
            assert got[key].vertices[SRC].target_data_rate == pytest.approx(RATE, rel=1e-12)
    # New fetches only, a point every 10 s; a 35 s window holds 5 of them (40 s): it begins at the last
    # point at or before its start, so its rate spans at least the window (window/job_window.py).
    assert sizes == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]


async def test_the_stored_window_holds_one_row_per_fetch_so_a_restart_replays_no_stale_point(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The state store keeps one row per (vertex, time): a stale sample, at its first read's time, is
    already there, so the window a restarted daemon replays is the live one."""
    run = await ticks(client, clock, 8, FetchBook())
    store = TickStore(MemoryStateStore(), MetricsReporter(), persist_window=True)
    for tick in run:
        await store.flush([tick.sample], Loaded(), {}, tick.now_ms)
    later = replace(run[-1].sample, ts_ms=run[-1].now_ms + 1)
    stored = store.load_windows([later])[TARGET.job.key]
    fresh = [t.sample for t in run if t.sample.stale_ticks == 0]
    assert [s.ts_ms for s in stored] == [s.ts_ms for s in fresh]
    assert [s.vertices for s in stored] == [s.vertices for s in fresh]


async def test_telling_a_stale_reading_costs_no_request(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The check reads only the /jobs/:id the tick reads anyway: after the cluster's one wait for the
    fetch (a probe read of /jobs/:id), each tick reads /jobs/:id and each vertex once, stale or not."""
    cache, book, per_tick = MetricNameCache(), FetchBook(), []
    for _ in range(4):
        flink.queried.clear()
        reads = flink.details_reads
        await probe(client, book)
        sample = await collect(
            client,
            TARGET,
            clock.now_ms(),
            cache,
            TaskManagerSample(),
            fetches=FetchCheck(book, TIMING),
            sleep=RecordingSleep(),
        )
        assert isinstance(sample, JobSample)
        per_tick.append((sample.stale_ticks, len(flink.queried), flink.details_reads - reads))
        clock.advance(TICK_S)
    assert per_tick == [(0, 3, 2), (1, 3, 2)] * 2  # (stale ticks, vertex queries, /jobs/:id reads)


# --------------------------------------------------------------------------------------- fetch-time stamps
async def poked_ticks(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock, n: int, book: FetchBook | None, poke_s: int
) -> list[Tick]:
    """``ticks`` with another client (a dashboard) querying Flink ``poke_s`` after each tick."""
    run: list[Tick] = []
    for _ in range(n):
        run += await ticks(client, clock, 1, book)
        clock.advance(poke_s)
        flink.handle(httpx.Request("GET", f"{BASE}/jobs/{JID}"))
        clock.advance(TICK_S - poke_s)
    return run


async def test_a_fetch_another_client_started_is_stamped_with_its_own_time(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """A dashboard's query 2 s after each tick starts some of Flink's fetches: the ticks then read a
    fetch 3 s old as new. Stamped by the task clock each sample carries its fetch's time, so every
    window's rate is exact; stamped with the ticks' times, the spans alternate 10 s and 5 s for 7 s and
    8 s of records."""
    fetched_before = len(flink.fetches)
    run = await poked_ticks(flink, client, clock, 16, FetchBook(), poke_s=2)
    fetch_times = set(flink.fetches[fetched_before:])
    new = [t for t in run if t.sample.stale_ticks == 0]
    assert len(new) >= 10 and any(t.sample.ts_ms < t.now_ms for t in new)
    assert {t.sample.ts_ms for t in new} <= fetch_times  # each stamped with the time its fetch started
    assert source_rates(run)[2:] == pytest.approx([RATE] * 14, rel=1e-9)


async def test_stamped_with_the_ticks_the_dashboards_fetches_bias_the_rate(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The same run, each new reading stamped with its tick's time (no task clock in /jobs/:id)."""
    flink.clocked = False
    run = await poked_ticks(flink, client, clock, 16, FetchBook(), poke_s=2)
    errors = [abs(r / RATE - 1) for r in source_rates(run)[7:]]
    assert max(errors) > 0.05


async def test_an_anchor_read_from_an_old_fetch_moves_to_the_first_tick_that_fetched_itself(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The book's first reading of the job may be a fetch another client started 3 s earlier: anchored
    at the tick, later stamps run 3 s late until one would come after its own tick. That one is the
    tick's own fetch; the anchor moves there and the stamps are the fetch times from then on."""
    flink.handle(httpx.Request("GET", f"{BASE}/jobs/{JID}"))  # a fetch now ...
    clock.advance(3)  # ... read as the first reading 3 s later
    fetched_before = len(flink.fetches)
    run = await poked_ticks(flink, client, clock, 12, FetchBook(), poke_s=2)
    assert all(t.sample.ts_ms <= t.now_ms for t in run)
    fetch_times = set(flink.fetches[fetched_before - 1 :])
    late = [t.sample.ts_ms for t in run if t.sample.stale_ticks == 0 and t.sample.ts_ms not in fetch_times]
    assert run[0].sample.ts_ms == run[0].now_ms  # the anchor: the first tick's time
    assert late == [run[0].now_ms]  # only the anchor's own stamp is off (by 3 s), none after it


async def test_the_window_restarts_after_a_late_anchor_so_no_rate_spans_its_stamp(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """The e2e suite's failure (2026-11-27): the first reading of a run was an older fetch, anchored
    at its tick 1 s late; when the anchor moved, every window spanning that reading read the source's
    rate 3 % high until it aged out. The move restarts the window: every rate is exact, a tick later."""
    flink.handle(httpx.Request("GET", f"{BASE}/jobs/{JID}"))  # a fetch now ...
    clock.advance(3)  # ... read as the first reading 3 s later
    run = await poked_ticks(flink, client, clock, 12, FetchBook(), poke_s=2)
    moves = [t.sample.restamped_ms for t in run]
    assert moves[0] == 0 and sum(m > 0 for m in moves) == 1 and max(moves) == 3_000
    rates = source_rates(run)
    moved_at = next(i for i, m in enumerate(moves) if m)
    assert rates[moved_at + 2 :] == pytest.approx([RATE] * (len(run) - moved_at - 2), rel=1e-9)
    # Without the restart, the window spanning the late stamp read 3 s more records than its span holds.
    unmoved = [replace(t, result=replace(t.sample, restamped_ms=0)) for t in run]
    assert max(abs(r / RATE - 1) for r in source_rates(unmoved)[moved_at:] if not math.isnan(r)) > 0.05


def test_a_clock_that_goes_back_or_is_missing_stamps_with_the_tick() -> None:
    book = FetchBook()
    assert book.judge("k", _details(100, busy=1_000.0), 10_000, TIMING).ts_ms == 10_000
    # The clock moved 4 s in a 5 s tick: the fetch landed 1 s before the tick.
    assert book.judge("k", _details(200, busy=5_000.0), 15_000, TIMING).ts_ms == 14_000
    # Backwards (a subtask restarted, its time counters reset): the tick's time, and a new anchor.
    assert book.judge("k", _details(300, busy=2_000.0), 20_000, TIMING).ts_ms == 20_000
    assert book.judge("k", _details(400, busy=6_500.0), 25_000, TIMING).ts_ms == 24_500
    # Further than a fetch can be behind (the clock barely moved): the tick's time.
    assert book.judge("k", _details(500, busy=6_600.0), 60_000, TIMING).ts_ms == 60_000
    # No busy time on any vertex (a legacy source): no clock, the tick's time.
    assert book.judge("k", _details(600, busy=math.nan), 65_000, TIMING).ts_ms == 65_000
    assert book.judge("k", _details(700, busy=math.nan), 70_000, TIMING).ts_ms == 70_000


def test_fetches_that_land_later_in_each_tick_keep_one_stamping() -> None:
    """The lab's 5 s loop on Flink's 5 s fetch interval (issue 36): each tick's fetch starts a poll later
    than the last one's (Flink starts one only for a query more than an interval after the last), so it
    lands 100, 200, ... 1,500 ms after its tick began, each read as it lands. Every stamp is the fetch's
    time less the first tick's offset: exact spacing, no move, although each lies after its tick's start.
    Only a stamp after the reading was in hand (an anchor from an older fetch) moves them."""
    book, busy, moves = FetchBook(), 1_000.0, []
    first = book.judge("k", _details(0, busy=busy), 10_000, TIMING, read_ms=10_050)
    assert (first.ts_ms, first.moved_ms) == (10_000, 0)
    for k in range(1, 16):
        tick_ms, landed_ms = 10_000 + 5_000 * k, 10_000 + 5_000 * k + 100 * k
        fresh = book.judge(
            "k", _details(k, busy=busy + landed_ms - 10_000), tick_ms, TIMING, read_ms=landed_ms
        )
        assert fresh.ts_ms == landed_ms and fresh.ts_ms > tick_ms
        moves.append(fresh.moved_ms)
    assert moves == [0] * 15
    # A fetch newer than the anchor's offset allows (the anchor read an older fetch): moved back.
    late = book.judge("k", _details(99, busy=busy + 90_000), 90_000, TIMING, read_ms=90_100)
    assert (late.ts_ms, late.moved_ms) == (90_000, 10_000)


def test_a_run_whose_times_are_not_fetched_yet_has_no_clock_to_anchor_on() -> None:
    """Right after a restart ``/jobs/:id`` shows the new tasks' times as 0 until Flink's next fetch: no
    clock, the tick's time, and the next reading (8 s of task time later) anchors without a move."""
    book = FetchBook()
    zero = _details(0, busy=0.0)
    zero.vertices[0].metrics["accumulated-idle-time"] = 0
    assert (book.judge("k", zero, 10_000, TIMING, read_ms=10_100).ts_ms, 0) == (10_000, 0)
    fresh = book.judge("k", _details(10, busy=7_995.0), 15_000, TIMING, read_ms=15_200)
    assert (fresh.ts_ms, fresh.moved_ms) == (15_000, 0)


# --------------------------------------------------------------------------------------- idle
async def test_an_idle_job_reads_idle_not_stale(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    """Its records stop, its time counters do not: every new fetch is a new reading, and the rate falls
    to 0 once the window holds only idle points. Never StaleMetrics."""
    busy = await ticks(client, clock, 8, FetchBook())
    clock.advance(TICK_S)
    flink.set_rate(0.0)
    book = FetchBook()
    run = [*busy, *await ticks(client, clock, 16, book)]
    assert all(isinstance(t.result, JobSample) for t in run)
    idle = [t.sample for t in run[8:]]
    assert {s.stale_ticks for s in idle} == {0, 1}  # a new fetch every other tick, as while busy
    records = {s.vertices[SRC].num_records_in for s in idle[2:]}
    assert len(records) == 1  # the records stopped ...
    assert len({s.ts_ms for s in idle}) == 8  # ... yet every fetch is a new point
    rates = source_rates(run[8:])
    assert rates[-1] == 0.0


async def test_clockless_counters_that_stop_read_idle_after_the_fetch_bound(
    client: FlinkClient, clock: FakeClock
) -> None:
    """With no time counters in /jobs/:id, unchanged counters could be a stale fetch or a stopped job.
    Past the bound (Flink's interval + the loop's) a fetch would have landed: the job is idle, each
    reading a point at its tick's time, the rate 0: not stale forever."""
    fake = LazyFlink(clock, interval_ms=TICK_S * 1000, rate=0.0, clocked=False)
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.route().mock(side_effect=fake.handle)
        clock.advance(30)
        run = await ticks(client, clock, 8, FetchBook())
    samples = [t.sample for t in run]
    assert [s.stale_ticks for s in samples] == [0, 1, 2, 0, 0, 0, 0, 0]
    assert [s.ts_ms for s in samples[3:]] == [t.now_ms for t in run[3:]]
    assert source_rates(run)[-1] == 0.0


# --------------------------------------------------------------------------------------- stopped fetcher
async def test_a_fetcher_that_stops_delivering_ends_in_stale_metrics_then_recovers(
    flink: LazyFlink, client: FlinkClient, clock: FakeClock
) -> None:
    book = FetchBook()
    await ticks(client, clock, 2, book)  # fresh, stale
    flink.delivering = False
    clock.advance(TICK_S)
    run = await ticks(client, clock, 2, book)
    # Read at +10 s: one stale tick more (a fetch could still be due); at +15 s it is past the bound.
    assert run[0].sample.stale_ticks == 2
    expired = run[1].result
    assert isinstance(expired, Unavailable) and expired.reason is Reason.STALE_METRICS
    assert "same metrics for 15 s (3 ticks in a row)" in expired.detail
    assert "metrics.fetcher.update-interval is 5 s" in expired.detail
    flink.delivering = True
    clock.advance(TICK_S)
    (back,) = await ticks(client, clock, 1, book)
    assert back.sample.stale_ticks == 0 and back.sample.ts_ms == back.now_ms


# --------------------------------------------------------------------------------------- the book alone
def _details(write_records: int, *, running_ms: int = RUNNING_MS, busy: float = 10.0) -> JobDetails:
    return JobDetails.model_validate(
        {
            "jid": JID,
            "name": "j",
            "state": "RUNNING",
            "timestamps": {"RUNNING": running_ms},
            "vertices": [
                {
                    "id": SRC,
                    "name": "Source",
                    "parallelism": 1,
                    "maxParallelism": 128,
                    "status": "RUNNING",
                    "metrics": {
                        "write-records": write_records,
                        "accumulated-busy-time": busy,
                        "accumulated-idle-time": 5,
                    },
                }
            ],
            "plan": {"nodes": [{"id": SRC, "parallelism": 1}]},
        }
    )


def test_a_restart_or_a_new_job_key_starts_a_new_reading() -> None:
    book = FetchBook()
    assert book.judge("k", _details(100), 1_000, TIMING).stale_ticks == 0
    assert book.judge("k", _details(100), 6_000, TIMING).stale_ticks == 1
    # Same counters after a restart (RUNNING moved): a new job run, not a stale one.
    assert book.judge("k", _details(100, running_ms=RUNNING_MS + 1), 11_000, TIMING).stale_ticks == 0
    assert book.judge("other", _details(100), 11_000, TIMING).stale_ticks == 0
    book.forget(["k"])
    assert "k" not in book
    assert book.judge("k", _details(100), 16_000, TIMING).ts_ms == 16_000


def test_nan_counters_compare_equal_and_a_second_read_in_one_tick_counts_nothing() -> None:
    book = FetchBook()
    book.judge("k", _details(100, busy=math.nan), 1_000, TIMING)
    again = book.judge("k", _details(100, busy=math.nan), 1_000, TIMING)  # e.g. a retry at the same time
    assert (again.ts_ms, again.stale_ticks) == (1_000, 0)
    later = book.judge("k", _details(100, busy=math.nan), 6_000, TIMING)
    assert (later.ts_ms, later.stale_ticks) == (1_000, 1)


def test_the_stale_bound_is_the_fetch_interval_the_loop_and_the_wait() -> None:
    assert (
        FetchTiming(fetch_interval_ms=10_000, loop_interval_ms=5_000, wait_ms=1_500).stale_limit_ms == 16_500
    )


# --------------------------------------------------------------------------------------- the warning
@pytest.mark.parametrize(
    ("loop_ms", "fetch_ms", "warns"),
    [
        (5_000, 5_000, True),  # the lab: every other tick stale
        (9_999, 5_000, True),
        (10_000, 5_000, False),  # 2 x: comfortably above
        (60_000, 10_000, False),
        (15_000, 10_000, True),  # Flink's default fetch interval with a 15 s loop
        (5_000, 0, False),  # a fetcher that reads live values (the simulator without a lazy fetcher)
    ],
)
def test_the_loop_should_be_at_least_twice_the_fetch_interval(
    loop_ms: int, fetch_ms: int, warns: bool
) -> None:
    warning = fetch_interval_warning(loop_ms, fetch_ms)
    assert (warning is not None) is warns
    if warning:
        assert f"at least {FETCH_INTERVAL_FACTOR * fetch_ms / 1000:g} s" in warning
        assert "metrics.fetcher.update-interval" in warning


def test_the_warning_says_when_the_fetch_interval_is_flinks_default() -> None:
    warning = fetch_interval_warning(5_000, 10_000, assumed=True)
    assert warning is not None and "Flink's default; /jobmanager/config did not say" in warning
