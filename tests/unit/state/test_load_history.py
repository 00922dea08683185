"""A job's load history as stored: only what changed is written, what comes back is what was kept,
and what cannot be trusted is left out."""

from __future__ import annotations

import dataclasses
import json
import math
import struct

import pytest
from load_traces import BUCKET_MS, DAY, daily, feed, sample

from autoscaler.foresight.forecast import ForecastParams, Prediction
from autoscaler.foresight.history import LoadHistory
from autoscaler.foresight.scores import Scores
from autoscaler.state import HistoryChunk, MemoryStateStore
from autoscaler.state.load_history import (
    CHUNK_BUCKETS,
    decode_scores,
    encode_scores,
    history_from,
    history_write,
)

PARAMS = ForecastParams(bucket_ms=BUCKET_MS)


def stored_again(store: MemoryStateStore, key: str = "c/j") -> LoadHistory:
    return history_from(key, store.read_load_history([key]).get(key, []), PARAMS)


def test_a_history_written_tick_by_tick_reads_back_as_kept() -> None:
    """Written as the tick writes it (each tick against the previous), read back by a new daemon: the
    same buckets and the same record; only the open bucket and the latest forecast are not kept."""
    store, rates = MemoryStateStore(), sample(daily(), 3 * DAY + 40, noise=0.02, gaps=0.05)
    history, writes = LoadHistory.empty(PARAMS), []
    for i, rate in enumerate(rates):
        if math.isnan(rate):
            continue
        after = history.observe(i * BUCKET_MS, rate, PARAMS)
        write = history_write(history, after)
        if write is not None:
            store.write_load_history({"c/j": write})
            writes.append(write)
        history = after
    back = stored_again(store)
    assert back.series == history.series and back.scores == history.scores
    assert back.open is None and back.latest is None
    assert all(len(w.chunks) <= 2 for w in writes), "a closed bucket rewrites its chunk, not the history"
    assert len(store.read_load_history(["c/j"])["c/j"]) == math.ceil(len(history.series) / CHUNK_BUCKETS)


def test_a_tick_that_closes_no_bucket_writes_nothing() -> None:
    history, _ = feed(sample(daily(), 30))
    more = history.observe(29 * BUCKET_MS + 1000, 5.0, PARAMS)
    assert more.series == history.series and history_write(history, more) is None
    assert history_write(None, LoadHistory.empty(PARAMS)) is None


def test_the_history_is_bounded_and_restored_within_the_bound() -> None:
    params = ForecastParams(bucket_ms=BUCKET_MS, horizon_ms=600_000, periods_ms=(3_600_000,))
    history, _ = feed(sample(daily(), 3000), params)
    assert len(history.series) == params.capacity
    store = MemoryStateStore()
    write = history_write(None, history)
    assert write is not None and write.keep_from == history.series.first // CHUNK_BUCKETS
    store.write_load_history({"c/j": write})
    back = history_from("c/j", store.read_load_history(["c/j"])["c/j"], params)
    assert back.series == history.series
    assert history_from("c/j", store.read_load_history(["c/j"])["c/j"], PARAMS) == back, "capacity"


def test_rows_that_cannot_be_trusted_are_left_out() -> None:
    nan_rate = struct.pack("<3f", 1.0, math.inf, -2.0)
    rows = [
        HistoryChunk(0, BUCKET_MS, 5, nan_rate),
        HistoryChunk(1, BUCKET_MS, 100, b"\x00" * 8),  # bucket 100 is not in chunk 1
        HistoryChunk(2, 60_000, 2 * CHUNK_BUCKETS, b"\x00" * 8),  # other buckets
        HistoryChunk(3, BUCKET_MS, 3 * CHUNK_BUCKETS, struct.pack("<f", 7.0), scores="{not json"),
    ]
    back = history_from("c/j", rows, PARAMS)
    assert back.series.first == 5 and back.series.last == 3 * CHUNK_BUCKETS
    assert back.series.at(5) == 1.0 and math.isnan(back.series.at(6)) and math.isnan(back.series.at(7))
    assert back.series.at(3 * CHUNK_BUCKETS) == 7.0 and back.scores == Scores()
    assert history_from("c/j", rows[2:3], PARAMS) == LoadHistory.empty(PARAMS)


def test_scores_round_trip_as_strict_json() -> None:
    scores = Scores(errors={"level": (0.1, 0.0), "daily": (1.0,)}).with_forecasts(
        42, 12, {"trend": Prediction(1234.5, 3), "daily": Prediction(0.0, 1)}
    )
    text = encode_scores(scores)
    assert decode_scores(text) == scores and json.loads(text)["v"] == 1
    assert decode_scores(encode_scores(Scores())) == Scores()


@pytest.mark.parametrize(
    "text",
    [
        '{"v":2,"pending":[],"errors":{}}',
        '{"v":1,"pending":[[1,0,"trend",1.0]],"errors":{}}',
        '{"v":1,"pending":[[1,2,"trend",-1.0]],"errors":{}}',
        '{"v":1,"pending":[[1.5,2,"trend",1.0]],"errors":{}}',
        '{"v":1,"pending":[],"errors":{"trend":[1.5]}}',
        '{"v":1,"pending":[],"errors":{"trend":[true]}}',
        "[]",
    ],
)
def test_a_record_that_is_not_ours_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decode_scores(text)


def test_changed_buckets_rewrite_their_chunk_whole() -> None:
    history, _ = feed(sample(daily(), CHUNK_BUCKETS + 10))
    later, _ = feed(sample(daily(), CHUNK_BUCKETS + 12))
    write = history_write(history, later)
    assert write is not None and [c.chunk for c in write.chunks] == [1]
    (newest,) = write.chunks
    assert newest.first == CHUNK_BUCKETS and len(newest.rates) == 4 * (len(later.series) - CHUNK_BUCKETS)
    assert newest.scores is not None and decode_scores(newest.scores) == later.scores
    assert dataclasses.replace(newest, scores=None).scores is None
