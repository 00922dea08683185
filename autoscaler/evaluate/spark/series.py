"""The window's rows as Spark holds them: keyed by one integer per vertex series, named in the driver.

A window row used to carry its job key, epoch and vertex id as Spark columns, two of them strings of
some 40 and 32 characters, and the tick's aggregation grouped by both strings. Now a row carries one
``series`` (a bigint) instead: ``slot << VERTEX_BITS | vertex``, where ``slot`` is the job window's
epoch (``autoscaler.evaluate.window.job_window``: one counter per book, never reused, so the epoch alone tells
the job and the run) and ``vertex`` is the vertex's place in its window's sorted vertex ids (an epoch's
vertex set never changes: a different one starts a new epoch). Spark groups by one long instead of two
strings, and its rows are half as wide. On ``bench/bench_evaluator.py``'s fleet of 10,000 jobs x 10
vertices (a 120 s window, 1.3 million rows, 2 cores) the JVM's CPU per tick went from 2.35 s to 2.07 s
and the tick from 2.90 s to 2.73 s (docs/performance.md, "Evaluator"); at 1,000 jobs, where Spark's cost
per query dominates, nothing changed.

The driver knows which job and vertex each series is (:class:`SeriesNames`) and names the aggregation's
rows after collecting them (:meth:`SeriesNames.name`): one ``take`` per column, no Python per row.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from autoscaler.model import JobSample, VertexId, VertexSample

if TYPE_CHECKING:
    from autoscaler.evaluate.window.book import WindowBook

__all__ = [
    "MAX_VERTICES",
    "ROW_DDL",
    "SAMPLE_COLUMNS",
    "VERTEX_BITS",
    "SeriesNames",
    "VertexOrders",
    "rows_frame",
    "vertex_order",
    "window_rows",
]

VERTEX_BITS = 20  # a job's vertices per series slot: a million, far beyond any Flink job graph
MAX_VERTICES = 1 << VERTEX_BITS

# VertexSample field -> column name in the window frame.
SAMPLE_COLUMNS: dict[str, str] = {
    "busy_time_ms_per_s": "busy",
    "backpressured_ms_per_s": "backpressure",
    "num_records_in": "records_in",
    "num_records_out": "records_out",
    "accumulated_busy_time_ms": "acc_busy",
    "num_records_in_per_s": "records_in_per_s",
    "pending_records": "pending",
    "observed_tpr": "observed_tpr",
    "accumulated_busy_time_agg_ms": "acc_busy_agg",
}
ROW_DDL = "series bigint, ts_ms bigint, " + ", ".join(f"{c} double" for c in SAMPLE_COLUMNS.values())

_SAMPLE_VALUES = attrgetter(*SAMPLE_COLUMNS)


def vertex_order(vertex_ids: Iterable[VertexId]) -> tuple[VertexId, ...]:
    """A window's vertices in series order: the same for the same set, whatever order it came in."""
    ordered = tuple(sorted(vertex_ids))
    if len(ordered) > MAX_VERTICES:
        raise ValueError(f"a job of {len(ordered)} vertices: at most {MAX_VERTICES} are supported")
    return ordered


class SeriesNames:
    """Which job and vertex each series of the window is: ``{slot: (job_key, vertex order)}``."""

    def __init__(self, slots: Mapping[int, tuple[str, Sequence[VertexId]]]) -> None:
        ordered = sorted(slots.items())
        self._slots = np.fromiter((slot for slot, _ in ordered), dtype=np.int64, count=len(ordered))
        self._job_keys = pa.array([key for _, (key, _) in ordered], type=pa.string())
        sizes = np.fromiter((len(order) for _, (_, order) in ordered), dtype=np.int64, count=len(ordered))
        self._sizes = sizes
        self._offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        self._vertex_ids = pa.array(
            list(itertools.chain.from_iterable(order for _, (_, order) in ordered)), type=pa.string()
        )

    def name(self, table: pa.Table) -> pa.Table:
        """``table`` with its ``series`` column replaced by ``job_key`` and ``vertex_id`` (first), and
        without rows of a series these names do not know."""
        series = table["series"].to_numpy()
        slot, vertex = series >> VERTEX_BITS, series & (MAX_VERTICES - 1)
        place = np.searchsorted(self._slots, slot)
        place = np.minimum(place, max(len(self._slots) - 1, 0))
        known = np.zeros(len(series), dtype=np.bool_)
        if len(self._slots):
            known = (self._slots[place] == slot) & (vertex < self._sizes[place])
        if not known.all():
            table, place, vertex = table.filter(pa.array(known)), place[known], vertex[known]
        rest = table.drop_columns(["series"])
        job_key = self._job_keys.take(pa.array(place))
        vertex_id = self._vertex_ids.take(pa.array(self._offsets[place] + vertex))
        return pa.table(
            {"job_key": job_key, "vertex_id": vertex_id, **{n: rest[n] for n in rest.column_names}}
        )


class VertexOrders:
    """Each window epoch's vertices in series order, sorted once and forgotten when the epoch leaves
    the window. :meth:`clear` it whenever the book's epochs may be handed out again (a rolled-back or
    a new book)."""

    def __init__(self) -> None:
        self._orders: dict[int, tuple[VertexId, ...]] = {}
        # The last names given out: the same window (its epochs unchanged) gets them again, not rebuilt.
        self._last: tuple[dict[int, tuple[str, tuple[VertexId, ...]]], SeriesNames] | None = None

    def of(self, epoch: int, vertex_ids: Iterable[VertexId]) -> tuple[VertexId, ...]:
        order = self._orders.get(epoch)
        if order is None:
            order = self._orders[epoch] = vertex_order(vertex_ids)
        return order

    def names(self, keep: Mapping[str, tuple[int, int]], book: WindowBook) -> SeriesNames:
        """Which job and vertex each series kept in the window is (``WindowBook.retain``'s ``keep``);
        the epochs that left the window are forgotten."""
        slots: dict[int, tuple[str, tuple[VertexId, ...]]] = {}
        for key, (epoch, _) in keep.items():
            window = book.get(key)
            if window is not None:
                slots[epoch] = (key, self.of(epoch, window.vertex_ids))
        self._orders = {epoch: order for epoch, (_, order) in slots.items()}
        if self._last is not None and self._last[0] == slots:
            return self._last[1]
        names = SeriesNames(slots)
        self._last = (slots, names)
        return names

    def clear(self) -> None:
        self._orders.clear()
        self._last = None


def window_rows(entries: Iterable[tuple[int, JobSample, Sequence[VertexId]]]) -> pa.Table:
    """The window rows of whole samples, ``(slot, sample, its vertex order)``, as an Arrow table.

    Built column by column: a sample's series and time are laid out by numpy, its values are read with
    one ``attrgetter`` call per vertex, so 100,000 rows cost tens of milliseconds.
    """
    slots: list[int] = []
    stamps: list[int] = []
    counts: list[int] = []
    samples: list[VertexSample] = []
    for slot, sample, order in entries:
        samples.extend(map(sample.vertices.__getitem__, order))
        slots.append(slot)
        stamps.append(sample.ts_ms)
        counts.append(len(order))
    repeat = np.repeat(np.arange(len(slots), dtype=np.int64), counts)
    starts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1])).astype(np.int64)
    vertex = np.arange(len(samples), dtype=np.int64) - starts[repeat]
    series = (np.asarray(slots, dtype=np.int64)[repeat] << VERTEX_BITS) | vertex
    return _rows_table(series, np.asarray(stamps, dtype=np.int64)[repeat], samples)


def rows_frame(rows: Iterable[tuple[str, int, VertexId, int, VertexSample]]) -> tuple[pa.Table, SeriesNames]:
    """Window rows ``(job_key, epoch, vertex_id, ts_ms, sample)``, one by one, as an Arrow table, and
    the names of its series: each ``(job_key, epoch)`` a slot of its own (tests, the benchmark)."""
    listed = list(rows)
    slots: dict[tuple[str, int], int] = {}
    vertices: dict[int, set[VertexId]] = {}
    for key, epoch, vid, _, _ in listed:
        slot = slots.setdefault((key, epoch), len(slots))
        vertices.setdefault(slot, set()).add(vid)
    orders = {slot: vertex_order(vids) for slot, vids in vertices.items()}
    index = {slot: {vid: k for k, vid in enumerate(order)} for slot, order in orders.items()}
    series = np.fromiter(
        (
            (slots[key, epoch] << VERTEX_BITS) | index[slots[key, epoch]][vid]
            for key, epoch, vid, _, _ in listed
        ),
        dtype=np.int64,
        count=len(listed),
    )
    stamps = np.fromiter((ts for _, _, _, ts, _ in listed), dtype=np.int64, count=len(listed))
    table = _rows_table(series, stamps, [sample for *_, sample in listed])
    return table, SeriesNames({slot: (key, orders[slot]) for (key, _), slot in slots.items()})


def _rows_table(series: np.ndarray, stamps: np.ndarray, samples: list[VertexSample]) -> pa.Table:
    width = len(SAMPLE_COLUMNS)
    flat = itertools.chain.from_iterable(map(_SAMPLE_VALUES, samples))  # no array of tuples: 3x faster
    values = np.fromiter(flat, dtype=np.float64, count=len(samples) * width).reshape(-1, width)
    columns: dict[str, pa.Array] = {"series": pa.array(series), "ts_ms": pa.array(stamps)}
    for k, column in enumerate(SAMPLE_COLUMNS.values()):
        columns[column] = pa.array(values[:, k])  # NaN stays a value: the SQL reads it as null (_value)
    return pa.table(columns)
