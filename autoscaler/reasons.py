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

    # Ours.
    SCALING_CONFIRMED = "ScalingConfirmed"
    RESCALE_STUCK = "RescaleStuck"
    IN_BAND = "InBand"
    ADVISOR_MODE = "AdvisorMode"
    SCALE_DOWN_DELAYED = "ScaleDownDelayed"
    COOLDOWN_DEFERRED = "CooldownDeferred"
    SCALING_FORCED = "ScalingForced"
    RESCALE_IN_FLIGHT = "RescaleInFlight"
    DISABLED = "Disabled"
    NOT_RUNNING = "NotRunning"
    STABILIZING = "Stabilizing"
    WINDOW_NOT_FULL = "WindowNotFull"
    PARTIAL_METRICS = "PartialMetrics"
    CLUSTER_UNREACHABLE = "ClusterUnreachable"
    STATE_STORE_ERROR = "StateStoreError"
    PLUGIN_FAILED = "PluginFailed"
    SCALING_APPROVED = "ScalingApproved"
    SCALING_MODIFIED = "ScalingModified"
    EXCLUDED_PERIOD = "ExcludedPeriod"  # now is in job.autoscaler.excluded.periods: report, never apply
    LEASE_EXPIRED = "LeaseExpired"  # the cluster's lease ran out during the tick: another daemon may act
