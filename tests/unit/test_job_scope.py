"""The job scope of a tick (``autoscaler.job_scope``): every job, or one job alone."""

from __future__ import annotations

from autoscaler.job_scope import WHOLE, JobScope


def test_a_whole_tick_reads_every_job_of_every_cluster() -> None:
    assert WHOLE.whole and WHOLE.admits("a/x") and WHOLE.reaches("a")


def test_a_one_job_scope_reads_that_job_of_its_cluster_alone() -> None:
    scope = JobScope("a/b/job")  # cluster "a", job "b/job": a job name may hold a slash
    assert not scope.whole
    assert scope.admits("a/b/job") and not scope.admits("a/other")
    assert scope.reaches("a") and scope.reaches("a/b") and not scope.reaches("b")
