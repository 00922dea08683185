"""The aggregation query's rows (one per vertex, an Arrow table) as numpy columns in the fleet's order.

Apart from :mod:`autoscaler.evaluate.fleet.evaluator` because it is the one place that knows the table's
layout: the columns are :class:`~autoscaler.evaluate.aggregates.VertexAggregates`' fields by name, beside
``job_key`` and ``vertex_id``, in whatever row order Spark returns them. Reading them costs no Python
call per row: Arrow finds each row's job and vertex (``pc.index_in``), numpy puts it in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.evaluate.aggregates import EMPTY_AGGREGATES, VertexAggregates
from autoscaler.evaluate.fleet.plan import FleetLayout
from autoscaler.model import VertexId

__all__ = ["AGGREGATE_FIELDS", "aggregates_by_job", "job_aggregates", "laid_out_columns"]

# The aggregation query's columns beside job_key and vertex_id: VertexAggregates' fields, by name.
AGGREGATE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(VertexAggregates))
# A vertex without a row has the all-unknown aggregates (aggregates.aggregates_of).
_DEFAULTS: dict[str, Any] = {name: getattr(EMPTY_AGGREGATES, name) for name in AGGREGATE_FIELDS}


def laid_out_columns(
    table: pa.Table, job_keys: Sequence[str], layout: FleetLayout
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The aggregate columns in the layout's vertex order (job ``j`` is ``job_keys[j]``), and which
    vertices had a row. Rows of other jobs, or of vertex ids not in their job's graph, are left out.

    A row's place is one integer: its job's index times the number of distinct vertex ids, plus its
    vertex id's code, matched against the same integer of every laid-out vertex.
    """
    size = layout.size
    columns = {
        name: np.full(size, default, dtype=np.int64 if isinstance(default, int) else np.float64)
        for name, default in _DEFAULTS.items()
    }
    matched = np.zeros(size, dtype=np.bool_)
    if table.num_rows == 0 or size == 0:
        return columns, matched
    codes: dict[VertexId, int] = {}
    plan_codes: dict[int, np.ndarray] = {}
    for plan in layout.plans:
        if id(plan) not in plan_codes:
            plan_codes[id(plan)] = np.array(
                [codes.setdefault(vid, len(codes)) for vid in plan.vertex_ids], dtype=np.int64
            )
    width = len(codes)
    laid_out = layout.job_of_vertex * width + np.concatenate([plan_codes[id(p)] for p in layout.plans])
    order = np.argsort(laid_out, kind="stable")
    ordered_codes = laid_out[order]

    job_index = _index_in(table["job_key"], list(job_keys))
    vertex_code = _index_in(table["vertex_id"], list(codes))
    row_code = job_index * width + vertex_code
    place = np.minimum(np.searchsorted(ordered_codes, row_code), size - 1)
    found = (job_index >= 0) & (vertex_code >= 0) & (ordered_codes[place] == row_code)
    target = order[place[found]]
    matched[target] = True
    for name, column in columns.items():
        column[target] = table[name].to_numpy()[found]
    return columns, matched


def _index_in(values: pa.ChunkedArray, candidates: list[str]) -> np.ndarray:
    """Each value's index in ``candidates``, -1 where it is none of them."""
    index = pc.index_in(values.cast(pa.string()), value_set=pa.array(candidates, type=pa.string()))
    return pc.fill_null(index, -1).to_numpy().astype(np.int64)


def job_aggregates(
    layout: FleetLayout, job: int, columns: Mapping[str, np.ndarray], matched: np.ndarray
) -> dict[VertexId, VertexAggregates]:
    """One job's vertices that had a row, as the oracle's graph walk takes them."""
    start = int(layout.offsets[job])
    out = {}
    for k, vid in enumerate(layout.plans[job].vertex_ids):
        i = start + k
        if matched[i]:
            out[vid] = VertexAggregates(**{name: columns[name][i].item() for name in AGGREGATE_FIELDS})
    return out


def aggregates_by_job(table: pa.Table) -> dict[str, dict[VertexId, VertexAggregates]]:
    """The aggregation query's rows as ``{job_key: {vertex_id: VertexAggregates}}``: the form tests and
    the benchmark's baselines compare with the plain-Python oracle's ``aggregate_window``."""
    names = ["job_key", "vertex_id", *AGGREGATE_FIELDS]
    columns = [table[name].to_numpy().tolist() for name in names]
    out: dict[str, dict[VertexId, VertexAggregates]] = {}
    for row in zip(*columns, strict=True):
        out.setdefault(str(row[0]), {})[str(row[1])] = VertexAggregates(*row[2:])
    return out
