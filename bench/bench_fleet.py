"""The daemon at fleet scale: the real process against a simulated cluster of N jobs x V vertices (a script).

For each size it starts two processes and measures them from outside:

* the simulator, ``python bench/bench_fleet.py --serve-simulator ...`` (``run_simulator`` over HTTP, in
  real time, Flink's lazy metric fetcher on at ``metrics.fetcher.update-interval``: by default half
  the control interval, as the daemon advises (Flink's own default, 10 s, with a 10 s loop makes every
  tick wait longer for its fetch, up to ``metric_fetch_wait``, and then read a stale one;
  ``--fetch-interval 10`` shows it); it counts every request it answers by endpoint template
  (``GET /_simulator/requests``);
* the daemon, ``python -m autoscaler run --config <tmp>/config.yaml`` as production runs it (Spark
  ``local[*]``, SQLite state, JSON logs at INFO, ``/metrics``), in its own process group.

The first ticks are not measured: at least ``--warm-up`` of them (the Spark session is up before the first
tick, but the first ticks discover every job's metric names and compile Spark's plans), and as many as end
within ``--window-s`` (``metrics.window``, 2 min by default) of the first, so the Spark window holds as
many rows as it will from then on. A short window lets jobs be decided, and some rescaled, within the
measured ticks; the daemon's default is 15 min, whose window holds 7.5 times the rows (see
``bench_evaluator.py --window-s 900`` for what that costs the evaluation). Then the daemon is measured
for ``--ticks`` control intervals of wall time (and at least ``--min-ticks`` ticks, however long they
take), from one tick's end to another's:

* **tick median / max**: each tick's duration, from ``flink_autoscaler_tick_duration_seconds``: the
  benchmark polls ``/readyz`` (cheap) every 0.5 s and scrapes ``/metrics`` once after each tick it sees
  end, so a tick's duration is the histogram's ``_sum`` delta over a ``_count`` delta of 1 (like a
  Prometheus scraping at the control interval). Two ticks ending within one poll share their mean.
* **skipped**: ``flink_autoscaler_ticks_skipped_total`` over the window (APScheduler's "maximum number
  of running instances reached" and misfires, which the daemon counts and logs as ``tick_skipped``); the
  table also shows the ``tick_skipped`` log lines and the interval slots the window spanned.
* **requests / job / tick**: requests the simulator answered in the window / (jobs x ticks run), and the
  same from the daemon's ``flink_autoscaler_rest_requests_total``; by endpoint template below the table.
  **job reads / job / tick**, the target's figure: the simulator's ``GET /jobs/:id`` and vertex-metric
  answers per job and tick (``is_job_read``: the cluster's own requests and rescales are left out),
  and per job by JobID: every job but the probe of the cluster's fetch wait should be read 1 + V times.
* **CPU s / tick**: utime + stime from ``/proc/<pid>/stat`` over the window / ticks run, for the daemon's
  Python process, its JVM (the ``java`` process among its descendants) and the simulator.
* **RSS**: ``VmRSS`` of the daemon and of its JVM from ``/proc/<pid>/status``, sampled after every
  tick; the table shows the window's maximum (``VmHWM``, the peak since start, is listed below it).

Below the table, per size: requests per job and tick by endpoint (both sides), and where a tick's time
went without profiling the daemon: the span in which the simulator was being asked (its request count,
polled every 0.1 s), the Spark evaluation (``flink_autoscaler_evaluation_duration_seconds``), and the
rest; then the jobs' decisions and the warnings the daemon logged.

Run: ``.venv/bin/python bench/bench_fleet.py`` (100, 1,000 and 5,000 jobs x 10 vertices);
``--sizes 20 --vertices 3 --ticks 3`` for a trial of a minute. ``--json FILE`` keeps every figure. The
fleet is in ``bench/fleet.py``; reading ``/proc`` and ``/metrics`` and starting the processes in
``bench/fleet_probe.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fleet import CLUSTER, fleet_cluster, fleet_job, job_kind, serve_simulator
from fleet_probe import (
    Scrape,
    daemon_config,
    descendants,
    find_jvm,
    free_port,
    machine_busy_s,
    proc_cpu_s,
    proc_status_mb,
    process,
    wait_for_url,
)

from autoscaler.simulator.rest.counts import is_job_read
from autoscaler.simulator.server import JOB_READS_PATH

__all__ = ["CLUSTER", "Scrape", "fleet_cluster", "fleet_job", "job_kind", "main"]

TARGET_MEDIAN_S = 5.0
TARGET_RSS_MB = 1500.0  # 1.5 GB, daemon + JVM


# ---------------------------------------------------------------------------------------------- one size
@dataclass
class Sample:
    """The processes' counters at one instant (right after a tick ended)."""

    scrape: Scrape
    daemon_cpu_s: float
    jvm_cpu_s: float
    sim_cpu_s: float
    bench_cpu_s: float
    machine_busy_s: float
    daemon_rss_mb: float
    jvm_rss_mb: float
    sim_rss_mb: float
    others_rss_mb: float  # the daemon's other descendants (spark-submit's shell, Python workers), if any
    sim_requests: Mapping[str, int]
    job_reads: Mapping[str, int]  # by JobID, as the simulator counted them
    rest_active_s: float  # the span in which requests came, since the previous sample


@dataclass
class Result:
    """One size's figures: what the table and the lines below it print, and the JSON output holds."""

    jobs: int
    vertices: int
    interval_s: float
    warm_up: int
    kinds: dict[str, int]
    startup_s: float = 0.0  # daemon start -> first tick ended
    warm_up_ticks_s: list[float] = field(default_factory=list)
    ticks_s: list[float] = field(default_factory=list)
    rest_active_s: list[float] = field(default_factory=list)  # per tick: the span requests came in
    merged_ticks: int = 0  # ticks whose duration is a mean (two ended within one poll)
    window_s: float = 0.0
    window_from_s: float = 0.0  # seconds after the daemon's start
    window_utc: tuple[float, float] = (0.0, 0.0)  # the window in Unix time, to pick its log lines
    ticks_run: int = 0
    skipped: int = 0
    skipped_log_lines: int = 0
    sim_requests: dict[str, int] = field(default_factory=dict)
    job_reads: dict[str, int] = field(default_factory=dict)  # in the window, by JobID
    daemon_requests: dict[str, float] = field(default_factory=dict)
    daemon_cpu_s: float = 0.0
    jvm_cpu_s: float = 0.0
    sim_cpu_s: float = 0.0
    bench_cpu_s: float = 0.0
    others_cpu_s: float = 0.0  # what other processes of the machine used in the window
    eval_s: float = 0.0
    stages_s: dict[str, float] = field(default_factory=dict)  # each stage's mean per tick, in order
    fetch_waits: dict[str, tuple[float, float]] = field(default_factory=dict)  # outcome -> (n, mean s)
    daemon_rss_mb: float = 0.0
    jvm_rss_mb: float = 0.0
    sim_rss_mb: float = 0.0
    others_rss_mb: float = 0.0
    daemon_hwm_mb: float = 0.0
    jvm_hwm_mb: float = 0.0
    scrape_mb: float = 0.0
    log_levels: dict[str, int] = field(default_factory=dict)
    log_events: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    note: str = ""

    def per_tick(self, total: float) -> float:
        return total / self.ticks_run if self.ticks_run else float("nan")

    def per_job_tick(self, total: float) -> float:
        return total / (self.jobs * self.ticks_run) if self.ticks_run else float("nan")


class Watch:
    """Follows one daemon from outside: ``/readyz`` to see a tick end, then one ``/metrics`` scrape."""

    def __init__(
        self, metrics_url: str, daemon: subprocess.Popen[bytes], log: Path, sim_pid: int, sim_url: str
    ) -> None:
        self.metrics_url = metrics_url
        self.log = log
        self.daemon = daemon
        self.sim_pid = sim_pid
        self.sim_url = sim_url
        self.client = httpx.Client(timeout=60)
        self.jvm: int | None = None
        self._last_end_s: float | None = None
        self._last_ticks = 0.0
        self._sim_total: int | None = None
        self._sim_polled_s = time.monotonic()
        self._rest_from_s: float | None = None  # the span, since the last sample, in which requests came
        self._rest_to_s = 0.0

    def close(self) -> None:
        self.client.close()

    def alive(self) -> None:
        if self.daemon.poll() is not None:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-6:]
            raise RuntimeError(f"the daemon exited with {self.daemon.returncode}: " + "\n    ".join(tail))

    def _tick_ended_at(self) -> float | None:
        """When the last tick ended, by ``/readyz`` ("last tick completed N s ago"), to a second."""
        try:
            text = self.client.get(self.metrics_url.replace("/metrics", "/readyz"), timeout=5).text
        except httpx.HTTPError:
            return None
        match = re.search(r"last tick completed (\d+) s ago", text)
        return time.monotonic() - int(match.group(1)) if match else None

    def _poll_simulator(self) -> None:
        """Did the simulator answer requests since the last poll? From the first such poll interval to
        the last one of a tick is the span in which the daemon was asking (discover, collect, realize),
        to a poll or two (0.1 s each): a look inside the tick without profiling the daemon."""
        try:
            total = int(self.client.get(self.sim_url + "/_simulator/requests", timeout=5).json()["total"])
        except (httpx.HTTPError, ValueError, KeyError):
            return
        now = time.monotonic()
        if self._sim_total is not None and total > self._sim_total:
            if self._rest_from_s is None:
                self._rest_from_s = self._sim_polled_s
            self._rest_to_s = now
        self._sim_total, self._sim_polled_s = total, now

    def wait_tick(self, deadline_s: float) -> Sample | None:
        """Block until a tick ends after the last one seen; the counters right after it (or None)."""
        polls = 0
        while time.monotonic() < deadline_s:
            time.sleep(0.1)
            self._poll_simulator()
            polls += 1
            if polls % 5:
                continue  # /readyz twice a second is enough to see a tick end
            self.alive()
            ended = self._tick_ended_at()
            if ended is not None and (self._last_end_s is None or ended > self._last_end_s + 1.5):
                sample = self.sample()
                if sample.scrape.ticks > self._last_ticks:
                    self._last_end_s, self._last_ticks = ended, sample.scrape.ticks
                    return sample
        return None

    def sample(self) -> Sample:
        at = time.monotonic()
        scrape = Scrape.parse(self.client.get(self.metrics_url).text, at)
        if self.jvm is None or not Path(f"/proc/{self.jvm}").exists():
            self.jvm = find_jvm(self.daemon.pid)
        jvm = self.jvm
        stats = self.client.get(self.sim_url + "/_simulator/requests").json()
        return Sample(
            scrape=scrape,
            daemon_cpu_s=proc_cpu_s(self.daemon.pid),
            jvm_cpu_s=proc_cpu_s(jvm) if jvm else 0.0,
            sim_cpu_s=proc_cpu_s(self.sim_pid),
            bench_cpu_s=time.process_time(),
            machine_busy_s=machine_busy_s(),
            daemon_rss_mb=proc_status_mb(self.daemon.pid, "VmRSS"),
            jvm_rss_mb=proc_status_mb(jvm, "VmRSS") if jvm else 0.0,
            sim_rss_mb=proc_status_mb(self.sim_pid, "VmRSS"),
            others_rss_mb=sum(
                proc_status_mb(pid, "VmRSS") for pid in descendants(self.daemon.pid) if pid != jvm
            ),
            sim_requests=stats["requests"],
            job_reads=self.client.get(self.sim_url + JOB_READS_PATH).json()["job_reads"],
            rest_active_s=self._take_rest_span(),
        )

    def _take_rest_span(self) -> float:
        span = 0.0 if self._rest_from_s is None else self._rest_to_s - self._rest_from_s
        self._rest_from_s = None
        return span


def _delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def _read_log(path: Path) -> list[dict[str, Any]]:
    lines = []
    with path.open("rb") as f:
        for raw in f:
            if raw.startswith(b"{"):
                with contextlib.suppress(json.JSONDecodeError):
                    lines.append(json.loads(raw))
    return lines


def run_size(jobs: int, args: argparse.Namespace) -> Result:
    """Simulator and daemon for one fleet size; every figure of the table's row."""
    kinds: dict[str, int] = {}
    for j in range(jobs):
        kinds[job_kind(j)] = kinds.get(job_kind(j), 0) + 1
    result = Result(jobs, args.vertices, args.interval, args.warm_up, kinds)
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{jobs}-"))
    print(f"\n== {jobs} jobs x {args.vertices} vertices (work dir {workdir})", flush=True)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    sim_argv = [
        sys.executable, str(Path(__file__).resolve()), "--serve-simulator", "--jobs", str(jobs),
        "--vertices", str(args.vertices), "--fetch-interval", str(args.fetch_interval),
        "--step", str(args.step),
    ]  # fmt: skip
    sim_log_path, daemon_log_path = workdir / "simulator.log", workdir / "daemon.log"
    with (
        sim_log_path.open("wb") as sim_log,
        daemon_log_path.open("wb") as daemon_log,
        process(sim_argv, sim_log, cwd=workdir, env=env) as sim,
    ):
        sim_url = wait_for_url(sim_log_path, sim, args.startup_timeout)
        metrics_port = free_port()
        config = workdir / "config.yaml"
        config.write_text(daemon_config(sim_url, metrics_port, workdir, args))
        daemon_argv = [sys.executable, "-m", "autoscaler", "run", "--config", str(config)]
        started = time.monotonic()
        with process(daemon_argv, daemon_log, cwd=workdir, env=env) as daemon:
            watch = Watch(
                f"http://127.0.0.1:{metrics_port}/metrics", daemon, daemon_log_path, sim.pid, sim_url
            )
            try:
                measure(watch, result, args, started)
            finally:
                watch.close()
            print(f"  stopping (log: {daemon_log_path})", flush=True)
    summarize_log(result, daemon_log_path)
    return result


def measure(watch: Watch, result: Result, args: argparse.Namespace, started: float) -> None:
    """Warm-up ticks (at least ``--warm-up``, and until the metric window is full, so the Spark window
    holds as many rows as it will from then on), then the measured window: from a tick's end to the
    tick end nearest ``--ticks`` intervals on."""
    deadline = started + args.startup_timeout
    previous: Sample | None = None
    first_end: float | None = None
    n = 0
    while n < args.warm_up or previous is None or previous.scrape.at_s - (first_end or 0.0) < args.window_s:
        sample = watch.wait_tick(deadline)
        if sample is None:
            raise RuntimeError(f"no tick ended within {args.startup_timeout:.0f} s of the daemon's start")
        if n == 0:
            result.startup_s = sample.scrape.at_s - started
            first_end = sample.scrape.at_s
        before_sum, before_ticks = (previous.scrape.tick_sum_s, previous.scrape.ticks) if previous else (0, 0)
        duration = (sample.scrape.tick_sum_s - before_sum) / max(1, round(sample.scrape.ticks - before_ticks))
        result.warm_up_ticks_s.append(duration)
        print(f"  warm-up tick {n + 1}: {duration:.1f} s", flush=True)
        previous = sample
        n += 1
        deadline = time.monotonic() + args.startup_timeout
    first = previous
    window_end = first.scrape.at_s + args.ticks * args.interval
    samples = [first]
    while True:
        sample = watch.wait_tick(time.monotonic() + max(args.startup_timeout, 10 * args.interval))
        if sample is None:
            result.note = "the daemon stopped ending ticks"
            break
        before = samples[-1].scrape
        n = round(sample.scrape.ticks - before.ticks)
        duration = (sample.scrape.tick_sum_s - before.tick_sum_s) / max(1, n)
        result.ticks_s += [duration] * n
        result.rest_active_s += [sample.rest_active_s / max(1, n)] * n
        result.merged_ticks += n if n > 1 else 0
        samples.append(sample)
        print(
            f"  tick: {duration:5.1f} s  (ticks {sample.scrape.ticks:.0f}, "
            f"skipped {sample.scrape.skipped:.0f}, "
            f"{sample.scrape.at_s - first.scrape.at_s:.0f}/{args.ticks * args.interval:.0f} s)",
            flush=True,
        )
        enough = sample.scrape.ticks - first.scrape.ticks >= args.min_ticks
        if enough and sample.scrape.at_s >= window_end - args.interval / 2:  # the tick end nearest the end
            break
    last = samples[-1]
    result.window_s = last.scrape.at_s - first.scrape.at_s
    result.ticks_run = round(last.scrape.ticks - first.scrape.ticks)
    result.skipped = round(last.scrape.skipped - first.scrape.skipped)
    result.sim_requests = {k: int(v) for k, v in _delta(last.sim_requests, first.sim_requests).items()}
    result.job_reads = {k: int(v) for k, v in _delta(last.job_reads, first.job_reads).items()}
    result.daemon_requests = _delta(last.scrape.requests, first.scrape.requests)
    result.daemon_cpu_s = last.daemon_cpu_s - first.daemon_cpu_s
    result.jvm_cpu_s = last.jvm_cpu_s - first.jvm_cpu_s
    result.sim_cpu_s = last.sim_cpu_s - first.sim_cpu_s
    result.bench_cpu_s = last.bench_cpu_s - first.bench_cpu_s
    ours = result.daemon_cpu_s + result.jvm_cpu_s + result.sim_cpu_s + result.bench_cpu_s
    result.others_cpu_s = max(0.0, last.machine_busy_s - first.machine_busy_s - ours)
    evals = last.scrape.eval_count - first.scrape.eval_count
    result.eval_s = (last.scrape.eval_sum_s - first.scrape.eval_sum_s) / evals if evals else float("nan")
    if result.ticks_run:
        stages = _delta(last.scrape.stage_sums_s, first.scrape.stage_sums_s)
        result.stages_s = {k: v / result.ticks_run for k, v in stages.items()}
    for outcome, (n, total) in last.scrape.fetch_waits.items():
        n0, total0 = first.scrape.fetch_waits.get(outcome, (0.0, 0.0))
        if n > n0:
            result.fetch_waits[outcome] = (n - n0, (total - total0) / (n - n0))
    result.daemon_rss_mb = max(s.daemon_rss_mb for s in samples)
    result.jvm_rss_mb = max(s.jvm_rss_mb for s in samples)
    result.sim_rss_mb = max(s.sim_rss_mb for s in samples)
    result.others_rss_mb = max(s.others_rss_mb for s in samples)
    result.daemon_hwm_mb = proc_status_mb(watch.daemon.pid, "VmHWM")
    result.jvm_hwm_mb = proc_status_mb(watch.jvm, "VmHWM") if watch.jvm else 0.0
    result.scrape_mb = last.scrape.size_bytes / 1e6
    result.window_from_s = first.scrape.at_s - started
    to_unix = time.time() - time.monotonic()
    result.window_utc = (first.scrape.at_s + to_unix, last.scrape.at_s + to_unix)


def _within(timestamp: object, window: tuple[float, float]) -> bool:
    """Whether a log line's ISO timestamp falls in the measured window."""
    if not isinstance(timestamp, str):
        return False
    with contextlib.suppress(ValueError):
        at = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
        return window[0] <= at <= window[1]
    return False


def summarize_log(result: Result, path: Path) -> None:
    """Levels and events of the daemon's log, and the jobs' outcomes (the ``decision`` lines)."""
    for line in _read_log(path):
        level = str(line.get("level", "?"))
        result.log_levels[level] = result.log_levels.get(level, 0) + 1
        event = str(line.get("event", "?"))
        if event == "decision":
            outcome = str(line.get("outcome"))
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
        elif level in ("warning", "error", "critical"):
            result.log_events[f"{level} {event}"] = result.log_events.get(f"{level} {event}", 0) + 1
        if event == "tick_skipped" and _within(line.get("timestamp"), result.window_utc):
            result.skipped_log_lines += 1


# ---------------------------------------------------------------------------------------------- the table
def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def jobs_read_more(r: Result) -> list[tuple[str, float]]:
    """The jobs read more than 1 + V times per tick in the window, most read first, with their reads per
    tick. One per cluster is expected: the probe job, which the cluster's wait for Flink's fetch polls
    (once per cluster and tick); others were read again (a fetch landed among their reads) or rescaled."""
    if not r.ticks_run:
        return []
    per_tick = {job: n / r.ticks_run for job, n in r.job_reads.items()}
    return sorted(((j, n) for j, n in per_tick.items() if n > 1 + r.vertices + 1e-9), key=lambda jn: -jn[1])


def table(results: Sequence[Result]) -> str:
    head = [
        "jobs x V",
        "ticks (window s)",
        "tick median / max s [<= 5]",
        "skipped [0]",
        "req/job/tick sim / daemon",
        "job reads/job/tick [each job <= 1+V but the probe]",
        "daemon CPU s/tick",
        "JVM CPU s/tick",
        "daemon RSS MB",
        "JVM RSS MB",
        "daemon+JVM MB [<= 1500]",
        "sim CPU s/tick",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        med = statistics.median(r.ticks_s) if r.ticks_s else float("nan")
        top = max(r.ticks_s) if r.ticks_s else float("nan")
        sim_rpj = r.per_job_tick(sum(r.sim_requests.values()))
        daemon_rpj = r.per_job_tick(sum(r.daemon_requests.values()))
        job_reads = r.per_job_tick(sum(n for key, n in r.sim_requests.items() if is_job_read(key)))
        more = jobs_read_more(r)
        rss = r.daemon_rss_mb + r.jvm_rss_mb
        cells = [
            f"{r.jobs} x {r.vertices}",
            f"{r.ticks_run} ({r.window_s:.0f})",
            f"{med:.2f} / {top:.2f} {_verdict(med <= TARGET_MEDIAN_S)}",
            f"{r.skipped} {_verdict(r.skipped == 0)}",
            f"{sim_rpj:.2f} / {daemon_rpj:.2f}",
            f"{job_reads:.2f}, {len(more)} job(s) above {_verdict(len(more) <= 1)}",
            f"{r.per_tick(r.daemon_cpu_s):.2f}",
            f"{r.per_tick(r.jvm_cpu_s):.2f}",
            f"{r.daemon_rss_mb:.0f}",
            f"{r.jvm_rss_mb:.0f}",
            f"{rss:.0f} {_verdict(rss <= TARGET_RSS_MB)}",
            f"{r.per_tick(r.sim_cpu_s):.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(r: Result, top: int) -> str:
    """Below the table, per size: endpoints, the other figures, and what the daemon logged."""
    out = [f"{r.jobs} jobs x {r.vertices} vertices ({r.kinds}):"]
    out.append(
        f"  start to first tick end {r.startup_s:.0f} s; warm-up ticks (skipped) "
        + ", ".join(f"{t:.1f}" for t in r.warm_up_ticks_s)
        + " s; measured ticks "
        + ", ".join(f"{t:.1f}" for t in r.ticks_s)
        + " s"
        + (f" ({r.merged_ticks} shown as the mean of two)" if r.merged_ticks else "")
    )
    slots = round(r.window_s / r.interval_s)
    out.append(
        f"  window {r.window_s:.0f} s = {slots} interval slots: {r.ticks_run} ticks run, {r.skipped} skipped "
        f"(tick_skipped log lines in the window: {r.skipped_log_lines}); Spark evaluation "
        f"{r.eval_s:.2f} s/tick; simulator {r.per_tick(r.sim_cpu_s):.2f} CPU s/tick "
        f"({100 * r.sim_cpu_s / r.window_s if r.window_s else float('nan'):.0f} % of a core), RSS "
        f"{r.sim_rss_mb:.0f} MB; bench {r.per_tick(r.bench_cpu_s):.2f} CPU s/tick, "
        f"/metrics {r.scrape_mb:.1f} MB per scrape"
    )
    if r.window_s:
        cores = {
            "daemon": r.daemon_cpu_s,
            "its JVM": r.jvm_cpu_s,
            "simulator": r.sim_cpu_s,
            "bench": r.bench_cpu_s,
            "other processes": r.others_cpu_s,
        }
        out.append(
            "  cores used over the window: "
            + ", ".join(f"{name} {cpu / r.window_s:.2f}" for name, cpu in cores.items())
            + (
                " (others shared the machine: the figures above are slower for it)"
                if r.others_cpu_s / r.window_s > 0.1
                else ""
            )
        )
    if r.ticks_s:
        rest, med = statistics.median(r.rest_active_s), statistics.median(r.ticks_s)
        out.append(
            f"  where a tick's time goes (medians): the tick {med:.1f} s; requests came during {rest:.1f} s "
            f"of it (first to last, as the simulator's count polled every 0.1 s saw it); the Spark "
            f"evaluation {r.eval_s:.1f} s (mean)"
        )
    if r.stages_s:
        stages = ", ".join(f"{k} {v:.2f}" for k, v in r.stages_s.items())
        waits = "; ".join(f"{k} {n:.0f}x, {mean:.2f} s" for k, (n, mean) in sorted(r.fetch_waits.items()))
        out.append(
            f"  the tick's stages (means, s, flink_autoscaler_tick_stage_duration_seconds): {stages}; "
            f"collect's wait for Flink's metric fetch: {waits or 'none'}"
        )
    out.append(
        f"  daemon + JVM CPU {r.per_tick(r.daemon_cpu_s + r.jvm_cpu_s):.2f} s/tick; peak RSS since start "
        f"(VmHWM): daemon {r.daemon_hwm_mb:.0f} MB, JVM {r.jvm_hwm_mb:.0f} MB; the daemon's other "
        f"descendant processes {r.others_rss_mb:.0f} MB"
    )
    more = jobs_read_more(r)
    if r.ticks_run and r.job_reads:
        reads = sorted(n / r.ticks_run for n in r.job_reads.values())
        shown = ", ".join(f"{job[:8]}… {n:.1f}" for job, n in more[:3])
        out.append(
            "  job reads per tick, per job (the simulator's count by JobID): "
            f"median {statistics.median(reads):.2f}, min {reads[0]:.2f}, max {reads[-1]:.2f}; "
            f"{len(more)} of {len(reads)} jobs above 1 + V = {1 + r.vertices}"
            + (f" ({shown}; most read first; the fetch wait polls one job)" if more else "")
        )
    out.append("  requests per job per tick by endpoint (simulator / daemon):")
    daemon = dict(r.daemon_requests)
    for key, n in sorted(r.sim_requests.items(), key=lambda kv: -kv[1])[:top]:
        mine = daemon.pop(key, 0.0)
        out.append(f"    {r.per_job_tick(n):7.2f} / {r.per_job_tick(mine):7.2f}  {key}")
    rest_sim = sum(sorted(r.sim_requests.values(), reverse=True)[top:])
    if rest_sim or daemon:
        out.append(
            f"    {r.per_job_tick(rest_sim):7.2f} / {r.per_job_tick(sum(daemon.values())):7.2f}  (others)"
        )
    total = sum(r.outcomes.values())
    out.append(
        "  decisions over the run: "
        + ", ".join(
            f"{k} {100 * v / total:.0f} %" for k, v in sorted(r.outcomes.items(), key=lambda kv: -kv[1])
        )
    )
    if r.log_events:
        out.append(
            "  warnings and errors logged: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(r.log_events.items(), key=lambda kv: -kv[1])[:8])
        )
    if r.note:
        out.append(f"  NOTE: {r.note}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- main
def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000], help="jobs per run")
    ap.add_argument("--vertices", type=int, default=10, help="vertices per job (a source, stages, a sink)")
    ap.add_argument("--ticks", type=int, default=15, help="control intervals measured after the warm-up")
    ap.add_argument(
        "--min-ticks", type=int, default=3, help="ticks measured at least, however long they take"
    )
    ap.add_argument("--warm-up", type=int, default=3, help="first ticks not measured (at least)")
    ap.add_argument("--interval", type=float, default=10.0, help="control_loop_interval, seconds")
    ap.add_argument(
        "--fetch-interval",
        type=float,
        default=None,
        help="metrics.fetcher.update-interval, s; by default half of --interval, what the daemon advises "
        "(metric_fetch_interval_too_long): at Flink's 10 s and a 10 s loop each tick waits longer for "
        "its fetch, up to metric_fetch_wait, and then reads a stale one",
    )
    ap.add_argument(
        "--step",
        type=float,
        default=5.0,
        help="the simulator's integration step, s (its meters update every 5)",
    )
    ap.add_argument(
        "--window-s",
        type=float,
        default=120.0,
        help="job.autoscaler.metrics.window; the warm-up lasts as long",
    )
    ap.add_argument(
        "--stabilization-s", type=float, default=30.0, help="job.autoscaler.stabilization.interval"
    )
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        type=lambda kv: tuple(kv.split("=", 1)),
        metavar="KEY=VALUE",
        help="a spark.* setting for the daemon (spark.conf), e.g. spark.driver.memory=512m; repeatable",
    )
    ap.add_argument("--startup-timeout", type=float, default=900.0, help="seconds for a start or a tick")
    ap.add_argument("--top", type=int, default=8, help="endpoints listed per size")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--serve-simulator", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=100, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.fetch_interval is None:
        args.fetch_interval = args.interval / 2
    if args.vertices < 1:
        ap.error("--vertices must be at least 1")
    if args.serve_simulator:
        serve_simulator(args)
        return
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the simulator, the daemon and its JVM, each in
    # a session of its own, are stopped on the way out instead of left running.
    signal.signal(signal.SIGTERM, _stop)

    command = ".venv/bin/python bench/bench_fleet.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(
        f"{command.strip()}\nmachine: {os.cpu_count()} cores; control loop {args.interval:g} s; metric fetch "
        f"every {args.fetch_interval:g} s (lazy); metrics.window {args.window_s:g} s, stabilization "
        f"{args.stabilization_s:g} s; Spark {args.spark_master} {dict(args.conf) or ''}; "
        f"warm-up: {args.warm_up} ticks and "
        f"a window's {args.window_s:g} s, then {args.ticks} intervals measured",
        flush=True,
    )
    results = []
    for jobs in args.sizes:
        try:
            results.append(run_size(jobs, args))
        except RuntimeError as error:
            print(f"  {jobs} jobs: FAILED: {error}", flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    print()
    print(table(results))
    print()
    for r in results:
        print(details(r, args.top))


if __name__ == "__main__":
    main()
