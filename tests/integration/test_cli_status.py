"""`status` and `explain` read what a running daemon wrote: a daemon ticks against the simulator with a
SQLite state database and records its decisions the way `run --decisions-dir` does; the CLI, given the
config (for state_url) and the directory, reports them between ticks. Also `plugins` and `check-config`
through `main([...])`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from autoscaler.cli import main
from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.decision_store import JsonDecisionDir, outcome_recorder
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant, SimClusterSpec
from autoscaler.state import open_stores
from autoscaler.testing import FaultyTransport, StubEvaluator

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "example.yaml"


class Running:
    """A daemon whose evaluator wants Work at 3 (each subtask processing 1000 rec/s, so a rescale
    delivers what it promised), and the CLI arguments that point at what it writes."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        sim = SimCluster(SimClusterSpec(cooldown_after_rescaling_s=0), self.clock)
        sim.submit(work_job(name="orders", input_rate=Constant(rate=2000.0)))
        state_url = f"sqlite:///{tmp_path / 'state.db'}"
        config = tmp_path / "config.yaml"
        config.write_text(f"state_url: {state_url}\n")
        self.args = ["--config", str(config), "--decisions-dir", str(tmp_path / "decisions")]
        self.stores = open_stores(state_url)
        self.flink = FaultyTransport(transport(sim))  # no faults unless a test adds some
        settings = Settings(
            clusters=[ClusterSettings(name="prod", rest_url="http://prod.invalid:8081")],
            autoscaler={"job.autoscaler.enabled": "true"},
            metrics_address="",
            state_url=state_url,
        )
        self.daemon = Daemon(
            settings,
            evaluator=StubEvaluator({"Work": 3}, tpr={"Work": lambda p: 1000.0 * p}),
            clock=self.clock,
            state=self.stores.state,
            events=self.stores.events,
            metrics=MetricsReporter(),
            transports={"prod": self.flink},
            on_outcome=outcome_recorder(JsonDecisionDir(tmp_path / "decisions")),
        )

    async def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.daemon.run_tick()


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    world = Running(tmp_path)
    try:
        yield world
    finally:
        await world.daemon.aclose()
        world.stores.close()


def rows(out: str) -> dict[str, list[str]]:
    """First cell (job key or vertex name) -> the line's cells split on runs of 2+ spaces."""
    table = {}
    for line in out.splitlines()[1:]:
        cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
        if cells:
            table[cells[0]] = cells
    return table


async def test_status_shows_each_job_its_vertices_and_last_decision(running, capsys):
    await running.tick(10)  # scales Work 1 -> 3
    assert main(["status", *running.args]) == 0
    table = rows(capsys.readouterr().out)
    assert "Scaling (0 s ago), rescale pending" in table["prod/orders"]
    assert table["prod/orders"][-1].startswith("Scaling: In-place scaling triggered")
    assert table["Work"][1:3] == ["1", "3"]  # parallelism 1, going to 3
    assert table["prod"][1] == running.daemon.settings.instance_id  # the daemon holding the lease

    await running.tick(60)  # the job restarted and runs at 3: in band, and the rescale is verified
    assert main(["status", *running.args]) == 0
    table = rows(capsys.readouterr().out)
    assert "InBand (0 s ago)" in table["prod/orders"]
    assert "rescale pending" not in table["prod/orders"][2]
    assert table["prod/orders"][-1].startswith("ScalingVerified: Rescale of")
    assert table["Work"][1:3] == ["3", "3"]
    assert table["Source: BacklogSource"][1:3] == ["1", "1"]


async def test_status_says_since_when_the_cluster_could_not_be_read_for_a_job(running, capsys):
    """Fault probe (issue 12): while the job could not be read, status showed its last decision as if
    nothing were wrong. Here its configuration cannot be fetched (connection refused) for three ticks."""
    await running.tick(10)  # scales Work 1 -> 3
    await running.tick(60)  # in band
    running.flink.faults[("GET", r"/jobs/[0-9a-f]+/jobmanager/config")] = httpx.ConnectError("refused")
    running.daemon.clusters["prod"].job_configs.clear()  # as after a restart: read once per JobID
    await running.tick(10)
    first = datetime.fromtimestamp(running.clock.now_ms() / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    await running.tick(10)
    await running.tick(10)
    assert main(["status", *running.args]) == 0
    row = rows(capsys.readouterr().out)["prod/orders"]
    [decision] = [cell for cell in row if cell.startswith("ClusterUnreachable")]  # was: InBand, as if fine
    assert f"not read since {first}" in decision and "3 ticks" in decision  # ages: the CLI's real clock
    assert main(["explain", "orders", "--last", "2", *running.args]) == 0
    out = capsys.readouterr().out
    assert "cannot read the job's configuration this tick, not scaling it" in out and "[InBand]" in out


async def test_explain_says_why_in_plain_words(running, capsys, monkeypatch):
    await running.tick(10)
    config, decisions = running.args[1], running.args[3]
    monkeypatch.setenv("FLINK_AUTOSCALER_DECISIONS_DIR", decisions)
    assert main(["explain", "orders", "--config", config]) == 0  # a unique job name is enough
    out = capsys.readouterr().out
    assert "Job prod/orders" in out and "SCALED [Scaling]" in out
    assert "Work (" in out and "parallelism 1 -> 3" in out and "outside its utilization band" in out
    assert "Gates, in the order they run:" in out and "no executor plugins configured" in out
    assert "Recent events:" in out and "In-place scaling triggered" in out

    await running.tick(60)
    assert main(["explain", "prod/orders", *running.args]) == 0
    out = capsys.readouterr().out
    assert "[InBand]" in out and "BLOCKED" in out and "utilization band" in out
    assert "ScalingConfirmed" in out


async def test_explain_shows_the_last_decisions_and_what_the_rescale_delivered(running, capsys):
    await running.tick(10)  # scales Work 1 -> 3
    await running.tick(60)  # running at 3, the window full: in band, and the rescale verified
    for _ in range(3):
        await running.tick(10)  # in band again: the same decision, one run
    assert main(["explain", "orders", "--last", "3", *running.args]) == 0
    out = capsys.readouterr().out
    latest, _, earlier = out.partition("Earlier decisions, newest first:")
    assert "[InBand] (the same for 3 ticks since" in latest
    verifying, _, rescale = earlier.partition("SCALED [Scaling]")
    assert (
        "This tick verified the rescale at" in verifying and "gates: BLOCKED at utilization band" in verifying
    )
    assert "Work: p 1 -> 3 (recommended 3)" in rescale and "gates: all passed" in rescale
    assert "Verification at" in rescale and "the expected capacity was delivered" in rescale
    assert "Work: parallelism 1 -> 3: 3,000 rec/s at full load of 3,000 rec/s expected (100%)" in rescale
    assert "ScalingVerified" in latest  # among the recent events

    assert main(["explain", "orders", "--last", "1", *running.args]) == 0
    assert "Earlier decisions" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_code:
        main(["explain", "orders", "--last", "0", *running.args])
    assert exit_code.value.code == 2
    assert "expected a whole number of decisions, 1 or more, got '0'" in capsys.readouterr().err


async def test_explain_of_an_unknown_job_lists_the_known_ones(running, capsys):
    await running.tick(10)
    assert main(["explain", "nope", *running.args]) == 1
    assert "known jobs: prod/orders" in capsys.readouterr().err


def test_status_without_decisions_says_how_to_get_them(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FLINK_AUTOSCALER_DECISIONS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # the default state_url is a file in the working directory
    assert main(["status"]) == 2  # the default decisions_dir does not exist until a daemon wrote it
    assert "no decisions at flink-autoscaler-decisions: has the daemon run" in capsys.readouterr().err
    assert main(["status", "--decisions-dir", str(tmp_path / "missing")]) == 2
    assert f"no decisions at {tmp_path / 'missing'}" in capsys.readouterr().err
    (tmp_path / "decisions").mkdir()
    assert main(["status", "--decisions-dir", str(tmp_path / "decisions")]) == 0
    captured = capsys.readouterr()
    assert "no jobs recorded yet" in captured.out and "no state database at" in captured.err
    assert not (tmp_path / "flink-autoscaler.db").exists()  # reading never creates the database


def test_plugins_lists_discovered_plugins_and_reports_problems(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(f"plugins_dir: {tmp_path / 'plugins'}\n")
    assert main(["plugins", "--config", str(config)]) == 1  # the directory does not exist
    assert "plugins directory" in capsys.readouterr().err
    (tmp_path / "plugins").mkdir()
    assert main(["plugins", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.strip()  # a table of installed plugins, or "no executor plugins installed"


def test_check_config_prints_the_effective_options(capsys):
    assert main(["check-config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "cluster prod (http://jobmanager:8081)" in out and "job.autoscaler.enabled: true" in out
