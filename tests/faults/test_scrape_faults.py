"""The daemon process under a scrape flood: ``/metrics`` asked a thousand times, fifty at once, while the
probes ask ``/healthz`` and ``/readyz`` and the ticks go on.

The daemon watches a fleet large enough for a page of some thousands of series (every vertex gauge
exported). Before the fix the server kept the standard library's listen backlog of 5 and rendered the page
once per request: a burst overflowed the backlog (its clients, the probes among them, waited for TCP's
retries: seconds, then a minute), and fifty renders at once held the GIL from the control loop (ticks
skipped). The flood is bounded in count and time and stays on the loopback.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autoscaler.clock import SystemClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import Constant, SimClusterSpec

from .harness import Daemon, daemon_config, free_port

pytestmark = [pytest.mark.faults, pytest.mark.spark]

JOBS = 60
"""Jobs in the simulated cluster: with every vertex gauge exported, a page of some 3,000 series."""
INTERVAL_S = 8
"""The control interval: a tick of this fleet takes some seconds on a loaded machine, flood or not."""
FLOOD_S = INTERVAL_S + 1
"""The flood asks for this long, so that at least one tick is due while it lasts..."""
FLOOD_MAX_REQUESTS = 10_000
"""...and at most this many times in all, from ``FLOOD_CONCURRENCY`` threads at once."""
FLOOD_CONCURRENCY = 50
SCRAPE_BOUND_S = 5.0
"""A scrape answered within this is served (generous: the machine is loaded, the page some hundred kB)."""
REQUEST_TIMEOUT_S = 20.0
"""A scrape still waiting after this failed (the flood ends by ``FLOOD_S`` plus this at the latest)."""
PROBE_BOUND_S = 2.0
"""An answer within this is an answer (the image's health check allows 4 s); a probe that waits for TCP's
retries of a dropped connection takes 1 s, 3 s, 7 s..."""
PROBE_EVERY_S = 0.2


def _get(port: int, path: str, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
    """One HTTP/1.0 GET on the loopback, read to its end: (status, body). As cheap as a client gets, so
    the flood's threads leave the GIL of this process (which also serves the simulated cluster) alone;
    it accepts gzip, as Prometheus does."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as conn:
        request = f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n"
        conn.sendall(request.encode())
        chunks = []
        while chunk := conn.recv(1 << 20):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@dataclass
class Flood:
    """GETs of ``/metrics`` from ``FLOOD_CONCURRENCY`` threads for ``FLOOD_S``, ``FLOOD_MAX_REQUESTS`` at
    most."""

    port: int
    answered: int = 0
    failed: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    _tickets: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        deadline = time.monotonic() + FLOOD_S
        threads = [threading.Thread(target=self._worker, args=(deadline,)) for _ in range(FLOOD_CONCURRENCY)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _worker(self, deadline: float) -> None:
        while next(self._tickets) < FLOOD_MAX_REQUESTS and time.monotonic() < deadline:
            started = time.monotonic()
            try:
                status, body = _get(self.port, "/metrics")
                ok = status == 200 and len(body) > 0
                error = None if ok else f"status {status}, {len(body)} bytes"
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
                if error is None:
                    self.answered += 1
                else:
                    self.failed.append(error)


@dataclass
class Probes:
    """``/healthz`` and ``/readyz`` asked in turn every ``PROBE_EVERY_S`` until stopped: each answer's
    path, status and time (a connection that got no answer at all counts with its error)."""

    port: int
    answers: list[tuple[str, int | str, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        for path in itertools.cycle(("/healthz", "/readyz")):
            if self.stop.is_set():
                return
            started = time.monotonic()
            try:
                status: int | str = _get(self.port, path)[0]
            except OSError as exc:
                status = type(exc).__name__
            self.answers.append((path, status, time.monotonic() - started))
            self.stop.wait(PROBE_EVERY_S)


def test_a_scrape_flood_neither_delays_the_probes_nor_skips_a_tick(tmp_path: Path) -> None:
    sim = SimCluster(SimClusterSpec(slots=8, taskmanagers=JOBS // 8 + 1), SystemClock())
    for i in range(JOBS):  # offered less than Work handles at parallelism 1: nothing to rescale
        sim.submit(work_job(name=f"flood-{i:03d}", work_capacity=1250.0, input_rate=Constant(rate=500.0)))
    port = free_port()
    with SimulatorServer(sim) as server:
        config = daemon_config(
            {"sim": server.url}, state_url=f"sqlite:///{tmp_path / 'state.db'}", metrics_port=port
        )
        config = config.replace("control_loop_interval: 1 s", f"control_loop_interval: {INTERVAL_S} s")
        config += "vertex_metrics: all\nvertex_metrics_max_series: 0\n"
        with Daemon(tmp_path, config, port) as daemon:
            # Two ticks done, every job evaluated: the page holds the whole fleet's vertex series.
            daemon.wait_log("decision")
            daemon.wait_metric("flink_autoscaler_ticks_total", 2)
            series = len(daemon.scrape())
            ticks_before = daemon.metric("flink_autoscaler_ticks_total")
            tick_s_before = daemon.metric("flink_autoscaler_tick_duration_seconds_sum")
            mark = daemon.mark()

            flood, probes = Flood(port), Probes(port)
            prober = threading.Thread(target=probes.run)
            prober.start()
            started = time.monotonic()
            try:
                flood.run()
            finally:
                probes.stop.set()
                prober.join()
            flood_s = time.monotonic() - started

            # The tick that was due during the flood, or after it, completes; none was skipped.
            daemon.wait_metric("flink_autoscaler_ticks_total", ticks_before + 1)
            ticks = daemon.metric("flink_autoscaler_ticks_total") - ticks_before
            tick_s = daemon.metric("flink_autoscaler_tick_duration_seconds_sum") - tick_s_before
            skipped = daemon.find("tick_skipped", since=mark)
            summary = (
                f"{series} series; {flood.answered} scrapes answered, {len(flood.failed)} failed "
                f"(slowest {flood.slowest_s:.1f} s) in {flood_s:.1f} s; {ticks:g} ticks of "
                f"{tick_s / ticks:.1f} s on average (before: {tick_s_before / ticks_before:.1f} s), "
                f"{len(skipped)} skipped; {len(probes.answers)} probes"
            )
            print(summary)
            slow = [a for a in probes.answers if not isinstance(a[1], int) or a[2] > PROBE_BOUND_S]
            assert not slow, f"probes without an answer within {PROBE_BOUND_S} s: {slow[:10]} ({summary})"
            assert probes.answers and all(status == 200 for _, status, _ in probes.answers), (
                f"probes that did not answer 200: {[a for a in probes.answers if a[1] != 200][:10]}"
            )
            assert not flood.failed, f"scrapes that failed: {flood.failed[:5]} ({summary})"
            assert flood.slowest_s < SCRAPE_BOUND_S and flood.answered >= FLOOD_CONCURRENCY, summary
            assert not skipped, f"ticks skipped during the flood: {skipped[:3]} ({summary})"
