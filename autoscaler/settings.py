"""Daemon settings (YAML file + env vars) and the reference autoscaler's ``job.autoscaler.*`` options.

Precedence, lowest to highest: built-in defaults, the YAML file, environment variables
(``FLINK_AUTOSCALER_<FIELD>``, nested with ``__``), then per cluster and per job the Flink-style
``job.autoscaler.*`` keys (daemon ``autoscaler:`` section < cluster ``autoscaler:`` < the job's own
configuration on the cluster). Keys and defaults are the reference's, so a config written for the Java
autoscaler means the same thing here.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from autoscaler.calendar import PeriodError, parse_period
from autoscaler.durations import format_duration, parse_duration

__all__ = [
    "KEY_PREFIX",
    "LEGACY_KEY_PREFIX",
    "AlignmentMode",
    "AutoscalerOptions",
    "BusyTimeAggregator",
    "ClusterSettings",
    "ConfigError",
    "Settings",
    "SparkSettings",
    "flatten_keys",
]

KEY_PREFIX = "job.autoscaler."
EXECUTOR_PREFIX = "scaling.custom-executor."  # + <name>.class / <name>.<param>
EVALUATOR_PREFIX = "metrics.custom-evaluator."  # + <name>.class / <name>.<param>
# Plugin instance lists and the per-instance settings their dynamic keys fill, with the key prefix.
_INSTANCES = {
    "custom_executors": ("custom_executor_settings", EXECUTOR_PREFIX),
    "custom_evaluators": ("custom_evaluator_settings", EVALUATOR_PREFIX),
}
LEGACY_KEY_PREFIX = "kubernetes.operator.job.autoscaler."

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending key(s)."""


class BusyTimeAggregator(StrEnum):
    MAX = "MAX"
    AVG = "AVG"
    MIN = "MIN"


class AlignmentMode(StrEnum):
    BALANCED = "BALANCED"
    EVENLY_SPREAD = "EVENLY_SPREAD"
    OFF = "OFF"


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


def _csv_list(value: object) -> object:
    """Flink list options are ';'-separated strings (',' accepted too); YAML lists pass through."""
    if isinstance(value, str):
        sep = ";" if ";" in value else ","
        return [part.strip() for part in value.split(sep) if part.strip()]
    return value


_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kibibytes": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mebibytes": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gibibytes": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tebibytes": 1 << 40,
}


def parse_memory_size(value: object) -> object:
    """Flink ``MemorySize`` text ("16 gb", "512m", "1073741824") to bytes; units are powers of 1024."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = text[len(number) :].strip()
    if not number or unit not in _MEMORY_UNITS:
        raise ValueError(f"not a memory size: {value!r} (use e.g. '512 mb', '16 gb')")
    return round(float(number) * _MEMORY_UNITS[unit])


def _semicolon_list(value: object) -> object:
    """``excluded.periods`` splits on ';' only: a cron expression holds ',' lists (``MON,WED``)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(";") if part.strip()]
    return value


def _opt_float(value: object) -> object:
    return None if isinstance(value, str) and value.strip() == "" else value


OURS: dict[str, Any] = {"origin": "ours"}  # Field extra of a key the reference does not have (for the docs)


def _k(key: str, *deprecated: str) -> Any:
    """Field metadata for a ``job.autoscaler.<key>`` option (plus deprecated spellings)."""
    return AliasChoices(key, *deprecated)


class AutoscalerOptions(BaseModel):
    """The ``job.autoscaler.*`` options, with the reference's defaults and validation ranges.

    Field aliases are the key suffixes after ``job.autoscaler.``; build instances from Flink-style flat
    keys with :meth:`from_flink_conf`.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

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
    utilization_max: Annotated[float | None, BeforeValidator(_opt_float)] = Field(
        None, validation_alias=_k("utilization.max"), description="Upper utilization (scale-up threshold)."
    )
    utilization_min: Annotated[float | None, BeforeValidator(_opt_float)] = Field(
        None, validation_alias=_k("utilization.min"), description="Lower utilization (scale-down threshold)."
    )
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
    busy_time_aggregator: Annotated[BusyTimeAggregator, BeforeValidator(_upper)] = Field(
        BusyTimeAggregator.MAX,
        validation_alias=_k("metrics.busy-time.aggregator"),
        description="How busy time is aggregated over a vertex's subtasks (MAX is robust to skew).",
    )
    vertex_exclude_ids: Annotated[tuple[str, ...], BeforeValidator(_csv_list)] = Field(
        (),
        validation_alias=_k("vertex.exclude.ids"),
        description="Vertex ids (hex) never scaled; vertices downstream of them still are.",
    )
    parallelism_alignment_mode: Annotated[AlignmentMode | None, BeforeValidator(_upper)] = Field(
        None,
        validation_alias=_k("scaling.parallelism-alignment.mode"),
        json_schema_extra={"doc_default": "`BALANCED`"},
        description="How a target parallelism is aligned to key groups or source partitions. Unset, "
        "it is BALANCED, unless the deprecated scaling.key-group.partitions.adjust.mode is set.",
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
            "Block scaling while the window average of TaskManager heap used / max is above this"
            " (1.0: never)."
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
        description="Timeout of each Flink REST call.",
    )

    excluded_periods: Annotated[tuple[str, ...], BeforeValidator(_semicolon_list)] = Field(
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
        description="Accepted for compatibility; TaskManager memory cannot be changed over Flink's REST API.",
    )
    memory_tuning_scale_down_compensation_enabled: bool = Field(
        True,
        validation_alias=_k("memory.tuning.scale-down-compensation.enabled"),
        description="Accepted for compatibility; memory tuning cannot be applied over REST.",
    )
    memory_tuning_overhead: float = Field(
        0.2,
        validation_alias=_k("memory.tuning.overhead"),
        description="Accepted for compatibility; memory tuning cannot be applied over REST.",
    )
    memory_tuning_maximize_managed_memory: bool = Field(
        False,
        validation_alias=_k("memory.tuning.maximize-managed-memory"),
        description="Accepted for compatibility; memory tuning cannot be applied over REST.",
    )
    key_group_partitions_adjust_mode: Annotated[str | None, BeforeValidator(_upper)] = Field(
        None,
        validation_alias=_k("scaling.key-group.partitions.adjust.mode"),
        description="Deprecated legacy alignment (EVENLY_SPREAD or MAXIMIZE_UTILISATION), used only "
        "while scaling.parallelism-alignment.mode is unset: it blocks a scaling it cannot align.",
    )
    custom_executors: Annotated[tuple[str, ...], BeforeValidator(_csv_list)] = Field(
        (),
        validation_alias=_k("scaling.custom-executors"),
        description="Executor plugin instance names, run by ascending priority (duplicates ignored).",
    )
    custom_executor_settings: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        validation_alias=_k(EXECUTOR_PREFIX.rstrip(".")),
        description="Per instance: scaling.custom-executor.<name>.class and .<param> keys, prefix stripped.",
    )
    custom_evaluators: Annotated[tuple[str, ...], BeforeValidator(_csv_list)] = Field(
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
    # Ours (not in the reference):
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
    prefer_counter_rates: bool = Field(
        True,
        validation_alias=_k("metrics.prefer-counter-rates"),
        json_schema_extra=OURS,
        description="Take rates from counter deltas over the window instead of Flink's 60 s meters, "
        "which restart from zero and ramp for a minute after every rescale.",
    )
    busy_time_only_enabled: bool = Field(
        False,
        validation_alias=_k("scaling.busy-time-only.enabled"),
        json_schema_extra=OURS,
        description="Size each vertex from its own busy time alone, ignoring propagated target rates and "
        "output ratios (for operators whose output ratio misleads the model, FLINK-38538).",
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

    @field_validator("memory_gc_pressure_threshold", "memory_heap_usage_threshold")
    @classmethod
    def _ratio(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("must be within [0, 1]")
        return v

    @field_validator("custom_executors", "custom_evaluators")
    @classmethod
    def _dedupe_instances(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v))

    @model_validator(mode="after")
    def _instances_have_classes(self) -> AutoscalerOptions:
        for names_field, (settings_field, prefix) in _INSTANCES.items():
            settings = getattr(self, settings_field)
            missing = [n for n in getattr(self, names_field) if "class" not in settings.get(n, {})]
            if missing:
                keys = ", ".join(f"{KEY_PREFIX}{prefix}{n}.class" for n in missing)
                raise ValueError(
                    f"{self.canonical_key(names_field)} names instances without a class: set {keys}"
                )
        return self

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

    @model_validator(mode="after")
    def _enabled_feature_ranges(self) -> AutoscalerOptions:
        """Like the reference, a feature's ranges are checked only when the feature is on."""
        if self.observed_scalability_enabled and not 0.01 <= self.observed_scalability_coefficient_min <= 1.0:
            raise ValueError(f"{KEY_PREFIX}observed-scalability.coefficient-min must be within [0.01, 1]")
        if (
            self.scaling_effectiveness_detection_enabled
            and not 0.0 <= self.scaling_effectiveness_threshold <= 1.0
        ):
            raise ValueError(f"{KEY_PREFIX}scaling.effectiveness.threshold must be within [0, 1]")
        if self.memory_tuning_enabled and not 0.0 <= self.memory_tuning_overhead <= 1.0:
            raise ValueError(f"{KEY_PREFIX}memory.tuning.overhead must be within [0, 1]")
        return self

    @model_validator(mode="after")
    def _band(self) -> AutoscalerOptions:
        if self.utilization_max is not None and not self.utilization_target <= self.utilization_max <= 1.0:
            raise ValueError(
                f"{KEY_PREFIX}utilization.max must be within [target {self.utilization_target}, 1]"
            )
        if self.utilization_min is not None and not 0.0 <= self.utilization_min <= self.utilization_target:
            raise ValueError(
                f"{KEY_PREFIX}utilization.min must be within [0, target {self.utilization_target}]"
            )
        return self

    # ------------------------------------------------------------------ derived values used by the math
    @property
    def utilization_upper(self) -> float:
        """Upper utilization bound (scale-up threshold) outside backlog processing."""
        if self.utilization_max is not None:
            return self.utilization_max
        return self.utilization_target + self.target_utilization_boundary

    @property
    def utilization_lower(self) -> float:
        """Lower utilization bound (scale-down threshold) outside backlog processing."""
        if self.utilization_min is not None:
            return self.utilization_min
        return self.utilization_target - self.target_utilization_boundary

    # ------------------------------------------------------------------ Flink-style key handling
    @classmethod
    def option_keys(cls) -> dict[str, str]:
        """Map every accepted key suffix (canonical and deprecated) to its field name."""
        keys: dict[str, str] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            assert isinstance(alias, AliasChoices)
            for choice in alias.choices:
                assert isinstance(choice, str)
                keys[choice] = name
        return keys

    @classmethod
    def canonical_key(cls, field_name: str) -> str:
        alias = cls.model_fields[field_name].validation_alias
        assert isinstance(alias, AliasChoices)
        first = alias.choices[0]
        assert isinstance(first, str)
        return KEY_PREFIX + first

    @classmethod
    def from_flink_conf(
        cls, conf: Mapping[str, Any], base: AutoscalerOptions | None = None, *, source: str = "config"
    ) -> AutoscalerOptions:
        """Overlay Flink-style keys on ``base`` (defaults when None).

        The legacy ``kubernetes.operator.`` prefix is read first so the canonical prefix wins, and a
        deprecated key loses to its canonical spelling, as in the reference. Keys outside
        ``job.autoscaler.*`` are ignored (a job's configuration holds many other keys).
        """
        known = cls.option_keys()
        values: dict[str, Any] = base.model_dump() if base is not None else {}
        ranked: dict[str, tuple[int, str, Any]] = {}
        # settings field -> instance -> param -> (rank, value), for the plugins' dynamic keys
        dynamic: dict[str, dict[str, dict[str, tuple[int, str]]]] = {}
        for key, raw in flatten_keys(conf).items():
            for rank, prefix in ((0, LEGACY_KEY_PREFIX), (2, KEY_PREFIX)):
                if key.startswith(prefix):
                    suffix = key[len(prefix) :]
                    instance = next(
                        (
                            (settings_field, suffix[len(p) :])
                            for settings_field, p in _INSTANCES.values()
                            if suffix.startswith(p) and "." in suffix[len(p) :]
                        ),
                        None,
                    )
                    if instance is not None:
                        settings_field, rest = instance
                        name, param = rest.split(".", 1)
                        slot = dynamic.setdefault(settings_field, {}).setdefault(name, {})
                        if param not in slot or slot[param][0] <= rank:
                            slot[param] = (rank, str(raw))
                        break
                    field = known.get(suffix)
                    if field is None:
                        continue
                    canonical = cls.canonical_key(field)[len(KEY_PREFIX) :]
                    score = rank + (1 if suffix == canonical else 0)
                    if field not in ranked or ranked[field][0] <= score:
                        ranked[field] = (score, key, raw)
                    break
        for field, (_, _, raw) in ranked.items():
            values[field] = raw
        for settings_field, instances in dynamic.items():
            merged = {name: dict(params) for name, params in values.get(settings_field, {}).items()}
            for name, params in instances.items():
                merged.setdefault(name, {}).update({param: value for param, (_, value) in params.items()})
            values[settings_field] = merged
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            origin = {field: key for field, (_, key, _) in ranked.items()}
            raise ConfigError(_describe(exc, source, lambda loc: origin.get(loc, cls._key_for(loc)))) from exc

    @classmethod
    def _key_for(cls, loc: str) -> str:
        return cls.canonical_key(loc) if loc in cls.model_fields else loc

    def to_flink_conf(self) -> dict[str, str]:
        """Canonical ``job.autoscaler.*`` keys with string values (for docs and round trips)."""
        out: dict[str, str] = {}
        for name, value in self.model_dump(mode="json").items():
            prefix = next((p for field, p in _INSTANCES.values() if field == name), None)
            if prefix is not None:
                for instance, params in value.items():
                    for param, text in params.items():
                        out[f"{KEY_PREFIX}{prefix}{instance}.{param}"] = text
                continue
            if value is None:
                continue
            out[self.canonical_key(name)] = (
                ";".join(value)
                if isinstance(value, list)
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
        return out


def flatten_keys(conf: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested YAML mappings into Flink's dotted keys (Flink 2's config.yaml allows both)."""
    flat: dict[str, Any] = {}
    for key, value in conf.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_keys(value, full + "."))
        else:
            flat[full] = value
    return flat


def _describe(exc: ValidationError, source: str, key_of: Any) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if not loc:
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
            continue
        first = str(err["loc"][0]) if err["loc"] else ""
        key = key_of(first) if first else loc
        if len(err["loc"]) > 1 and key != loc:
            key = f"{key}{loc[len(first) :]}"
        value = err.get("input")
        shown = f" (got {value!r})" if value is not None and not isinstance(value, dict) else ""
        lines.append(f"  {key}: {err['msg']}{shown}")
    return f"invalid configuration in {source}:\n" + "\n".join(lines)


class ClusterSettings(BaseModel):
    """One Flink cluster to watch."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name used in job keys, metric labels and logs.")
    rest_url: str = Field(description="Flink REST endpoint, e.g. http://jobmanager:8081.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers (e.g. auth).")
    verify_tls: bool = Field(True, description="Verify the cluster's TLS certificate.")
    ca_file: Path | None = Field(None, description="CA bundle that signs the cluster's certificate.")
    client_cert: Path | None = Field(None, description="Client certificate for mutual TLS.")
    client_key: Path | None = Field(None, description="Private key of client_cert.")
    request_timeout: Duration | None = Field(
        None, description="REST timeout; defaults to job.autoscaler.flink.rest-client.timeout."
    )
    max_concurrency: int = Field(8, ge=1, description="Concurrent REST requests to this cluster.")
    metric_fetch_wait: Duration = Field(
        timedelta(seconds=1.5),
        description="How long a tick waits for the metric fetch it started on the JobManager (Flink's "
        "fetcher is lazy), so a sample is whole and fresh rather than mixed or a tick old; 0 disables.",
    )
    autoscaler: dict[str, Any] = Field(
        default_factory=dict, description="job.autoscaler.* keys for every job of this cluster."
    )

    @field_validator("rest_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")


class SparkSettings(BaseModel):
    """Where the evaluator's SparkSession runs."""

    model_config = ConfigDict(extra="forbid")

    master: str = Field("local[*]", description="local[*], spark://host:7077, or sc://host:15002 (Connect).")
    app_name: str = Field("flink-autoscaler", description="Spark application name.")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings.")


class Settings(BaseSettings):
    """Everything the daemon reads at start-up."""

    model_config = SettingsConfigDict(
        env_prefix="FLINK_AUTOSCALER_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    clusters: list[ClusterSettings] = Field(default_factory=list, description="Flink clusters to watch.")
    control_loop_interval: Duration = Field(
        timedelta(seconds=10), description="Tick period; also the metric sample rate."
    )
    metrics_address: str = Field("127.0.0.1:9250", description="host:port for /metrics; empty disables.")
    log_format: Literal["console", "json"] = Field("console", description="Log output: console or json.")
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING or ERROR.")
    spark: SparkSettings = Field(
        default_factory=SparkSettings, description="Where the evaluator's SparkSession runs."
    )
    autoscaler: dict[str, Any] = Field(
        default_factory=dict, description="job.autoscaler.* defaults for every job (Flink-style keys)."
    )
    state_url: str = Field(
        "sqlite:///flink-autoscaler.db",
        description="Where per-job state (scaling history, pending rescale, delayed scale-downs, cooldowns, "
        "overrides), the metric window and events are kept: sqlite:///PATH (a file; sqlite:////abs/path "
        "for an absolute path), postgresql+psycopg://USER@HOST:PORT/DB to share one database between "
        "daemons watching different clusters, or memory:// to keep nothing across restarts. The schema is "
        "created and migrated at start-up.",
    )
    event_retention: Duration = Field(
        timedelta(days=90),
        description="How long events stay in the state database; older ones are deleted once a day. "
        "0 keeps them forever (the reference's jdbc.event-handler.ttl).",
    )
    persist_window: bool = Field(
        True,
        description="Store each tick's samples so a restarted daemon resumes its metric window instead of "
        "waiting a full metrics.window.",
    )
    decisions_dir: Path | None = Field(
        Path("flink-autoscaler-decisions"),
        description="Where the daemon writes each job's last decision (one JSON file per job), read by "
        "'flink-autoscaler status' and 'explain'. Relative to the working directory, like the default "
        "state_url; null disables it.",
    )
    plugins_dir: Path | None = Field(
        None, description="Directory of executor-plugin wheels loaded at start-up (besides installed ones)."
    )
    confirm_timeout: Duration = Field(
        timedelta(minutes=5),
        description="How long a rescale may take to show in /jobs/:id before it is reported stuck.",
    )
    instance_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}",
        json_schema_extra={"doc_default": "*hostname*`:`*pid*"},
        min_length=1,
        max_length=256,
        description="This daemon's name in the cluster leases of the state database (default: "
        "hostname:pid). A stable one (the host name under systemd) lets a restarted daemon take its "
        "clusters back at once instead of after lease_ttl.",
    )
    lease_ttl: Duration | None = Field(
        None,
        description="How long a daemon's claim on a cluster lasts unless renewed (every tick). Daemons "
        "sharing a state database act on a cluster one at a time; the others stand by and take over "
        "this long after the holder stopped renewing (at once after a clean shutdown). Default: "
        "max(60 s, 3 x control_loop_interval); at least 2 x control_loop_interval.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs (see load()); env vars must win over it.
        return (env_settings, init_settings)

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, v: list[ClusterSettings]) -> list[ClusterSettings]:
        names = [c.name for c in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"cluster names must be unique, repeated: {', '.join(dupes)}")
        return v

    @model_validator(mode="after")
    def _lease_outlives_a_tick(self) -> Settings:
        if self.lease_ttl is not None and self.lease_ttl < 2 * self.control_loop_interval:
            raise ValueError(
                f"lease_ttl ({self.lease_ttl.total_seconds():g} s) must be at least twice "
                f"control_loop_interval ({self.control_loop_interval.total_seconds():g} s), or a "
                "daemon could lose its clusters between two ticks"
            )
        return self

    @property
    def effective_lease_ttl(self) -> timedelta:
        return self.lease_ttl or max(timedelta(seconds=60), 3 * self.control_loop_interval)

    @model_validator(mode="after")
    def _options_valid(self) -> Settings:
        base = AutoscalerOptions.from_flink_conf(self.autoscaler, source="autoscaler")
        for cluster in self.clusters:
            AutoscalerOptions.from_flink_conf(
                cluster.autoscaler, base, source=f"clusters[{cluster.name}].autoscaler"
            )
        return self

    def options_for(self, cluster: ClusterSettings) -> AutoscalerOptions:
        base = AutoscalerOptions.from_flink_conf(self.autoscaler, source="autoscaler")
        return AutoscalerOptions.from_flink_conf(cluster.autoscaler, base, source=f"clusters[{cluster.name}]")

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Settings:
        """Read the YAML file (if any), then env vars; raise ConfigError naming every bad key."""
        data: dict[str, Any] = {}
        source = "defaults"
        if path is not None:
            source = str(path)
            try:
                loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {path} must hold a mapping at the top level")
            data = {k.replace("-", "_"): v for k, v in loaded.items()}
        data.update(overrides)
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (in {source})") from exc
        except ValidationError as exc:
            nested = [e for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), ConfigError)]
            if nested:
                raise ConfigError(f"{nested[0]['ctx']['error']} (in {source})") from exc
            raise ConfigError(_describe(exc, source, lambda loc: loc)) from exc
