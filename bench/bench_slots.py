"""Slot contention: a scale-up that needs the slots another job's scale-down leaves idle (a script).

Flink 2.3 keeps the slots a smaller run no longer uses for about 70 s after its restart
(``docs/e2e.md``, "Slots"; the simulator does the same). The slot stage now waits for them when they
are its own daemon's scale-down's and the rescale fits with them (``autoscaler/idle_slots.py``,
``scaling.insufficient-slots.wait-for-idle``); the baseline is the slot stage without it
(``wait-for-idle: false``), which caps the rescale to what is free (``CAP``, the default).

Eight slots, two lab jobs (Work at 1,250 rec/s per subtask) in the decision bench's lab
(``bench/decisions.py``: 5 s loop, Flink's fetch every 5 s, window 30 s, stabilization 30 s, scale-down
interval 1 min, a restart pauses 10 s, Flink's cooldown 30 s): ``shrinker`` at Work 5 for 4,000 rec/s
whose load drops to 500 at 300 s, ``grower`` at Work 1 for 1,000 rec/s whose load rises to 4,000 at
300 s + the offset (Work 5 needed; 2 slots free until the shrinker's idle ones are back). Each offset runs
once with and once without waiting, and prints the grower's restarts, seconds from its load step to its
final parallelism, the peak of its backlog and the seconds it spent with a backlog it would not drain
within 30 min (the decision bench's "backlog s"), beside the baseline's from the same run.

    .venv/bin/python bench/bench_slots.py
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from decisions import (
    CATCH_UP_TARGET_S,
    COOLDOWN_S,
    FETCH_S,
    RESTART_PAUSE_S,
    SETUP,
    TICK_S,
    WORK_CAPACITY,
)

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import SimClusterSpec, Steps
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog

CHANGE_S = 300.0  # both jobs steady and right-sized before
END_S = 900.0
OFFSETS_S = (-30.0, 0.0, 20.0, 40.0, 60.0)
WAIT_FOR_IDLE = "job.autoscaler.scaling.insufficient-slots.wait-for-idle"  # true: ours; false: the baseline


@dataclass(frozen=True)
class Outcome:
    restarts: int
    to_final_s: float
    peak_backlog: float
    backlog_s: int  # seconds with a backlog not drained within CATCH_UP_TARGET_S at the capacity then


async def run(offset_s: float, *, wait_for_idle: bool, notes: list[str] | None = None) -> Outcome:
    clock = FakeClock()
    sim = SimCluster(
        SimClusterSpec(
            slots=8,
            cooldown_after_rescaling_s=COOLDOWN_S,
            restart_pause_s=RESTART_PAUSE_S,
            metric_fetch_interval_s=FETCH_S,
            step_s=0.5,
        ),
        clock,
    )
    sim.submit(work_job(name="shrinker", work_parallelism=5, input_rate=Steps([(0, 4000), (CHANGE_S, 500)])))
    grow_at = CHANGE_S + offset_s
    grower = sim.submit(work_job(name="grower", input_rate=Steps([(0, 1000), (grow_at, 4000)])))
    settings = Settings(
        clusters=[ClusterSettings(name="sim", rest_url="http://sim.invalid", metric_fetch_wait=timedelta(0))],
        control_loop_interval=timedelta(seconds=TICK_S),
        metrics_address="",
        decisions_dir=None,
        persist_window=False,
        autoscaler={**SETUP, WAIT_FOR_IDLE: str(wait_for_idle).lower()},
    )
    start_ms = clock.now_ms()
    daemon = Daemon(
        settings,
        evaluator=PythonEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=MetricsReporter(),
        transports={"sim": transport(sim)},
    )
    if notes is not None:
        daemon.on_outcome = lambda o: notes.append(
            f"{(o.now_ms - start_ms) / 1000:6.0f} s {o.job.name}: {o.outcome} {o.detail}"
        )
    parallelism: list[tuple[float, int]] = []
    peak, backlog_s = 0.0, 0
    try:
        for second in range(1, int(END_S) + 1):
            clock.advance(ms=start_ms + second * 1000 - clock.now_ms())
            if second % TICK_S == 0:
                await daemon.run_tick()
            p = sim.parallelism(grower)["Work"]
            if not parallelism or parallelism[-1][1] != p:
                parallelism.append((float(second), p))
            backlog = sim.backlog(grower)
            peak = max(peak, backlog)
            running = sim.state(grower) == "RUNNING"
            spare = p * WORK_CAPACITY - sim.input_rate(grower) if running else 0.0
            if backlog > 0 and (spare <= 0 or backlog / spare > CATCH_UP_TARGET_S) and second >= grow_at:
                backlog_s += 1
    finally:
        await daemon.aclose()
    final_at = parallelism[-1][0] if len(parallelism) > 1 else grow_at
    return Outcome(sim.rescale_count(grower), max(0.0, final_at - grow_at), peak, backlog_s)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--offset", type=float, action="append", help="grower's step after the shrinker's (s)"
    )
    args = parser.parse_args(argv)
    offsets = args.offset or OFFSETS_S
    print("grower (Work 1 -> 5 needed; 2 slots free until the shrinker's 4 idle ones are back)")
    print("cells: waits for idle slots / baseline (caps to what is free)")
    print(f"{'offset s':>9} {'restarts':>10} {'to final p s':>14} {'peak backlog':>18} {'backlog s':>11}")
    totals = [0, 0]
    for offset in offsets:
        ours = asyncio.run(run(offset, wait_for_idle=True))
        base = asyncio.run(run(offset, wait_for_idle=False))
        totals[0] += ours.restarts
        totals[1] += base.restarts
        cells = (
            f"{ours.restarts:>4} / {base.restarts:<3}",
            f"{ours.to_final_s:>6.0f} / {base.to_final_s:<5.0f}",
            f"{ours.peak_backlog:>8.0f} / {base.peak_backlog:<8.0f}",
            f"{ours.backlog_s:>4} / {base.backlog_s:<4}",
        )
        print(f"{offset:>9.0f} " + " ".join(cells))
    print(f"restarts in all: {totals[0]} / {totals[1]}")


if __name__ == "__main__":
    main()
