"""The window's integer key (evaluate.spark.series): rows laid out by series, named in the driver."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from autoscaler.evaluate.spark.series import (
    MAX_VERTICES,
    VERTEX_BITS,
    SeriesNames,
    VertexOrders,
    rows_frame,
    vertex_order,
    window_rows,
)
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.model import JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AutoscalerOptions


def _sample(key: str, ts_ms: int, vertex_ids: list[str]) -> JobSample:
    topology = JobTopology.build([VertexInfo(v, v, 1, 128) for v in vertex_ids], [])
    vertices = {
        v: VertexSample(busy_time_ms_per_s=float(k), num_records_in=ts_ms) for k, v in enumerate(vertex_ids)
    }
    target = JobTarget(JobRef("c", key, key), AutoscalerOptions())
    return JobSample(target, ts_ms, 0, topology, vertices)


def test_window_rows_key_each_vertex_by_epoch_and_sorted_place() -> None:
    """A sample's rows follow its window's vertex order, whatever order its topology lists them in."""
    a, b = _sample("a", 10, ["z", "m", "b"]), _sample("b", 20, ["q"])
    orders = VertexOrders()
    table = window_rows(
        [(7, a, orders.of(7, a.topology.vertices)), (9, b, orders.of(9, b.topology.vertices))]
    )
    assert table["series"].to_pylist() == [
        7 << VERTEX_BITS,
        (7 << VERTEX_BITS) | 1,
        (7 << VERTEX_BITS) | 2,
        9 << VERTEX_BITS,
    ]
    assert table["ts_ms"].to_pylist() == [10, 10, 10, 20]
    assert table["busy"].to_pylist() == [2.0, 1.0, 0.0, 0.0]  # b, m, z: sorted
    assert orders.of(7, ["whatever"]) == ("b", "m", "z")  # sorted once per epoch


def test_names_map_series_back_and_drop_unknown_ones() -> None:
    names = SeriesNames({3: ("job-3", ("v1", "v2")), 1: ("job-1", ("w",))})
    series = [
        (3 << VERTEX_BITS) | 1,
        1 << VERTEX_BITS,
        (3 << VERTEX_BITS) | 5,
        2 << VERTEX_BITS,
        3 << VERTEX_BITS,
    ]
    table = pa.table(
        {"series": pa.array(series, pa.int64()), "samples": pa.array([1, 2, 3, 4, 5], pa.int64())}
    )
    named = names.name(table)
    assert named.column_names == ["job_key", "vertex_id", "samples"]
    assert named.to_pylist() == [
        {"job_key": "job-3", "vertex_id": "v2", "samples": 1},
        {"job_key": "job-1", "vertex_id": "w", "samples": 2},
        {"job_key": "job-3", "vertex_id": "v1", "samples": 5},
    ]
    assert SeriesNames({}).name(table).num_rows == 0


def test_rows_frame_gives_each_job_and_epoch_a_slot() -> None:
    """Tests and the benchmark build windows row by row: two jobs at epoch 0 must not share a series."""
    rows = [
        ("x", 0, "v", 1, VertexSample()),
        ("y", 0, "v", 1, VertexSample()),
        ("x", 0, "a", 2, VertexSample()),
    ]
    table, names = rows_frame(rows)
    assert len(set(table["series"].to_pylist())) == 3
    named = names.name(table)
    assert list(zip(named["job_key"].to_pylist(), named["vertex_id"].to_pylist(), strict=True)) == [
        ("x", "v"),
        ("y", "v"),
        ("x", "a"),
    ]


def test_names_follow_the_book_and_forget_epochs_that_left() -> None:
    book, orders = WindowBook(), VertexOrders()
    sample = _sample("a", 10_000, ["v2", "v1"])
    status = book.observe_sample(sample, 10_000)
    names = orders.names({sample.job.key: (status.epoch, 0)}, book)
    table = pa.table({"series": pa.array([(status.epoch << VERTEX_BITS) | 1], pa.int64())})
    assert names.name(table)["vertex_id"].to_pylist() == ["v2"]
    orders.names({}, book)
    assert orders.of(status.epoch, ["other"]) == ("other",)  # forgotten, sorted afresh


def test_the_same_window_gets_the_same_names_until_an_epoch_changes_or_the_orders_are_cleared() -> None:
    book, orders = WindowBook(), VertexOrders()
    first = book.observe_sample(_sample("a", 10_000, ["v1", "v2"]), 10_000)
    keep = {"c/a": (first.epoch, 0)}
    names = orders.names(keep, book)
    assert orders.names(dict(keep), book) is names  # not rebuilt tick after tick
    renamed = book.observe_sample(_sample("a", 20_000, ["v1", "v3"]), 20_000)  # a new graph: a new epoch
    assert renamed.epoch != first.epoch
    again = orders.names({"c/a": (renamed.epoch, 0)}, book)
    table = pa.table({"series": pa.array([(renamed.epoch << VERTEX_BITS) | 1], pa.int64())})
    assert again is not names and again.name(table)["vertex_id"].to_pylist() == ["v3"]
    orders.clear()  # a rolled-back tick: the epochs may be handed out again
    assert orders.names({"c/a": (renamed.epoch, 0)}, book) is not again


def test_a_graph_beyond_the_series_width_is_refused() -> None:
    assert vertex_order(["b", "a"]) == ("a", "b")
    with pytest.raises(ValueError, match="at most"):
        vertex_order(str(k) for k in range(MAX_VERTICES + 1))
    assert math.log2(MAX_VERTICES) == VERTEX_BITS
