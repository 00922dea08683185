"""The ``job`` label's cap: a 10,000-character job name must not be repeated in full in every series of
its job, two long names must stay two jobs, and a capped series must still be its job's (not a "gone"
job whose series are removed every tick)."""

from __future__ import annotations

import hashlib

from prometheus_client import generate_latest

from autoscaler.metric_labels import MAX_JOB_LABEL, job_label
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef
from autoscaler.reasons import Reason
from autoscaler.testing import make_evaluation, vertex_eval

LONG = "n" * 10_000


def test_a_short_name_is_its_own_label_and_a_long_one_a_readable_prefix_and_a_hash():
    assert job_label("orders") == "orders"
    assert job_label("x" * MAX_JOB_LABEL) == "x" * MAX_JOB_LABEL
    capped = job_label(f"{LONG}A")
    digest = hashlib.sha256(f"{LONG}A".encode()).hexdigest()[:16]
    assert capped == f"{'n' * (MAX_JOB_LABEL - 17)}~{digest}"
    assert len(capped) == MAX_JOB_LABEL
    assert job_label(f"{LONG}B") != capped  # names that differ only at the end stay two jobs
    assert job_label(f"{LONG}A") == capped  # and a name always gets the same label


def test_every_series_of_a_long_named_job_has_the_capped_label_and_stays_its_jobs():
    metrics = MetricsReporter()
    job = JobRef("c1", "0" * 32, LONG)
    evaluation = make_evaluation([vertex_eval("src", 1), vertex_eval("work", 1, 3)], job=job)
    metrics.report_evaluation(evaluation)
    metrics.report_outcome(job, Reason.SCALING, scaled=True)
    metrics.job_slots.labels(job.cluster, job.name).set(4)  # as the stages label their series
    metrics.plugin_outcomes.labels(cluster="c1", job=job.name, plugin="gate", outcome="approved").inc()
    metrics.report_outcome(JobRef("c1", "1" * 32, "short"), Reason.IN_BAND, scaled=False)

    samples = [s for family in metrics.registry.collect() for s in family.samples if "job" in s.labels]
    assert {s.labels["job"] for s in samples} == {job_label(LONG), "short"}
    families = {s.name.removesuffix("_total").removesuffix("_created") for s in samples}
    assert {
        "flink_autoscaler_vertex_parallelism",
        "flink_autoscaler_scalings",
        "flink_autoscaler_plugin_outcomes",
        "flink_autoscaler_job_slots",
    } <= families
    page = generate_latest(metrics.registry).splitlines()
    assert max(len(line) for line in page) < 1_000  # with the name in full, every line of the job 10 KB

    # The job is known by its key, so it is not taken for a vanished one (whose series go) at each tick.
    assert metrics.known_jobs() == {job.key, "c1/short"}
    metrics.forget([job.key])
    left = {
        s.labels["job"] for family in metrics.registry.collect() for s in family.samples if "job" in s.labels
    }
    assert left == {"short"}
    assert metrics.known_jobs() == {"c1/short"}
    assert len(metrics.job_labels) == 0  # nothing kept of a forgotten name
