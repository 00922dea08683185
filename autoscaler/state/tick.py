"""The state layer as one tick uses it: read every job's state and stored window at the start, write
the whole tick back in one transaction at the end.

All of it runs off the event loop (the store may be a database on the network). A write the database
refuses (a SQLite file another process holds locked past the busy timeout, a PostgreSQL server gone) is
not a crash, and loses nothing: the jobs' new states are kept in memory and written by the next tick
that holds their leases, which also decides from them (issue 35: a held lock lost the tick's state, and
logged a traceback). Kept only while nobody else may have acted on the job: the lease's ``acquired_ms``
(``ClusterLease.token``) must be the one the state was computed under; if another daemon held the lease
in between, its stored state is newer and the kept one is dropped (``state_unsaved_dropped``). The
tick's window rows are not kept: the stored window has a hole of one tick, which rates span.
Any other failure (a bug) is like a crash: the tick is lost, the next one recomputes from what the
store holds, and idempotent realizing keeps a rescale the lost tick issued from being sent twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from sqlalchemy.exc import DBAPIError

from autoscaler.durations import to_ms
from autoscaler.foresight.backfill import complete
from autoscaler.foresight.forecast import ForecastParams
from autoscaler.foresight.history import LoadHistory
from autoscaler.model import JobSample
from autoscaler.offload import offload
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state.load_history import history_from, history_write
from autoscaler.state.model import JobState
from autoscaler.state.store import StateStore, custom_window_rows, group_window, window_rows

__all__ = ["Loaded", "TickStore"]

log = structlog.get_logger(__name__)

Tokens = Callable[[str], int | None]  # job key -> its lease token now (Clusters.lease_tokens)
# (job keys, since_ms) -> each one's recorded offered rate per tick from since_ms on, (ts_ms, records/s)
# oldest first; never raises (the daemon's is autoscaler.archive.offered.ArchivedLoad, over archive_dir)
Recorded = Callable[[Collection[str], int], Mapping[str, Sequence[tuple[int, float]]]]
ARCHIVE_JOBS_PER_TICK = 8
"""Jobs whose history one tick completes from the archive at most: a daemon starting with a fleet reads
the archive a few jobs per tick (three weeks of one job's ticks are some 180,000 rows), so no tick waits
long nor holds a fleet's archive in memory; the others forecast from their store's history meanwhile."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """What the store held for the tick's jobs."""

    states: Mapping[str, JobState] = field(default_factory=dict)  # job key -> remembered state
    # job key -> stored window ticks this process has not evaluated yet (after a restart, a takeover)
    restored: Mapping[str, Sequence[JobSample]] = field(default_factory=dict)
    # job key -> its load history, of the jobs with forecast.enabled (autoscaler.foresight)
    histories: Mapping[str, LoadHistory] = field(default_factory=dict)


class ErrorCounter(Protocol):
    """What the tick's store needs of the metrics: a failed write counted against each cluster it held.

    The daemon passes its ``MetricsReporter``; naming only this call keeps the state package below the
    metrics module, which reads state values (a rescale's verification) to report them.
    """

    def report_error(self, cluster: str, reason: Reason) -> None: ...


class TickStore:
    """Loads and flushes a tick's job states and metric windows.

    It remembers which jobs' stored windows this process has already replayed, so a window is
    restored once per job and process (again after :meth:`forget`, e.g. when the lease comes back).
    """

    def __init__(
        self,
        state: StateStore,
        metrics: ErrorCounter,
        *,
        persist_window: bool,
        recorded: Recorded | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.persist_window = persist_window
        # the archive's offered rates, where one is configured: a load history the store holds less of
        # is completed from them once, when read (_load_histories)
        self.recorded = recorded
        self._unstored: set[str] = set()  # histories completed from the archive: written whole next
        self._archive_due: set[str] = set()  # histories read from the store, the archive not asked yet
        self._restored: set[str] = set()  # jobs whose stored window this process replayed
        # job key -> its load history as this process keeps it: read from the store once, then kept here
        # (the store holds its closed buckets, written as they close)
        self._histories: dict[str, LoadHistory] = {}
        # job key -> (lease token, state): states the database refused, written at the next chance
        self._unsaved: dict[str, tuple[int | None, JobState]] = {}

    # ------------------------------------------------------------------ load
    async def load(self, samples: Sequence[JobSample], tokens: Tokens | None = None) -> Loaded:
        """Every job's remembered state in one read, then the stored windows not replayed yet. A state
        the database refused at an earlier tick stands in for the stored one while it is still this
        daemon's (``tokens``, module doc)."""
        keys = [s.job.key for s in samples]
        states = await offload(self.state.load_many, keys) if keys else {}
        if self._unsaved:
            states = {**states, **self._still_mine(keys, tokens)}
        return Loaded(states, await self._stored_windows(samples), await self._load_histories(samples))

    async def _load_histories(self, samples: Sequence[JobSample]) -> dict[str, LoadHistory]:
        """The load history of each job with ``forecast.enabled``: kept in memory, read from the store
        the first time this process sees the job (again after :meth:`forget`). A read that fails gives
        those jobs none this tick, and is tried again at the next: starting them empty would have the
        next write drop what the store holds."""
        wanted = {s.job.key: s.target.options for s in samples if s.target.options.forecast_enabled}
        missing = [key for key in wanted if key not in self._histories]
        if missing:
            try:
                rows = await offload(self.state.read_load_history, missing)
            except Exception as exc:
                log.warning("load_history_restore_failed", jobs=len(missing), error=str(exc))
            else:
                for key in missing:
                    params = ForecastParams.of(wanted[key], key)
                    self._histories[key] = history_from(key, rows.get(key, ()), params)
                    if self.recorded is not None and len(self._histories[key].series) < params.capacity:
                        self._archive_due.add(key)
        if self._archive_due:
            now_ms = max((s.ts_ms for s in samples), default=0)
            await self._complete({k: o for k, o in wanted.items() if k in self._archive_due}, now_ms)
        return {key: self._histories[key] for key in wanted if key in self._histories}

    async def _complete(self, options: Mapping[str, AutoscalerOptions], now_ms: int) -> None:
        """Histories read from the store with fewer buckets than the forecast reads, completed from the
        archive's recorded offered rates (``autoscaler.foresight.backfill``): asked once per job and
        process, like the store's rows, :data:`ARCHIVE_JOBS_PER_TICK` jobs a tick, back to the oldest
        bucket a forecast reads; the next flush writes a completed history whole."""
        short = sorted(options)[:ARCHIVE_JOBS_PER_TICK]
        if not short or self.recorded is None:
            return
        self._archive_due.difference_update(short)
        params = {key: ForecastParams.of(options[key], key) for key in short}
        since_ms = now_ms - max(p.capacity * p.bucket_ms for p in params.values())
        try:
            recorded = await offload(self.recorded, short, since_ms)
        except Exception as exc:  # the reader logs its own failures; this is a bug, kept from the tick
            log.warning("load_history_archive_failed", jobs=len(short), error=str(exc), exc_info=True)
            return
        for key in short:
            samples = recorded.get(key)
            if not samples:
                continue
            done = complete(self._histories[key], samples, params[key])
            if done.added:
                self._histories[key] = done.history
                self._unstored.add(key)
                detail = (
                    "the job's load history in the state store was shorter than the archive's: completed "
                    "from the offered rates the archive recorded"
                )
            elif done.skipped == len(samples):
                detail = (
                    "none of the archive's offered rates for the job is a rate (NaN: a source's rate was "
                    "unknown): its forecast reads what the state store holds"
                )
            else:
                detail = "the archive holds no bucket older than the state store's"
            log.info(
                "load_history_from_archive",
                job=key,
                samples=len(samples),
                buckets_added=done.added,
                buckets=len(done.history.series),
                not_a_rate=done.skipped,
                detail=detail,
            )

    def _still_mine(self, keys: Iterable[str], tokens: Tokens | None) -> dict[str, JobState]:
        """The kept states of these jobs that are still this daemon's to write; those of a job another
        daemon held since are dropped (its stored state is newer). A job whose lease this daemon does
        not hold now keeps its state for when it does."""
        mine: dict[str, JobState] = {}
        for key in keys:
            if key not in self._unsaved:
                continue
            token, state = self._unsaved[key]
            now = tokens(key) if tokens is not None else token
            if now == token:
                mine[key] = state
            elif now is not None:
                del self._unsaved[key]
                log.warning(
                    "state_unsaved_dropped",
                    job=key,
                    detail="another daemon held the job's lease since this daemon's state write failed: "
                    "its stored state is newer than the one kept",
                )
        return mine

    async def _stored_windows(self, samples: Sequence[JobSample]) -> dict[str, list[JobSample]]:
        """The stored window of each job this process has not evaluated yet (e.g. after a restart).

        Only ticks older than the job's current sample and with its vertex set come back; whether
        the job restarted since is the evaluator's window bookkeeping to decide, as for live ticks.
        """
        new = [s for s in samples if s.job.key not in self._restored]
        self._restored.update(s.job.key for s in new)
        if not new or not self.persist_window:
            return {}
        try:
            restored = await offload(self.load_windows, new)
        except Exception as exc:  # without it the window just fills again from now on
            log.warning("window_restore_failed", error=str(exc))
            return {}
        if restored:
            log.info("windows_restored", jobs={k: len(v) for k, v in restored.items()})
        return restored

    def load_windows(self, samples: Sequence[JobSample]) -> dict[str, list[JobSample]]:
        """Each job's stored ticks older than its sample and with its vertex set (blocking I/O).

        The evaluator also calls it to refill every window at once when Spark lost them.
        """
        out: dict[str, list[JobSample]] = {}
        for sample in samples:
            vertices = set(sample.topology.vertices)
            stored = group_window(
                self.state.load_window(sample.job.key), self.state.load_custom_window(sample.job.key)
            )
            past = [
                JobSample(
                    sample.target,
                    t.ts_ms,
                    t.running_since_ms,
                    sample.topology,
                    t.vertices,
                    custom_vertex_metrics=t.custom_vertex_metrics,
                    custom_job_metrics=t.custom_job_metrics,
                )
                for t in stored
                if t.ts_ms < sample.ts_ms and set(t.vertices) == vertices
            ]
            if past:
                out[sample.job.key] = past
            elif stored:  # the operator asks why a restart lost the window: say which rule dropped it
                log.info(
                    "window_not_restored",
                    job=sample.job.key,
                    stored_ticks=len(stored),
                    not_older=sum(t.ts_ms >= sample.ts_ms for t in stored),
                    other_vertices=sum(set(t.vertices) != vertices for t in stored),
                    sample_ts_ms=sample.ts_ms,
                    newest_stored_ms=stored[-1].ts_ms,
                )
        return out

    def forget(self, keys: Iterable[str]) -> None:
        """Replay these jobs' stored windows, and read their load histories, again when they come back to
        this process. A state the database refused stays kept: the lease token decides whether it is
        still this daemon's."""
        keys = list(keys)
        self._restored.difference_update(keys)
        for key in keys:  # read again: another daemon may have written it meanwhile
            self._histories.pop(key, None)
            self._unstored.discard(key)
            self._archive_due.discard(key)

    # ------------------------------------------------------------------ flush
    async def flush(
        self,
        samples: Sequence[JobSample],
        loaded: Loaded,
        states: Mapping[str, JobState],
        now_ms: int,
        *,
        gone: Sequence[str] = (),
        lapsed: Callable[[str], bool] | None = None,
        tokens: Tokens | None = None,
        histories: Mapping[str, LoadHistory] | None = None,
    ) -> None:
        """Write the tick in one transaction: changed states, the tick's samples, the window trim, the
        load histories' closed buckets.

        ``states`` are the states the tick produced (unchanged ones are not written); ``gone`` jobs
        left their cluster and drop their window rows; ``lapsed`` says of a job key whether this
        daemon lost its lease (its cluster's or its shard's) during the tick: such a job is not
        written, since another daemon may own it by now. ``tokens`` gives each job's lease token, under
        which a state the database refuses is kept for the next tick (module doc). ``histories`` are the
        jobs' load histories after the tick: kept in memory, and what closed since ``loaded`` written.
        A refused write loses those buckets from the store only (the next write of their chunk puts
        them back, if it is still the newest).
        """
        histories = dict(histories or {})
        if lapsed is not None:
            samples = [s for s in samples if not lapsed(s.job.key)]
            states = {key: state for key, state in states.items() if not lapsed(key)}
            gone = [key for key in gone if not lapsed(key)]
            histories = {key: h for key, h in histories.items() if not lapsed(key)}
        self._histories.update(histories)
        unstored = self._unstored & histories.keys()  # completed from the archive: the store lacks parts
        writes = {
            key: write
            for key, h in histories.items()
            if (write := history_write(None if key in unstored else loaded.histories.get(key), h)) is not None
        }
        for key in gone:
            self._unsaved.pop(key, None)
        kept = self._still_mine(list(self._unsaved), tokens)
        changed = {
            key: state for key, state in states.items() if loaded.states.get(key) != state or key in kept
        }
        changed = {**kept, **changed}  # a kept state not in this tick: written as it was kept
        rows = {s.job.key: window_rows(s) for s in samples} if self.persist_window else {}
        custom = {s.job.key: custom_window_rows(s) for s in samples if s.job.key in rows}
        custom = {key: measured for key, measured in custom.items() if measured}
        cut = {
            s.job.key: now_ms - to_ms(s.target.options.metrics_window) for s in samples if s.job.key in rows
        }
        cut.update({key: now_ms + 1 for key in gone})  # a job that left drops its window rows

        def write() -> None:
            with self.state.transaction():
                if changed:
                    self.state.save_many(changed)
                if rows:
                    self.state.append_windows(rows)
                if custom:
                    self.state.append_custom_windows(custom)
                if cut:
                    self.state.trim_windows(cut)
                if writes:
                    self.state.write_load_history(writes)

        try:
            if changed or rows or cut or writes:
                await offload(write)
        except (DBAPIError, sqlite3.Error, OSError) as exc:  # the database, not the daemon: kept
            for key, state in changed.items():
                self._unsaved[key] = (tokens(key) if tokens is not None else None, state)
            log.error(
                "state_save_failed",
                error=_cause(exc),
                jobs=sorted(changed),
                detail="the state database refused this tick's write (locked by another process, or "
                "unreachable): the jobs' states are kept in memory and written at the next tick that holds "
                "their leases",
            )
            self._count_failure(samples)
        except Exception as exc:
            log.error("state_save_failed", error=str(exc), jobs=sorted(changed), exc_info=True)
            self._count_failure(samples)
        else:
            self._unstored -= unstored
            late = sorted(key for key in kept if self._unsaved.pop(key, None) is not None)
            if late:
                log.info("state_unsaved_written", jobs=late, detail="the states kept since a failed write")

    def _count_failure(self, samples: Sequence[JobSample]) -> None:
        for cluster in sorted({s.job.cluster for s in samples}):
            self.metrics.report_error(cluster, Reason.STATE_STORE_ERROR)


def _cause(exc: BaseException) -> str:
    """The database's own words ("database is locked"), without SQLAlchemy's statement and link."""
    orig = getattr(exc, "orig", None) or exc
    return f"{type(orig).__name__}: {orig}"
