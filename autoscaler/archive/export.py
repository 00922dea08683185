"""``flink-autoscaler export-history``: what the state database holds, in the archive's layout.

The database keeps two kinds of history: the metric window (each job's recent samples, one row per
vertex and tick, as long as ``metrics.window`` needs them, when ``persist_window`` is on) and the
scaling history (each executed rescale, per vertex from and to, as long as ``history.max.count`` /
``history.max.age`` keep it). They become ``samples`` and ``decisions`` rows of the archive's schema; the
columns the database does not hold (the graph, the TaskManager values, the decisions that changed
nothing) are null, which a reader tells from NaN ("not measured").

Idempotent: the rows of a partition go to one file, ``export.parquet``, replaced whole at every run,
so a rerun does not duplicate rows, and files the daemon wrote into the same directory (``part-…``)
are left alone (export into a directory of its own, or the rows the daemon archived too are there
twice). The database is opened read-only, as ``status`` does.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from autoscaler.archive.layout import partition_dir, write_file
from autoscaler.archive.schema import DECISIONS, SAMPLES, SCHEMA_VERSION, TABLES, day_of
from autoscaler.durations import parse_duration, to_ms
from autoscaler.settings import ConfigError
from autoscaler.state.model import JobState
from autoscaler.state.store import SAMPLE_FIELDS, group_window

__all__ = ["UNKNOWN_JOB_ID", "ExportSummary", "export_command", "export_history", "parse_since"]

UNKNOWN_JOB_ID = "unknown"  # the job= partition of a job whose state never recorded its JobID
_EXPORT_FILE = "export.parquet"  # one per partition, replaced whole at every run


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What one export wrote: rows per table, the partition files, and the jobs seen."""

    rows: dict[str, int]
    files: int
    jobs: int


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: an ISO date or date-time (UTC unless it says otherwise), or a duration before now
    (``7 d``, ``12 h``). Returns epoch ms; raises ConfigError with the text otherwise."""
    with contextlib.suppress(ValueError):
        moment = datetime.fromisoformat(text)
        return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)
    try:
        return now_ms - to_ms(parse_duration(text))
    except ValueError:
        raise ConfigError(
            f"--since {text!r}: expected a date (2026-11-20), a date-time (2026-11-20T12:00) or a "
            "duration before now (7 d, 12 h)"
        ) from None


def _sample_rows(store: Any, job_key: str, since_ms: int) -> list[dict[str, Any]]:
    name = job_key.partition("/")[2]
    rows = []
    for tick in group_window(store.load_window(job_key), store.load_custom_window(job_key)):
        if tick.ts_ms < since_ms:
            continue
        for vid, sample in tick.vertices.items():
            rows.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "ts_ms": tick.ts_ms,
                    "job_name": name,
                    "running_since_ms": tick.running_since_ms,
                    "vertex": vid,
                    **{f: getattr(sample, f) for f in SAMPLE_FIELDS},
                    "custom_metrics": list(tick.custom_vertex_metrics.get(vid, {}).items()),
                    "job_custom_metrics": list(tick.custom_job_metrics.items()),
                }
            )
    return rows


def _decision_rows(job_key: str, state: JobState, since_ms: int) -> list[dict[str, Any]]:
    """A row per vertex of every executed rescale: the only decisions the database keeps."""
    name, rows = job_key.partition("/")[2], []
    for record in state.history:
        if record.ts_ms < since_ms:
            continue
        confirmed = f", confirmed at {record.confirmed_ms}" if record.confirmed_ms is not None else ""
        for vid, (before, after) in record.changes.items():
            tpr, expected = record.metrics.get(vid, (math.nan, math.nan))
            rows.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "ts_ms": record.ts_ms,
                    "job_name": name,
                    "outcome": "Scaling",
                    "status": "applied",
                    "detail": f"exported from the scaling history{confirmed}",
                    "rescale_issued": True,
                    "vertex": vid,
                    "parallelism": before,
                    "target_parallelism": after,
                    "requested_parallelism": after,
                    "true_processing_rate": tpr,
                    "expected_processing_rate": expected,
                }
            )
    return rows


@contextlib.contextmanager
def _open_store(state_url: str) -> Iterator[Any]:
    """The state database, read-only; ConfigError (with what to do) when there is none to read."""
    import sqlalchemy as sa

    from autoscaler.state.db import Database, current_revision
    from autoscaler.state.sql import SqlStateStore

    if state_url.startswith("memory://"):
        raise ConfigError("state_url is memory://: the daemon kept no history outside its process")
    parsed = sa.engine.make_url(state_url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        path = Path(parsed.database).expanduser()
        if not path.is_file():
            raise ConfigError(f"no state database at {path} (state_url {state_url!r})")
    db = Database.open(state_url, upgrade=False)
    try:
        try:
            revision = current_revision(db.engine)
        except Exception as exc:  # an unreachable server, wrong credentials, not a database
            raise ConfigError(f"cannot read the state database ({state_url!r}): {exc}") from exc
        if revision is None:
            raise ConfigError("the state database has no schema yet (has the daemon started?)")
        yield SqlStateStore(db)
    finally:
        db.close()


def _job_keys(store: Any) -> list[str]:
    import sqlalchemy as sa

    from autoscaler.state.tables import METRIC_WINDOW

    with store.db.read() as conn:
        windowed = set(conn.scalars(sa.select(METRIC_WINDOW.c.job_key).distinct()))
    return sorted(windowed | set(store.keys()))


def export_history(
    state_url: str, out: Path, *, since_ms: int = 0, clusters: Sequence[str] = ()
) -> ExportSummary:
    """Write the database's samples and scaling history under ``out``; raise ConfigError when there is
    no database to read or ``out`` cannot be written."""
    import sqlalchemy as sa

    with _open_store(state_url) as store:
        try:
            keys = [k for k in _job_keys(store) if not clusters or k.partition("/")[0] in clusters]
            states = store.load_many(keys)
            partitions: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
            for key in keys:
                cluster, state = key.partition("/")[0], states.get(key, JobState())
                job_id = state.known_job_id or UNKNOWN_JOB_ID
                for table, rows in (
                    (SAMPLES, _sample_rows(store, key, since_ms)),
                    (DECISIONS, _decision_rows(key, state, since_ms)),
                ):
                    for row in rows:
                        partitions[(table, cluster, job_id, day_of(row["ts_ms"]))].append(row)
        except sa.exc.SQLAlchemyError as exc:  # a table missing: a schema older than this version's
            raise ConfigError(
                f"cannot read the state database ({state_url!r}): {getattr(exc, 'orig', None) or exc}"
                " (a database from an older version is migrated when this version's daemon starts on it)"
            ) from exc
    counts = {SAMPLES: 0, DECISIONS: 0}
    for (table, cluster, job_id, day), rows in sorted(partitions.items()):
        directory = partition_dir(out, table, cluster, job_id, day)
        try:
            write_file(directory, _EXPORT_FILE, pa.Table.from_pylist(rows, schema=TABLES[table]))
        except OSError as exc:
            raise ConfigError(f"cannot write the archive under {out}: {exc.strerror or exc}") from exc
        counts[table] += len(rows)
    return ExportSummary(counts, len(partitions), len(keys))


def export_command(state_url: str, out: Path, *, since: str | None, clusters: Sequence[str]) -> int:
    """The subcommand: exit 0 when rows were written, 1 when the database holds nothing to export;
    a ConfigError (no database, an unwritable directory, a bad --since) is exit 2 in ``cli.main``."""
    from autoscaler.clock import SystemClock

    since_ms = parse_since(since, SystemClock().now_ms()) if since else 0
    summary = export_history(state_url, out, since_ms=since_ms, clusters=clusters)
    if not summary.files:
        where = f" for cluster(s) {', '.join(clusters)}" if clusters else ""
        after = " from --since on" if since else ""
        print(
            f"flink-autoscaler: nothing to export{where}: the state database holds no samples or rescales"
            f"{after} ({summary.jobs} job(s) selected)",
            file=sys.stderr,
        )
        return 1
    print(
        f"exported {summary.rows[SAMPLES]} sample rows and {summary.rows[DECISIONS]} decision rows of "
        f"{summary.jobs} job(s) to {out} ({summary.files} partition files)"
    )
    return 0
