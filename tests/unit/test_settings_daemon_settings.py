"""Daemon settings: YAML + env precedence, per-cluster options, clear errors naming the key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.settings import ConfigError, Settings


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


def test_the_profile_is_the_bottom_layer_of_every_jobs_options() -> None:
    """recommended by default; reference gives the reference's behaviour; the sections win over both."""
    from autoscaler.settings import ClusterSettings, Settings

    cluster = ClusterSettings(name="c", rest_url="http://jm:8081")
    recommended = Settings(metrics_address="", clusters=[cluster]).options_for(cluster)
    assert (recommended.load_change_threshold, recommended.scale_down_max_factor) == (0.3, 0.8)
    reference = Settings(metrics_address="", clusters=[cluster], profile="reference").options_for(cluster)
    assert (reference.load_change_threshold, reference.scale_down_max_factor) == (0.0, 0.6)
    assert not reference.prefer_counter_rates
    own = Settings(
        metrics_address="",
        clusters=[cluster],
        profile="reference",
        autoscaler={"job.autoscaler.metrics.load-change.threshold": "0.5"},
    ).options_for(cluster)
    assert (own.load_change_threshold, own.scale_down_max_factor) == (0.5, 0.6)


def test_decision_history_is_a_bounded_setting(monkeypatch):
    """How many decisions per job `explain --last N` can reach back over (decisions_dir)."""
    assert Settings().decision_history == 20
    monkeypatch.setenv("FLINK_AUTOSCALER_DECISION_HISTORY", "50")
    assert Settings().decision_history == 50
    monkeypatch.setenv("FLINK_AUTOSCALER_DECISION_HISTORY", "0")
    with pytest.raises(ConfigError, match="decision_history"):
        Settings.load(None)
