"""The ``job.autoscaler.*`` options model: cross-field validation, derived bounds, Flink-style key handling.

:class:`AutoscalerOptions` combines the field groups of ``option_groups`` (one field per reference key)
and adds what needs all of them: the validators that compare fields of several groups or must run in a
fixed order, the utilization bounds the scaling math reads, and the translation between flat
``job.autoscaler.*`` keys (legacy prefix, deprecated spellings, plugins' dynamic keys) and fields.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, ConfigDict, ValidationError, model_validator

from autoscaler.settings.errors import ConfigError, describe_errors
from autoscaler.settings.keys import (
    EVALUATOR_PREFIX,
    EXECUTOR_PREFIX,
    KEY_PREFIX,
    LEGACY_KEY_PREFIX,
    flatten_keys,
)
from autoscaler.settings.option_groups import (
    FeatureOptions,
    LimitOptions,
    OwnOptions,
    PluginOptions,
    RateOptions,
    RuntimeOptions,
    TargetOptions,
)
from autoscaler.settings.values import AlignmentMode

__all__ = ["AutoscalerOptions"]

# Plugin instance lists and the per-instance settings their dynamic keys fill, with the key prefix.
_INSTANCES = {
    "custom_executors": ("custom_executor_settings", EXECUTOR_PREFIX),
    "custom_evaluators": ("custom_evaluator_settings", EVALUATOR_PREFIX),
}


# pydantic puts the fields of the last base class first: the groups are listed in reverse so the fields
# keep their declaration order (docs/configuration.md, to_flink_conf, error messages follow it).
class AutoscalerOptions(
    OwnOptions, PluginOptions, FeatureOptions, RuntimeOptions, RateOptions, LimitOptions, TargetOptions
):
    """The ``job.autoscaler.*`` options, with the reference's defaults and validation ranges.

    Field aliases are the key suffixes after ``job.autoscaler.``; build instances from Flink-style flat
    keys with :meth:`from_flink_conf`.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    # The model validators stay here, in this order: pydantic runs a model's "after" validators in
    # declaration order (a base class's first) and reports only the first that fails.
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

    def warnings(self) -> list[str]:
        """Values that are valid (the reference accepts them) but hardly meant: said, not rejected."""
        out = []
        if self.vertex_min_parallelism > self.vertex_max_parallelism:
            out.append(
                f"{KEY_PREFIX}vertex.min-parallelism ({self.vertex_min_parallelism}) is above "
                f"{KEY_PREFIX}vertex.max-parallelism ({self.vertex_max_parallelism}): the maximum wins, "
                "as in the reference"
            )
        return out

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

    @property
    def alignment_mode(self) -> AlignmentMode | None:
        """The alignment mode in effect; None while ``scaling.parallelism-alignment.mode`` is unset (the
        deprecated legacy key, else BALANCED, applies then).

        A name that is no built-in mode falls back to BALANCED, as the reference's
        ``ParallelismAligner#resolve`` does (custom modes are Java plugins this daemon cannot load):
        the job keeps being scaled, and :attr:`alignment_mode_fallback` says why it is BALANCED.
        """
        mode = self.parallelism_alignment_mode
        if mode is None:
            return None
        try:
            return AlignmentMode(mode)
        except ValueError:
            return AlignmentMode.BALANCED

    @property
    def alignment_mode_fallback(self) -> str | None:
        """The warning for a ``scaling.parallelism-alignment.mode`` that is no built-in mode, or None."""
        mode = self.parallelism_alignment_mode
        if mode is None or mode in {m.value for m in AlignmentMode}:
            return None
        key = self.canonical_key("parallelism_alignment_mode")
        builtins = ", ".join(m.value for m in AlignmentMode)
        return (
            f"Alignment mode {mode!r} of {key} is not a built-in mode ({builtins}) and custom "
            f"alignment modes (Java classes, {key}.<name>.class) cannot be loaded here. Falling back "
            f"to {AlignmentMode.BALANCED.value}."
        )

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
    def unknown_keys(cls, conf: Mapping[str, Any]) -> list[str]:
        """Why each ``job.autoscaler.*`` key of ``conf`` that no option reads is ignored, naming the
        closest known key: a misspelled key otherwise changes nothing, silently (issue 12)."""
        known = cls.option_keys()
        dynamic = tuple(p for _, p in _INSTANCES.values())
        out: list[str] = []
        for key in flatten_keys(conf):
            prefix = next((p for p in (KEY_PREFIX, LEGACY_KEY_PREFIX) if key.startswith(p)), None)
            if prefix is None:
                continue
            suffix = key[len(prefix) :]
            if suffix in known or suffix.startswith(dynamic):
                continue
            match = difflib.get_close_matches(suffix, list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {KEY_PREFIX}{match[0]}?)" if match else ""
            out.append(f"{key} is not an autoscaler option and is ignored{hint}")
        return out

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
            raise ConfigError(
                describe_errors(exc, source, lambda loc: origin.get(loc, cls._key_for(loc)))
            ) from exc

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
