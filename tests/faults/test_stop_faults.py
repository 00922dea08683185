"""SIGTERM while plugin code blocks for ever (issue 35): a plain executor plugin's ``apply`` and a plain
custom metric provider's ``collect_external_metrics``, each in a real daemon process.

Each time the stop must end the process and its Spark JVM within a bound, with the clean stop's exit
code 0, its lease released, the tick it cut short logged as cancelled (no ERROR traceback), and a last
log line that names the plugin call it left running. Before the fix the process stayed alive: at
interpreter exit it waited for the plugin's worker thread (the plugin), or never saw the signal at
all because the call blocked the event loop (the provider).

The plugins come in a wheel dropped into ``plugins_dir``, as in ``test_plugin_faults.py``; each one
touches the file named by its ``entered-file`` key when the blocking call starts, so the test sends
SIGTERM while the tick waits for it.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from autoscaler.simulator.server import SimulatorServer
from autoscaler.state import open_stores

from .harness import WAIT_S, Daemon, SimJob, daemon_config, free_port, plugin_wheel, sim_cluster

pytestmark = [pytest.mark.faults, pytest.mark.spark]

STOP_BOUND_S = 30.0
"""How long SIGTERM may take to end the process: far above a clean stop (a few seconds), far below a hang."""

MODULE = textwrap.dedent(
    '''
    """Plugin calls that never return."""

    import pathlib
    import threading

    from autoscaler.plugins.api import ScalingExecutorPlugin
    from autoscaler.plugins.metrics import CustomMetricProvider


    def _block(config):
        pathlib.Path(config["entered-file"]).touch()
        threading.Event().wait()  # for ever


    class StuckGate(ScalingExecutorPlugin):
        name = "stuck-gate"

        def apply(self, context, changes):
            _block(context.config)


    class StuckProvider(ScalingExecutorPlugin, CustomMetricProvider):
        name = "stuck-provider"

        def external_metric_names(self):
            return ["stuck.rate"]

        def collect_external_metrics(self, context):
            _block(context.config)

        def apply(self, context, changes):
            return changes
    '''
)


def _wait_file(path: Path, daemon: Daemon) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        daemon.assert_running()
        assert time.monotonic() < deadline, f"the plugin was never called:\n{daemon.tail()}"
        time.sleep(0.1)


def _group_alive(pgid: int) -> list[int]:
    """The live (not zombie) processes of the process group: the Spark JVM, if it outlived the daemon."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(int(entry.name))
    return alive


@pytest.mark.parametrize(
    ("plugin_class", "call"),
    [
        ("stuck-gate", "'stuck' (stuck_plugins.StuckGate).apply"),
        ("stuck-provider", "'stuck' (stuck_plugins.StuckProvider).collect_external_metrics"),
    ],
    ids=["executor-plugin", "metric-provider"],
)
def test_sigterm_ends_the_process_while_a_plain_plugin_call_blocks_for_ever(
    tmp_path: Path, plugin_class: str, call: str
) -> None:
    entered = tmp_path / "entered"
    plugins = tmp_path / "plugins"
    plugin_wheel(
        plugins,
        "stuck_plugins",
        MODULE,
        {"stuck-gate": "stuck_plugins:StuckGate", "stuck-provider": "stuck_plugins:StuckProvider"},
    )
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "stuck")
    port = free_port()
    db = tmp_path / "state.db"
    options = {
        "job.autoscaler.scaling.custom-executors": "stuck",
        "job.autoscaler.scaling.custom-executor.stuck.class": plugin_class,
        "job.autoscaler.scaling.custom-executor.stuck.entered-file": str(entered),
    }
    with SimulatorServer(sim) as server:
        config = daemon_config(
            {"sim": server.url}, state_url=f"sqlite:///{db}", metrics_port=port, options=options
        )
        config += f"plugins_dir: {plugins}\n"
        workdir = tmp_path / "daemon"
        workdir.mkdir()
        with Daemon(workdir, config, port) as daemon:
            daemon.wait_log("lease_acquired", cluster="sim")
            _wait_file(entered, daemon)  # a tick now waits for the blocked call
            mark = daemon.mark()
            stopped = time.monotonic()
            try:
                code = daemon.stop(timeout_s=STOP_BOUND_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"SIGTERM did not end the process in {STOP_BOUND_S:g} s:\n{daemon.tail()}")
            took = time.monotonic() - stopped

            assert code == 0, daemon.tail()
            assert sim.rescale_count(job.job_id) == 0  # the stuck gate let nothing through
            lines = daemon.logs(since=mark)
            events = [line["event"] for line in lines]
            assert "tick_cancelled" in events, daemon.tail()
            assert "daemon_stopped" in events and "lease_released" in events, daemon.tail()
            last = lines[-1]  # the closing line names what the process left running
            assert last["event"] == "daemon_exited", daemon.tail()
            assert last["exit_code"] == 0
            (abandoned,) = last["abandoned"]
            assert call in abandoned, abandoned
            assert not [line for line in lines if line.get("level") == "error"], daemon.tail()
            after = daemon.log_path.read_text(errors="replace").split('"tick_cancelled"', 1)[1]
            assert "Traceback" not in after and "raised an exception" not in after, after

            deadline = time.monotonic() + STOP_BOUND_S
            while (left := _group_alive(daemon.pid)) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not left, f"processes of the daemon's group outlived it {took:.0f} s after SIGTERM: {left}"

    stores = open_stores(f"sqlite:///{db}")
    try:  # the lease was handed back: a standby may take the cluster at once
        assert [(lease.name, lease.expires_ms) for lease in stores.state.leases()] == [("sim", 0)]
    finally:
        stores.close()
