"""Every reason code the daemon gives for what it did or did not do.

Events, metric labels, logs and tests use these codes; the words in messages are for people.
The values of the reference's event reasons are kept verbatim so dashboards built for it still match.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Reason"]


class Reason(StrEnum):
    # Outcomes and events shared with the reference autoscaler (same spelling).
    SCALING_REPORT = "ScalingReport"
    SCALING = "Scaling"
    INEFFECTIVE_SCALING = "IneffectiveScaling"
    SCALING_LIMITED = "ScalingLimited"
    MEMORY_PRESSURE = "MemoryPressure"
    RESOURCE_QUOTA_REACHED = "ResourceQuotaReached"
    SCALING_VETOED = "ScalingVetoed"
    AUTOSCALER_ERROR = "AutoscalerError"
    OPTIONS_VALIDATION = "AutoScaler Options Validation"
    # The memory advice for a rescale (the reference's memory tuning: key MemoryTuning). An event only.
    CONFIGURATION_RECOMMENDATION = "Configuration recommendation"

    # Ours.
    SCALING_CONFIRMED = "ScalingConfirmed"
    # A confirmed rescale measured over its first full metric window: did it deliver the capacity its
    # decision expected? (Normal when it did, Warning when well below.) An event only, never an outcome.
    SCALING_VERIFIED = "ScalingVerified"
    RESCALE_STUCK = "RescaleStuck"
    # Flink refused the PUT of new requirements (4xx): an event, and the next rescale waits a backoff.
    RESCALE_REJECTED = "RescaleRejected"
    # The same job name runs under a new JobID (a JobManager restart without HA, a resubmission): the
    # name's scaling history is kept, the old JobID's pending rescale and stuck count are not. An event.
    JOB_RESUBMITTED = "JobResubmitted"
    IN_BAND = "InBand"
    # cost.enabled: the change the band asks for costs more than waiting over cost.horizon (a restart,
    # its pause and lag against the slots it saves or the lag it prevents): not made (tick/decide.py).
    NOT_WORTH_IT = "NotWorthIt"
    # The window is full but the rates of the vertices that matter are NaN or missing (tick/decide.py says
    # which): nothing is known, so nothing is judged in band and nothing is scaled.
    METRICS_UNKNOWN = "MetricsUnknown"
    ADVISOR_MODE = "AdvisorMode"
    SCALE_DOWN_DELAYED = "ScaleDownDelayed"
    COOLDOWN_DEFERRED = "CooldownDeferred"
    SCALING_FORCED = "ScalingForced"
    RESCALE_IN_FLIGHT = "RescaleInFlight"
    DISABLED = "Disabled"
    NOT_RUNNING = "NotRunning"
    STABILIZING = "Stabilizing"
    WINDOW_NOT_FULL = "WindowNotFull"
    # The window is full, but its newest interval's offered load moved past metrics.load-change.threshold:
    # the next interval tells a load change (the window restarts) from a blip; no decision until then.
    LOAD_CHANGING = "LoadChanging"
    PARTIAL_METRICS = "PartialMetrics"
    # Flink's lazy metric fetcher served its last fetch again: as an event, a sample that added no point
    # to the window; as an outcome, one served for longer than the fetcher should take (not evaluated).
    STALE_METRICS = "StaleMetrics"
    CLUSTER_UNREACHABLE = "ClusterUnreachable"
    # The cluster answered, but with an error status (a JobManager's 5xx, a 4xx from a proxy) or a body
    # that is not what Flink sends: reachable, yet unreadable this tick. Not our error (AutoscalerError).
    CLUSTER_ERROR = "ClusterError"
    STATE_STORE_ERROR = "StateStoreError"
    PLUGIN_FAILED = "PluginFailed"
    SCALING_APPROVED = "ScalingApproved"
    SCALING_MODIFIED = "ScalingModified"
    EXCLUDED_PERIOD = "ExcludedPeriod"  # now is in job.autoscaler.excluded.periods: report, never apply
    # The rescale needs more slots than the cluster has free plus the job's own, and
    # scaling.insufficient-slots is WAIT (or CAP left nothing that grows): nothing asked this tick.
    WAITING_FOR_SLOTS = "WaitingForSlots"
    # A vertex has subtasks busy far above its median (autoscaler/skew.py): a Warning event, not an outcome.
    SLOW_SUBTASKS = "SlowSubtasks"
    LEASE_EXPIRED = "LeaseExpired"  # the cluster's lease ran out during the tick: another daemon may act
