"""The one interface the daemon stores through, and its in-memory implementation.

``StateStore`` keeps per job one ``JobState`` and the job's collected metric window. The memory store
serves tests and the demo and is the reference behaviour: ``SqlStateStore`` (``autoscaler.state.sql``)
must pass the same contract suite (``tests/unit/state/test_store.py``).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from autoscaler.model import VertexId, VertexSample, frozen_map
from autoscaler.state.model import JobState

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = [
    "SAMPLE_FIELDS",
    "CustomWindowRow",
    "HistoryChunk",
    "HistoryWrite",
    "Lease",
    "MemoryStateStore",
    "StateStore",
    "WindowRow",
    "WindowTick",
    "custom_window_rows",
    "group_window",
    "window_rows",
]

SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(VertexSample))


@dataclass(frozen=True, slots=True)
class WindowRow:
    """One vertex's sample at one tick, as kept in a job's stored metric window.

    ``running_since_ms`` is the job's RUNNING timestamp at that tick: restoring the evaluator's window
    needs it to tell samples of the current run from samples taken before a restart or rescale.
    """

    vertex: VertexId
    ts_ms: int
    running_since_ms: int
    sample: VertexSample

    def same_values(self, other: WindowRow) -> bool:
        """Equality with NaN equal to NaN (dataclass ``==`` says NaN != NaN)."""
        if (self.vertex, self.ts_ms, self.running_since_ms) != (
            other.vertex,
            other.ts_ms,
            other.running_since_ms,
        ):
            return False
        for name in SAMPLE_FIELDS:
            a, b = getattr(self.sample, name), getattr(other.sample, name)
            if a != b and not (math.isnan(a) and math.isnan(b)):
                return False
        return True


@dataclass(frozen=True, slots=True)
class CustomWindowRow:
    """One measured custom metric at one tick: ``scope`` is a vertex id, or ``""`` for a job-level one
    (TaskManager or external). Not-measured (NaN) values are not stored: they add nothing to a window."""

    scope: str
    name: str
    ts_ms: int
    value: float


@dataclass(frozen=True, slots=True)
class HistoryChunk:
    """One stored row of a job's load history (``autoscaler.state.load_history``): the rates of buckets
    ``first ..`` of chunk ``chunk`` (bucket index // ``CHUNK_BUCKETS``), as little-endian float32, and
    on the job's newest row its forecasts' record (JSON)."""

    chunk: int
    bucket_ms: int
    first: int
    rates: bytes
    scores: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryWrite:
    """What one tick writes of a job's load history: the chunks whose buckets changed, and what is kept
    of the rest: its chunks from ``keep_from`` on, of buckets of ``bucket_ms`` (others are dropped;
    ``keep_from`` None: nothing is, the history's oldest chunk is the one stored)."""

    chunks: tuple[HistoryChunk, ...]
    bucket_ms: int
    keep_from: int | None


@dataclass(frozen=True, slots=True)
class WindowTick:
    """A job's stored rows of one tick, grouped back: what the evaluator's window replays on restore."""

    ts_ms: int
    running_since_ms: int
    vertices: Mapping[VertexId, VertexSample]
    custom_vertex_metrics: Mapping[VertexId, Mapping[str, float]] = field(default_factory=dict)
    custom_job_metrics: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", frozen_map(self.vertices))


def window_rows(sample: JobSample) -> tuple[WindowRow, ...]:
    """The rows one collected sample adds to its job's stored window."""
    return tuple(
        WindowRow(vid, sample.ts_ms, sample.running_since_ms, vs) for vid, vs in sample.vertices.items()
    )


def custom_window_rows(sample: JobSample) -> tuple[CustomWindowRow, ...]:
    """The measured custom metrics one collected sample adds to its job's stored window."""
    return tuple(
        CustomWindowRow(scope, name, sample.ts_ms, value)
        for scope, name, value in sample.measured_custom_metrics()
    )


def group_window(rows: Iterable[WindowRow], custom: Iterable[CustomWindowRow] = ()) -> list[WindowTick]:
    """Rows (any order) grouped by tick, oldest first, each with the custom metrics of its tick."""
    ticks: dict[int, tuple[int, dict[VertexId, VertexSample]]] = {}
    for row in sorted(rows, key=lambda r: (r.ts_ms, r.vertex)):
        ticks.setdefault(row.ts_ms, (row.running_since_ms, {}))[1][row.vertex] = row.sample
    by_tick: dict[int, tuple[dict[VertexId, dict[str, float]], dict[str, float]]] = {}
    for c in custom:
        per_vertex, per_job = by_tick.setdefault(c.ts_ms, ({}, {}))
        (per_vertex.setdefault(c.scope, {}) if c.scope else per_job)[c.name] = c.value
    return [
        WindowTick(ts, since, vertices, *by_tick.get(ts, ({}, {}))) for ts, (since, vertices) in ticks.items()
    ]


@dataclass(frozen=True, slots=True)
class Lease:
    """Which daemon acts on a cluster, and until when it may without renewing."""

    name: str  # the cluster's name
    owner: str  # the holder's instance id
    expires_ms: int
    acquired_ms: int  # when this owner took it (unchanged by renewals)

    def held_by(self, owner: str, now_ms: int) -> bool:
        return self.owner == owner and now_ms < self.expires_ms


class StateStore(Protocol):
    """Per-job state and metric window, keyed by ``JobRef.key`` (``cluster/job name``).

    Contract (the same for every backend):
    - ``load`` of an unknown job, or of a job whose stored value cannot be read back, is ``JobState()``;
      a value that cannot be read is logged and discarded, never raised.
    - ``save_many`` writes all given states or none of them; so does everything done inside
      ``transaction()`` (nested transactions join the outer one). Reads inside a transaction see its
      writes. A daemon writes once per tick, so a crash loses at most that tick.
    - ``append_window`` ignores a row whose (vertex, ts_ms) the job already has; ``load_window`` returns
      rows oldest first (then by vertex); ``trim_window`` drops rows older than ``before_ms`` and returns
      how many. ``append_windows`` / ``trim_windows`` do the same for many jobs at once (a tick's worth
      in one statement each).
    - ``append_custom_windows`` / ``load_custom_window`` do the same for the custom metrics of each
      tick (a row per measured (tick, scope, name)); the trims and ``delete`` cover them too.
    - ``write_load_history`` upserts each job's chunks (by chunk number) and drops its rows before
      ``keep_from`` or of other bucket sizes; ``read_load_history`` returns each job's rows oldest first
      (jobs without any: absent).
    - ``delete`` drops the job's state, window and load history.
    - ``acquire_lease`` takes or renews a named lease atomically: it goes to ``owner`` when it is free,
      expired (``expires_ms <= now_ms``) or already ``owner``'s, and then expires at ``now_ms + ttl_ms``;
      either way it returns the lease as it stands afterwards. ``release_lease`` expires it at once if
      ``owner`` holds it. Each lease call commits on its own; call them outside ``transaction()`` (SQLite
      would wait for the open write transaction).
    """

    def load(self, job_key: str) -> JobState: ...

    def load_many(self, job_keys: Iterable[str]) -> dict[str, JobState]: ...

    def save(self, job_key: str, state: JobState) -> None: ...

    def save_many(self, states: Mapping[str, JobState]) -> None: ...

    def delete(self, job_key: str) -> None: ...

    def keys(self) -> Iterable[str]: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def append_window(self, job_key: str, rows: Iterable[WindowRow]) -> None: ...

    def append_windows(self, rows_by_job: Mapping[str, Iterable[WindowRow]]) -> None: ...

    def load_window(self, job_key: str) -> list[WindowRow]: ...

    def append_custom_windows(self, rows_by_job: Mapping[str, Iterable[CustomWindowRow]]) -> None: ...

    def load_custom_window(self, job_key: str) -> list[CustomWindowRow]: ...

    def trim_window(self, job_key: str | None, before_ms: int) -> int: ...

    def write_load_history(self, writes: Mapping[str, HistoryWrite]) -> None: ...

    def read_load_history(self, job_keys: Iterable[str]) -> dict[str, list[HistoryChunk]]: ...

    def trim_windows(self, before_ms_by_job: Mapping[str, int]) -> int: ...

    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> Lease: ...

    def release_lease(self, name: str, owner: str) -> None: ...

    def leases(self) -> list[Lease]: ...

    def check_storage(self) -> str | None:
        """Repair what can be repaired of the storage under the store (a deleted SQLite file is put
        back) and say what happened, or None; asked once per tick, before the leases."""
        ...

    def close(self) -> None: ...


class MemoryStateStore:
    """Process-local store (lost on restart); thread-safe for the CLI reading while the daemon writes.

    A transaction holds the store's lock and snapshots it, so a failure inside rolls everything back,
    as the SQL store's does.
    """

    def __init__(self) -> None:
        self._states: dict[str, JobState] = {}
        self._windows: dict[str, dict[tuple[int, VertexId], WindowRow]] = {}
        self._custom: dict[str, dict[tuple[int, str, str], CustomWindowRow]] = {}
        self._leases: dict[str, Lease] = {}
        self._histories: dict[str, dict[int, HistoryChunk]] = {}
        self._lock = threading.RLock()
        self._depth = 0

    # ------------------------------------------------------------------ state
    def load(self, job_key: str) -> JobState:
        with self._lock:
            return self._states.get(job_key, JobState())

    def load_many(self, job_keys: Iterable[str]) -> dict[str, JobState]:
        with self._lock:
            return {key: self._states.get(key, JobState()) for key in job_keys}

    def save(self, job_key: str, state: JobState) -> None:
        with self._lock:
            self._states[job_key] = state

    def save_many(self, states: Mapping[str, JobState]) -> None:
        with self._lock:
            self._states.update(states)

    def delete(self, job_key: str) -> None:
        with self._lock:
            self._states.pop(job_key, None)
            self._windows.pop(job_key, None)
            self._custom.pop(job_key, None)
            self._histories.pop(job_key, None)

    def keys(self) -> Iterable[str]:
        with self._lock:
            return list(self._states)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            states = dict(self._states)
            windows = {key: dict(rows) for key, rows in self._windows.items()}
            custom = {key: dict(rows) for key, rows in self._custom.items()}
            histories = {key: dict(rows) for key, rows in self._histories.items()}
            self._depth = 1
            try:
                yield
            except BaseException:
                self._states, self._windows, self._custom = states, windows, custom
                self._histories = histories
                raise
            finally:
                self._depth = 0

    # ------------------------------------------------------------------ metric window
    def append_window(self, job_key: str, rows: Iterable[WindowRow]) -> None:
        with self._lock:
            window = self._windows.setdefault(job_key, {})
            for row in rows:
                window.setdefault((row.ts_ms, row.vertex), row)

    def append_windows(self, rows_by_job: Mapping[str, Iterable[WindowRow]]) -> None:
        with self._lock:
            for job_key, rows in rows_by_job.items():
                self.append_window(job_key, rows)

    def load_window(self, job_key: str) -> list[WindowRow]:
        with self._lock:
            window = self._windows.get(job_key, {})
            return [window[k] for k in sorted(window)]

    def append_custom_windows(self, rows_by_job: Mapping[str, Iterable[CustomWindowRow]]) -> None:
        with self._lock:
            for job_key, rows in rows_by_job.items():
                window = self._custom.setdefault(job_key, {})
                for row in rows:
                    window.setdefault((row.ts_ms, row.scope, row.name), row)

    def load_custom_window(self, job_key: str) -> list[CustomWindowRow]:
        with self._lock:
            window = self._custom.get(job_key, {})
            return [window[k] for k in sorted(window)]

    def trim_window(self, job_key: str | None, before_ms: int) -> int:
        """Rows dropped; of the custom metrics too, which are not counted."""
        with self._lock:
            _trim(self._custom, job_key, before_ms)
            return _trim(self._windows, job_key, before_ms)

    def trim_windows(self, before_ms_by_job: Mapping[str, int]) -> int:
        with self._lock:
            return sum(self.trim_window(key, before) for key, before in before_ms_by_job.items())

    # ------------------------------------------------------------------ load history
    def write_load_history(self, writes: Mapping[str, HistoryWrite]) -> None:
        with self._lock:
            for job_key, write in writes.items():
                keep_from = write.keep_from
                rows = {
                    n: c
                    for n, c in self._histories.get(job_key, {}).items()
                    if keep_from is None or (n >= keep_from and c.bucket_ms == write.bucket_ms)
                }
                rows.update({c.chunk: c for c in write.chunks})
                if rows:
                    self._histories[job_key] = rows
                else:
                    self._histories.pop(job_key, None)

    def read_load_history(self, job_keys: Iterable[str]) -> dict[str, list[HistoryChunk]]:
        with self._lock:
            return {
                key: [rows[n] for n in sorted(rows)] for key in job_keys if (rows := self._histories.get(key))
            }

    # ------------------------------------------------------------------ leases
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> Lease:
        with self._lock:
            current = self._leases.get(name)
            if current is None or current.owner == owner or current.expires_ms <= now_ms:
                since = current.acquired_ms if current is not None and current.owner == owner else now_ms
                current = self._leases[name] = Lease(name, owner, now_ms + ttl_ms, since)
            return current

    def release_lease(self, name: str, owner: str) -> None:
        with self._lock:
            current = self._leases.get(name)
            if current is not None and current.owner == owner:
                self._leases[name] = Lease(name, owner, 0, current.acquired_ms)

    def leases(self) -> list[Lease]:
        with self._lock:
            return [self._leases[name] for name in sorted(self._leases)]

    def check_storage(self) -> str | None:
        return None  # memory cannot go missing

    def close(self) -> None:
        """Nothing to release; here so every store can be closed the same way."""


def _trim(windows: dict[str, dict[Any, Any]], job_key: str | None, before_ms: int) -> int:
    """Drop entries keyed (ts_ms, ...) older than ``before_ms``: of one job, or of all with None."""
    dropped = 0
    for key in list(windows) if job_key is None else [job_key]:
        window = windows.get(key)
        if not window:
            continue
        old = [k for k in window if k[0] < before_ms]
        for k in old:
            del window[k]
        dropped += len(old)
        if not window:
            del windows[key]
    return dropped
