"""The archive's samples read back as the ``JobSample`` values the daemon evaluated, tick by tick.

A backtest replays them through the evaluate and decide stages; for that to be honest, what comes back
must be what the daemon had: every vertex's metrics, the job graph and parallelism as they ran, the
TaskManager values, the custom metrics, and the tick (``tick_ms``) that read each sample, stale ones
included (a stale sample repeats its first reading's ``ts_ms``, and the window ignores it as the
daemon's did). ``tests/integration/test_archive_simulator.py`` reads back a daemon's run and finds the
samples equal to those it collected.

What the archive does not hold is the job's options: the caller says which to evaluate with (the point
of a backtest), as one value or per job.

Rows the daemon's archive wrote have the job graph; rows ``export-history`` wrote from the state
database do not (it keeps no graph), so those samples cannot be rebuilt and are counted as
``incomplete``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from autoscaler.archive.layout import PARTITIONING
from autoscaler.archive.schema import SAMPLE_FIELDS, SAMPLES, nan_if_none
from autoscaler.model import (
    Edge,
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    TaskManagerMemory,
    TaskManagerSample,
    VertexInfo,
    VertexSample,
)
from autoscaler.settings import AutoscalerOptions

__all__ = ["NESTED_COLUMNS", "ArchivedSamples", "ArchivedTick", "read_samples", "samples_from_table"]

NESTED_COLUMNS = ("inputs", "custom_metrics", "job_custom_metrics", "tm_memory")  # may come as JSON text
_TM_FIELDS = tuple(f for f in fields(TaskManagerSample) if f.name != "memory")
# The sample's own columns, in the order they group by: one JobSample per (job, tick, reading).
_KEY = ("cluster", "job", "tick_ms", "ts_ms", "stale_ticks")
Options = AutoscalerOptions | Callable[[JobRef], AutoscalerOptions]


@dataclass(frozen=True, slots=True)
class ArchivedTick:
    """One archived sample and the tick that read it (None when the row does not say: exported)."""

    tick_ms: int | None
    sample: JobSample


@dataclass(frozen=True, slots=True)
class ArchivedSamples:
    """Each job's archived samples (by job key, ``cluster/name``), in the order they were read."""

    jobs: Mapping[str, Sequence[ArchivedTick]]
    incomplete: int = 0  # samples whose rows lack the job graph (export-history's), not rebuilt


def read_samples(
    root: Path,
    options: Options,
    *,
    clusters: Iterable[str] = (),
    job_names: Iterable[str] = (),
) -> ArchivedSamples:
    """Every sample under ``root/samples`` (only these clusters and job names, when given)."""
    directory = root / SAMPLES
    if not directory.is_dir():
        return ArchivedSamples({})
    dataset = ds.dataset(directory, format="parquet", partitioning=PARTITIONING)
    wanted_clusters, wanted_names = list(clusters), list(job_names)
    where = None
    if wanted_clusters:
        where = pc.field("cluster").isin(wanted_clusters)
    if wanted_names:
        by_name = pc.field("job_name").isin(wanted_names)
        where = by_name if where is None else where & by_name
    return samples_from_table(dataset.to_table(filter=where), options)


def samples_from_table(table: pa.Table, options: Options) -> ArchivedSamples:
    """The samples of a table of ``samples`` rows with their ``cluster`` and ``job`` columns (what a
    dataset read or a Spark group of the archive holds), by job, in the order they were read."""
    rows = table.to_pylist()
    _decode_json(table, rows)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in _KEY), []).append(row)
    jobs: dict[str, list[ArchivedTick]] = {}
    incomplete = 0
    order = sorted(groups, key=lambda k: (k[0], k[1], k[3], k[4], -1 if k[2] is None else k[2]))
    topologies: dict[tuple[Any, ...], JobTopology] = {}  # a job's graph repeats at every tick: built once
    for key in order:
        sample = _sample(groups[key], options, topologies)
        if sample is None:
            incomplete += 1
            continue
        jobs.setdefault(sample.job.key, []).append(ArchivedTick(key[2], sample))
    return ArchivedSamples(jobs, incomplete)


def _decode_json(table: pa.Table, rows: list[dict[str, Any]]) -> None:
    """Nested columns sent as JSON text (Spark's Arrow writer is three times slower on the nested types
    than on text: ``autoscaler.backtest.spark``), parsed back in place. A job's graph and maps repeat
    on every tick, so each distinct text is parsed once."""
    texts = [
        c
        for c in NESTED_COLUMNS
        if c in table.column_names and pa.types.is_string(table.schema.field(c).type)
    ]
    if not texts:
        return
    parse = functools.lru_cache(maxsize=4096)(json.loads)
    for row in rows:
        for column in texts:
            text = row[column]
            row[column] = None if text is None else parse(text)


def _sample(
    rows: list[dict[str, Any]], options: Options, topologies: dict[tuple[Any, ...], JobTopology]
) -> JobSample | None:
    rows.sort(key=lambda r: -1 if r["vertex_index"] is None else r["vertex_index"])
    first = rows[0]
    if any(r["vertex_name"] is None or r["parallelism"] is None for r in rows):
        return None
    ref = JobRef(str(first["cluster"]), str(first["job"]), first["job_name"])
    graph = tuple(
        (
            r["vertex"],
            r["vertex_name"],
            r["parallelism"],
            r["max_parallelism"],
            r["vertex_status"] or "RUNNING",
            r["slot_sharing_group"],
            tuple((i["source"], i["ship_strategy"]) for i in r["inputs"] or ()),
        )
        for r in rows
    )
    topology = topologies.get(graph)
    if topology is None:
        infos = [VertexInfo(*vertex[:6]) for vertex in graph]
        edges = [Edge(source, vertex[0], strategy) for vertex in graph for source, strategy in vertex[6]]
        topology = topologies[graph] = JobTopology.build(infos, edges)
    return JobSample(
        target=JobTarget(ref, options if isinstance(options, AutoscalerOptions) else options(ref)),
        ts_ms=first["ts_ms"],
        running_since_ms=first["running_since_ms"],
        topology=topology,
        vertices={r["vertex"]: VertexSample(**{f: nan_if_none(r[f]) for f in SAMPLE_FIELDS}) for r in rows},
        taskmanagers=_taskmanagers(first),
        num_source_partitions={
            r["vertex"]: r["num_source_partitions"] for r in rows if r["num_source_partitions"] is not None
        },
        custom_vertex_metrics={r["vertex"]: dict(r["custom_metrics"]) for r in rows if r["custom_metrics"]},
        custom_job_metrics=dict(first["job_custom_metrics"] or ()),
        stale_ticks=first["stale_ticks"] or 0,
        restamped_ms=first["restamped_ms"] or 0,
    )


def _taskmanagers(row: Mapping[str, Any]) -> TaskManagerSample:
    values: dict[str, Any] = {}
    for f in _TM_FIELDS:
        value = row.get(f"tm_{f.name}")
        if value is not None:
            values[f.name] = value
    memory = row.get("tm_memory")
    return TaskManagerSample(**values, memory=TaskManagerMemory(**memory) if memory else None)
