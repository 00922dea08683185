"""Where a cluster's jobs and samples come from (``autoscaler.metrics_source``): the source is a value the
daemon is given, so collect does not branch on the mode; a backtest's recorded history is one source."""

from __future__ import annotations

from dataclasses import replace

from formula_builders import job_sample, topology

from autoscaler.daemon import Daemon
from autoscaler.job_scope import WHOLE, JobScope
from autoscaler.metrics_source import FlinkRest, RecordedHistory
from autoscaler.model import JobSample
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.testing import StubEvaluator

STALE = "flink_autoscaler_stale_samples_total"
SAMPLE = job_sample(topology({"Work": 2}))  # the job "c1/job"
SETTINGS = Settings(
    clusters=[ClusterSettings(name="c1", rest_url="http://c1.invalid:8081")],
    autoscaler={"job.autoscaler.enabled": "true"},
    metrics_address="",
)


def _daemon(recorded: dict[str, tuple[frozenset[str], tuple[JobSample, ...]]]) -> Daemon:
    source = RecordedHistory(lambda _cluster, _now: recorded["now"])
    return Daemon(SETTINGS, evaluator=StubEvaluator(), source=source)


def test_the_daemon_reads_flink_unless_given_a_source() -> None:
    assert isinstance(Daemon(SETTINGS, evaluator=StubEvaluator()).clusters.source, FlinkRest)


async def test_a_recorded_history_says_which_jobs_run_and_gives_the_samples_of_the_scope() -> None:
    other = "c1/not-running-yet"
    source = RecordedHistory(lambda _c, _now: (frozenset({SAMPLE.job.key, other}), (SAMPLE,)))
    cluster = _daemon({}).clusters["c1"]
    reading = await source.read(cluster, 0, WHOLE)
    assert reading.running == {SAMPLE.job.key, other} and reading.refs == (SAMPLE.job,)
    assert reading.found == (SAMPLE,) and reading.invalid == () and reading.read_now == ()
    assert (await source.read(cluster, 0, JobScope("c1/other"))).found == ()


async def test_recorded_samples_go_through_the_tick_and_a_job_that_leaves_them_is_gone() -> None:
    recorded = {"now": (frozenset({SAMPLE.job.key}), (replace(SAMPLE, stale_ticks=1),))}
    daemon = _daemon(recorded)
    report = await daemon.run_tick()
    assert [o.job.key for o in report.outcomes] == [SAMPLE.job.key]
    # a recorded sample's staleness was told when it was recorded: not counted again by the replay
    assert daemon.metrics.registry.get_sample_value(STALE, {"cluster": "c1", "job": "job"}) is None
    recorded["now"] = (frozenset(), ())
    await daemon.run_tick()
    assert daemon.evaluator.forgotten == [SAMPLE.job.key]
