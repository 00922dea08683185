"""Two daemon processes share one 200-job cluster through shard leases; one is SIGKILLed.

The real daemons (``python -m autoscaler run``, Spark ``local[1]`` each, as ``tests/faults/harness.py``
starts them) share a SQLite state file, the same config with ``shards: 8`` and distinct instance ids,
against a simulator in this process hosting 200 small jobs whose load sits in the utilization band (so
no rescale, no cooldown retry: one decision per job and tick). It shows, from the daemons' logs:

* over a steady run of ticks, each daemon decides exactly the jobs of its shards (as
  ``autoscaler.shards.assign`` divides the 8 shards between ``a`` and ``b``), each of them exactly once
  per tick, and no job is decided by both;
* after ``b`` is SIGKILLed, ``a`` decides all 200 jobs, each once per tick, within ``lease_ttl`` and a
  couple of ticks, and not before ``b``'s leases could have run out;
* over the whole run, each job's decisions pass from one daemon to the other at most twice (the
  hand-over when ``b`` joins, the take-over when it dies), never back and forth.

A tick's decisions are the ``decision`` lines that follow its ``jobs_discovered`` line (logged once
per tick and cluster at DEBUG, after the leases); what it measured is printed (``pytest -s``).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from faults.harness import Daemon, LogLine, free_port

from autoscaler.clock import SystemClock
from autoscaler.shards import assign, shard_of
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import Constant, SimClusterSpec

pytestmark = [pytest.mark.spark, pytest.mark.process]

CLUSTER = "fleet"
JOBS = 200
SHARDS = 8
INTERVAL_S = 3
LEASE_TTL_S = 30  # well above a tick of all 200 jobs (10-15 s on two loaded cores): no daemon stalls past it
FETCH_INTERVAL_S = 1.0  # metrics.fetcher.update-interval: at most half the control interval
STEADY_TICKS = 6  # complete ticks of each daemon measured before the kill
AFTER_TICKS = 3  # complete ticks of the survivor measured after the take-over
WAIT_S = 240.0
NAMES = [f"job-{i:03d}" for i in range(JOBS)]


def _config(url: str, state_url: str, port: int, instance: str) -> str:
    return "\n".join(
        [
            "clusters:",
            f"  - name: {CLUSTER}",
            f"    rest_url: {url}",
            f"    shards: {SHARDS}",
            f"control_loop_interval: {INTERVAL_S} s",
            f"lease_ttl: {LEASE_TTL_S} s",
            f"metrics_address: 127.0.0.1:{port}",
            "log_format: json",
            "log_level: DEBUG",
            f"state_url: {state_url}",
            f"instance_id: {instance}",
            "decisions_dir: null",
            "spark:",
            "  master: local[1]",
            "autoscaler:",
            "  job.autoscaler.enabled: 'true'",
            "  job.autoscaler.metrics.window: 20 s",
            "  job.autoscaler.stabilization.interval: 5 s",
        ]
    )


def _share(instance: str, members: Sequence[str]) -> set[str]:
    owners = assign(SHARDS, members)
    return {name for name in NAMES if owners[shard_of(f"{CLUSTER}/{name}", SHARDS)] == instance}


def _ts(line: LogLine) -> float:
    return datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Tick:
    """One tick of one daemon, as its log tells it: when it listed the jobs, what it decided."""

    at: float
    targets: int
    decided: Counter[str]


def _ticks(daemon: Daemon) -> list[Tick]:
    """The daemon's complete ticks so far (the one still running, after the last marker, is left out
    unless the daemon has stopped)."""
    ticks: list[Tick] = []
    current: tuple[LogLine, Counter[str]] | None = None
    for line in daemon.logs():
        if line.get("event") == "jobs_discovered" and line.get("cluster") == CLUSTER:
            if current is not None:
                ticks.append(Tick(_ts(current[0]), current[0]["targets"], current[1]))
            current = (line, Counter())
        elif line.get("event") == "decision" and current is not None:
            current[1][line["job"]] += 1
    if current is not None and not daemon.running:
        ticks.append(Tick(_ts(current[0]), current[0]["targets"], current[1]))
    return ticks


def _wait(condition: object, what: str, *daemons: Daemon) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        for d in daemons:
            d.assert_running()
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + "\n".join(
            d.tail(2000) for d in daemons
        )
        time.sleep(0.5)


def _after(ticks: list[Tick], since: float) -> list[Tick]:
    return [t for t in ticks if t.at > since]


def test_two_daemons_split_200_jobs_by_shard_and_one_takes_over_when_the_other_is_killed(
    tmp_path: Path,
) -> None:
    sim = SimCluster(
        SimClusterSpec(
            slots=8,
            taskmanagers=JOBS // 8,
            cooldown_after_rescaling_s=2,
            restart_pause_s=1,
            # Flink's lazy fetcher, as on a real cluster: a tick's reads see one fetch, and the simulator
            # computes each fetch once instead of once per request (20 times cheaper for 200 jobs).
            metric_fetch_interval_s=FETCH_INTERVAL_S,
        ),
        SystemClock(),
    )
    for name in NAMES:  # Work at parallelism 1 handles 1250 rec/s: 700 is 56 % busy, inside the band
        sim.submit(work_job(name=name, input_rate=Constant(rate=700.0)))
    share_a, share_b = _share("a", ["a", "b"]), _share("b", ["a", "b"])
    assert share_a and share_b and not share_a & share_b and share_a | share_b == set(NAMES)
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    port_a, port_b = free_port(), free_port()
    with SimulatorServer(sim) as server:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        a = Daemon(tmp_path / "a", _config(server.url, state_url, port_a, "a"), port_a)
        b = Daemon(tmp_path / "b", _config(server.url, state_url, port_b, "b"), port_b)
        with a, b:
            # Settled: each has decided exactly its share in a tick (after the first tick's hand-over).
            _wait(
                lambda: (
                    any(set(t.decided) == share_a for t in _ticks(a))
                    and any(set(t.decided) == share_b for t in _ticks(b))
                ),
                "both daemons deciding their shares",
                a,
                b,
            )
            settled = time.time()
            _wait(
                lambda: (
                    min(len(_after(_ticks(a), settled)), len(_after(_ticks(b), settled))) >= STEADY_TICKS + 1
                ),
                f"{STEADY_TICKS} steady ticks of each",
                a,
                b,
            )
            steady = {name: _after(_ticks(d), settled) for name, d in (("a", a), ("b", b))}
            killed = time.time()
            b.kill()  # SIGKILL, with its Spark JVM: no lease is released

            def took_over() -> bool:
                return any(set(t.decided) == set(NAMES) for t in _after(_ticks(a), killed))

            _wait(took_over, "a deciding every job", a)
            first_full = next(t for t in _after(_ticks(a), killed) if set(t.decided) == set(NAMES))
            _wait(
                lambda: len(_after(_ticks(a), first_full.at)) >= AFTER_TICKS, "ticks after the take-over", a
            )
            after = _after(_ticks(a), first_full.at - 0.001)  # complete ticks only: a still runs
            assert a.stop() == 0
        lines = {"a": a.logs(), "b": b.logs()}

    # -- steady: each daemon decides exactly its share, each job once per tick, none both
    for name, share in (("a", share_a), ("b", share_b)):
        for tick in steady[name]:
            assert tick.decided == Counter(dict.fromkeys(share, 1)), (name, tick)
            assert tick.targets == len(share)
    # -- the kill: b's jobs go to a within the lease ttl and a couple of ticks, not before. A tick here
    # starts every control interval or, when the last one ran longer, at the next interval after it.
    takeover_s = first_full.at - killed
    last_b = max(t.at for t in _ticks(b))
    cadence_s = max(y.at - x.at for x, y in itertools.pairwise(steady["a"]))
    assert takeover_s <= LEASE_TTL_S + 2 * max(cadence_s, INTERVAL_S), (takeover_s, cadence_s)
    assert first_full.at >= last_b + LEASE_TTL_S - 2 * INTERVAL_S  # b's leases ran out first
    for tick in _after(_ticks(a), killed):
        assert not (set(tick.decided) - share_a) or set(tick.decided) == set(NAMES), tick  # all or a's
    for tick in after:
        assert tick.decided == Counter(dict.fromkeys(NAMES, 1)), tick
    acquired = [e for e in lines["a"] if e.get("event") == "shard_acquired" and _ts(e) > killed]
    assert {e["previous"] for e in acquired} == {"b"}
    assert {e["shard"] for e in acquired} == {s for s, o in assign(SHARDS, ["a", "b"]).items() if o == "b"}
    # -- the whole run: a job's decisions change hands at most twice, never back and forth
    by_job: dict[str, list[tuple[float, str]]] = {name: [] for name in NAMES}
    for daemon, found in lines.items():
        for line in found:
            if line.get("event") == "decision":
                by_job[line["job"]].append((_ts(line), daemon))
    for name, decisions in by_job.items():
        owners = [d for _, d in sorted(decisions)]
        changes = [(x, y) for x, y in itertools.pairwise(owners) if x != y]
        assert len(changes) <= 2 and owners[-1] == "a", (name, changes)

    ticks_a, ticks_b = len(steady["a"]), len(steady["b"])
    print(
        f"\nsteady: a {ticks_a} ticks x {len(share_a)} jobs, b {ticks_b} ticks x {len(share_b)} jobs, "
        f"each job decided once per tick by one daemon; b killed, a decided all {JOBS} jobs "
        f"{takeover_s:.1f} s later (lease_ttl {LEASE_TTL_S} s, interval {INTERVAL_S} s, a tick every "
        f"{cadence_s:.1f} s at most), then "
        f"{len(after)} ticks of {JOBS} jobs once each"
    )
