"""The Spark backend of the evaluator: one long-lived session, one batched computation per tick.

Split of work (see ``/work/shared/reference/spark.md`` §3 and §6): Spark keeps the metric window and
reduces it to ONE ROW PER VERTEX (every getRate and getAverage done in the query); the driver does the
graph propagation and the parallelism arithmetic for all jobs at once in numpy
(:class:`autoscaler.evaluate.fleet.evaluator.FleetEvaluator`, the oracle's graph walk for jobs with custom
evaluators). Rows travel both ways as Arrow tables, never as Python objects per row. Each tick appends
only the new samples to the window held in Spark, drops what left the window with a semi-join against a
tiny ``(job_key, epoch, start_ms)`` frame (in one partition, for all but the largest windows), and cuts
the lineage with ``localCheckpoint`` so a loop that runs for months never grows its plan. The tick
aggregates that plan as it is; its checkpoint is taken in the background and waited for by the next
tick (:mod:`autoscaler.evaluate.spark.checkpointing`).

Custom metrics (declared by plugins, :mod:`autoscaler.plugins.metrics`) live beside the window in a
long frame ``(job_key, epoch, scope, name, ts_ms, value)``: one row per measured value, so any number of
names costs no schema change. It goes through the same append/drop cycle with the same keep frame, and
its aggregation is unioned into the standard one, so a tick is still ONE aggregation query for every
job. Jobs without custom metrics cost nothing: the frame exists only while it holds rows.

The session is made in :mod:`autoscaler.evaluate.spark.session`; the frames' layout and the aggregation
query are in :mod:`autoscaler.evaluate.spark.frames`; what each job needs around the batch, and its
result, in :mod:`autoscaler.evaluate.spark.tick_jobs`. This module keeps the windows across ticks and
evaluates; it re-exports the names importers take from it. It is some 450 lines because
:class:`SparkEvaluator` is one transaction per tick (replay, append, slide, aggregate, evaluate, roll back
or recover) over one shared state (the window book, the two frames, the session): split up, its parts
would only hand that state to each other.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import structlog

from autoscaler.evaluate.custom import ConfiguredEvaluator
from autoscaler.evaluate.fleet.evaluator import FleetEvaluator
from autoscaler.evaluate.spark.checkpointing import BackgroundCheckpoint, WindowFrames
from autoscaler.evaluate.spark.frames import (
    CUSTOM_COLUMNS,
    CUSTOM_DDL,
    ROW_DDL,
    SINGLE_TASK_ROWS,
    CustomAggregates,
    aggregate_frame,
    collect_aggregates,
    collect_tick_aggregates,
    collect_tick_columns,
    custom_aggregate_frame,
    custom_rows_frame,
    extend_window,
    job_custom_rows,
    keep_frame,
    release_frame,
    rows_frame,
    window_rows,
)
from autoscaler.evaluate.spark.phases import EvaluationPhases, PhaseTimer
from autoscaler.evaluate.spark.series import SeriesNames, VertexOrders
from autoscaler.evaluate.spark.session import (
    create_spark_session,
    discard_local_session,
    is_connect,
    is_connect_session,
    local_jvm_alive,
    session_conf,
    spark_error,
)
from autoscaler.evaluate.spark.tick_jobs import TickJob, prepare_job, rows_per_job, windowed_custom_metrics
from autoscaler.evaluate.window.book import WindowBook
from autoscaler.model import JobEvaluation, JobSample, VertexSample
from autoscaler.settings import SparkSettings
from autoscaler.state import ScalingRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = structlog.get_logger(__name__)

__all__ = [
    "CUSTOM_COLUMNS",
    "CUSTOM_DDL",
    "ROW_DDL",
    "CustomAggregates",
    "SeriesNames",
    "SparkEvaluator",
    "aggregate_frame",
    "collect_aggregates",
    "collect_tick_aggregates",
    "create_spark_session",
    "custom_aggregate_frame",
    "custom_rows_frame",
    "is_connect",
    "rows_frame",
    "session_conf",
    "start_evaluator",
    "windowed_custom_metrics",
]

STOP_GRACE_S = 10.0  # how long stop() waits for a background checkpoint under way
# Spark's error class for a local checkpoint whose blocks went with their executor: not recomputable.
_LOST_WINDOW = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",)
# A Connect session the server no longer knows (it restarted, or expired the session): the client closes
# itself and every later call fails with NO_ACTIVE_SESSION until a new session is created.
_GONE_SESSION = ("NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION_")


def start_evaluator(
    settings: SparkSettings, *, on_lost: Callable[[str], None] | None = None
) -> SparkEvaluator:
    """The process's session and its evaluator, which makes a new session when it loses this one: a
    Connect server that restarted, or a local driver JVM that died. ``on_lost`` is told each loss it
    recovers from ("session" or "window"), for the daemon's metrics."""
    spark = create_spark_session(settings)
    try:
        return SparkEvaluator(
            spark, reconnect=functools.partial(create_spark_session, settings), on_lost=on_lost
        )
    except BaseException:
        spark.stop()
        raise


def _keeps(keep: Mapping[str, tuple[int, int]], job_key: str, epoch: int, ts_ms: int) -> bool:
    """Whether the slide keeps a sample of ``epoch`` taken at ``ts_ms`` (``WindowBook.retain``'s frame)."""
    kept = keep.get(job_key)
    return kept is not None and kept[0] == epoch and ts_ms >= kept[1]


# ---------------------------------------------------------------------------------------------- evaluator
class SparkEvaluator:
    """Keeps every job's metric window in Spark and evaluates all jobs of a tick in one batch.

    ``evaluate`` must be called from one thread at a time (the daemon's tick).
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        partitions: int | None = None,
        reconnect: Callable[[], SparkSession] | None = None,
        on_lost: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``reconnect`` makes a new session when this one is lost: Spark Connect no longer knows it
        (the server restarted), or the local driver JVM died; without it such a session fails every
        tick until the process restarts. ``clock`` times the phases of a tick (:attr:`last_phases`)."""
        self._spark = spark
        self._clock = clock
        self.last_phases: EvaluationPhases | None = None
        """Where the last evaluation that succeeded spent its time (``spark/phases.py``)."""
        self._reconnect = reconnect
        self._connect = is_connect_session(spark)
        self._on_lost = on_lost or (lambda _what: None)
        self._partitions = partitions or max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or "4"))
        self._book = WindowBook()
        self._fleet = FleetEvaluator()
        self._frames = WindowFrames()
        self._rows_by_job: dict[str, int] = {}
        self._custom_rows_by_job: dict[str, int] = {}
        self._orders = VertexOrders()  # each epoch's vertices in series order, sorted once

    # -- lifecycle -----------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Run the tick's Spark operations once on throwaway rows (JIT, codegen, Arrow, workers)."""
        rows, names = rows_frame(
            [("warm-up", 0, "v", 0, VertexSample()), ("warm-up", 0, "v", 1, VertexSample())]
        )
        custom = custom_rows_frame([("warm-up", 0, "v", "m", 0, 1.0)])
        keep = keep_frame({"warm-up": (0, 0)})
        frame = self._extend(None, rows, keep)
        custom_frame = self._extend(None, custom, keep, CUSTOM_DDL)
        if frame is not None:
            collect_tick_columns(frame, custom_frame, names)
        for done in BackgroundCheckpoint((frame, custom_frame)).result():
            release_frame(done)

    @property
    def session(self) -> SparkSession:
        """The session this evaluator runs on now."""
        return self._spark

    def check(self) -> None:
        """Raise unless Spark can evaluate now, after replacing a session it lost (``reconnect``).

        The daemon asks before it takes its leases back after a failed evaluation: a daemon that
        cannot evaluate stands by, so that a healthy standby acts on its clusters.
        """
        try:
            self._spark.range(1).count()
        except Exception as err:
            self._recover(err)
            self._spark.range(1).count()

    def stop(self) -> None:
        """Stop the session this evaluator runs on now (a reconnect replaces the one it started with).

        A background checkpoint under way is given :data:`STOP_GRACE_S` to end (it takes a second or
        less), then abandoned: stopping the session ends it."""
        if not self._frames.abandon(STOP_GRACE_S):
            log.info("spark_window_checkpoint_abandoned", grace_s=STOP_GRACE_S)
        with contextlib.suppress(Exception):  # a session that is gone has nothing left to stop
            self._spark.stop()

    def settle(self) -> None:
        """Wait for the last tick's background checkpoint of the window (each tick does this first)."""
        self._frames.settle()

    def forget(self, job_keys: Iterable[str]) -> None:
        """Drop jobs (stopped or removed); their rows leave Spark at the next tick."""
        keys = list(job_keys)
        self._book.forget(keys)
        for key in keys:
            self._rows_by_job.pop(key, None)
            self._custom_rows_by_job.pop(key, None)

    def window_size(self) -> int:
        """Rows retained in Spark as of the last tick, minus forgotten jobs."""
        return sum(self._rows_by_job.values())

    def custom_window_size(self) -> int:
        """Custom-metric rows (one per measured value) retained as of the last tick, minus forgotten jobs."""
        return sum(self._custom_rows_by_job.values())

    # -- the tick ------------------------------------------------------------------------------
    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        restart_times_s: Mapping[str, float] | None = None,
        history: Mapping[str, Sequence[ScalingRecord]] | None = None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        """Append this tick's samples, slide every window, aggregate all jobs at once, evaluate each job.

        ``restored`` (by job key, any order) are samples a previous daemon process stored for jobs
        this one has not seen yet: they are replayed into the window at their own timestamps before
        this tick's samples, and their rows join this tick's single append, so a restarted daemon
        resumes its windows instead of waiting a full ``metrics.window``.

        ``history`` (by job key, oldest first) feeds the history-dependent rules: restart-time tracking,
        ineffective scale-up detection and the observed scalability coefficient. ``restart_times_s`` (by
        job key) overrides the restart time; without it a job's restart time comes from its history
        (:func:`autoscaler.evaluate.history.restart_time_s`), i.e. ``restart.time`` unless tracked.
        ``evaluators`` (by job key) are the job's custom evaluators with their config, in order
        (:class:`autoscaler.plugins.evaluators.EvaluatorInstances`); a job whose list holds an
        :class:`~autoscaler.evaluate.custom.UnavailableEvaluator` is not evaluated (``PluginFailed``).
        If Spark fails, the window bookkeeping rolls back so the next tick starts from the rows Spark has.
        If Spark lost the rows (an executor holding a local checkpoint died: a standalone cluster or a
        Connect server's cluster), every window starts afresh with this tick instead of every later
        tick failing on the missing blocks; so do they on a new session when the Connect server lost
        ours (``reconnect``). ``reload`` (this tick's samples -> the stored samples older than them, by
        job key, as ``restored``) refills them at once; without it, or if it fails, jobs read
        ``WindowNotFull`` for one ``metrics.window``.
        """
        try:
            return self._evaluate(samples, now_ms, restart_times_s, history, evaluators, restored)
        except Exception as err:
            self._recover(err)
        refill = restored
        if reload is not None:
            try:
                refill = reload(samples)
            except Exception as exc:  # the windows then fill from this tick on
                log.warning("spark_window_reload_failed", error=str(exc))
            else:
                log.info("spark_window_reloaded", jobs={k: len(v) for k, v in refill.items()})
        return self._evaluate(samples, now_ms, restart_times_s, history, evaluators, refill)

    def _evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        restart_times_s: Mapping[str, float] | None,
        history: Mapping[str, Sequence[ScalingRecord]] | None,
        evaluators: Mapping[str, Sequence[ConfiguredEvaluator]] | None,
        restored: Mapping[str, Sequence[JobSample]] | None,
    ) -> dict[str, JobEvaluation]:
        timer = PhaseTimer(self._clock)
        self.settle()
        timer.lap("spark")
        saved = self._book.copy()
        replayed = self._replay(restored or {})
        ticks = self._observe(samples, now_ms)
        keep = self._book.retain(now_ms, present=ticks)
        # This tick's samples and the replayed ones that the slide keeps: known here, so their rows need
        # no join in Spark (only the rows already there do).
        fresh = [
            (epoch, s)
            for epoch, s in (
                *replayed,
                *((t.status.epoch, t.sample) for t in ticks.values() if t.status.kept),
            )
            if _keeps(keep, s.job.key, epoch, s.ts_ms)
        ]
        rows = window_rows([(epoch, s, self._orders.of(epoch, s.topology.vertices)) for epoch, s in fresh])
        custom_rows = custom_rows_frame(
            row for epoch, s in fresh for row in job_custom_rows(s.job.key, epoch, s)
        )
        keep_rows = keep_frame(keep)
        timer.lap("window")
        previous, previous_custom = self._frames.window, self._frames.custom
        # The window's size before this tick's slide plus its new rows: an upper bound on what the
        # aggregation reads (the slide only drops rows), so a window near the limit keeps its shuffle.
        small = self.window_size() + rows.num_rows <= SINGLE_TASK_ROWS
        window: DataFrame | None = None
        try:
            window = self._extend(previous, rows, keep_rows, single_task=small)
            custom = (
                self._extend(previous_custom, custom_rows, keep_rows, CUSTOM_DDL, single_task=small)
                if previous_custom is not None or custom_rows.num_rows > 0
                else None
            )
        except BaseException:
            self._book = saved
            self._orders.clear()  # the saved book hands out this tick's epochs again
            raise
        self._frames.advance(window, custom)
        if not small:
            # A large window's plan costs about as much to compute as to aggregate: checkpoint it
            # first and aggregate the checkpoint, instead of computing it twice (in the tick and again
            # in the background). A checkpoint that fails leaves the plan, which still aggregates.
            self._frames.checkpoint()
            self._frames.settle()
            window, custom = self._frames.window, self._frames.custom
        standard, custom_aggregates = collect_tick_columns(
            window, custom, self._orders.names(keep, self._book), single_task=small
        )
        timer.lap("spark")
        counts = rows_per_job(standard)
        self._rows_by_job = {key: rows for key, (rows, _) in counts.items()}
        self._custom_rows_by_job = {
            key: sum(m.points for per_scope in scopes.values() for m in per_scope.values())
            for key, scopes in custom_aggregates.items()
        }
        if custom is not None and not self._custom_rows_by_job:
            self._frames.drop_custom()  # every custom row left the window: back to the no-cost path
        if small:
            self._frames.checkpoint()
        jobs = {
            key: prepare_job(
                t,
                counts.get(key, (0, 0))[1],
                custom_aggregates.get(key, {}),
                (restart_times_s or {}).get(key),
                (history or {}).get(key, ()),
                (evaluators or {}).get(key, ()),
            )
            for key, t in ticks.items()
        }
        evaluated = [key for key, job in jobs.items() if job.evaluated]
        graphs = self._fleet.evaluate([jobs[key].fleet for key in evaluated], standard)
        results = dict(zip(evaluated, graphs, strict=True))
        evaluations = {key: job.evaluation(results.get(key)) for key, job in jobs.items()}
        timer.lap("driver")
        self.last_phases = timer.phases()
        return evaluations

    def _recover(self, err: Exception) -> None:
        """Start every window afresh if ``err`` says Spark lost them, on a new session if it lost ours;
        re-raise anything else (and a failing reconnect: the next tick tries again)."""
        lost = spark_error(err, _LOST_WINDOW)
        jvm_dead = not self._connect and not local_jvm_alive()
        gone = None if lost is not None else self._session_gone(err, jvm_dead)
        if lost is None and gone is None:
            raise err
        jobs = len(self._rows_by_job)
        self._drop_windows()
        if lost is not None:
            log.warning("spark_window_lost", jobs=jobs, detail=lost)
            self._on_lost("window")
            return
        assert self._reconnect is not None
        if not jvm_dead:
            log.warning("spark_session_lost", jobs=jobs, detail=gone)
            # Stopped, the dead session stops being PySpark's default: the new one takes its place, which
            # Connect's DataFrames look up (the tick runs on worker threads that have no active session).
            self.stop()
        else:
            exit_code = discard_local_session(self._spark)
            log.warning("spark_session_lost", jobs=jobs, detail=gone, jvm_exit_code=exit_code)
        self._on_lost("session")
        self._spark = self._reconnect()
        log.info("spark_session_reconnected")

    def _session_gone(self, err: Exception, jvm_dead: bool) -> str | None:
        """Why our session is gone for good, or None (it is not, or there is no ``reconnect``)."""
        if self._reconnect is None:
            return None
        forgotten = spark_error(err, _GONE_SESSION)  # a Connect server that restarted
        if forgotten is not None or not jvm_dead:
            return forgotten
        return f"the driver JVM is gone ({type(err).__name__}: {err})"

    def _drop_windows(self) -> None:
        """Forget every window, in Spark and in the bookkeeping: what is left of the frames is unusable."""
        self._frames.drop()
        self._book = WindowBook()
        self._orders.clear()
        self._rows_by_job.clear()
        self._custom_rows_by_job.clear()

    def _replay(self, restored: Mapping[str, Sequence[JobSample]]) -> list[tuple[int, JobSample]]:
        """Fold stored samples into the window bookkeeping as their ticks did; the (epoch, sample) kept."""
        kept: list[tuple[int, JobSample]] = []
        for past in restored.values():
            for sample in sorted(past, key=lambda s: s.ts_ms):
                status = self._book.observe_sample(sample, sample.ts_ms)
                if status.kept:
                    kept.append((status.epoch, sample))
        return kept

    def _observe(self, samples: Sequence[JobSample], now_ms: int) -> dict[str, TickJob]:
        """Fold each job's sample into its window; of two samples with one job key the newest wins."""
        latest: dict[str, JobSample] = {}
        for sample in samples:
            seen = latest.get(sample.job.key)
            if seen is None or sample.ts_ms > seen.ts_ms:
                latest[sample.job.key] = sample
        ticks: dict[str, TickJob] = {}
        for sample in latest.values():
            status = self._book.observe_sample(sample, now_ms)
            ticks[sample.job.key] = TickJob(sample, status)
        return ticks

    def _extend(
        self,
        previous: DataFrame | None,
        rows: pa.Table,
        keep: pa.Table,
        ddl: str = ROW_DDL,
        *,
        single_task: bool = False,
    ) -> DataFrame | None:
        """:func:`~autoscaler.evaluate.spark.frames.extend_window` on this evaluator's session."""
        return extend_window(
            self._spark, previous, rows, keep, ddl, partitions=self._partitions, single_task=single_task
        )
