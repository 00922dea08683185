"""How ``bench_fleet.py`` watches the processes it measures from outside: ``/proc`` (CPU time, RSS, the
daemon's JVM among its descendants), the few ``/metrics`` series it reads, and starting the processes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fleet import CLUSTER

CLK_TCK = os.sysconf("SC_CLK_TCK")
KIB = 1024  # /proc/<pid>/status says "kB" and means KiB


# ---------------------------------------------------------------------------------------------- /proc
def proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (every thread), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_mb(pid: int, key: str) -> float:
    """A ``kB`` line of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``) in MB (10^6 bytes); 0 once gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * KIB / 1e6
    return 0.0


def machine_busy_s() -> float:
    """CPU seconds every core of the machine spent busy (``/proc/stat``): less ours, what else ran."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from ``/proc/<pid>/task/*/children``."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                for child in task.read_text().split():
                    found.append(int(child))
                    todo.append(int(child))
    return found


def find_jvm(pid: int) -> int | None:
    """The Spark driver JVM the daemon started (``spark-submit`` execs ``java``, a descendant)."""
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                return child
    return None


# ---------------------------------------------------------------------------------------------- /metrics
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_WANTED = (
    "flink_autoscaler_tick_duration_seconds_sum",
    "flink_autoscaler_tick_duration_seconds_count",
    "flink_autoscaler_ticks_total",
    "flink_autoscaler_ticks_skipped_total",
    "flink_autoscaler_rest_requests_total",
    "flink_autoscaler_evaluation_duration_seconds_sum",
    "flink_autoscaler_evaluation_duration_seconds_count",
    "flink_autoscaler_tick_stage_duration_seconds_sum",
    "flink_autoscaler_metric_fetch_wait_seconds_sum",
    "flink_autoscaler_metric_fetch_wait_seconds_count",
)


@dataclass(frozen=True, slots=True)
class Scrape:
    """What one ``/metrics`` scrape says about ticks and REST requests, and how big it was."""

    at_s: float
    ticks: float
    tick_sum_s: float
    skipped: float
    eval_sum_s: float
    eval_count: float
    requests: Mapping[str, float]  # "<METHOD> <endpoint template>" -> count
    size_bytes: int
    stage_sums_s: Mapping[str, float] = field(default_factory=dict)  # tick stage -> seconds, in order
    fetch_waits: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # outcome -> (n, s)

    @classmethod
    def parse(cls, text: str, at_s: float) -> Scrape:
        """Only the few series used (a full parse of a fleet's ``/metrics`` would cost the bench seconds)."""
        values: dict[str, float] = {}
        requests: dict[str, float] = {}
        stages: dict[str, float] = {}
        waits: dict[str, tuple[float, float]] = {}
        for line in text.splitlines():
            if not line.startswith(_WANTED):
                continue
            name_labels, _, value = line.rpartition(" ")
            name, _, labels = name_labels.partition("{")
            have = dict(_LABEL.findall(labels))
            if name == "flink_autoscaler_rest_requests_total":
                key = f"{have.get('method', '?')} {have.get('endpoint', '?')}"
                requests[key] = requests.get(key, 0.0) + float(value)
            elif name == "flink_autoscaler_tick_stage_duration_seconds_sum":
                stages[have.get("stage", "?")] = float(value)
            elif name.startswith("flink_autoscaler_metric_fetch_wait_seconds_"):  # summed over clusters
                outcome = have.get("outcome", "?")
                n, total = waits.get(outcome, (0.0, 0.0))
                x = float(value)
                waits[outcome] = (n + x, total) if name.endswith("_count") else (n, total + x)
            else:
                values[name] = float(value)
        return cls(
            at_s=at_s,
            ticks=values.get("flink_autoscaler_tick_duration_seconds_count", 0.0),
            tick_sum_s=values.get("flink_autoscaler_tick_duration_seconds_sum", 0.0),
            skipped=values.get("flink_autoscaler_ticks_skipped_total", 0.0),
            eval_sum_s=values.get("flink_autoscaler_evaluation_duration_seconds_sum", 0.0),
            eval_count=values.get("flink_autoscaler_evaluation_duration_seconds_count", 0.0),
            requests=requests,
            size_bytes=len(text),
            stage_sums_s=stages,
            fetch_waits=waits,
        )


# ---------------------------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def daemon_config(rest_url: str, metrics_port: int, workdir: Path, args: argparse.Namespace) -> str:
    """The daemon's YAML: defaults everywhere except the cluster, the 10 s loop, a short window (so jobs
    are decided, and some rescaled, within the measured ticks) and JSON logs the bench can read."""
    lines = [
        "clusters:",
        f"  - name: {CLUSTER}",
        f"    rest_url: {rest_url}",
        f"control_loop_interval: {args.interval:g} s",
        f"metrics_address: 127.0.0.1:{metrics_port}",
        "log_format: json",
        f"state_url: sqlite:///{workdir / 'state.db'}",
        "instance_id: bench-fleet",
        "spark:",
        f"  master: '{args.spark_master}'",
        *(["  conf:"] + [f"    {k}: '{v}'" for k, v in args.conf] if args.conf else []),
        "autoscaler:",
        "  job.autoscaler.enabled: 'true'",
        f"  job.autoscaler.metrics.window: {args.window_s:g} s",
        f"  job.autoscaler.stabilization.interval: {args.stabilization_s:g} s",
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def process(
    argv: Sequence[str], log: IO[bytes], *, cwd: Path, env: Mapping[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """A child in its own process group; on the way out SIGTERM to it, then SIGKILL to what is left of
    the group (a JVM the daemon could not stop)."""
    proc = subprocess.Popen(
        list(argv), stdout=log, stderr=log, cwd=cwd, env=dict(env), start_new_session=True
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)  # the process stops what it started (the daemon, its JVM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def wait_for_url(path: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    """The simulator's URL, from the first line it prints."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = re.search(r"REST API at (http://\S+)", path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"the simulator exited ({proc.returncode}):\n{path.read_text()[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"the simulator did not start within {timeout_s:.0f} s")
