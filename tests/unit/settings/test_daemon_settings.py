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
    with pytest.raises(ConfigError, match="FLINK_AUTOSCALER_DECISION_HISTORY: Input should be greater"):
        Settings.load(None)


def test_credentials_in_rest_url_become_a_header_and_never_show(tmp_path, capsys):
    """Issue 12: a password in rest_url appeared in check-config, validation errors and every REST
    error log line, and silently replaced a configured Authorization header."""
    import base64

    from autoscaler.cli import main
    from autoscaler.settings import ClusterSettings

    cluster = ClusterSettings(name="prod", rest_url="https://ops:s%40cret@jm:8081/")
    assert cluster.rest_url == "https://jm:8081"
    assert cluster.headers["Authorization"] == "Basic " + base64.b64encode(b"ops:s@cret").decode()

    both = tmp_path / "both.yaml"
    both.write_text(
        "clusters:\n  - name: prod\n    rest_url: https://ops:secret@jm:8081\n"
        "    headers: {authorization: Bearer t}\n"
    )
    with pytest.raises(ConfigError) as err:
        Settings.load(both)
    assert "keep one of them" in str(err.value) and "secret" not in str(err.value)

    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  - name: prod\n    rest_url: ftp://ops:secret@jm:8081\n")
    with pytest.raises(ConfigError) as err:
        Settings.load(bad)
    assert "ftp://ops:***@jm:8081" in str(err.value) and "secret" not in str(err.value)

    good = tmp_path / "good.yaml"
    good.write_text("clusters:\n  - name: prod\n    rest_url: https://ops:secret@jm:8081\n")
    assert main(["check-config", str(good)]) == 0
    out = capsys.readouterr()
    assert "https://jm:8081" in out.out and "secret" not in out.out + out.err


def test_redact_url_keeps_the_user_and_hides_the_password():
    from autoscaler.settings.values import redact_url

    assert redact_url("postgresql://app:pw@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact_url("http://jm:8081") == "http://jm:8081"
    assert redact_url("not a url") == "not a url"


def test_header_names_and_values_are_checked_and_never_in_the_repr():
    """Issue 35: an HTTP library quoted a header value with a line break in its error (h11's "Illegal
    header value b'...'"), and a non-ASCII one crashed the client at start-up."""
    from autoscaler.settings import ClusterSettings

    cluster = ClusterSettings(name="p", rest_url="http://jm:8081", headers={"X-Api-Key": "k-1234"})
    assert "k-1234" not in repr(cluster) and "headers" not in repr(cluster)
    for headers, says in (
        ({"X-Api-Key": "k-1234\nX-Other: 1"}, "header 'X-Api-Key': its value holds a line break"),
        ({"X-Api-Key": "k-1234é"}, "header 'X-Api-Key': its value holds"),
        ({"Bad Name": "k-1234"}, "header name 'Bad Name' is not an HTTP token"),
    ):
        with pytest.raises(ConfigError) as err:
            Settings.load(clusters=[{"name": "p", "rest_url": "http://jm:8081", "headers": headers}])
        assert says in str(err.value) and "k-1234" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        (
            "FLINK_AUTOSCALER_METRICS_ADDRESS",
            "0.0.0.0",
            "FLINK_AUTOSCALER_METRICS_ADDRESS: must be host:port",
        ),
        (
            "FLINK_AUTOSCALER_METRICS_ADDRESS",
            "host:99999",
            "FLINK_AUTOSCALER_METRICS_ADDRESS: must be host:port",
        ),
        (
            "FLINK_AUTOSCALER_STATE_URL",
            "mongodb://u:pw@db/x",
            "FLINK_AUTOSCALER_STATE_URL: must be sqlite:///PATH",
        ),
        (
            "FLINK_AUTOSCALER_LOG_LEVEL",
            "LOUD",
            "FLINK_AUTOSCALER_LOG_LEVEL: must be one of DEBUG, INFO, WARNING",
        ),
        ("FLINK_AUTOSCALER_CLUSTERS", "{bad", "must hold JSON; the cause: Expecting property name"),
        ("FLINK_AUTOSCALER_SPARK__CONF", "{bad", "FLINK_AUTOSCALER_SPARK__CONF"),
    ],
)
def test_what_run_would_trip_over_is_a_config_error_first(monkeypatch, env, value, message):
    """Issue 12: check-config said OK and run then died with a traceback (or check-config did)."""
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as err:
        Settings.load(None)
    assert message in str(err.value) and "pw@" not in str(err.value)


def test_good_values_pass_and_the_log_level_is_normalised(monkeypatch):
    monkeypatch.setenv("FLINK_AUTOSCALER_LOG_LEVEL", "debug")
    monkeypatch.setenv("FLINK_AUTOSCALER_METRICS_ADDRESS", "[::1]:9250")
    monkeypatch.setenv("FLINK_AUTOSCALER_STATE_URL", "postgresql+psycopg://app@db:5432/x")
    settings = Settings.load(None)
    assert (settings.log_level, settings.metrics_address) == ("DEBUG", "[::1]:9250")
    monkeypatch.setenv("FLINK_AUTOSCALER_METRICS_ADDRESS", "")
    assert Settings.load(None).metrics_address == ""


def test_min_parallelism_above_max_is_said_not_silently_accepted(tmp_path, capsys):
    """Valid in the reference (the maximum wins), so not rejected: a warning says it."""
    from autoscaler.cli import main
    from autoscaler.settings import AutoscalerOptions

    options = AutoscalerOptions.from_flink_conf(
        {"job.autoscaler.vertex.min-parallelism": "8", "job.autoscaler.vertex.max-parallelism": "4"}
    )
    (warning,) = options.warnings()
    assert "vertex.min-parallelism (8) is above job.autoscaler.vertex.max-parallelism (4)" in warning
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  - name: a\n    rest_url: http://jm:8081\n"
        "    autoscaler:\n      job.autoscaler.vertex.min-parallelism: 8\n"
        "      job.autoscaler.vertex.max-parallelism: 4\n"
    )
    assert main(["check-config", str(config)]) == 0
    assert (
        "warning: clusters[a].autoscaler: job.autoscaler.vertex.min-parallelism (8)"
        in capsys.readouterr().err
    )


async def test_a_metrics_port_in_use_is_one_clear_line(tmp_path):
    """Issue 12: run died with a traceback; main() prints a ConfigError as one line and exits 2."""
    import socket

    from autoscaler.process import run_daemon

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "c.yaml"
        config.write_text(
            f"metrics_address: 127.0.0.1:{port}\nstate_url: memory://\n"
            "clusters:\n  - name: a\n    rest_url: http://127.0.0.1:9\n"
        )
        with pytest.raises(
            ConfigError, match=f"cannot serve /metrics: metrics_address 127.0.0.1:{port} is in use"
        ):
            await run_daemon(Settings.load(config))


def test_a_misspelled_option_key_is_named_with_the_closest_one(tmp_path, capsys):
    """Issue 12: a misspelled job.autoscaler.* key changed nothing, silently."""
    from autoscaler.cli import main
    from autoscaler.settings import AutoscalerOptions

    warnings = AutoscalerOptions.unknown_keys(
        {
            "job.autoscaler.utilisation.target": "0.6",
            "job.autoscaler.scaling.custom-executor.gate.class": "x",  # a plugin's: known family
            "job.autoscaler.utilization.target": "0.6",
            "pipeline.name": "not ours",
        }
    )
    assert warnings == [
        "job.autoscaler.utilisation.target is not an autoscaler option and is ignored "
        "(did you mean job.autoscaler.utilization.target?)"
    ]
    config = tmp_path / "c.yaml"
    config.write_text(
        "autoscaler:\n  job.autoscaler.scale-down.intervall: 1 h\n"
        "clusters:\n  - name: a\n    rest_url: http://jm:8081\n"
    )
    assert main(["check-config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "warning: autoscaler: job.autoscaler.scale-down.intervall is not an autoscaler option" in err
    assert "did you mean job.autoscaler.scale-down.interval?" in err
