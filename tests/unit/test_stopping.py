"""Issue 35, the pure parts: plain plugin calls on daemon threads that a stop leaves behind and names
(``autoscaler.plugins.calls``), a plain metric provider off the event loop, a tick cancelled by the
stop logged as such, and the stop's signal handler and watchdog (``autoscaler.stopping``). The daemon
process itself is in ``tests/faults/test_stop_faults.py``.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping

import pytest
from structlog.testing import capture_logs

from autoscaler.clock import FakeClock
from autoscaler.metrics import MetricsReporter
from autoscaler.plugins.calls import StillRunning, call_blocking, still_running
from autoscaler.plugins.metrics import (
    ConfiguredProvider,
    CustomMetricProvider,
    ExternalMetricsContext,
    external_metrics,
)
from autoscaler.schedule import Schedule
from autoscaler.settings import AutoscalerOptions
from autoscaler.stopping import EXIT_STOP_FORCED, StopWatchdog, exit_process, stop_on_signals
from autoscaler.testing import JOB


async def test_a_blocked_call_runs_on_a_daemon_thread_is_listed_and_not_started_twice() -> None:
    release = threading.Event()
    threads: list[threading.Thread] = []

    def blocked() -> str:
        threads.append(threading.current_thread())
        release.wait(30)
        return "done"

    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(call_blocking("k", "executor plugin 'p' (m.P).apply", blocked), 0.05)
        (thread,) = threads
        assert thread.daemon  # the interpreter does not wait for it at exit
        (listed,) = still_running()
        assert listed.startswith("executor plugin 'p' (m.P).apply, running for ")
        with pytest.raises(StillRunning, match="previous call has not returned"):
            await call_blocking("k", "again", blocked)
        assert await call_blocking("other", "another call", lambda: 7) == 7  # other keys run
    finally:
        release.set()
    await _until_nothing_runs()  # the abandoned thread returned: it is no longer listed


async def _until_nothing_runs() -> None:
    deadline = time.monotonic() + 10
    while still_running() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert still_running() == []


async def test_a_calls_exception_reaches_the_caller_and_its_exit_does_not_end_the_daemon() -> None:
    def raising() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await call_blocking("r", "raising", raising)
    with pytest.raises(RuntimeError, match="SystemExit"):
        await call_blocking("e", "exiting", lambda: sys.exit(3))
    assert still_running() == []


async def test_a_plain_metric_provider_that_blocks_leaves_the_loop_running_and_costs_only_its_names() -> None:
    release = threading.Event()
    calls: list[str] = []

    class Stuck(CustomMetricProvider):
        def external_metric_names(self) -> list[str]:
            return ["q"]

        def collect_external_metrics(self, context: ExternalMetricsContext) -> Mapping[str, float]:  # type: ignore[override]
            calls.append(context.job.key)
            release.wait(30)
            return {"q": 1.0}

    provider = ConfiguredProvider("stuck", Stuck())
    ctx = ExternalMetricsContext(JOB, AutoscalerOptions(), {}, 0)
    beats: list[int] = []

    async def heartbeat() -> None:
        for _ in range(10):
            beats.append(1)
            await asyncio.sleep(0.005)

    try:
        beat = asyncio.create_task(heartbeat())
        with capture_logs() as logs:
            first = await external_metrics(provider, ctx, budget_s=0.2)
            await beat
            again = await external_metrics(provider, ctx, budget_s=0.2)
        assert math.isnan(first["q"]) and math.isnan(again["q"])
        assert len(beats) == 10  # before the fix the call ran on the loop: no beat until it returned
        assert len(calls) == 1  # not called again for the job while the first call runs
        failed = [e for e in logs if e["event"] == "metric_provider_failed"]
        assert "TimeoutError" in failed[0]["error"] and "has not returned" in failed[1]["error"]
        (listed,) = still_running()
        assert f"metric provider 'stuck' ({__name__}." in listed and f"for {JOB.key}" in listed
    finally:
        release.set()
    await _until_nothing_runs()
    assert await external_metrics(provider, ctx, budget_s=5) == {"q": 1.0}


@pytest.mark.parametrize("stopping", [True, False], ids=["by-the-stop", "by-anything-else"])
async def test_a_tick_cancelled_by_the_stop_is_one_info_line_and_any_other_cancellation_propagates(
    stopping: bool,
) -> None:
    schedule = Schedule(FakeClock(), MetricsReporter())
    started = asyncio.Event()

    async def tick() -> None:
        started.set()
        await asyncio.sleep(60)

    schedule._tick = tick
    schedule._stopping = stopping
    with capture_logs() as logs:
        running = asyncio.create_task(schedule._run_tick())
        await started.wait()
        running.cancel()
        if stopping:
            await running  # ends quietly: APScheduler sees no exception to log as an ERROR
        else:
            with pytest.raises(asyncio.CancelledError):
                await running
    cancelled = [e for e in logs if e["event"] == "tick_cancelled"]
    assert [(e["log_level"], e["reason"]) for e in cancelled] == (
        [("info", "the daemon is stopping")] if stopping else []
    )
    assert not [e for e in logs if e["log_level"] == "error"]


async def test_sigterm_sets_stop_and_arms_the_watchdog_even_while_the_loop_is_blocked() -> None:
    exits: list[int] = []
    before = signal.getsignal(signal.SIGTERM)
    dog = StopWatchdog(grace_s=0.3, exit=exits.append)
    stop = asyncio.Event()
    with capture_logs() as logs, stop_on_signals(stop, dog):
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        time.sleep(0.5)  # the event loop is blocked, as by an async plugin that never yields
        await asyncio.wait_for(stop.wait(), 5)
        deadline = time.monotonic() + 10
        while not exits and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    assert exits == [EXIT_STOP_FORCED]
    (forced,) = [e for e in logs if e["event"] == "stop_forced"]
    assert forced["log_level"] == "error" and forced["grace_s"] == 0.3
    assert any("test_stopping.py" in frame for frame in forced["main_thread"])  # where it was stuck
    assert signal.getsignal(signal.SIGTERM) is before  # put back as it was


def test_exit_process_says_daemon_exited_and_returns_the_code_when_nothing_is_left_running() -> None:
    with capture_logs() as logs:
        assert exit_process(0) == 0
    assert logs == [{"event": "daemon_exited", "exit_code": 0, "log_level": "info"}]
