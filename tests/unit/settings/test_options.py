"""``job.autoscaler.*`` options: reference keys and defaults, legacy prefix and deprecated spellings,
plugin instances, and clear errors naming the key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.settings import AlignmentMode, AutoscalerOptions, ConfigError


def test_reference_defaults():
    o = AutoscalerOptions()
    assert (o.enabled, o.scaling_enabled, o.utilization_target, o.target_utilization_boundary) == (
        False,
        True,
        0.7,
        0.3,
    )
    assert o.metrics_window == timedelta(minutes=15) and o.stabilization_interval == timedelta(minutes=5)
    assert o.scale_down_interval == timedelta(hours=1) and o.catch_up_duration == timedelta(minutes=30)
    assert (o.vertex_min_parallelism, o.vertex_max_parallelism) == (1, 200)
    assert (o.scale_down_max_factor, o.scale_up_max_factor) == (0.6, 100000.0)
    assert o.utilization_upper == pytest.approx(1.0) and o.utilization_lower == pytest.approx(0.4)


def test_legacy_prefix_deprecated_keys_and_precedence():
    o = AutoscalerOptions.from_flink_conf(
        {
            "kubernetes.operator.job.autoscaler.metrics.window": "2 min",
            "job.autoscaler.target.utilization": "0.6",  # deprecated spelling
            "kubernetes.operator.job.autoscaler.utilization.target": "0.5",
            "job.autoscaler.scale-up.grace-period": "7 min",
            "job.autoscaler.scale-down.interval": "9 min",  # canonical wins over deprecated
            "taskmanager.numberOfTaskSlots": "8",  # not ours: ignored
        }
    )
    assert o.metrics_window == timedelta(minutes=2)
    assert o.utilization_target == 0.6  # canonical prefix (even deprecated key) wins over legacy prefix
    assert o.scale_down_interval == timedelta(minutes=9)


def test_nested_yaml_keys_are_flattened():
    o = AutoscalerOptions.from_flink_conf(
        {"job": {"autoscaler": {"enabled": True, "utilization": {"target": 0.5}}}}
    )
    assert o.enabled and o.utilization_target == 0.5


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        ({"job.autoscaler.utilization.target": "1.5"}, "job.autoscaler.utilization.target"),
        ({"job.autoscaler.metrics.window": "soon"}, "job.autoscaler.metrics.window"),
        (
            {"kubernetes.operator.job.autoscaler.vertex.max-parallelism": "0"},
            "kubernetes.operator.job.autoscaler.vertex.max-parallelism",
        ),
        ({"job.autoscaler.utilization.max": "0.5"}, "utilization.max"),
    ],
)
def test_invalid_values_name_the_key(conf, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        AutoscalerOptions.from_flink_conf(conf)


def test_custom_executor_instances_like_the_reference():
    o = AutoscalerOptions.from_flink_conf(
        {
            "job.autoscaler.scaling.custom-executors": "gate;budget;gate",  # duplicates ignored
            "kubernetes.operator.job.autoscaler.scaling.custom-executor.gate.class": "legacy.Gate",
            "job.autoscaler.scaling.custom-executor.gate.class": "cpu-gate",  # canonical prefix wins
            "job.autoscaler.scaling.custom-executor.gate.threshold": "0.9",
            "job.autoscaler.scaling.custom-executor.budget.class": "budget-cap",
            "job.autoscaler.scaling.custom-executor.budget.max-slots": 16,
        }
    )
    assert o.custom_executors == ("gate", "budget")
    assert o.custom_executor_settings == {
        "gate": {"class": "cpu-gate", "threshold": "0.9"},
        "budget": {"class": "budget-cap", "max-slots": "16"},
    }
    per_job = AutoscalerOptions.from_flink_conf(
        {"job.autoscaler.scaling.custom-executor.gate.threshold": "0.5"}, o
    )
    assert per_job.custom_executor_settings["gate"] == {"class": "cpu-gate", "threshold": "0.5"}
    with pytest.raises(ConfigError, match=r"custom-executor\.x\.class"):
        AutoscalerOptions.from_flink_conf({"job.autoscaler.scaling.custom-executors": "x"})


# --------------------------------------------------------------------------------------------- reference §2
# Every key of the reference's AutoScalerOptions table: (reference default as parsed here, a valid
# non-default value, what that value parses to). Deprecated spellings map to their canonical field.
MIN = timedelta(minutes=1)
REFERENCE_KEYS = {
    "enabled": (False, "true", True),
    "scaling.enabled": (True, "false", False),
    "metrics.window": (15 * MIN, "10 min", 10 * MIN),
    "stabilization.interval": (5 * MIN, "1 min", MIN),
    "excluded.periods": ((), "* * 9-17 ? * MON,FRI;22:00-06:00", ("* * 9-17 ? * MON,FRI", "22:00-06:00")),
    "utilization.target": (0.7, "0.6", 0.6),
    "target.utilization": (0.7, "0.5", 0.5),
    "target.utilization.boundary": (0.3, "0.2", 0.2),
    "utilization.max": (None, "0.9", 0.9),
    "utilization.min": (None, "0.3", 0.3),
    "scale-down.interval": (60 * MIN, "30 min", 30 * MIN),
    "scale-up.grace-period": (60 * MIN, "20 min", 20 * MIN),
    "vertex.min-parallelism": (1, "2", 2),
    "vertex.max-parallelism": (200, "64", 64),
    "scale-down.max-factor": (0.6, "0.5", 0.5),
    "scale-up.max-factor": (100000.0, "2", 2.0),
    "catch-up.duration": (30 * MIN, "0 s", timedelta(0)),
    "restart.time": (5 * MIN, "2 min", 2 * MIN),
    "restart.time-tracking.enabled": (False, "true", True),
    "restart.time-tracking.limit": (15 * MIN, "10 min", 10 * MIN),
    "backlog-processing.lag-threshold": (5 * MIN, "1 min", MIN),
    "observed-true-processing-rate.lag-threshold": (timedelta(seconds=30), "1 min", MIN),
    "observed-true-processing-rate.switch-threshold": (0.15, "0.2", 0.2),
    "observed-true-processing-rate.min-observations": (2, "3", 3),
    "scaling.effectiveness.detection.enabled": (False, "true", True),
    "scaling.effectiveness.threshold": (0.1, "0.2", 0.2),
    "memory.gc-pressure.threshold": (1.0, "0.8", 0.8),
    "memory.heap-usage.threshold": (1.0, "0.9", 0.9),
    "memory.tuning.enabled": (False, "true", True),
    "memory.tuning.scale-down-compensation.enabled": (True, "false", False),
    "memory.tuning.overhead": (0.2, "0.3", 0.3),
    "memory.tuning.maximize-managed-memory": (False, "true", True),
    "history.max.count": (3, "5", 5),
    "history.max.age": (24 * 60 * MIN, "2 h", 120 * MIN),
    "metrics.busy-time.aggregator": ("MAX", "avg", "AVG"),
    "vertex.exclude.ids": ((), "a1;b2", ("a1", "b2")),
    "scaling.event.interval": (30 * MIN, "5 min", 5 * MIN),
    "flink.rest-client.timeout": (timedelta(seconds=10), "30 s", timedelta(seconds=30)),
    "quota.memory": (None, "16 gb", 16 << 30),
    "quota.cpu": (None, "12", 12.0),
    # Reference default EVENLY_SPREAD; unset here (documented in docs/configuration.md).
    "scaling.key-group.partitions.adjust.mode": (None, "maximize_utilisation", "MAXIMIZE_UTILISATION"),
    # Unset means BALANCED (the reference's default), or the legacy mode above when that is set.
    "scaling.parallelism-alignment.mode": (None, "evenly_spread", "EVENLY_SPREAD"),
    "observed-scalability.enabled": (False, "true", True),
    "observed-scalability.min-observations": (3, "4", 4),
    "observed-scalability.coefficient-min": (0.5, "0.7", 0.7),
    "scaling.custom-executors": ((), "", ()),  # instances need a .class: see the executor test above
    "metrics.custom-evaluators": ((), "", ()),  # instances need a .class, like the executors
}


@pytest.mark.parametrize("key", list(REFERENCE_KEYS))
@pytest.mark.parametrize("prefix", ["job.autoscaler.", "kubernetes.operator.job.autoscaler."])
def test_every_reference_key_is_accepted_with_its_default(key, prefix):
    default, text, parsed = REFERENCE_KEYS[key]
    field = AutoscalerOptions.option_keys()[key]
    assert getattr(AutoscalerOptions(), field) == default
    options = AutoscalerOptions.from_flink_conf({prefix + key: text})
    assert getattr(options, field) == parsed


def test_only_our_own_keys_are_outside_the_reference_table():
    ours = {
        AutoscalerOptions.canonical_key(name).removeprefix("job.autoscaler.")
        for name, f in AutoscalerOptions.model_fields.items()
        if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("origin") == "ours"
    }
    # scaling.custom-executor.<name>.class / .<param> and metrics.custom-evaluator.<name>.class / .<param>
    dynamic = {"scaling.custom-executor", "metrics.custom-evaluator"}
    assert set(AutoscalerOptions.option_keys()) == set(REFERENCE_KEYS) | ours | dynamic
    assert ours == {
        "flink.rest-client.max-answer-size",
        "metrics.load-change.threshold",
        "metrics.prefer-counter-rates",
        "observed-true-processing-rate.settle-time",
        "scale-down.keep-last-peak.enabled",
        "scaling.busy-time-only.enabled",
        "scaling.insufficient-slots",
        "scaling.insufficient-slots.wait-for-idle",
        "scaling.slot-priority",
        "scaling-interval.min",
        "scaling-interval.max",
        "scaling.min-parallelism-change",
        "slow-subtasks.enabled",
        "slow-subtasks.multiplier",
        "slow-subtasks.busy-floor",
        "cost.slot-second",
        "cost.restart",
        "cost.lag-second",
        "cost.enabled",
        "cost.horizon",
        "lag.target",
        "forecast.enabled",
        "forecast.horizon",
        "forecast.bucket",
        "forecast.periods",
        "forecast.max-error",
    }


# Reference §1.12 ranges (and parse errors): each invalid value is rejected with a message that names
# the key as the user spelled it. A job with such a value is skipped with an "AutoScaler Options
# Validation" event (discover + daemon); these messages are that event's text.
INVALID = [
    ({"utilization.target": "1.5"}, "job.autoscaler.utilization.target", "within [0, 1]"),
    ({"target.utilization": "-0.1"}, "job.autoscaler.target.utilization", "within [0, 1]"),
    ({"target.utilization.boundary": "-0.1"}, "job.autoscaler.target.utilization.boundary", ">= 0"),
    ({"utilization.max": "0.5"}, "job.autoscaler.utilization.max", "within [target 0.7, 1]"),
    ({"utilization.max": "1.1"}, "job.autoscaler.utilization.max", "within [target 0.7, 1]"),
    ({"utilization.min": "0.8"}, "job.autoscaler.utilization.min", "within [0, target 0.7]"),
    ({"scale-down.max-factor": "-0.1"}, "job.autoscaler.scale-down.max-factor", "greater than or equal to 0"),
    ({"scale-up.max-factor": "-1"}, "job.autoscaler.scale-up.max-factor", "greater than or equal to 0"),
    ({"memory.gc-pressure.threshold": "1.5"}, "job.autoscaler.memory.gc-pressure.threshold", "within [0, 1]"),
    ({"memory.heap-usage.threshold": "-0.5"}, "job.autoscaler.memory.heap-usage.threshold", "within [0, 1]"),
    (
        {"observed-scalability.enabled": "true", "observed-scalability.coefficient-min": "0.001"},
        "job.autoscaler.observed-scalability.coefficient-min",
        "within [0.01, 1]",
    ),
    (
        {"scaling.effectiveness.detection.enabled": "true", "scaling.effectiveness.threshold": "2"},
        "job.autoscaler.scaling.effectiveness.threshold",
        "within [0, 1]",
    ),
    (
        {"memory.tuning.enabled": "true", "memory.tuning.overhead": "1.5"},
        "job.autoscaler.memory.tuning.overhead",
        "within [0, 1]",
    ),
    ({"excluded.periods": "* * 9-17 * * MON-FRI"}, "job.autoscaler.excluded.periods", "must be '?'"),
    ({"excluded.periods": "09:00-25:00"}, "job.autoscaler.excluded.periods", "25:00 is not a time of day"),
    ({"excluded.periods": "0 * * * *"}, "job.autoscaler.excluded.periods", "6 or 7 fields"),
    ({"metrics.busy-time.aggregator": "median"}, "job.autoscaler.metrics.busy-time.aggregator", "MAX"),
    (
        {"scaling.key-group.partitions.adjust.mode": "x"},
        "partitions.adjust.mode",
        "EVENLY_SPREAD or MAXIMIZE",
    ),
    ({"quota.memory": "lots"}, "job.autoscaler.quota.memory", "not a memory size"),
    ({"quota.cpu": "-1"}, "job.autoscaler.quota.cpu", "greater than or equal to 0"),
    ({"vertex.min-parallelism": "0"}, "job.autoscaler.vertex.min-parallelism", "greater than or equal to 1"),
    ({"history.max.count": "-1"}, "job.autoscaler.history.max.count", "greater than or equal to 0"),
    ({"metrics.window": "soon"}, "job.autoscaler.metrics.window", "soon"),
    ({"enabled": "maybe"}, "job.autoscaler.enabled", "boolean"),
]


@pytest.mark.parametrize(("conf", "key", "message"), INVALID, ids=[next(iter(c)) for c, _, _ in INVALID])
def test_invalid_values_are_rejected_with_a_message_naming_the_key(conf, key, message):
    with pytest.raises(ConfigError) as err:
        AutoscalerOptions.from_flink_conf({f"job.autoscaler.{k}": v for k, v in conf.items()}, source="job x")
    text = str(err.value)
    assert key in text and message in text and "job x" in text


def test_invalid_value_under_the_legacy_prefix_names_the_legacy_key():
    with pytest.raises(ConfigError, match=r"kubernetes\.operator\.job\.autoscaler\.excluded\.periods"):
        AutoscalerOptions.from_flink_conf(
            {"kubernetes.operator.job.autoscaler.excluded.periods": "25:00-26:00"}
        )


def test_feature_ranges_are_only_checked_while_the_feature_is_enabled():
    o = AutoscalerOptions.from_flink_conf(
        {
            "job.autoscaler.observed-scalability.coefficient-min": "0.001",
            "job.autoscaler.scaling.effectiveness.threshold": "2",
            "job.autoscaler.memory.tuning.overhead": "1.5",
        }
    )
    assert (o.observed_scalability_coefficient_min, o.memory_tuning_overhead) == (0.001, 1.5)


def test_excluded_periods_keep_commas_inside_cron_lists():
    o = AutoscalerOptions.from_flink_conf({"job.autoscaler.excluded.periods": "* * 9-17 ? * MON,WED,FRI"})
    assert o.excluded_periods == ("* * 9-17 ? * MON,WED,FRI",)
    assert o.to_flink_conf()["job.autoscaler.excluded.periods"] == "* * 9-17 ? * MON,WED,FRI"
    listed = AutoscalerOptions.from_flink_conf(
        {"job": {"autoscaler": {"excluded": {"periods": ["09:00-17:00", "* * * ? * SAT,SUN"]}}}}
    )
    assert listed.excluded_periods == ("09:00-17:00", "* * * ? * SAT,SUN")


# ------------------------------------------------------------------ alignment mode fallback (reference)
ALIGNMENT_KEY = "job.autoscaler.scaling.parallelism-alignment.mode"


@pytest.mark.parametrize("name", ["myMode", "com.acme.PrimeAwareAlignment", "balancd", ""])
def test_an_unknown_or_custom_alignment_mode_falls_back_to_balanced_with_a_warning(name):
    """Reference ParallelismAligner#resolve: a name that is no built-in mode aligns BALANCED and warns;
    the job's configuration is not rejected (which would stop the job from being scaled at all)."""
    o = AutoscalerOptions.from_flink_conf(
        {ALIGNMENT_KEY: name, f"{ALIGNMENT_KEY}.{name}.class": "com.acme.Mode"}, source="job x"
    )
    assert o.alignment_mode is AlignmentMode.BALANCED
    warning = o.alignment_mode_fallback
    assert warning is not None and ALIGNMENT_KEY in warning and repr(name) in warning
    assert warning.endswith("Falling back to BALANCED.")
    assert o.to_flink_conf()[ALIGNMENT_KEY] == name  # the configured name is kept, as written


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("balanced", AlignmentMode.BALANCED),
        (" Evenly_Spread ", AlignmentMode.EVENLY_SPREAD),
        ("OFF", AlignmentMode.OFF),
    ],
)
def test_a_built_in_alignment_mode_in_any_case_is_used_without_a_warning(name, mode):
    o = AutoscalerOptions.from_flink_conf({ALIGNMENT_KEY: name})
    assert (o.alignment_mode, o.alignment_mode_fallback) == (mode, None)


def test_an_unset_alignment_mode_leaves_the_choice_to_the_legacy_key_without_a_warning():
    o = AutoscalerOptions()
    assert (o.parallelism_alignment_mode, o.alignment_mode, o.alignment_mode_fallback) == (None, None, None)
