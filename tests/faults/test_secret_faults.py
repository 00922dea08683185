"""Fault probe (issue 35, item 3): a secret in the configuration must never reach what a person reads.

Every path that can echo configuration or a URL is fed credentials: configuration errors of many kinds
(from the file and from ``FLINK_AUTOSCALER_*`` variables) through ``check-config`` and ``run``, the
output of a valid ``check-config``, log lines (JSON and console) carrying a URL, headers or an error text
that quotes them, and a Flink client error. Before the fix a duplicate cluster name echoed the whole
clusters list with its password and tokens, ``check-config`` printed ``?token=`` and a YAML error quoted
the line holding a token. The CLI runs as the operator runs it, ``python -m autoscaler``, in a process of
its own, so no secret remembered by an earlier test can hide a leak; no daemon, no Spark.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import structlog

pytestmark = pytest.mark.faults

# Distinct, greppable markers; each at least 8 characters, like any real credential.
PASSWORD = "pw-Hunter2-0001"
QUERY = "qy-Hunter2-0002"
BEARER = "tk-Hunter2-0003"
API_KEY = "ky-Hunter2-0004"
BASIC = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, QUERY, BEARER, API_KEY, BASIC)

URL = f"http://admin:{PASSWORD}@jm.invalid:8081/?token={QUERY}"
HEADERS = f"{{Authorization: 'Bearer {BEARER}', X-Api-Key: '{API_KEY}'}}"


def assert_no_secret(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"secrets {leaked} shown in:\n{text}"


def cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """``python -m autoscaler ARGS`` as a process of its own: exit code and everything it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    return done.returncode, done.stdout + done.stderr


# name -> (config file text, what the message must still say)
BAD_CONFIGS = {
    "duplicate cluster names": (
        f"clusters:\n  - name: prod\n    rest_url: {URL}\n"
        f"  - name: prod\n    rest_url: http://jm2.invalid:8081/?token={QUERY}\n    headers: {HEADERS}\n",
        "cluster names must be unique",
    ),
    "bad types": (
        f"clusters:\n  - name: prod\n    rest_url: http://jm.invalid:8081\n"
        f"    headers: {{Authorization: 'Bearer {BEARER}', X-Api-Key: '{API_KEY}', X-Retries: 5}}\n"
        f"    verify_tls: 'Bearer {BEARER}'\n    max_concurrency: '{API_KEY}'\n"
        f"  - name: other\n    rest_url: ['{URL}']\n"
        f"  - 'Bearer {BEARER}'\n",
        "clusters.0.verify_tls",
    ),
    "bad URL": (
        f"clusters:\n  - name: prod\n    rest_url: ftp://admin:{PASSWORD}@jm.invalid/?token={QUERY}\n",
        "must start with http:// or https://",
    ),
    "unknown key": (
        f"clusters:\n  - name: prod\n    rest-url: {URL}\n    header: {HEADERS}\n",
        "Extra inputs are not permitted",
    ),
    "header value with a line break": (
        f"clusters:\n  - name: prod\n    rest_url: http://jm.invalid:8081\n"
        f'    headers: {{X-Api-Key: "{API_KEY}\\nX-Other: 1"}}\n',
        "header 'X-Api-Key'",
    ),
    "credentials in the URL and an Authorization header": (
        f"clusters:\n  - name: prod\n    rest_url: {URL}\n    headers: {HEADERS}\n",
        "keep one of them",
    ),
    "YAML syntax error on a line with a token": (
        f"clusters:\n  - name: prod\n    rest_url: {URL}\n    headers: {{Authorization: Bearer {BEARER}, ]\n",
        "not valid YAML",
    ),
    "bad state_url": (f"state_url: mysql://app:{PASSWORD}@db.invalid/x?token={QUERY}\n", "state_url"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_check_config_errors_name_the_problem_and_hide_every_secret(case: str, tmp_path: Path) -> None:
    text, says = BAD_CONFIGS[case]
    config = tmp_path / "config.yaml"
    config.write_text(text)
    code, out = cli("check-config", str(config))
    assert code == 2, out
    assert says in out
    assert_no_secret(out)


def test_run_refuses_a_bad_config_without_showing_its_secrets(tmp_path: Path) -> None:
    """The same refusal from ``run`` (before Spark or any server starts)."""
    text, says = BAD_CONFIGS["duplicate cluster names"]
    config = tmp_path / "config.yaml"
    config.write_text(text)
    code, out = cli("run", "--config", str(config), "--decisions-dir", str(tmp_path / "d"))
    assert code == 2, out
    assert says in out
    assert_no_secret(out)


ENV_CASES = {
    "duplicate names from FLINK_AUTOSCALER_CLUSTERS": (
        {
            "FLINK_AUTOSCALER_CLUSTERS": json.dumps(
                [
                    {"name": "a", "rest_url": URL},
                    {"name": "a", "rest_url": "http://b.invalid", "headers": {"X-Api-Key": API_KEY}},
                ]
            )
        },
        "cluster names must be unique",
    ),
    "bad values from FLINK_AUTOSCALER_CLUSTERS": (
        {
            "FLINK_AUTOSCALER_CLUSTERS": json.dumps(
                [
                    {
                        "name": "a",
                        "rest_url": f"ftp://u:{PASSWORD}@a/?token={QUERY}",
                        "verify_tls": f"Bearer {BEARER}",
                    }
                ]
            )
        },
        "must start with http:// or https://",
    ),
    "FLINK_AUTOSCALER_CLUSTERS that is not JSON": (
        {"FLINK_AUTOSCALER_CLUSTERS": f'[{{"name": "a", "rest_url": "{URL}",}}'},
        "must hold JSON",
    ),
    "bad FLINK_AUTOSCALER_STATE_URL": (
        {"FLINK_AUTOSCALER_STATE_URL": f"mysql://app:{PASSWORD}@db/x?token={QUERY}"},
        "environment variable FLINK_AUTOSCALER_STATE_URL",
    ),
}


@pytest.mark.parametrize("case", list(ENV_CASES))
def test_settings_from_the_environment_hide_their_secrets(case: str, tmp_path: Path) -> None:
    env, says = ENV_CASES[case]
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    code, out = cli("check-config", str(config), env=env)
    assert code == 2, out
    assert says in out
    assert_no_secret(out)


def test_check_config_prints_the_cluster_without_its_credentials(tmp_path: Path) -> None:
    """A valid config: the cluster line shows host and path, the query's value hidden, no header value."""
    config = tmp_path / "config.yaml"
    config.write_text(
        f"clusters:\n  - name: prod\n    rest_url: http://jm.invalid:8081/?token={QUERY}\n"
        f"    headers: {HEADERS}\n"
        f"  - name: basic\n    rest_url: http://admin:{PASSWORD}@jm2.invalid:8081\n"
    )
    code, out = cli("check-config", str(config))
    assert code == 0, out
    assert "cluster prod (http://jm.invalid:8081/?token=***)" in out
    assert "cluster basic (http://jm2.invalid:8081)" in out
    assert_no_secret(out)


@pytest.fixture
def logs(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    """The daemon's logging set up inside the test (its output captured), and put back afterwards."""
    saved = structlog.get_config()
    yield capsys
    structlog.configure(**saved)


def _log_secrets(log: structlog.typing.FilteringBoundLogger) -> None:
    log.info("flink_request", url=URL, headers={"Authorization": f"Bearer {BEARER}", "X-Api-Key": API_KEY})
    log.warning(f"cannot reach {URL}", error=f"GET {URL} failed; Authorization: Basic {BASIC}")
    log.warning("client", cluster={"rest_url": URL, "headers": {"X-Api-Key": API_KEY}}, args=[URL])
    try:
        raise RuntimeError(f"connect to {URL} with {{'X-Api-Key': '{API_KEY}', 'token': '{BEARER}'}}")
    except RuntimeError:
        log.exception("request_failed")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_log_lines_hide_urls_headers_and_quoted_credentials(fmt, logs) -> None:
    from autoscaler.logs import configure_logging

    configure_logging(fmt, "INFO")
    _log_secrets(structlog.get_logger("test"))
    err = logs.readouterr().err
    assert "flink_request" in err and "X-Api-Key" in err and "jm.invalid:8081" in err
    assert "request_failed" in err and "RuntimeError" in err
    assert_no_secret(err)
    if fmt == "json":
        assert all(json.loads(line) for line in err.splitlines())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_flink_client_errors_and_their_log_lines_hide_the_url_secrets(transport, logs) -> None:
    from autoscaler.flink.client import FlinkClient
    from autoscaler.flink.errors import FlinkError
    from autoscaler.logs import configure_logging

    configure_logging("json", "DEBUG")
    url = f"http://admin:{PASSWORD}@127.0.0.1:{_closed_port()}/?token={QUERY}"

    async def call() -> FlinkError:
        client = FlinkClient(
            url, cluster="prod", headers={"X-Api-Key": API_KEY}, http_transport=transport, timeout_s=5
        )
        try:
            await client.overview()
        except FlinkError as exc:
            return exc
        finally:
            await client.aclose()
        raise AssertionError("a closed port answered")

    error = asyncio.run(call())
    structlog.get_logger("test").error("job_tick_failed", error=str(error))
    assert "127.0.0.1" in str(error) and "GET /overview" in str(error)
    assert_no_secret(str(error) + repr(error) + logs.readouterr().err)
