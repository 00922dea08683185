"""The backtest's progress: jobs replayed, read from Spark's status tracker, told from a thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from autoscaler.backtest.progress import JobsDone, done_in_group, replay_progress


@dataclass
class Stage:  # Spark's StageInfo, Spark's names
    numTasks: int
    numCompletedTasks: int


@dataclass
class Job:
    stageIds: list[int]


@dataclass
class Tracker:
    """Spark's status tracker: a group's jobs, their stages, each stage's tasks."""

    groups: dict[str, list[int]] = field(default_factory=dict)
    jobs: dict[int, Job] = field(default_factory=dict)
    stages: dict[int, Stage] = field(default_factory=dict)

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return self.groups.get(group, [])

    def getJobInfo(self, job_id: int) -> Job | None:
        return self.jobs.get(job_id)

    def getStageInfo(self, stage_id: int) -> Stage | None:
        return self.stages.get(stage_id)


@dataclass
class Context:
    tracker: Tracker
    properties: dict[str, str | None] = field(default_factory=dict)

    def setJobGroup(self, group: str, description: str) -> None:
        self.properties["spark.jobGroup.id"] = group
        self.properties["spark.job.description"] = description
        self.properties["spark.job.interruptOnCancel"] = "false"
        self.tracker.groups[group] = [7]

    def setLocalProperty(self, key: str, value: str | None) -> None:
        self.properties[key] = value

    def statusTracker(self) -> Tracker:
        return self.tracker


@dataclass
class Session:
    sparkContext: Context


def test_the_jobs_done_are_the_completed_tasks_of_the_replay_stage() -> None:
    tracker = Tracker(groups={"g": [3]}, jobs={3: Job([4, 5])}, stages={4: Stage(2, 2), 5: Stage(1000, 120)})
    assert done_in_group(tracker, "g") == 120  # the last stage, not the one that laid the list out
    assert done_in_group(tracker, "other") == 0  # nothing started yet
    assert done_in_group(Tracker(groups={"g": [3]}, jobs={3: Job([9])}), "g") == 0  # stage info gone


def test_a_progress_line_says_what_is_left_at_the_pace_so_far() -> None:
    assert JobsDone(250, 1000, 600.0).left_s == 1800.0
    assert str(JobsDone(250, 1000, 600.0)) == (
        "backtest: 250 of 1,000 jobs replayed in 600 s, about 1,800 s left"
    )
    assert JobsDone(0, 1000, 30.0).left_s is None
    assert str(JobsDone(0, 1000, 30.0)) == "backtest: 0 of 1,000 jobs replayed in 30 s"


def test_progress_is_told_while_the_block_runs_and_the_job_group_is_cleared_after() -> None:
    tracker = Tracker(jobs={7: Job([1, 2])}, stages={2: Stage(10, 4)})
    context = Context(tracker)
    told: list[JobsDone] = []
    first = threading.Event()

    def report(done: JobsDone) -> None:
        told.append(done)
        first.set()

    ticks = iter(range(0, 10_000, 30))
    with replay_progress(Session(context), 10, report, every_s=0.001, clock=lambda: float(next(ticks))):
        assert context.properties["spark.jobGroup.id"] is not None  # the replay runs in our group
        assert first.wait(timeout=30)

    assert context.properties == dict.fromkeys(
        ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
    )  # nor are later jobs of this thread described as the replay
    assert told[0] == JobsDone(4, 10, 30.0)


def test_a_report_that_fails_ends_the_reporting_not_the_backtest() -> None:
    context = Context(Tracker(jobs={7: Job([1])}, stages={1: Stage(3, 1)}))
    failed = threading.Event()

    def report(done: JobsDone) -> None:
        failed.set()
        raise OSError("stderr is gone")

    with replay_progress(Session(context), 3, report, every_s=0.001):
        assert failed.wait(timeout=30)
    assert context.properties["spark.jobGroup.id"] is None


def test_without_a_status_tracker_the_backtest_runs_silent() -> None:
    class Connect:  # what a Spark Connect client looks like here: no SparkContext
        pass

    Connect.__module__ = "pyspark.sql.connect.session"
    told: list[Any] = []
    with replay_progress(Connect(), 3, told.append, every_s=0.001):
        pass
    assert told == []


def test_without_a_report_the_block_just_runs_outside_any_job_group() -> None:
    context = Context(Tracker())
    with replay_progress(Session(context), 3, None, every_s=0.001):
        assert "spark.jobGroup.id" not in context.properties
