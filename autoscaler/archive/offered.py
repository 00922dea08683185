"""Each job's offered load as the archive recorded it, tick by tick: what its forecast's history needs.

The forecast's buckets hold the offered rate the foresee stage adds at each tick: the evaluated target
data rate of the job's sources, summed (``autoscaler.tick.foresee.offered_rate``). The archive records
both halves: each tick's evaluated ``target_data_rate`` per vertex in ``decisions`` (with the
``sample_ts_ms`` the evaluation read), and the job graph in ``samples`` (a vertex without inputs is a
source). So a tick's offered rate is its decision rows' source rates summed, at its sample's ``ts_ms``
(the instant the stage files it under); NaN when a source's rate is not known, as the stage has it.

A stale sample's tick repeats its first reading's ``sample_ts_ms``; the stage adds nothing for it, so
only the first tick of each reading counts here. Rows ``export-history`` wrote do not count: its
samples hold no graph and its decisions only the rescales (the state database keeps no more), so they
cannot say what was offered at each tick.

Read once per job and process (``autoscaler.state.tick.TickStore``), of the jobs asked for only, and
only the few columns needed: a day of a 10-vertex job at 10 s ticks is 86,000 rows per table.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import structlog

from autoscaler.archive.layout import PARTITIONING
from autoscaler.archive.schema import DECISIONS, SAMPLES, day_of
from autoscaler.metrics import MetricsReporter

__all__ = ["ArchivedLoad", "offered_rates"]

log = structlog.get_logger(__name__)


def offered_rates(
    root: Path, job_keys: Collection[str], since_ms: int | None = None
) -> dict[str, list[tuple[int, float]]]:
    """The recorded offered rate of each of these jobs (``cluster/name``) at each tick from ``since_ms``
    on (all kept, when None), oldest first; a job the archive holds nothing of is left out. Raises
    OSError or an Arrow error for files that cannot be read (the caller logs it, and the forecast keeps
    what the store has).

    The filters go to the scan (the day partitions before ``since_ms`` are not opened; of the rest, only
    the sources' rows are kept as they are read), so what is held is one row per tick and source."""
    if not job_keys:
        return {}
    if not root.is_dir():
        raise FileNotFoundError(f"no archive directory at {root}")
    clusters = sorted({key.partition("/")[0] for key in job_keys})
    names = sorted({key.partition("/")[2] for key in job_keys})
    where = pc.field("cluster").isin(clusters) & pc.field("job_name").isin(names)
    if since_ms is not None:
        where = where & (pc.field("day") >= day_of(since_ms)) & (pc.field("ts_ms") >= since_ms)
    graph = pc.is_valid(pc.field("vertex_name")) & (pc.list_value_length(pc.field("inputs")) == 0)
    sources = _sources(_table(root / SAMPLES, ["cluster", "job", "vertex"], where & graph))
    if not sources:
        return {}
    every = pa.array(sorted(set().union(*sources.values())), pa.string())
    columns = ["cluster", "job", "job_name", "ts_ms", "sample_ts_ms", "vertex", "target_data_rate"]
    decisions = _table(root / DECISIONS, columns, where & pc.field("vertex").isin(every))
    wanted = set(job_keys)
    return {key: rates for key, rates in _rates(decisions, sources).items() if key in wanted}


def _table(directory: Path, columns: list[str], where: pc.Expression) -> pa.Table | None:
    if not directory.is_dir():
        return None
    dataset = ds.dataset(directory, format="parquet", partitioning=PARTITIONING)
    return dataset.to_table(columns=columns, filter=where)


def _sources(samples: pa.Table | None) -> dict[tuple[str, str], frozenset[str]]:
    """(cluster, JobID) -> its source vertices, from the rows that recorded the graph (the scan kept
    only the sources' rows)."""
    if samples is None or samples.num_rows == 0:
        return {}
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    rows = zip(*(samples[c].to_pylist() for c in ("cluster", "job", "vertex")), strict=True)
    for cluster, job, vertex in rows:
        found[(cluster, job)].add(vertex)
    return {k: frozenset(v) for k, v in found.items()}


def _rates(
    decisions: pa.Table | None, sources: Mapping[tuple[str, str], frozenset[str]]
) -> dict[str, list[tuple[int, float]]]:
    """Each job's offered rate per reading (module doc), from its decision rows of source vertices."""
    if decisions is None or decisions.num_rows == 0:
        return {}
    rows = decisions.filter(pc.is_valid(decisions["sample_ts_ms"])).sort_by(
        [(c, "ascending") for c in ("cluster", "job_name", "sample_ts_ms", "ts_ms")]
    )
    names = ("cluster", "job", "job_name", "ts_ms", "sample_ts_ms", "vertex", "target_data_rate")
    columns = [rows[c].to_pylist() for c in names]
    # (job key, sample ts) -> (first tick's ts_ms, JobID, vertex -> rate) of that reading's first tick
    readings: dict[tuple[str, int], tuple[int, str, dict[str, float]]] = {}
    for cluster, job, name, ts_ms, sample_ts, vertex, rate in zip(*columns, strict=True):
        key = (f"{cluster}/{name}", sample_ts)
        first = readings.get(key)
        if first is None:
            first = readings[key] = (ts_ms, job, {})
        if first[0] == ts_ms and first[1] == job:  # a later (stale) tick of the same reading adds nothing
            first[2][vertex] = math.nan if rate is None else rate
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for (key, sample_ts), (_, job, rates) in readings.items():
        wanted = sources.get((key.partition("/")[0], job))
        if not wanted:
            continue
        known = [rates.get(v, math.nan) for v in sorted(wanted)]
        total = math.fsum(known) if all(math.isfinite(r) for r in known) else math.nan
        out[key].append((sample_ts, total))
    return {key: sorted(rates) for key, rates in out.items()}


class ArchivedLoad:
    """The daemon's reader of the archive's offered rates (``archive_dir``), for the tick's store: it
    never raises. An archive that cannot be read (gone, a file unreadable or half-written by another
    writer) is logged (``archive_read_failed``) and counted
    (``flink_autoscaler_archive_failures_total{operation="read"}``), and gives nothing: the forecast
    keeps what the state store holds."""

    def __init__(self, root: Path, metrics: MetricsReporter) -> None:
        self.root = root
        self.metrics = metrics

    def __call__(
        self, job_keys: Collection[str], since_ms: int | None = None
    ) -> dict[str, list[tuple[int, float]]]:
        try:
            return offered_rates(self.root, job_keys, since_ms)
        except (OSError, pa.ArrowException, ValueError, TypeError, KeyError) as exc:
            log.warning(
                "archive_read_failed",
                archive=str(self.root),
                jobs=sorted(job_keys),
                error=f"{type(exc).__name__}: {exc}",
                detail="the load history of these jobs is not completed from the archive; their forecasts "
                "read what the state store holds",
            )
            self.metrics.archive_failures.labels("read").inc()
            return {}
