"""The state layer as a tick uses it (``autoscaler.state.tick``): only changed states are written, a
lapsed cluster's jobs are not written at all, a job that left drops its window rows, and a stored window
is replayed once per job and process.
"""

from __future__ import annotations

from structlog.testing import capture_logs

from autoscaler.foresight.forecast import ForecastParams
from autoscaler.foresight.history import LoadHistory
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, MemoryStateStore
from autoscaler.state.tick import Loaded, TickStore
from autoscaler.testing import make_sample, make_topology

TOPOLOGY = make_topology({"src": 1, "sink": 1})
A = JobRef(cluster="a", job_id="a" * 32, name="job-a")
B = JobRef(cluster="b", job_id="b" * 32, name="job-b")


def sample(job: JobRef, ts_ms: int):
    return make_sample(TOPOLOGY, job=job, ts_ms=ts_ms)


class CountingStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.saved: list[set[str]] = []

    def save_many(self, states):
        self.saved.append(set(states))
        super().save_many(states)


async def test_only_states_the_tick_changed_are_written_and_windows_append_and_trim():
    store = CountingStore()
    tick = TickStore(store, MetricsReporter(), persist_window=True)
    old = JobState(last_rescale_ms=1)
    store.save_many({A.key: old, B.key: old})
    store.saved.clear()
    samples = [sample(A, 1_000), sample(B, 1_000)]
    loaded = await tick.load(samples)
    await tick.flush(samples, loaded, {A.key: old, B.key: JobState(last_rescale_ms=2)}, 1_000)
    assert store.saved == [{B.key}]  # A's state is what was loaded: not written again
    assert [r.ts_ms for r in store.load_window(A.key)] == [1_000, 1_000]  # one row per vertex


async def test_a_lapsed_clusters_jobs_are_not_written_and_a_gone_job_drops_its_window():
    store = CountingStore()
    tick = TickStore(store, MetricsReporter(), persist_window=True)
    first = [sample(A, 1_000), sample(B, 1_000)]
    await tick.flush(first, Loaded(), {}, 1_000)
    assert store.load_window(A.key) and store.load_window(B.key)
    states = {A.key: JobState(last_rescale_ms=5), B.key: JobState(last_rescale_ms=5)}
    await tick.flush([sample(B, 2_000)], Loaded(), states, 2_000, gone=[A.key], lapsed={B.key}.__contains__)
    assert store.saved == [{A.key}]  # b's lease lapsed during the tick: another daemon may own job-b
    assert store.load_window(A.key) == []  # job-a left its cluster
    assert {r.ts_ms for r in store.load_window(B.key)} == {1_000}  # nothing of b written at 2 s


async def test_a_stored_window_is_replayed_once_per_job_until_forgotten():
    store = MemoryStateStore()
    tick = TickStore(store, MetricsReporter(), persist_window=True)
    await tick.flush([sample(A, 1_000)], Loaded(), {}, 1_000)
    await tick.flush([sample(A, 2_000)], Loaded(), {}, 2_000)
    restarted = TickStore(store, MetricsReporter(), persist_window=True)  # a new process
    first = await restarted.load([sample(A, 3_000)])
    assert [s.ts_ms for s in first.restored[A.key]] == [1_000, 2_000]  # older than the sample only
    assert (await restarted.load([sample(A, 4_000)])).restored == {}
    restarted.forget([A.key])  # e.g. the lease was lost and taken back
    assert A.key in (await restarted.load([sample(A, 5_000)])).restored


async def test_a_stored_window_that_cannot_be_restored_says_why():
    """An operator whose restarted daemon started its windows afresh can read which rule dropped the
    stored ticks: none older than the job's sample, or another vertex set (the job graph changed)."""
    store = MemoryStateStore()
    await TickStore(store, MetricsReporter(), persist_window=True).flush(
        [sample(A, 1_000)], Loaded(), {}, 1_000
    )
    other_graph = make_sample(make_topology({"src": 1, "map": 2, "sink": 1}), job=A, ts_ms=2_000)
    with capture_logs() as logs:
        loaded = await TickStore(store, MetricsReporter(), persist_window=True).load([other_graph])
    assert loaded.restored == {}
    [why] = [e for e in logs if e["event"] == "window_not_restored"]
    assert (why["job"], why["stored_ticks"], why["not_older"], why["other_vertices"]) == (A.key, 1, 0, 1)


async def test_a_failed_write_is_counted_and_never_raises():
    class Broken(MemoryStateStore):
        def save_many(self, states):
            raise OSError("disk full")

    metrics = MetricsReporter()
    tick = TickStore(Broken(), metrics, persist_window=False)
    await tick.flush([sample(A, 1_000)], Loaded(), {A.key: JobState(last_rescale_ms=1)}, 1_000)
    labels = {"cluster": "a", "reason": str(Reason.STATE_STORE_ERROR)}
    assert metrics.registry.get_sample_value("flink_autoscaler_errors_total", labels) == 1


# ---------------------------------------------------------------------------------------- load history
class HistoryStore(MemoryStateStore):
    """Counts the load-history reads and writes; can be told to fail reading."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[list[str]] = []
        self.writes: list[set[str]] = []
        self.fail_reads = False

    def read_load_history(self, job_keys):
        keys = list(job_keys)
        self.reads.append(keys)
        if self.fail_reads:
            raise OSError("disk gone")
        return super().read_load_history(keys)

    def write_load_history(self, writes):
        self.writes.append(set(writes))
        super().write_load_history(writes)


FORECASTING = AutoscalerOptions(enabled=True, forecast_enabled=True)


def forecasting(job: JobRef, ts_ms: int):
    return make_sample(TOPOLOGY, job=job, ts_ms=ts_ms, options=FORECASTING)


async def test_load_histories_are_read_once_kept_and_written_as_buckets_close():
    store = HistoryStore()
    tick = TickStore(store, MetricsReporter(), persist_window=False)
    params = ForecastParams.of(FORECASTING, A.key)
    bucket, phase = params.bucket_ms, params.phase_ms
    for n, at in enumerate((0, bucket // 2, bucket, bucket + 1, 2 * bucket)):
        ts = phase + at
        samples = [forecasting(A, ts), sample(B, ts)]  # job-b does not forecast
        loaded = await tick.load(samples)
        assert set(loaded.histories) == {A.key}
        histories = {A.key: loaded.histories[A.key].observe(ts, 100.0 + n, params)}
        await tick.flush(samples, loaded, {}, ts, histories=histories)
    assert store.reads == [[A.key]], "read once, then kept"
    assert store.writes == [{A.key}, {A.key}], "written when a bucket closed: at 1 and 2 buckets"
    kept = store.read_load_history([A.key])[A.key]
    assert len(kept) == 1 and len(kept[0].rates) == 8  # buckets 0 and 1, one float each
    tick.forget([A.key])
    again = await tick.load([forecasting(A, phase + 2 * bucket)])
    assert store.reads[-1] == [A.key] and again.histories[A.key].series.rates(0, 2) == [100.5, 102.5]


async def test_a_failed_read_gives_no_history_and_is_tried_again():
    store = HistoryStore()
    store.fail_reads = True
    tick = TickStore(store, MetricsReporter(), persist_window=False)
    with capture_logs() as logs:
        assert (await tick.load([forecasting(A, 0)])).histories == {}
    assert [e["event"] for e in logs] == ["load_history_restore_failed"]
    store.fail_reads = False
    assert set((await tick.load([forecasting(A, 0)])).histories) == {A.key}
    assert len(store.reads) == 2


async def test_a_lapsed_jobs_history_is_not_written():
    store = HistoryStore()
    tick = TickStore(store, MetricsReporter(), persist_window=False)
    params = ForecastParams.of(FORECASTING, A.key)
    history = LoadHistory.empty(params).observe(0, 1.0, params).observe(2 * params.bucket_ms, 2.0, params)
    await tick.flush(
        [forecasting(A, 0)], Loaded(), {}, 0, histories={A.key: history}, lapsed={A.key}.__contains__
    )
    assert store.writes == []


# ------------------------------------------------------------------------------ completed from the archive
class Recorded:
    """An archive's offered rates for the store's tests: counts the reads, can fail as a bug would."""

    def __init__(self, rates=None, *, fail: bool = False) -> None:
        self.rates = rates or {}
        self.fail = fail
        self.asked: list[list[str]] = []
        self.since: list[int] = []

    def __call__(self, keys, since_ms):
        self.asked.append(sorted(keys))
        self.since.append(since_ms)
        if self.fail:
            raise RuntimeError("a bug")
        return {key: self.rates[key] for key in keys if key in self.rates}


async def test_a_short_history_is_completed_from_the_archive_once_and_then_stored_whole():
    store = HistoryStore()
    params = ForecastParams.of(FORECASTING, A.key)
    bucket, phase = params.bucket_ms, params.phase_ms
    recorded = Recorded({A.key: [(phase + i * bucket, 100.0 + i) for i in range(30)]})
    tick = TickStore(store, MetricsReporter(), persist_window=False, recorded=recorded)
    ts = phase + 30 * bucket + 5
    with capture_logs() as logs:
        loaded = await tick.load([forecasting(A, ts), sample(B, ts)])
    history = loaded.histories[A.key]
    assert history.series.rates(0, 29) == [100.0 + i for i in range(29)] and history.open is not None
    assert recorded.asked == [[A.key]], "only forecasting jobs, read with the store's rows"
    assert recorded.since == [ts - params.capacity * bucket], "back to the oldest bucket a forecast reads"
    (done,) = [e for e in logs if e["event"] == "load_history_from_archive"]
    assert done["buckets_added"] == 30 and done["not_a_rate"] == 0
    after = history.observe(ts, 500.0, params)  # the tick closes bucket 29
    await tick.flush([forecasting(A, ts)], loaded, {}, ts, histories={A.key: after})
    assert store.read_load_history([A.key])[A.key][0].first == 0, "all of it written, not just bucket 29"
    again = await tick.load([forecasting(A, ts + bucket)])
    assert recorded.asked == [[A.key]], "kept in memory: the archive is not read again"
    later = again.histories[A.key].observe(ts + bucket, 1.0, params)
    await tick.flush([forecasting(A, ts + bucket)], again, {}, ts + bucket, histories={A.key: later})
    assert store.writes[-1] == {A.key}
    tick.forget([A.key])
    restored = await tick.load([forecasting(A, ts + 2 * bucket)])
    assert restored.histories[A.key].series == later.series, "the state store keeps it as usual"
    assert len(recorded.asked) == 2, "read again with the store's rows, and nothing older is found"


async def test_an_archive_that_fails_leaves_the_stores_history():
    store = HistoryStore()
    recorded = Recorded(fail=True)
    tick = TickStore(store, MetricsReporter(), persist_window=False, recorded=recorded)
    with capture_logs() as logs:
        loaded = await tick.load([forecasting(A, 0)])
    assert len(loaded.histories[A.key].series) == 0 and not loaded.histories[A.key].open
    assert [e["event"] for e in logs] == ["load_history_archive_failed"]


async def test_a_fleet_is_completed_a_few_jobs_a_tick_and_live_buckets_are_kept():
    """Twenty forecasting jobs start at once: the archive is asked for eight a tick, so no tick reads a
    fleet's archive; a job completed after live ticks keeps the buckets they gave and its open one."""
    store = HistoryStore()
    jobs = [JobRef("a", f"{n:032d}", f"job-{n:02d}") for n in range(20)]
    bucket = ForecastParams.of(FORECASTING).bucket_ms
    start = 100 * bucket  # the archive recorded 50 rec/s over the 40 buckets before
    recorded = Recorded({j.key: [(start - i * bucket, 50.0) for i in range(1, 41)] for j in jobs})
    tick = TickStore(store, MetricsReporter(), persist_window=False, recorded=recorded)
    kept = {}
    for n in range(3):
        ts = start + n * bucket
        samples = [forecasting(j, ts) for j in jobs]
        loaded = await tick.load(samples)
        kept = {
            k: h.observe(ts, 100.0, ForecastParams.of(FORECASTING, k)) for k, h in loaded.histories.items()
        }
        await tick.flush(samples, loaded, {}, ts, histories=kept)
    assert [len(a) for a in recorded.asked] == [8, 8, 4]
    assert sorted(k for a in recorded.asked for k in a) == sorted(j.key for j in jobs), "each job once"
    late = recorded.asked[-1][0]  # completed at the third tick, after two live samples
    history = kept[late]
    assert history.open is not None and history.open.total == 100.0, "the open bucket is the live one"
    series = history.series
    assert series.rates(series.first, series.first + 3) == [50.0] * 3, "the archive's buckets before"
    assert series.at(series.last) == 100.0, "the bucket live ticks closed: theirs, not the archive's"
    (row,) = store.read_load_history([late])[late]
    assert row.first == series.first, "written whole"


async def test_an_archive_of_unknown_rates_is_said_and_leaves_the_stores_history():
    store = HistoryStore()
    params = ForecastParams.of(FORECASTING, A.key)
    nan = float("nan")
    recorded = Recorded({A.key: [(params.phase_ms + i * params.bucket_ms, nan) for i in range(5)]})
    tick = TickStore(store, MetricsReporter(), persist_window=False, recorded=recorded)
    with capture_logs() as logs:
        loaded = await tick.load([forecasting(A, params.phase_ms + 10 * params.bucket_ms)])
    assert len(loaded.histories[A.key].series) == 0
    (said,) = [e for e in logs if e["event"] == "load_history_from_archive"]
    assert said["not_a_rate"] == 5 and said["buckets_added"] == 0 and "not a rate" not in said["detail"]
    assert "none of the archive's offered rates" in said["detail"]
