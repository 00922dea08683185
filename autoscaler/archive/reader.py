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

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from autoscaler.archive.layout import PARTITIONING
from autoscaler.archive.schema import SAMPLE_FIELDS, SAMPLES
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

__all__ = ["ArchivedSamples", "ArchivedTick", "read_samples", "samples_from_table"]

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
    dataset read or a backtest task's read of one job holds), by job, in the order they were read.

    Column by column: the rows are sorted in Arrow, each column becomes one Python list, and a sample is
    built from its run of rows. A day of a 10-vertex job is 86,000 rows; a dict per row cost more than
    the rest of the reading together."""
    if table.num_rows == 0:
        return ArchivedSamples({})
    # No tick (an exported row) sorts first, as does no vertex index.
    keys = ("cluster", "job", "ts_ms", "stale_ticks", "tick_ms", "vertex_index")
    ordered = table.sort_by([(k, "ascending", "at_start") for k in keys])
    columns = _Columns(ordered)
    jobs: dict[str, list[ArchivedTick]] = {}
    incomplete = 0
    topologies: dict[tuple[Any, ...], JobTopology] = {}  # a job's graph repeats at every tick: built once
    for first, end in columns.runs():
        sample = columns.sample(first, end, options, topologies)
        if sample is None:
            incomplete += 1
            continue
        jobs.setdefault(sample.job.key, []).append(ArchivedTick(columns.get("tick_ms", first), sample))
    return ArchivedSamples(jobs, incomplete)


class _Columns:
    """A sorted table's columns as Python lists, and the samples made of their runs of rows."""

    def __init__(self, table: pa.Table) -> None:
        self.rows = table.num_rows
        self._lists: dict[str, list[Any]] = {}
        self._table = table
        self._names = set(table.column_names)
        # The vertex metrics, one tuple per row in VertexSample's field order (null read as NaN).
        metrics = [
            pc.fill_null(table.column(f), math.nan).to_pylist()
            if f in self._names
            else [math.nan] * self.rows
            for f in SAMPLE_FIELDS
        ]
        self.metrics = list(zip(*metrics, strict=True))

    def column(self, name: str) -> list[Any]:
        values = self._lists.get(name)
        if values is None:
            present = name in self._names  # older files lack the newer columns
            values = self._table.column(name).to_pylist() if present else [None] * self.rows
            self._lists[name] = values
        return values

    def get(self, name: str, row: int) -> Any:
        return self.column(name)[row]

    def runs(self) -> Iterator[tuple[int, int]]:
        """``[first, end)`` of each sample's rows: one per (job, tick, reading)."""
        keys = list(zip(*(self.column(k) for k in _KEY), strict=True))
        first = 0
        for row in range(1, self.rows):
            if keys[row] != keys[first]:
                yield first, row
                first = row
        yield first, self.rows

    def sample(
        self, first: int, end: int, options: Options, topologies: dict[tuple[Any, ...], JobTopology]
    ) -> JobSample | None:
        rows = range(first, end)
        vertex, name, parallelism = (
            self.column("vertex"),
            self.column("vertex_name"),
            self.column("parallelism"),
        )
        if any(name[r] is None or parallelism[r] is None for r in rows):
            return None
        status, inputs = self.column("vertex_status"), self.column("inputs")
        max_parallelism, group = self.column("max_parallelism"), self.column("slot_sharing_group")
        graph = tuple(
            (
                vertex[r],
                name[r],
                parallelism[r],
                max_parallelism[r],
                status[r] or "RUNNING",
                group[r],
                tuple((i["source"], i["ship_strategy"]) for i in inputs[r] or ()),
            )
            for r in rows
        )
        topology = topologies.get(graph)
        if topology is None:
            infos = [VertexInfo(*v[:6]) for v in graph]
            edges = [Edge(source, v[0], strategy) for v in graph for source, strategy in v[6]]
            topology = topologies[graph] = JobTopology.build(infos, edges)
        ref = JobRef(
            str(self.get("cluster", first)), str(self.get("job", first)), self.get("job_name", first)
        )
        partitions, custom = self.column("num_source_partitions"), self.column("custom_metrics")
        return JobSample(
            target=JobTarget(ref, options if isinstance(options, AutoscalerOptions) else options(ref)),
            ts_ms=self.get("ts_ms", first),
            running_since_ms=self.get("running_since_ms", first),
            topology=topology,
            vertices={vertex[r]: VertexSample(*self.metrics[r]) for r in rows},
            taskmanagers=self._taskmanagers(first),
            num_source_partitions={vertex[r]: partitions[r] for r in rows if partitions[r] is not None},
            custom_vertex_metrics={vertex[r]: dict(custom[r]) for r in rows if custom[r]},
            custom_job_metrics=dict(self.get("job_custom_metrics", first) or ()),
            stale_ticks=self.get("stale_ticks", first) or 0,
            restamped_ms=self.get("restamped_ms", first) or 0,
        )

    def _taskmanagers(self, row: int) -> TaskManagerSample:
        values: dict[str, Any] = {}
        for f in _TM_FIELDS:
            value = self.get(f"tm_{f.name}", row)
            if value is not None:
                values[f.name] = value
        memory = self.get("tm_memory", row)
        return TaskManagerSample(**values, memory=TaskManagerMemory(**memory) if memory else None)
