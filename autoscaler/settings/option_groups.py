"""The ``job.autoscaler.*`` option fields, declared in thematic groups that ``AutoscalerOptions`` combines.

The options model declares one field per key (more than fifty), so its fields live here in groups, each a
pydantic model used only as a base class of :class:`autoscaler.settings.options.AutoscalerOptions`.
Every group's field validators check only that group's fields; the validators that compare fields of
several groups, and the key handling, stay on the model itself.

The groups split the fields where their order allows, not by theme alone: pydantic lists a model's
fields in reverse MRO order (the last base class's first), and that order is the order of
``docs/configuration.md`` (``scripts/gen_config_docs.py``), of ``to_flink_conf`` and ``check-config``
output, and of validation errors. Each group is therefore a run of consecutive fields of the original
declaration, and ``AutoscalerOptions`` lists the groups in reverse. The groups stay in one module, at
about 480 lines, because together they are the option table, read top to bottom in that order.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, field_validator

from autoscaler.calendar import PeriodError, parse_period
from autoscaler.durations import format_duration
from autoscaler.settings.keys import EVALUATOR_PREFIX, EXECUTOR_PREFIX
from autoscaler.settings.values import (
    BusyTimeAggregator,
    Duration,
    InsufficientSlots,
    alignment_mode_name,
    csv_list,
    opt_float,
    parse_memory_size,
    semicolon_list,
    upper,
)

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "OURS",
    "FeatureOptions",
    "LimitOptions",
    "OwnOptions",
    "PluginOptions",
    "RateOptions",
    "RuntimeOptions",
    "TargetOptions",
]

OURS: dict[str, Any] = {"origin": "ours"}  # Field extra of a key the reference does not have (for the docs)

DEFAULT_MAX_ANSWER_BYTES = 64 << 20
"""``flink.rest-client.max-answer-size``. The largest answer the daemon reads is far smaller: ``/jobs/:id``
grows with vertices, not subtasks (about 1.2 KB a vertex), ``/taskmanagers`` with TaskManagers (about
0.9 KB each: 9 MB for 10,000 single-slot ones), and the slow-subtask reads ask for 64 values at a time.
The largest a 10,000-subtask job has is the listing of a vertex's per-subtask metric names
(``/jobs/:id/vertices/:vid/metrics``, Flink 2.3: 75 names of about 41 bytes per subtask, 31 MB), which the
client can read: 64 MiB holds it twice over, while a body of hundreds of MB, which would cost the daemon
several times its size in memory to parse, is refused."""


def _k(key: str, *deprecated: str) -> Any:
    """Field metadata for a ``job.autoscaler.<key>`` option (plus deprecated spellings)."""
    return AliasChoices(key, *deprecated)


class TargetOptions(BaseModel):
    """The switches, the metric window and the utilization target band."""

    enabled: bool = Field(False, validation_alias=_k("enabled"), description="Master switch.")
    scaling_enabled: bool = Field(
        True,
        validation_alias=_k("scaling.enabled"),
        description="False gives advisor mode: evaluate and report, never apply.",
    )
    metrics_window: Duration = Field(
        timedelta(minutes=15), validation_alias=_k("metrics.window"), description="Sliding averaging window."
    )
    stabilization_interval: Duration = Field(
        timedelta(minutes=5),
        validation_alias=_k("stabilization.interval"),
        description="Time after the job reaches RUNNING before samples count towards the window.",
    )
    utilization_target: float = Field(
        0.7, validation_alias=_k("utilization.target", "target.utilization"), description="Target busy ratio."
    )
    target_utilization_boundary: float = Field(
        0.3,
        validation_alias=_k("target.utilization.boundary"),
        description="Band around the target used when utilization.max/min are unset.",
    )
    utilization_max: Annotated[float | None, BeforeValidator(opt_float)] = Field(
        None, validation_alias=_k("utilization.max"), description="Upper utilization (scale-up threshold)."
    )
    utilization_min: Annotated[float | None, BeforeValidator(opt_float)] = Field(
        None, validation_alias=_k("utilization.min"), description="Lower utilization (scale-down threshold)."
    )

    @field_validator("utilization_target")
    @classmethod
    def _target_in_unit(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0 or math.isnan(v):
            raise ValueError("must be within [0, 1]")
        return v

    @field_validator("target_utilization_boundary")
    @classmethod
    def _boundary_positive(cls, v: float) -> float:
        if v < 0.0 or math.isnan(v):
            raise ValueError("must be >= 0")
        return v


class LimitOptions(BaseModel):
    """How far and how soon a scaling goes: scale-down delay, parallelism bounds and factors, catch-up and
    restart time."""

    scale_down_interval: Duration = Field(
        timedelta(hours=1),
        validation_alias=_k("scale-down.interval", "scale-up.grace-period"),
        description="Scale-downs wait this long; the highest recommendation within it is used.",
    )
    vertex_min_parallelism: int = Field(
        1,
        ge=1,
        validation_alias=_k("vertex.min-parallelism"),
        description="Lowest parallelism the autoscaler sets; a vertex already below it is never forced up.",
    )
    vertex_max_parallelism: int = Field(
        200,
        ge=1,
        validation_alias=_k("vertex.max-parallelism"),
        description="Highest parallelism the autoscaler sets (also capped by the vertex's max parallelism).",
    )
    scale_down_max_factor: float = Field(
        0.6,
        ge=0.0,
        validation_alias=_k("scale-down.max-factor"),
        description="The scale factor can drop to at most 1 - value.",
    )
    scale_up_max_factor: float = Field(
        100000.0,
        ge=0.0,
        validation_alias=_k("scale-up.max-factor"),
        description="The scale factor can rise to at most 1 + value.",
    )
    catch_up_duration: Duration = Field(
        timedelta(minutes=30),
        validation_alias=_k("catch-up.duration"),
        description="Time to drain the backlog after scaling; 0 disables backlog-based capacity.",
    )
    restart_time: Duration = Field(
        timedelta(minutes=5), validation_alias=_k("restart.time"), description="Assumed restart time."
    )
    restart_time_tracking_enabled: bool = Field(
        False,
        validation_alias=_k("restart.time-tracking.enabled"),
        description="Use the highest observed restart time instead of restart.time.",
    )
    restart_time_tracking_limit: Duration = Field(
        timedelta(minutes=15),
        validation_alias=_k("restart.time-tracking.limit"),
        description="Cap on the observed restart time.",
    )


class RateOptions(BaseModel):
    """How processing rates are estimated: backlog threshold, observed true processing rate, busy time."""

    backlog_processing_lag_threshold: Duration = Field(
        timedelta(minutes=5),
        validation_alias=_k("backlog-processing.lag-threshold"),
        description="Lag (in seconds of input) above which a source counts as processing backlog.",
    )
    observed_tpr_lag_threshold: Duration = Field(
        timedelta(seconds=30),
        validation_alias=_k("observed-true-processing-rate.lag-threshold"),
        description="Lag (in seconds of input) a source needs before its observed true processing rate "
        "is measured.",
    )
    observed_tpr_switch_threshold: float = Field(
        0.15,
        ge=0.0,
        validation_alias=_k("observed-true-processing-rate.switch-threshold"),
        description="Use the observed true processing rate when the busy-time estimate exceeds it by more "
        "than this fraction.",
    )
    observed_tpr_min_observations: int = Field(
        2,
        ge=1,
        validation_alias=_k("observed-true-processing-rate.min-observations"),
        description="Observations needed before the observed true processing rate is used.",
    )
    observed_tpr_settle_time: Duration = Field(
        timedelta(seconds=60),
        validation_alias=_k("observed-true-processing-rate.settle-time"),
        json_schema_extra=OURS,
        description="How long a source must have been catching up, and its job running, before its "
        "observed true processing rate is measured: Flink's rate meter and back-pressure gauge average "
        "the last 60 s, which right after a load step still hold the calm before it (0: from the first "
        "catching-up sample, as the reference does).",
    )
    busy_time_aggregator: Annotated[BusyTimeAggregator, BeforeValidator(upper)] = Field(
        BusyTimeAggregator.MAX,
        validation_alias=_k("metrics.busy-time.aggregator"),
        description="How busy time is aggregated over a vertex's subtasks (MAX is robust to skew).",
    )


class RuntimeOptions(BaseModel):
    """Vertex exclusion and alignment, the memory-pressure gate, the history kept, events and REST."""

    vertex_exclude_ids: Annotated[tuple[str, ...], BeforeValidator(csv_list)] = Field(
        (),
        validation_alias=_k("vertex.exclude.ids"),
        description="Vertex ids (hex) never scaled; vertices downstream of them still are.",
    )
    # Any name is accepted, as in the reference: one that is no built-in mode (a custom Java mode, a
    # typo) falls back to BALANCED with a warning (AutoscalerOptions.alignment_mode) instead of
    # rejecting the job's whole configuration.
    parallelism_alignment_mode: Annotated[str | None, BeforeValidator(alignment_mode_name)] = Field(
        None,
        validation_alias=_k("scaling.parallelism-alignment.mode"),
        json_schema_extra={"doc_default": "`BALANCED`"},
        description="How a target parallelism is aligned to key groups or source partitions. Unset, "
        "it is BALANCED, unless the deprecated scaling.key-group.partitions.adjust.mode is set. Any "
        "other name (e.g. a custom mode, which needs Java) falls back to BALANCED with a warning.",
    )
    memory_gc_pressure_threshold: float = Field(
        1.0,
        validation_alias=_k("memory.gc-pressure.threshold"),
        description="Block scaling while the highest TaskManager GC time fraction is above this "
        "(1.0: never).",
    )
    memory_heap_usage_threshold: float = Field(
        1.0,
        validation_alias=_k("memory.heap-usage.threshold"),
        description=(
            "Block scaling while the window average of how full the TaskManagers' heap is lies above this "
            "(1.0: never). The ratio is heap used / heap max, each the max over TaskManagers, capped at 1 "
            "(used briefly above max reads as full); unknown, and never blocking, when max is not reported "
            "(-1 or 0)."
        ),
    )
    history_max_count: int = Field(
        3, ge=0, validation_alias=_k("history.max.count"), description="Past scalings kept per vertex."
    )
    history_max_age: Duration = Field(
        timedelta(hours=24),
        validation_alias=_k("history.max.age"),
        description="Maximum age of the kept past scalings.",
    )
    scaling_event_interval: Duration = Field(
        timedelta(minutes=30),
        validation_alias=_k("scaling.event.interval"),
        description="An identical event within this interval is counted, not repeated.",
    )
    rest_client_timeout: Duration = Field(
        timedelta(seconds=10),
        validation_alias=_k("flink.rest-client.timeout"),
        description="Deadline of each Flink REST call, for connecting, the headers and the whole answer "
        "together (an answer still arriving then is given up; a timed-out call is not retried). A tick "
        "waits for its slowest job, whose reads are a few calls one after another: keep it well under "
        "control_loop_interval.",
    )

    @field_validator("memory_gc_pressure_threshold", "memory_heap_usage_threshold")
    @classmethod
    def _ratio(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("must be within [0, 1]")
        return v


class FeatureOptions(BaseModel):
    """The reference's opt-in features, each inert at its default: excluded periods, resource quotas,
    scaling-effectiveness detection, observed scalability, memory tuning and the legacy alignment."""

    excluded_periods: Annotated[tuple[str, ...], BeforeValidator(semicolon_list)] = Field(
        (),
        validation_alias=_k("excluded.periods"),
        description="Periods in which no scaling is executed (only reported): each a Quartz cron "
        "expression, a daily range HH:mm:ss-HH:mm:ss (may wrap midnight), or both joined by &&. "
        "Evaluated in UTC.",
    )
    quota_cpu: float | None = Field(
        None, ge=0.0, validation_alias=_k("quota.cpu"), description="Total TaskManager CPU the job may use."
    )
    quota_memory: Annotated[int | None, BeforeValidator(parse_memory_size)] = Field(
        None,
        ge=0,
        validation_alias=_k("quota.memory"),
        description="Total TaskManager memory the job may use.",
    )
    scaling_effectiveness_detection_enabled: bool = Field(
        False,
        validation_alias=_k("scaling.effectiveness.detection.enabled"),
        description="Block further scale-ups of a vertex after an ineffective one (always reported).",
    )
    scaling_effectiveness_threshold: float = Field(
        0.1,
        validation_alias=_k("scaling.effectiveness.threshold"),
        description="Fraction of the expected processing-rate gain a scale-up must realise.",
    )
    observed_scalability_enabled: bool = Field(
        False,
        validation_alias=_k("observed-scalability.enabled"),
        description="Correct the scale factor by the scalability observed in past scalings (FLINK-30571).",
    )
    observed_scalability_min_observations: int = Field(
        3,
        ge=1,
        validation_alias=_k("observed-scalability.min-observations"),
        description="Past scalings needed before the observed scalability is used.",
    )
    observed_scalability_coefficient_min: float = Field(
        0.5,
        validation_alias=_k("observed-scalability.coefficient-min"),
        description="Lower clamp of the observed scalability coefficient.",
    )
    memory_tuning_enabled: bool = Field(
        False,
        validation_alias=_k("memory.tuning.enabled"),
        description="Accepted for compatibility: TaskManager memory cannot be changed over Flink's REST API, "
        "so every rescale comes with the advice instead (a Configuration recommendation event), whatever "
        "this says.",
    )
    memory_tuning_scale_down_compensation_enabled: bool = Field(
        True,
        validation_alias=_k("memory.tuning.scale-down-compensation.enabled"),
        description="The memory advice grows the heap by how many times fewer TaskManagers a rescale needs.",
    )
    memory_tuning_overhead: float = Field(
        0.2,
        validation_alias=_k("memory.tuning.overhead"),
        description="Headroom the memory advice adds to the heap and metaspace the TaskManagers used over "
        "the metric window.",
    )
    memory_tuning_maximize_managed_memory: bool = Field(
        False,
        validation_alias=_k("memory.tuning.maximize-managed-memory"),
        description="The memory advice gives managed memory, if the job uses any, all that the other "
        "pools leave of the TaskManager's current size.",
    )
    key_group_partitions_adjust_mode: Annotated[str | None, BeforeValidator(upper)] = Field(
        None,
        validation_alias=_k("scaling.key-group.partitions.adjust.mode"),
        description="Deprecated legacy alignment (EVENLY_SPREAD or MAXIMIZE_UTILISATION), used only "
        "while scaling.parallelism-alignment.mode is unset: it blocks a scaling it cannot align.",
    )

    @field_validator("excluded_periods")
    @classmethod
    def _periods_parse(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        """Reject a period the decision stage could not evaluate, at load time (reference §1.12)."""
        for text in v:
            try:
                parse_period(text)
            except PeriodError as exc:
                raise ValueError(f"invalid excluded period {exc}") from None
        return v

    @field_validator("key_group_partitions_adjust_mode")
    @classmethod
    def _legacy_mode(cls, v: str | None) -> str | None:
        if v is not None and v not in ("EVENLY_SPREAD", "MAXIMIZE_UTILISATION"):
            raise ValueError("must be EVENLY_SPREAD or MAXIMIZE_UTILISATION")
        return v


class PluginOptions(BaseModel):
    """Executor plugin and custom evaluator instances (see ``docs/plugins.md``)."""

    custom_executors: Annotated[tuple[str, ...], BeforeValidator(csv_list)] = Field(
        (),
        validation_alias=_k("scaling.custom-executors"),
        description="Executor plugin instance names, run by ascending priority (duplicates ignored).",
    )
    custom_executor_settings: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        validation_alias=_k(EXECUTOR_PREFIX.rstrip(".")),
        description="Per instance: scaling.custom-executor.<name>.class and .<param> keys, prefix stripped.",
    )
    custom_evaluators: Annotated[tuple[str, ...], BeforeValidator(csv_list)] = Field(
        (),
        validation_alias=_k("metrics.custom-evaluators"),
        description="Custom evaluator instance names, applied in this order (FLIP-514; the reference "
        "honours only the first, we chain all).",
    )
    custom_evaluator_settings: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        validation_alias=_k(EVALUATOR_PREFIX.rstrip(".")),
        description="Per instance: metrics.custom-evaluator.<name>.class and .<param> keys, prefix stripped.",
    )

    @field_validator("custom_executors", "custom_evaluators")
    @classmethod
    def _dedupe_instances(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v))


class OwnOptions(BaseModel):
    """Ours: keys the reference does not have (``origin: ours`` in the docs)."""

    scaling_interval_min: Duration | None = Field(
        None,
        json_schema_extra=OURS,
        validation_alias=_k("scaling-interval.min"),
        description="A decision reached sooner than this after the job's last rescale (or start) is "
        "deferred to exactly last rescale + min, not dropped. Unset: no extra cooldown.",
    )
    scaling_interval_max: Duration | None = Field(
        None,
        json_schema_extra=OURS,
        validation_alias=_k("scaling-interval.max"),
        description="A change below the minimum scaling requirement (every vertex in its band, or a "
        "total change below scaling.min-parallelism-change) is forced once the last rescale is older "
        "than this. Unset: never forced.",
    )
    scaling_min_parallelism_change: int = Field(
        1,
        ge=1,
        json_schema_extra=OURS,
        validation_alias=_k("scaling.min-parallelism-change"),
        description="The smallest total parallelism change (summed over vertices) worth a restart.",
    )
    scale_down_keep_last_peak: bool = Field(
        True,
        validation_alias=_k("scale-down.keep-last-peak.enabled"),
        json_schema_extra=OURS,
        description="A scale-down goes no lower than the smallest parallelism at which the load of the "
        "vertex's last scale-up would be within the utilization band, when the current load is within "
        "the band there too: a load that came back once may come back, and one size that holds both "
        "saves two restarts each time. False: to the recommendation (the reference).",
    )
    load_change_threshold: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        validation_alias=_k("metrics.load-change.threshold"),
        json_schema_extra=OURS,
        description="Restart the metric window where the offered load changed by more than this fraction "
        "of the larger rate (each of the two newest intervals against the rest of the window), so a "
        "decision uses only samples of the new load; while only the newest interval has moved, wait "
        "one interval (LoadChanging); a scale-down delay counts from the change. 0 disables all three "
        "(the reference averages across the change).",
    )
    prefer_counter_rates: bool = Field(
        True,
        validation_alias=_k("metrics.prefer-counter-rates"),
        json_schema_extra=OURS,
        description="Take rates from counter deltas over the window instead of Flink's 60 s meters, "
        "which restart from zero and ramp for a minute after every rescale.",
    )
    insufficient_slots: Annotated[InsufficientSlots, BeforeValidator(upper)] = Field(
        InsufficientSlots.CAP,
        validation_alias=_k("scaling.insufficient-slots"),
        json_schema_extra=OURS,
        description="A rescale that needs more slots than the cluster has free (plus the job's own): CAP "
        "asks for what fits (the scale-ups share the free slots in proportion to what each slot-sharing "
        "group wanted), WAIT asks for nothing until all of it fits, IGNORE asks for all of it (Flink "
        "runs what fits and restarts the job again as slots come). Each says so in a ScalingLimited "
        "event. Unknown slots (no TaskManager listing) never hold a rescale back.",
    )
    wait_for_idle_slots: bool = Field(
        True,
        validation_alias=_k("scaling.insufficient-slots.wait-for-idle"),
        json_schema_extra=OURS,
        description="A rescale that does not fit the free slots but would with the slots this daemon's "
        "scale-downs left idle (Flink keeps them slot.idle.timeout, about a minute, after the restart) "
        "waits for them and is then asked for whole, instead of being capped (CAP) now and rescaled "
        "again later: one restart instead of two, for a backlog that grows meanwhile at the job's "
        "current capacity. Not with IGNORE.",
    )
    slot_priority: int = Field(
        0,
        validation_alias=_k("scaling.slot-priority"),
        json_schema_extra=OURS,
        description="When the rescales of several jobs of one cluster want more slots in one tick than "
        "are free, the jobs of higher priority claim them first; among equals, the job with the most "
        "backlog (in seconds of its processing capacity) first. A job held back says why in a "
        "ScalingLimited event.",
    )
    busy_time_only_enabled: bool = Field(
        False,
        validation_alias=_k("scaling.busy-time-only.enabled"),
        json_schema_extra=OURS,
        description="Size each vertex from its own busy time alone, ignoring propagated target rates and "
        "output ratios (for operators whose output ratio misleads the model, FLINK-38538).",
    )
    slow_subtasks_enabled: bool = Field(
        True,
        validation_alias=_k("slow-subtasks.enabled"),
        json_schema_extra=OURS,
        description="Look for slow subtasks: a vertex whose busiest subtask is at least the floor and "
        "slow-subtasks.multiplier x its least busy one has its subtasks read one by one (one request), "
        "and those busy at least multiplier x the median are slow; a SlowSubtasks event, "
        "flink_autoscaler_job_slow_subtasks and explain say which, and whether a hot key (their records "
        "in as far above the median) or slowness is the cause. Every vertex's skew figure (max / avg "
        "busy time) comes from the aggregates it is read with anyway. Diagnosis only: the hot-key-guard "
        "executor plugin acts on it.",
    )
    slow_subtasks_multiplier: float = Field(
        1.5,
        ge=1.0,
        validation_alias=_k("slow-subtasks.multiplier"),
        json_schema_extra=OURS,
        description="A subtask is slow when busy at least this many times the median of its vertex's "
        "subtasks (Flink's slow-task detector's baseline-multiplier).",
    )
    slow_subtasks_busy_floor: float = Field(
        500.0,
        ge=0.0,
        le=1000.0,
        validation_alias=_k("slow-subtasks.busy-floor"),
        json_schema_extra=OURS,
        description="A slow subtask is also busy at least this many ms per second: below it nothing "
        "waits on it (Flink's slow-task detector's baseline-lower-bound).",
    )
    rest_client_max_answer_size: Annotated[int, BeforeValidator(parse_memory_size)] = Field(
        DEFAULT_MAX_ANSWER_BYTES,
        ge=1024,
        validation_alias=_k("flink.rest-client.max-answer-size"),
        json_schema_extra={**OURS, "doc_default": "`64 mb`"},
        description="The longest Flink REST answer read (a memory size, e.g. '64 mb'): a longer one is "
        "refused once its Content-Length says so, or as soon as that much has arrived, and counts as "
        "bad_payload, so a proxy or a broken JobManager cannot fill the daemon's memory. The default "
        "holds twice the largest answer of a 10,000-subtask job (its per-subtask metric names). Like "
        "flink.rest-client.timeout, read per cluster (daemon or cluster autoscaler: section).",
    )
    # Issue 38: what a user pays for, in one unit. Read by the decision bench and backtest to price runs
    # and the best plan in hindsight (autoscaler/foresight/cost.py); no decision reads them yet.
    cost_slot_second: float = Field(
        1.0,
        ge=0.0,
        allow_inf_nan=False,
        validation_alias=_k("cost.slot-second"),
        json_schema_extra=OURS,
        description="The price of one slot held for one second: the unit the other prices are in "
        "(slot-seconds). The slots a job holds while it restarts count too.",
    )
    cost_restart: float = Field(
        600.0,
        ge=0.0,
        allow_inf_nan=False,
        validation_alias=_k("cost.restart"),
        json_schema_extra=OURS,
        description="The price of one restart, in slot-seconds, on top of what its pause costs in slots "
        "held and in lag above lag.target: the risk and disturbance the pause does not show. The "
        "default, ten slot-minutes, is worth a restart that frees one slot for about ten minutes.",
    )
    cost_lag_second: float = Field(
        30.0,
        ge=0.0,
        allow_inf_nan=False,
        validation_alias=_k("cost.lag-second"),
        json_schema_extra=OURS,
        description="The price of one second in which the job's backlog is above lag.target, in "
        "slot-seconds. Keep it above the job's widest slot count, or running slower than the input "
        "would cost less than the slots it saves. At 30, a burst shorter than 20 s every 10 min costs "
        "less as lag than one more slot held throughout.",
    )
    cost_enabled: bool = Field(
        False,
        validation_alias=_k("cost.enabled"),
        json_schema_extra=OURS,
        description="Weigh each rescale the utilization band asks for: made only when changing now costs "
        "less than waiting over cost.horizon, at the cost.* prices (a restart, its pause and the lag it "
        "builds against the slots it saves or the lag it prevents); otherwise held as NotWorthIt, both "
        "costs in the decision's detail. A change forced by scaling-interval.max is not weighed. Off in "
        "the reference profile, on in the recommended one.",
    )
    cost_horizon: Duration = Field(
        timedelta(minutes=30),
        validation_alias=_k("cost.horizon"),
        json_schema_extra=OURS,
        description="How far ahead cost.enabled prices changing now against waiting, at least until the "
        "next rescale could be made (scaling-interval.min, Flink's cooldown). A longer horizon lets a "
        "scale-down save more slot-seconds against its restart, so smaller ones pay.",
    )
    lag_target: Duration | None = Field(
        None,
        validation_alias=_k("lag.target"),
        json_schema_extra=OURS,
        description="The lag a job may carry, in seconds of backlog at its current offered rate: a "
        "backlog of more than lag.target x that rate is above target. Unset: the catch-up bound, "
        "a backlog the job would not drain within catch-up.duration at its capacity then (every "
        "second it restarts or runs slower than its input, with records waiting). A job sized to "
        "utilization.target u drains a lag of L seconds in L x u / (1 - u): at 0.7 and 30 min, the "
        "unset bound lets a right-sized job carry up to 771 s.",
    )
    forecast_enabled: bool = Field(
        False,
        validation_alias=_k("forecast.enabled"),
        json_schema_extra=OURS,
        description="Keep the job's offered load (its sources' target rate) in time buckets in the state "
        "store and forecast it from that history: a ramp that continues, a daily or weekly pattern "
        "(forecast.periods), with a confidence learned from how well its past forecasts matched; "
        "explain shows the forecast, or why there is none (short or gappy history, forecasts that were "
        "wrong, no rise beyond noise). With cost.enabled, a foreseen rise sizes the vertices that would "
        "not carry its peak for it, ahead of it, and the gate prices waiting at the peak; a forecast never "
        "scales a job down. Off in the reference profile, on in the recommended one.",
    )
    forecast_horizon: Duration = Field(
        timedelta(hours=1),
        validation_alias=_k("forecast.horizon"),
        json_schema_extra=OURS,
        description="How far ahead the forecast looks: the expected peak is the highest load within it.",
    )
    forecast_bucket: Duration = Field(
        timedelta(minutes=5),
        validation_alias=_k("forecast.bucket"),
        json_schema_extra=OURS,
        description="The history's resolution: one value per bucket (the mean of the ticks in it), "
        "written when the bucket closes. The history keeps three times the longest of forecast.periods "
        "(three weeks of 5-minute buckets: about 24 KB a job).",
    )
    forecast_periods: Annotated[tuple[Duration, ...], BeforeValidator(csv_list)] = Field(
        (timedelta(days=1), timedelta(days=7)),
        validation_alias=_k("forecast.periods"),
        json_schema_extra={**OURS, "doc_default": "`1 d;7 d`"},
        description="The repeating patterns looked for ('1 d;7 d': daily and weekly): the same time one "
        "period ago, smoothed over up to three periods, once the history holds one (a rise that came "
        "in one jump: two). Each must be a whole number of forecast.bucket and longer than "
        "forecast.horizon; the one whose past forecasts matched best is used.",
    )
    forecast_max_error: float = Field(
        0.15,
        gt=0.0,
        le=1.0,
        validation_alias=_k("forecast.max-error"),
        json_schema_extra=OURS,
        description="A forecast is said only while its past forecasts of the peak were off by at most "
        "this fraction on average (the last 36 scored); otherwise there is none and the decision reacts.",
    )

    @field_validator("forecast_bucket")
    @classmethod
    def _bucket_positive(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError("must be at least 1 s")
        return value

    @field_validator("forecast_periods")
    @classmethod
    def _periods_fit(cls, value: tuple[timedelta, ...], info: Any) -> tuple[timedelta, ...]:
        bucket, horizon = info.data.get("forecast_bucket"), info.data.get("forecast_horizon")
        for period in value:
            if bucket is not None and period % bucket:
                raise ValueError(
                    f"{format_duration(period)} is not a whole number of forecast.bucket "
                    f"({format_duration(bucket)})"
                )
            if horizon is not None and period <= horizon:
                longest = format_duration(horizon)
                raise ValueError(f"{format_duration(period)} is not longer than forecast.horizon ({longest})")
        return value
