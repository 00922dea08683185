"""``flink-autoscaler demo``: the real daemon against a simulated Flink cluster, minutes compressed.

The simulator serves Flink's REST API over HTTP on 127.0.0.1 and shares a ScaledClock with the
daemon, so ten simulated seconds pass per wall second by default. Its job's offered load steps up
(the Work vertex is under-provisioned) and later drops; the daemon should scale up, then down after
the scale-down interval. Exit code 0 means both happened.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import TextIO

from autoscaler.clock import ScaledClock
from autoscaler.daemon import Daemon
from autoscaler.logs import configure_logging
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import SimClusterSpec, Steps
from autoscaler.tick.steps import JobOutcome

__all__ = ["DEMO_OPTIONS", "demo_settings", "run_demo"]

# Short windows so a load change is acted on within a simulated minute or two.
DEMO_OPTIONS: dict[str, str] = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "60 s",
    "job.autoscaler.stabilization.interval": "60 s",  # covers Flink's 60 s meter ramp after a restart
    "job.autoscaler.scale-down.interval": "60 s",
    "job.autoscaler.restart.time": "10 s",
    "job.autoscaler.catch-up.duration": "5 min",
}

# Offered records/s over simulated time: under capacity, then 1.6x one Work subtask, then quiet.
DEMO_LOAD = Steps(steps=[(0.0, 800.0), (60.0, 2000.0), (330.0, 500.0)])


def demo_settings(rest_url: str, tick_wall_s: float) -> Settings:
    return Settings(
        clusters=[ClusterSettings(name="sim", rest_url=rest_url)],
        control_loop_interval=timedelta(seconds=tick_wall_s),
        metrics_address="",
        autoscaler=DEMO_OPTIONS,
        # The clock runs fast: a slow tick must not outlast the (in-memory, uncontested) lease.
        lease_ttl=timedelta(hours=1),
    )


def run_demo(
    duration_s: float = 75.0, speed: float = 10.0, log_level: str = "WARNING", out: TextIO = sys.stdout
) -> int:
    configure_logging("console", log_level)
    print(
        f"flink-autoscaler demo: {duration_s:g} s at {speed:g}x (simulated seconds per wall second)", file=out
    )
    print(
        "starting Spark (one long-lived session; the first start takes a few seconds)...",
        file=out,
        flush=True,
    )
    from autoscaler.evaluate.spark.evaluator import start_evaluator

    evaluator = start_evaluator(Settings().spark)
    try:
        evaluator.warm_up()
        return asyncio.run(_demo(evaluator, duration_s, speed, out))
    finally:
        evaluator.stop()


async def _demo(evaluator: object, duration_s: float, speed: float, out: TextIO) -> int:
    clock = ScaledClock(speed)
    sim = SimCluster(SimClusterSpec(slots=8, cooldown_after_rescaling_s=10, restart_pause_s=3), clock)
    job_id = sim.submit(work_job(name="load-job", input_rate=DEMO_LOAD))
    start_ms = clock.now_ms()
    seen: list[JobOutcome] = []

    def show(outcome: JobOutcome) -> None:
        seen.append(outcome)
        print(_line(outcome, sim, job_id, start_ms), file=out, flush=True)

    with SimulatorServer(sim) as server:
        print(f"simulated Flink 2.3 REST API at {server.url}; job load-job ({job_id})", file=out)
        print(
            "offered load: 800 rec/s, 2000 rec/s from t=60s, 500 rec/s from t=330s; "
            "Work handles 1250 rec/s per subtask\n",
            file=out,
            flush=True,
        )
        settings = demo_settings(server.url, tick_wall_s=10.0 / speed)
        daemon = Daemon(settings, evaluator=evaluator, clock=clock, on_outcome=show)  # type: ignore[arg-type]
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(duration_s, stop.set)
        try:
            await daemon.serve(stop)
        finally:
            await daemon.aclose()

    ups = [
        o
        for o in seen
        if o.outcome is Reason.SCALING
        and o.decision
        and any(c.is_scale_up for c in o.decision.changes.values())
    ]
    downs = [
        o
        for o in seen
        if o.outcome is Reason.SCALING
        and o.decision
        and not any(c.is_scale_up for c in o.decision.changes.values())
    ]
    final = sim.parallelism(job_id)
    print(
        f"\nsummary: {len(ups)} scale-up(s), {len(downs)} scale-down(s), "
        f"{sim.rescale_count(job_id)} rescale(s) applied by the simulated cluster; "
        f"final parallelism {final}; backlog {sim.backlog(job_id):,.0f}",
        file=out,
    )
    ok = bool(ups) and bool(downs)
    print(
        "demo OK: scaled up under load and down after it dropped"
        if ok
        else "demo incomplete: expected a scale-up and a scale-down (try a longer --duration)",
        file=out,
    )
    return 0 if ok else 1


def _line(outcome: JobOutcome, sim: SimCluster, job_id: str, start_ms: int) -> str:
    t_s = (outcome.now_ms - start_ms) / 1000
    rate = sim.input_rate(job_id)
    parallelism = " ".join(f"{name.split(' ')[0]}={p}" for name, p in sim.parallelism(job_id).items())
    head = f"t={t_s:5.0f}s  offered {rate:5.0f}/s  backlog {sim.backlog(job_id):8,.0f}  [{parallelism}]"
    detail = outcome.detail
    ev = outcome.decision.evaluation if outcome.decision else None
    if ev is not None and ev.vertices:
        work = max(ev.vertices.values(), key=lambda v: v.load if v.load == v.load else -1.0)
        names = {v.id: v.name for v in ev.sample.topology}
        detail = (
            f"{detail}  ({names.get(work.vertex, work.vertex)}: load {work.load:.2f}, "
            f"capacity {work.true_processing_rate:,.0f}/s, needs {work.target_data_rate:,.0f}/s, "
            f"recommends {work.target_parallelism})"
        )
    return f"{head}  {outcome.outcome!s:<16} {detail}"
