"""Fault probe (issue 35, items 8 and 5): a name from Flink must not take over the operator's terminal.

Whoever submits a job names it and its vertices. Before the fix ``status`` printed a job name with a
newline raw (so it could fake a table row), an ESC sequence raw (so it could recolour or clear the
terminal), a bidi override raw (so text showed reversed), and padded every line to the width of the
longest name: a Flink SQL vertex named after its 10,000-character plan made every row 10,000 wide. The
console log renderer printed such a name raw in a line's event and in a traceback.

Here a daemon ticks in-process against the simulator (a stub evaluator: no Spark, no daemon process),
writing its state database and decisions as ``run --decisions-dir`` does; ``status`` and ``explain``
then run through the CLI's ``main`` as an operator would, and ``check-config`` as a process of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import structlog

from autoscaler.cli import main
from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.decision_store import JsonDecisionDir, outcome_recorder
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec, SimEdgeSpec, SimJobSpec
from autoscaler.state import open_stores
from autoscaler.testing import StubEvaluator

pytestmark = pytest.mark.faults

# A newline followed by what looks like a row, an SGR colour, an OSC title with BEL, a right-to-left
# override, a C1 control (NEL) and a bidi isolate.
HOSTILE = "orders\nprod/fake-job  9  9  0.00\x1b[31m\x1b]0;owned\x07\u202eredro\x85\u2066x"
LONG_VERTEX = "Calc(select=[" + ", ".join(f"col_{i}" for i in range(1200)) + "])"  # ~10,000 characters
# Everything a terminal acts on besides the line breaks the output's own layout uses.
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def hostile_job() -> SimJobSpec:
    """The lab job under a hostile name, its sink vertex named like a Flink SQL plan."""
    job = work_job(name=HOSTILE, input_rate=Constant(rate=2000.0))
    sink = job.vertices[-1].name

    def renamed(name: str) -> str:
        return LONG_VERTEX if name == sink else name

    return job.model_copy(
        update={
            "vertices": (*job.vertices[:-1], job.vertices[-1].model_copy(update={"name": LONG_VERTEX})),
            "edges": tuple(
                SimEdgeSpec(source=renamed(e.source), target=renamed(e.target), ship_strategy=e.ship_strategy)
                for e in job.edges
            ),
        }
    )


@pytest.fixture
async def recorded(tmp_path: Path) -> AsyncIterator[list[str]]:
    """Two ticks of a daemon watching the hostile job; the CLI arguments that read what it wrote."""
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=0), clock)
    sim.submit(hostile_job())
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    config = tmp_path / "config.yaml"
    config.write_text(f"state_url: {state_url}\n")
    stores = open_stores(state_url)
    daemon = Daemon(
        Settings(
            clusters=[ClusterSettings(name="prod", rest_url="http://prod.invalid:8081")],
            autoscaler={"job.autoscaler.enabled": "true"},
            metrics_address="",
            state_url=state_url,
        ),
        evaluator=StubEvaluator({"Work": 3}, tpr={"Work": lambda p: 1000.0 * p}),
        clock=clock,
        state=stores.state,
        events=stores.events,
        metrics=MetricsReporter(),
        transports={"prod": transport(sim)},
        on_outcome=outcome_recorder(JsonDecisionDir(tmp_path / "decisions")),
    )
    try:
        for seconds in (10, 60):  # a rescale of Work, then the job running at its new parallelism
            clock.advance(seconds)
            await daemon.run_tick()
        yield ["--config", str(config), "--decisions-dir", str(tmp_path / "decisions")]
    finally:
        await daemon.aclose()
        stores.close()


def test_status_escapes_names_and_keeps_its_rows_short(recorded, capsys) -> None:
    assert main(["status", *recorded]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out), repr(out)
    lines = out.splitlines()
    assert not any(line.startswith("prod/fake-job") for line in lines)  # no row faked
    [job_row] = [line for line in lines if line.startswith("prod/orders")]
    assert job_row.startswith("prod/orders\\nprod/fake-job  9  9  0.00\\x1b[31m\\x1b]0;owned")  # cut at 64
    assert "Scaling" in job_row or "InBand" in job_row  # the row still carries its decision
    assert any(line.startswith("  Calc(select=[col_0, col_1") and "..." in line for line in lines)
    assert max(map(len, lines)) < 300, max(map(len, lines))  # was: every line padded to ~10,000


def test_explain_escapes_names_and_shows_them_whole(recorded, capsys) -> None:
    assert main(["explain", HOSTILE, "--last", "2", *recorded]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out), repr(out)
    assert out.startswith(
        "Job prod/orders\\nprod/fake-job  9  9  0.00\\x1b[31m\\x1b]0;owned\\x07\\u202eredro"
    )
    assert LONG_VERTEX in out  # the full name is here, for status's cut one


def test_explain_of_an_unknown_hostile_name_escapes_the_known_ones(recorded, capsys) -> None:
    assert main(["explain", "nope\x1b[2J", *recorded]) == 1
    err = capsys.readouterr().err
    assert not CONTROL.search(err.rstrip("\n")), repr(err)
    assert "known jobs: prod/orders\\nprod/fake-job" in err


@pytest.fixture
def logs(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    saved = structlog.get_config()
    yield capsys
    structlog.configure(**saved)


def _log_hostile() -> None:
    log = structlog.get_logger("test")
    log.warning(f"job {HOSTILE} skipped", job=HOSTILE, vertices=[HOSTILE])
    try:
        raise RuntimeError(f"cannot read job {HOSTILE}")
    except RuntimeError:
        log.exception("job_tick_failed", job=HOSTILE)


def test_console_logs_escape_control_characters(logs) -> None:
    from autoscaler.logs import configure_logging

    configure_logging("console", "INFO")
    _log_hostile()
    err = logs.readouterr().err
    assert not CONTROL.search(err.replace("\n", "")), repr(err)  # a traceback keeps its own lines
    first, *_ = err.splitlines()
    assert "job orders\\nprod/fake-job  9  9  0.00\\x1b[31m" in first  # the event stays on its line
    assert "\\u202eredro" in err and "RuntimeError: cannot read job orders" in err


def test_json_logs_are_escaped_by_json_and_round_trip(logs) -> None:
    from autoscaler.logs import configure_logging

    configure_logging("json", "INFO")
    _log_hostile()
    err = logs.readouterr().err
    assert not CONTROL.search(err.replace("\n", "")), repr(err)  # JSON escapes every control itself
    lines = [json.loads(line) for line in err.splitlines()]
    assert len(lines) == 2 and all(line["job"] == HOSTILE for line in lines)


def test_check_config_escapes_names_and_values(tmp_path: Path) -> None:
    """``check-config`` as a process: a cluster name and an option value with controls print escaped
    (or, should the name be refused, the refusal does)."""
    config = tmp_path / "config.yaml"
    config.write_text(
        'clusters:\n  - name: "prod\\x1b[2J\\u202e"\n    rest_url: http://jm.invalid:8081\n'
        '    autoscaler: {job.autoscaler.vertex.exclude.ids: "a\\nb\\x1b[31m"}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "check-config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    out = done.stdout + done.stderr
    assert done.returncode in (0, 2), out
    assert not CONTROL.search(out.replace("\n", "")), repr(out)
    assert "prod\\x1b[2J\\u202e" in out
