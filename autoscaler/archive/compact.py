"""A finished day's part files merged into one, so a backtest reads a file per job and day.

Why: the daemon writes a file per job and day at every flush (96 a day at the default 15 min, more when
the memory bound flushes early); Spark pays for every file it lists and opens, so a month of a
1,000-job fleet would be millions of small files. Once a UTC day is over (and at most once an hour
afterwards, since a flush just after midnight still adds the last minutes to it) its ``part-*`` files
are read and written again as one.

Only the day partitions this process wrote are compacted: a job is acted on by one daemon at a time,
so daemons sharing an archive do not merge the same files (a day last written by a daemon that stopped
before its next hourly pass is left as it is).

Crash safety: the merged file records in its metadata the names of the files it replaces, and is
renamed into place before they are deleted. A crash in between leaves both; the next pass first
deletes every file a merged file names, so rows are never counted twice for longer than one pass. A
reader listing the directory in that moment may see both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from autoscaler.archive.layout import write_part

__all__ = ["REPLACES_KEY", "compact_day", "compact_days"]

REPLACES_KEY = b"autoscaler.replaces"  # metadata of a merged file: the JSON list of the files it holds


def _drop_replaced(directory: Path) -> list[Path]:
    """Delete the files a merged file in ``directory`` already holds; return the part files left.

    Two merges of the same files (two daemons sharing the archive, in the same instant) would both stay,
    each holding the rows: the one with the later name, whose sources the other holds too, goes.
    """
    parts = sorted(directory.glob("part-*.parquet"))
    if len(parts) < 2:  # the steady state of a finished day: nothing to read
        return parts
    replaced: set[str] = set()
    for path in parts:
        metadata = pq.read_schema(path).metadata or {}
        if REPLACES_KEY in metadata:
            sources = set(json.loads(metadata[REPLACES_KEY]))
            if sources <= replaced:  # parts are sorted: an earlier merge holds all of them
                replaced.add(path.name)
            replaced.update(sources)
    for path in parts:
        if path.name in replaced:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return [p for p in parts if p.name not in replaced]


def compact_day(directory: Path, stamp_ms: int) -> bool:
    """Merge the day partition's part files into one; False when there was nothing to merge (one file,
    or files of different schema versions, which are left as they are)."""
    parts = _drop_replaced(directory)
    if len(parts) < 2:
        return False
    tables = [pq.read_table(p) for p in parts]
    if any(t.schema != tables[0].schema for t in tables[1:]):
        return False
    merged = pa.concat_tables(tables).combine_chunks()
    metadata = {**(merged.schema.metadata or {}), REPLACES_KEY: json.dumps([p.name for p in parts]).encode()}
    write_part(directory, merged.replace_schema_metadata(metadata), stamp_ms)
    for path in parts:
        with contextlib.suppress(FileNotFoundError):  # another daemon's pass got there first
            path.unlink()
    return True


def compact_days(
    directories: Iterable[Path], stamp_ms: int, on_error: Callable[[Path, Exception], None]
) -> int:
    """Compact each of ``directories`` (finished days); return how many merged. A partition that fails
    (a file Arrow cannot read, a full disk) goes to ``on_error`` and is left as it is; the others are
    merged all the same."""
    merged = 0
    for directory in directories:
        try:
            merged += compact_day(directory, stamp_ms)
        except FileNotFoundError:  # pruned meanwhile
            continue
        except Exception as exc:
            on_error(directory, exc)
    return merged
