"""How far a backtest on Spark has got: its jobs replayed so far, told every so often while it runs.

A full-size backtest (1,000 jobs x 1 day) runs for hours in one Spark stage, one task per job
(:mod:`autoscaler.backtest.spark`), with Spark's UI off and the command printing nothing until the
report. An operator watching it then cannot tell a slow run from a stuck one. Spark's status tracker
knows how many of the stage's tasks have completed, without the UI, so a thread reads it and reports
the count, the time so far and what is left at that pace.

A Spark Connect client has no status tracker: there the backtest runs silent, as before.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from autoscaler.evaluate.spark.session import is_connect_session

__all__ = ["JobsDone", "done_in_group", "replay_progress"]

EVERY_S = 60.0
_GROUPS = itertools.count(1)
# What ``setJobGroup`` sets on the thread, all cleared after the replay.
_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@dataclass(frozen=True, slots=True)
class JobsDone:
    """Jobs replayed of all of them, after ``elapsed_s``."""

    done: int
    jobs: int
    elapsed_s: float

    @property
    def left_s(self) -> float | None:
        """Seconds left at the pace so far; None until a job is done."""
        if self.done <= 0:
            return None
        return self.elapsed_s * max(0, self.jobs - self.done) / self.done

    def __str__(self) -> str:
        left = self.left_s
        pace = "" if left is None else f", about {left:,.0f} s left"
        return f"backtest: {self.done:,} of {self.jobs:,} jobs replayed in {self.elapsed_s:,.0f} s{pace}"


def done_in_group(tracker: Any, group: str) -> int:
    """Tasks completed in the last stage of the group's Spark jobs: the replay, one task per job (the
    stages before it only lay the job list out)."""
    stages = [
        stage
        for job_id in tracker.getJobIdsForGroup(group)
        if (info := tracker.getJobInfo(job_id)) is not None
        for stage in info.stageIds
    ]
    if not stages:
        return 0
    last = tracker.getStageInfo(max(stages))
    return 0 if last is None else int(last.numCompletedTasks)


@contextlib.contextmanager
def replay_progress(
    spark: Any,
    jobs: int,
    report: Callable[[JobsDone], None] | None,
    *,
    every_s: float = EVERY_S,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Run the Spark jobs of the block in a job group of their own and ``report`` their progress every
    ``every_s`` seconds, from a daemon thread, until the block ends. A report that fails ends the
    reporting, never the backtest. Without ``report``, or on Spark Connect, the block just runs."""
    if report is None or is_connect_session(spark):
        yield
        return
    context = spark.sparkContext
    group = f"flink-autoscaler-backtest-{next(_GROUPS)}"
    context.setJobGroup(group, f"backtest of {jobs} jobs")
    tracker, start, stop = context.statusTracker(), clock(), threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            try:
                report(JobsDone(done_in_group(tracker, group), jobs, clock() - start))
            except Exception:  # a session that stopped, a report that cannot print: stop telling
                return

    thread = threading.Thread(target=run, name="backtest-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s)
        for key in _GROUP_PROPERTIES:  # later jobs of this thread are not ours, nor described as ours
            context.setLocalProperty(key, None)
