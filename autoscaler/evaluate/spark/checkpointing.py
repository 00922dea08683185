"""The window's frames across ticks, and their local checkpoints, taken in the background.

A tick needs its window's aggregation; it does not need the window checkpointed. The checkpoint only
cuts the lineage the NEXT tick would otherwise replay (the previous checkpoint, semi-joined with what
the slide keeps, plus this tick's rows), so the tick aggregates the plan as it is and hands the
checkpoint to a thread that runs it while the driver finishes the tick's arithmetic and the daemon
decides, acts and waits for its next tick. The next tick waits for it first (:meth:`WindowFrames.settle`);
a daemon's interval is many times what a checkpoint takes, so that wait is nil. Together with keeping
a small window in one partition, this took a 1,000-job tick from 0.75 to 0.61 s (``docs/performance.md``,
"Evaluator"). A window too large for one partition is checkpointed in the tick, before its aggregation
(:meth:`WindowFrames.checkpoint` then :meth:`WindowFrames.settle`): its plan costs about as much as
its aggregation, and the background would compute it a second time.

Its own module because it is a thread and the hand-over of frames between ticks, apart from what the
evaluator computes (:mod:`autoscaler.evaluate.spark.evaluator`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

import structlog

from autoscaler.evaluate.spark.frames import release_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["BackgroundCheckpoint", "WindowFrames"]

log = structlog.get_logger(__name__)


class BackgroundCheckpoint:
    """Local checkpoints of some frames, taken on a daemon thread.

    A daemon thread, not an executor's worker: a session that hangs must not keep the process from
    exiting. PySpark runs each Python thread's calls on a JVM thread of its own (pinned threads), and
    waiting for Spark releases the GIL, so the tick's Python goes on beside it.
    """

    def __init__(self, frames: Sequence[DataFrame | None]) -> None:
        self.frames = tuple(frames)
        self._future: Future[tuple[DataFrame | None, ...]] = Future()
        threading.Thread(target=self._run, name="spark-window-checkpoint", daemon=True).start()

    def _run(self) -> None:
        try:
            done = tuple(None if f is None else f.localCheckpoint(eager=True) for f in self.frames)
        except BaseException as err:  # handed to whoever waits: the thread itself has no one to tell
            self._future.set_exception(err)
        else:
            self._future.set_result(done)

    def result(self) -> tuple[DataFrame | None, ...]:
        """The checkpointed frames, in order (None stays None); raises what the checkpoint raised."""
        return self._future.result()

    def wait(self, timeout_s: float) -> bool:
        """Whether it ended (done or failed) within ``timeout_s``."""
        try:
            self._future.exception(timeout=timeout_s)
        except TimeoutError:
            return False
        return True


class WindowFrames:
    """The window (``window``) and the custom-metric rows (``custom``, None while there are none) in
    Spark, as checkpoints or as plans over the checkpoints before them (``superseded``, released once
    a later checkpoint is taken). One thread at a time: the evaluator's tick."""

    def __init__(self) -> None:
        self.window: DataFrame | None = None
        self.custom: DataFrame | None = None
        self._superseded: list[DataFrame] = []
        self._pending: BackgroundCheckpoint | None = None

    def settle(self) -> None:
        """Wait for the last tick's background checkpoint and make it the frames.

        If it failed, the frames stay plans over the checkpoints before them, which are kept until a
        later checkpoint succeeds: the next tick aggregates those plans and checkpoints them again, and a
        failure that lost the rows themselves surfaces in that aggregation.
        """
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            done = pending.result()
        except Exception as err:
            log.warning(
                "spark_window_checkpoint_failed",
                error=str(err),
                detail="the window stays a plan over its last checkpoint; the next tick checkpoints it again",
            )
            return
        self.window, self.custom = done  # the frames change only in a tick, and each tick settles first
        self._release_superseded()

    def advance(self, window: DataFrame | None, custom: DataFrame | None) -> None:
        """This tick's plans become the frames; they read the previous frames until checkpointed (a frame
        that is itself a plan, after a failed checkpoint, has nothing to release: release_frame skips it)."""
        self._superseded += [f for f in (self.window, self.custom) if f is not None]
        self.window, self.custom = window, custom

    def checkpoint(self) -> None:
        """Start the frames' checkpoint in the background; with no frames, release what they read."""
        if self.window is None and self.custom is None:
            self._release_superseded()
        else:
            self._pending = BackgroundCheckpoint((self.window, self.custom))

    def drop_custom(self) -> None:
        """No custom rows are left: the custom frame goes, and is released with the next checkpoint."""
        if self.custom is not None:
            self._superseded.append(self.custom)
            self.custom = None

    def abandon(self, grace_s: float = 0.0) -> bool:
        """Stop waiting for a checkpoint under way, once it ended or after ``grace_s``: the session is
        stopping, which ends it (a checkpoint cut short by the stop logs Spark errors). Whether none was
        left running."""
        pending, self._pending = self._pending, None
        return pending is None or pending.wait(grace_s)

    def drop(self) -> None:
        """Forget every frame and free what can be freed: what is left of them is unusable."""
        self._pending = None  # its thread ends on its own, with an error or a checkpoint nobody reads
        self._release_superseded()
        release_frame(self.window)
        release_frame(self.custom)
        self.window = self.custom = None

    def _release_superseded(self) -> None:
        superseded, self._superseded = self._superseded, []
        for frame in superseded:
            release_frame(frame)
