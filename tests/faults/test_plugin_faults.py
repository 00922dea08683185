"""Executor plugins that raise, hang (a plain ``apply`` and an ``async`` one) or return garbage, in the real
daemon process: each failure vetoes the scaling with ``PluginFailed``, a log line and a counter name it,
the loop goes on (``/healthz`` stays 200 while a plain plugin blocks its worker thread), and once the
plugins behave the job scales, exactly once.

The plugins come as an operator ships them: a wheel dropped into ``plugins_dir``. The wheel is written
here (a zip with a module and its entry points), so the test needs no build tool. Each plugin reads its
behaviour from a file named in its config, which the test rewrites between steps.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from autoscaler.simulator.server import SimulatorServer

from .harness import Daemon, SimJob, daemon_config, free_port, plugin_wheel, sim_cluster
from .proxy import RESOURCE_REQUIREMENTS, FaultProxy

pytestmark = [pytest.mark.faults, pytest.mark.spark]

MODULE = textwrap.dedent(
    '''
    """Plugins that misbehave on demand: the mode file named by their ``mode-file`` key says how."""

    import asyncio
    import dataclasses
    import pathlib
    import time

    from autoscaler.plugins.api import ScalingExecutorPlugin


    def _mode(context):
        return pathlib.Path(context.config["mode-file"]).read_text().strip()


    class SyncChaos(ScalingExecutorPlugin):
        name = "sync-chaos"

        def apply(self, context, changes):
            mode = _mode(context)
            if mode == "raise":
                raise RuntimeError("sync-chaos raised on purpose")
            if mode == "hang":  # blocks its thread until the test heals it
                while _mode(context) == "hang":
                    time.sleep(0.1)
                return None
            if mode == "garbage":
                return "not a mapping"
            if mode == "float":
                return {k: dataclasses.replace(v, target=3.5) for k, v in changes.items()}
            return changes


    class AsyncChaos(ScalingExecutorPlugin):
        name = "async-chaos"

        async def apply(self, context, changes):
            if _mode(context) == "hang":
                while _mode(context) == "hang":
                    await asyncio.sleep(0.1)
            return changes
    '''
)


def test_plugins_that_raise_hang_or_return_garbage_veto_and_the_job_scales_once_they_behave(
    tmp_path: Path,
) -> None:
    sync_mode, async_mode = tmp_path / "sync.mode", tmp_path / "async.mode"
    sync_mode.write_text("raise")
    async_mode.write_text("approve")
    plugins = tmp_path / "plugins"
    plugin_wheel(
        plugins,
        "chaos_plugins",
        MODULE,
        {"sync-chaos": "chaos_plugins:SyncChaos", "async-chaos": "chaos_plugins:AsyncChaos"},
    )
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "plugged")
    port = free_port()
    options = {
        "job.autoscaler.scaling.custom-executors": "sync, async",
        "job.autoscaler.scaling.custom-executor.sync.class": "sync-chaos",
        "job.autoscaler.scaling.custom-executor.sync.mode-file": str(sync_mode),
        "job.autoscaler.scaling.custom-executor.async.class": "async-chaos",
        "job.autoscaler.scaling.custom-executor.async.mode-file": str(async_mode),
    }
    with SimulatorServer(sim) as server, FaultProxy(server.url) as proxy:
        config = daemon_config(
            {"sim": proxy.url},
            state_url=f"sqlite:///{tmp_path / 'state.db'}",
            metrics_port=port,
            options=options,
        )
        config += f"plugins_dir: {plugins}\n"
        workdir = tmp_path / "daemon"
        workdir.mkdir()
        with Daemon(workdir, config, port) as daemon:
            health = daemon.metrics_url.replace("/metrics", "/healthz")

            def failed(step: str, event: str, **fields: object) -> None:
                mark = daemon.mark()
                daemon.wait_log(event, since=mark, **fields)
                daemon.wait_decision(job, "PluginFailed", since=mark)
                assert httpx.get(health, timeout=10).status_code == 200, step
                assert proxy.forwarded(method="PUT", path=RESOURCE_REQUIREMENTS) == [], step

            failed("raise", "plugin_failed", plugin="sync")
            sync_mode.write_text("garbage")
            failed("garbage", "plugin_result_invalid", plugin="sync")
            sync_mode.write_text("float")
            failed("float", "plugin_result_invalid", plugin="sync")
            sync_mode.write_text("hang")
            failed("sync hang", "plugin_timed_out", plugin="sync")
            failed("sync hang, next tick", "plugin_still_running", plugin="sync")
            sync_mode.write_text("approve")  # its thread returns; the next call runs again
            async_mode.write_text("hang")
            failed("async hang", "plugin_timed_out", plugin="async")

            assert daemon.metric("flink_autoscaler_plugin_outcomes_total", outcome="PluginFailed") >= 6
            async_mode.write_text("approve")
            daemon.wait_event(job, "Scaling")
            daemon.wait_decision(job, "InBand", since=daemon.mark())
            assert job.work_parallelism() == 3
            assert len(proxy.forwarded(method="PUT", path=RESOURCE_REQUIREMENTS)) == 1
            assert daemon.stop() == 0
