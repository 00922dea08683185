"""Settings: YAML + env precedence, reference keys and defaults, clear errors naming the key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.durations import format_duration, parse_duration
from autoscaler.settings import AutoscalerOptions, ConfigError, Settings


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 min", 300),
        ("30s", 30),
        ("1h", 3600),
        ("PT5M", 300),
        ("500 ms", 0.5),
        (1500, 1.5),
        ("2 d", 172800),
        ("1.5 min", 90),
    ],
)
def test_flink_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["soon", "5 parsecs", "", True])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration_round_trips():
    for text in ("15 min", "1 h", "30 s", "250 ms", "1 d"):
        assert format_duration(parse_duration(text)) == text


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


def test_yaml_then_env(tmp_path, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "clusters:\n  - name: prod\n    rest_url: http://jm:8081/\n    autoscaler:\n"
        "      job.autoscaler.utilization.target: 0.6\n"
        "control_loop_interval: 30 s\nautoscaler:\n  job.autoscaler.enabled: true\n"
    )
    monkeypatch.setenv("FLINK_AUTOSCALER_CONTROL_LOOP_INTERVAL", "15s")
    monkeypatch.setenv("FLINK_AUTOSCALER_SPARK__MASTER", "local[2]")
    s = Settings.load(cfg)
    assert s.control_loop_interval == timedelta(seconds=15)  # env wins over the file
    assert s.spark.master == "local[2]"
    assert s.clusters[0].rest_url == "http://jm:8081"
    opts = s.options_for(s.clusters[0])
    assert opts.enabled and opts.utilization_target == 0.6


def test_config_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  - name: x\n    rest_url: jm:8081\nunknown_key: 1\n")
    with pytest.raises(ConfigError) as err:
        Settings.load(bad)
    assert "clusters.0.rest_url" in str(err.value) and "unknown_key" in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.load(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="mapping"):
        Settings.load(tmp_path / "list.yaml")
    (tmp_path / "opts.yaml").write_text("autoscaler:\n  job.autoscaler.utilization.target: 2\n")
    with pytest.raises(ConfigError, match=r"job\.autoscaler\.utilization\.target"):
        Settings.load(tmp_path / "opts.yaml")


def test_duplicate_cluster_names_rejected():
    with pytest.raises(ConfigError, match="unique"):
        Settings.load(
            None, clusters=[{"name": "a", "rest_url": "http://x"}, {"name": "a", "rest_url": "http://y"}]
        )


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
