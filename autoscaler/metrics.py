"""Every Prometheus metric the daemon exports, on an injected registry.

``MetricsReporter`` is fed domain objects (evaluations, outcomes, errors, REST calls) and removes every
series of a job that disappeared, vertex gauges and per-job counters alike, so dashboards never show a
stale job. The per-vertex gauges, and the budget that bounds them (``vertex_metrics``,
``vertex_metrics_max_series``), are :mod:`autoscaler.vertex_series`. At some 450 lines it stays one
module, because it is the one list of every series the daemon exports, which docs/operations.md mirrors.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from autoscaler.metric_labels import JobCounter, JobGauge, JobLabels
from autoscaler.model import JobEvaluation, JobRef, VertexId
from autoscaler.reasons import Reason
from autoscaler.settings.daemon_settings import VertexMetrics
from autoscaler.vertex_series import VertexSeries

if TYPE_CHECKING:
    from autoscaler.evaluate.spark.phases import EvaluationPhases
    from autoscaler.health import Health
    from autoscaler.state.model import ScalingVerification

__all__ = ["MetricsReporter"]


_JOB_LABELS = ("cluster", "job")


_ERROR_WORDS = {"FlinkUnreachable": "unreachable", "FlinkBadPayload": "bad_payload"}


class MetricsReporter:
    """The daemon's metrics. ``health`` (optional) learns from :meth:`report_tick` and
    :meth:`report_spark` that the loop is alive, so the daemon reports both in one call.

    ``vertex_metrics`` and ``vertex_metrics_max_series`` (0: no limit) bound the per-vertex series. Their
    defaults here export everything, so a reporter built bare (tests, tools) hides nothing; the daemon
    passes its settings, whose defaults keep a large daemon's page small. Only the gauges the mode exports
    are registered, so a restart with another mode leaves no empty families behind.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        health: Health | None = None,
        vertex_metrics: VertexMetrics = "all",
        vertex_metrics_max_series: int = 0,
    ) -> None:
        if vertex_metrics not in get_args(VertexMetrics):
            raise ValueError(
                f"vertex_metrics must be one of {get_args(VertexMetrics)}, not {vertex_metrics!r}"
            )
        if vertex_metrics_max_series < 0:
            raise ValueError("vertex_metrics_max_series must be >= 0 (0: no limit)")
        self.registry = registry or CollectorRegistry()
        self.health = health
        self.vertex_metrics: VertexMetrics = vertex_metrics
        self.vertex_metrics_max_series = vertex_metrics_max_series
        r = self.registry
        # Every metric with a job label caps its value (autoscaler.metric_labels); j names them back.
        j = self.job_labels = JobLabels()
        self.vertex = VertexSeries(r, vertex_metrics, vertex_metrics_max_series)
        self.verification_ratio = self.vertex.verification_ratio
        self.scalings = JobCounter(
            "flink_autoscaler_scalings", "Rescales issued", _JOB_LABELS, registry=r, job_labels=j
        )
        self.balanced = JobCounter(
            "flink_autoscaler_balanced",
            "Ticks that ended without a change",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.decisions = JobCounter(
            "flink_autoscaler_decisions",
            "Decision outcomes by reason",
            (*_JOB_LABELS, "outcome"),
            registry=r,
            job_labels=j,
        )
        self.errors = Counter(
            "flink_autoscaler_errors", "Errors by cluster and reason", ("cluster", "reason"), registry=r
        )
        self.plugin_outcomes = JobCounter(
            "flink_autoscaler_plugin_outcomes",
            "Executor-plugin outcomes per instance (approved, modified, vetoed, failed)",
            (*_JOB_LABELS, "plugin", "outcome"),
            registry=r,
            job_labels=j,
        )
        self.deferred = JobCounter(
            "flink_autoscaler_deferred_decisions",
            "Decisions deferred by scaling-interval.min or Flink's cooldown (retried when it ends)",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.forced = JobCounter(
            "flink_autoscaler_forced_scalings",
            "Changes below the minimum requirement forced by scaling-interval.max",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.metrics_unknown = JobCounter(
            "flink_autoscaler_metrics_unknown",
            "Decisions that ended MetricsUnknown: the rates of the vertices that matter were NaN or missing",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.option_fallbacks = JobCounter(
            "flink_autoscaler_option_fallbacks",
            "Evaluations that used a fallback for an option value that cannot be honoured (by option key)",
            (*_JOB_LABELS, "option"),
            registry=r,
            job_labels=j,
        )
        self.stale_samples = JobCounter(
            "flink_autoscaler_stale_samples",
            "Samples that found Flink serving its last metric fetch again (no new fetch had landed): "
            "kept at their first read's time, so they add no point to the metric window",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.rescales_rejected = JobCounter(
            "flink_autoscaler_rescales_rejected",
            "PUTs of new resource requirements Flink refused (4xx, RescaleRejected); the next rescale "
            "waits the same doubling backoff as after a stuck one",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.rescales_stuck = JobCounter(
            "flink_autoscaler_rescales_stuck",
            "Rescales Flink accepted but never ran within confirm_timeout (RescaleStuck); the next one "
            "waits a doubling backoff",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.resubmissions = JobCounter(
            "flink_autoscaler_job_resubmissions",
            "Times the job name was found running under a new JobID (JobResubmitted): its pending rescale "
            "and stuck count were dropped, its scaling history kept",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.invalid_metric_values = JobCounter(
            "flink_autoscaler_invalid_metric_values",
            "Metric values that cannot be, read as unknown (NaN) instead of becoming a rate, by kind: "
            "negative, infinite or too_large (a count, rate, time or lag at or above 2^63, a busy or "
            "back-pressured share above 1100 ms/s)",
            (*_JOB_LABELS, "kind"),
            registry=r,
            job_labels=j,
        )
        self.counter_resets = JobCounter(
            "flink_autoscaler_metric_counter_resets",
            "Record counters that fell within one job run (a reset without a restart): the job's metric "
            "window started over there",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.verifications = JobCounter(
            "flink_autoscaler_scaling_verifications",
            "Rescales verified over a full metric window, by result (as_expected, below_expected)",
            (*_JOB_LABELS, "result"),
            registry=r,
            job_labels=j,
        )
        self.rest_requests = Counter(
            "flink_autoscaler_rest_requests",
            "Flink REST requests by endpoint and HTTP status (or unreachable / bad_payload)",
            ("cluster", "method", "endpoint", "status"),
            registry=r,
        )
        self.rest_errors = Counter(
            "flink_autoscaler_rest_errors",
            "Flink REST requests that failed: an HTTP error status, unreachable, or an unreadable answer",
            ("cluster", "method", "endpoint", "error"),
            registry=r,
        )
        self.ticks = Counter("flink_autoscaler_ticks", "Control-loop ticks run", registry=r)
        self.ticks_skipped = Counter(
            "flink_autoscaler_ticks_skipped", "Ticks skipped because the previous one overran", registry=r
        )
        self.last_tick = Gauge(
            "flink_autoscaler_last_tick_timestamp_seconds",
            "Unix time the last full tick completed (alert when it falls behind)",
            registry=r,
        )
        self.tick_seconds = Histogram(
            "flink_autoscaler_tick_duration_seconds",
            "Duration of a whole tick",
            registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.tick_stage_seconds = Histogram(
            "flink_autoscaler_tick_stage_duration_seconds",
            "Duration of each stage of a whole tick, in order: collect (leases, discovery, the wait for "
            "Flink's metric fetch, the reads), load, evaluate, decide, plugins, realize, record",
            ("stage",),
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.metric_fetch_wait_seconds = Histogram(
            "flink_autoscaler_metric_fetch_wait_seconds",
            "How long a tick waited for the metric fetch it started on the cluster: outcome=landed, or "
            "timed_out after metric_fetch_wait (the jobs' readings may then be the last fetch again)",
            ("cluster", "outcome"),
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 5, 10),
        )
        self.evaluation_seconds = Histogram(
            "flink_autoscaler_evaluation_duration_seconds",
            "Duration of the batched Spark evaluation",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.evaluation_phase_seconds = Histogram(
            "flink_autoscaler_evaluation_phase_duration_seconds",
            "Where the batched evaluation spent its time: phase=window (every job's window bookkeeping in "
            "the daemon), spark (the Spark work it waited for), driver (the graph arithmetic in the daemon)",
            ("phase",),
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.spark_up = Gauge(
            "flink_autoscaler_spark_up", "1 while the Spark evaluation works, 0 after it failed", registry=r
        )
        self.spark_lost = Counter(
            "flink_autoscaler_spark_lost_total",
            "Spark losses the evaluator recovered from: what=session (a dead driver JVM or a Connect "
            "session the server forgot: a new session) or window (lost checkpoint blocks: windows restart)",
            ("what",),
            registry=r,
        )
        self.jobs = Gauge(
            "flink_autoscaler_jobs", "Jobs autoscaled in the last tick", ("cluster",), registry=r
        )
        self.lease_held = Gauge(
            "flink_autoscaler_lease_held",
            "1 while this daemon holds the cluster's lease (with shards: any of its shard leases) and "
            "acts on it, 0 while it stands by",
            ("cluster",),
            registry=r,
        )
        self.shards_held = Gauge(
            "flink_autoscaler_shards_held",
            "How many of the cluster's shard leases this daemon holds (1 or 0 for an unsharded cluster): "
            "it acts on those shards' jobs",
            ("cluster",),
            registry=r,
        )
        self.shards = Gauge(
            "flink_autoscaler_shards",
            "The cluster's configured shard count: summed over the daemons, shards_held should reach it",
            ("cluster",),
            registry=r,
        )
        self.metric_fetch_interval = Gauge(
            "flink_autoscaler_metric_fetch_interval_seconds",
            "The cluster's metrics.fetcher.update-interval, from /jobmanager/config (else Flink's default)",
            ("cluster",),
            registry=r,
        )
        self.metric_fetch_warning = Gauge(
            "flink_autoscaler_metric_fetch_interval_warning",
            "1 while control_loop_interval is less than 2 x the cluster's metrics.fetcher.update-interval "
            "(many ticks then read no new metric fetch), else 0",
            ("cluster",),
            registry=r,
        )
        # Every per-job metric, and its label names, for forget(); the per-vertex ones are in the books.
        self.cluster_slots = Gauge(
            "flink_autoscaler_cluster_slots",
            "The cluster's task slots from GET /taskmanagers at the last tick, by state (total, free); "
            "NaN while its TaskManagers could not be listed",
            ("cluster", "state"),
            registry=r,
        )
        self.job_slots = JobGauge(
            "flink_autoscaler_job_slots",
            "Slots the job holds: per slot-sharing group its highest vertex parallelism, summed",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.job_slots_short = JobGauge(
            "flink_autoscaler_job_slots_short_of_request",
            "Slots the job would hold more if Flink ran it at the parallelism last asked for it: above 0 "
            "while Flink runs it below its request (too few free slots); 0 otherwise",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        self.slot_limited = JobCounter(
            "flink_autoscaler_slot_limited_rescales",
            "Rescales that needed more slots than were free plus the job's own, by what was done "
            "(capped, waited, ignored: scaling.insufficient-slots) and why (short: the cluster lacks "
            "them; claimed: rescales of other jobs before it this tick took them; idle: a scale-down left "
            "them idle in its job's slot pool, and the rescale waits for them)",
            (*_JOB_LABELS, "action", "why"),
            registry=r,
            job_labels=j,
        )
        self.job_slow_subtasks = JobGauge(
            "flink_autoscaler_job_slow_subtasks",
            "Subtasks of the job busy at least slow-subtasks.multiplier x their vertex's median and at "
            "least slow-subtasks.busy-floor, at the last evaluation (per vertex: vertex_slow_subtasks)",
            _JOB_LABELS,
            registry=r,
            job_labels=j,
        )
        # The history archive (autoscaler.archive): daemon-wide, its failures never fail a tick.
        self.archive_rows = Counter(
            "flink_autoscaler_archive_rows", "Rows written to the history archive", ("table",), registry=r
        )
        self.archive_rows_dropped = Counter(
            "flink_autoscaler_archive_rows_dropped",
            "Rows of the history archive lost to a failed write",
            ("table",),
            registry=r,
        )
        self.archive_failures = Counter(
            "flink_autoscaler_archive_failures",
            "History archive failures by operation: write, prune, compact, convert (a value the schema "
            "cannot hold) or queue_full (a tick not archived because the writer was too far behind)",
            ("operation",),
            registry=r,
        )
        self.decision_write_failures = Counter(
            "flink_autoscaler_decision_write_failures",
            "Decision files (decisions_dir, read by status and explain) that could not be written; the "
            "log says so once per job until its file is written again",
            registry=r,
        )
        self._per_job: tuple[tuple[Counter | Gauge, tuple[str, ...]], ...] = (
            (self.scalings, _JOB_LABELS),
            (self.balanced, _JOB_LABELS),
            (self.decisions, (*_JOB_LABELS, "outcome")),
            (self.plugin_outcomes, (*_JOB_LABELS, "plugin", "outcome")),
            (self.deferred, _JOB_LABELS),
            (self.forced, _JOB_LABELS),
            (self.metrics_unknown, _JOB_LABELS),
            (self.option_fallbacks, (*_JOB_LABELS, "option")),
            (self.stale_samples, _JOB_LABELS),
            (self.invalid_metric_values, (*_JOB_LABELS, "kind")),
            (self.counter_resets, _JOB_LABELS),
            (self.rescales_stuck, _JOB_LABELS),
            (self.rescales_rejected, _JOB_LABELS),
            (self.resubmissions, _JOB_LABELS),
            (self.verifications, (*_JOB_LABELS, "result")),
            (self.job_slots, _JOB_LABELS),
            (self.job_slots_short, _JOB_LABELS),
            (self.slot_limited, (*_JOB_LABELS, "action", "why")),
            (self.job_slow_subtasks, _JOB_LABELS),
        )

    # ------------------------------------------------------------------ per job
    def report_evaluation(self, evaluation: JobEvaluation) -> None:
        """The job's per-vertex gauges, as far as the budget allows (:mod:`autoscaler.vertex_series`)."""
        self.vertex.report(evaluation)

    def report_verification(
        self, job: JobRef, names: dict[VertexId, str], verification: ScalingVerification
    ) -> None:
        """A rescale's verification: each measured vertex's ratio (``vertex_metrics: all`` only, within the
        cap), and the result counted once in every mode."""
        self.vertex.report_ratios(job, names, verification)
        result = "as_expected" if verification.as_expected else "below_expected"
        self.verifications.labels(job.cluster, job.name, result).inc()

    def report_outcome(self, job: JobRef, outcome: Reason, scaled: bool) -> None:
        self.decisions.labels(job.cluster, job.name, str(outcome)).inc()
        if scaled:
            self.scalings.labels(job.cluster, job.name).inc()
        else:
            self.balanced.labels(job.cluster, job.name).inc()

    def forget(self, job_keys: Iterable[str]) -> None:
        """Remove every series (vertex gauges and per-job counters) of jobs that are gone; their share of
        the per-vertex cap goes to the next job that did not fit."""
        gone = set(job_keys)
        self.vertex.forget(gone)
        for metric, label_names in self._per_job:
            for labels in _label_sets(metric, label_names):
                if self._job_key(labels) in gone:
                    with contextlib.suppress(KeyError):
                        metric.remove(*labels)
        if self.job_labels:  # a long name stays known while a series of a job of that name is left
            self.job_labels.retain(
                {labels[1] for metric, names in self._per_job for labels in _label_sets(metric, names)}
            )

    def known_jobs(self) -> set[str]:
        """Keys of every job with a series: evaluated ones and those that only counted outcomes."""
        keys = self.vertex.known_jobs()
        for metric, label_names in self._per_job:
            keys.update(self._job_key(labels) for labels in _label_sets(metric, label_names))
        return keys

    def _job_key(self, labels: tuple[str, ...]) -> str:
        """The key (``cluster/name``) of the job of a series' ``(cluster, job, ...)`` label values."""
        return f"{labels[0]}/{self.job_labels.name(labels[1])}"

    # ------------------------------------------------------------------ daemon-wide
    def report_error(self, cluster: str, reason: Reason) -> None:
        self.errors.labels(cluster, str(reason)).inc()

    def report_tick(self, duration_s: float, stages: Mapping[str, float] | None = None) -> None:
        """A full tick completed: counts it, times it and its ``stages`` (name -> seconds), and tells
        ``health`` the loop is alive."""
        self.ticks.inc()
        self.tick_seconds.observe(duration_s)
        for stage, seconds in (stages or {}).items():
            self.tick_stage_seconds.labels(stage).observe(seconds)
        self.last_tick.set(time.time())
        if self.health is not None:
            self.health.tick_completed()

    def report_fetch_wait(self, cluster: str, seconds: float, landed: bool) -> None:
        """A tick's wait for the cluster's metric fetch: how long, and whether the fetch landed in it."""
        self.metric_fetch_wait_seconds.labels(cluster, "landed" if landed else "timed_out").observe(seconds)

    def report_spark(
        self,
        ok: bool,
        detail: str = "",
        duration_s: float | None = None,
        phases: EvaluationPhases | None = None,
    ) -> None:
        """The outcome of a Spark evaluation (``duration_s`` and its ``phases`` when it ran); readiness
        follows it."""
        self.spark_up.set(1 if ok else 0)
        if ok and duration_s is not None:
            self.evaluation_seconds.observe(duration_s)
        if ok and phases is not None:
            for phase, seconds in phases.items():
                self.evaluation_phase_seconds.labels(phase).observe(seconds)
        if self.health is not None:
            self.health.set_spark(ok, detail)

    def report_request(self, cluster: str, method: str, endpoint: str, status_or_error: int | str) -> None:
        """The Flink client's ``on_request`` hook: one call per REST request, after its answer.

        ``endpoint`` is a template (``/jobs/:jobid/...``) so the label's values stay few;
        ``status_or_error`` is the HTTP status, or the name of the error when there was no answer.
        """
        if isinstance(status_or_error, int):
            status = str(status_or_error)
            error = status if status_or_error >= 400 else None
        else:
            status = error = _ERROR_WORDS.get(status_or_error, status_or_error)
        self.rest_requests.labels(cluster, method, endpoint, status).inc()
        if error is not None:
            self.rest_errors.labels(cluster, method, endpoint, error).inc()


def _label_sets(metric: Counter | Gauge, label_names: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The label values of every child of ``metric``.

    Read from prometheus_client's table of children when it has the shape it has had for years (a dict
    by label values, under the metric's lock): asked every tick, reading them from the public samples
    instead built every sample of every child, 0.3-0.6 s a tick at 1,000 jobs. Otherwise, from the
    public samples.
    """
    children, lock = getattr(metric, "_metrics", None), getattr(metric, "_lock", None)
    if (
        isinstance(children, dict)
        and lock is not None
        and tuple(getattr(metric, "_labelnames", ())) == label_names
    ):
        with lock:
            return set(children)
    return {
        tuple(sample.labels[n] for n in label_names)
        for family in metric.collect()
        for sample in family.samples
        if all(n in sample.labels for n in label_names)
    }
