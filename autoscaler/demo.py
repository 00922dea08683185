"""``flink-autoscaler demo``: the real daemon against a simulated Flink cluster, minutes compressed.

The simulator serves Flink's REST API over HTTP on 127.0.0.1 and shares a ScaledClock with the
daemon, so ten simulated seconds pass per wall second by default. Its job's offered load steps up
(the Work vertex is under-provisioned) and later drops; the daemon should scale up, then down after
the scale-down interval. Exit code 0 means both happened.

The daemon keeps its decisions and state in a directory of the demo's own (a config file there names
them), so that ``flink-autoscaler explain`` can show, and draw, the run afterwards: the demo ends with
that command.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from autoscaler.clock import ScaledClock
from autoscaler.daemon import Daemon
from autoscaler.decision_store import JsonDecisionDir, outcome_recorder
from autoscaler.logs import configure_logging
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings, SparkSettings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import SimClusterSpec, Steps
from autoscaler.state import open_stores
from autoscaler.tick.steps import JobOutcome

__all__ = [
    "DEMO_CLUSTER",
    "DEMO_OPTIONS",
    "NOT_MEASURED",
    "Reached",
    "demo_settings",
    "line",
    "reached",
    "run_demo",
    "summary_lines",
]

# Short windows so a load change is acted on within a simulated minute or two.
DEMO_OPTIONS: dict[str, str] = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "60 s",
    "job.autoscaler.stabilization.interval": "60 s",  # covers Flink's 60 s meter ramp after a restart
    "job.autoscaler.scale-down.interval": "60 s",
    "job.autoscaler.restart.time": "10 s",
    "job.autoscaler.catch-up.duration": "5 min",
}

# The simulated cluster plays Flink's lazy metric fetcher at the lab's 5 s (half the demo's 10 s loop,
# so every tick finds a fetch due): a tick's /jobs/:id and vertex answers then come from one fetch, as
# on a real cluster. Without one (metric_fetch_interval_s 0) every query read the jobs at its own
# simulated instant; at 10x the few wall milliseconds between /jobs/:id and the vertex queries were
# hundreds of simulated ones, the busy time of the two never agreed, and every tick past the
# stabilization interval logged metric_fetches_disagree: a warning about a cluster no Flink is.
DEMO_CLUSTER = SimClusterSpec(
    slots=8, cooldown_after_rescaling_s=10, restart_pause_s=3, metric_fetch_interval_s=5.0
)

# Offered records/s over simulated time: under capacity, then 1.6x one Work subtask, then quiet.
DEMO_LOAD = Steps(steps=[(0.0, 800.0), (60.0, 2000.0), (330.0, 500.0)])

NOT_MEASURED = "not measured yet"  # a rate needs two samples: the first of each window has none
TIMELINE_FILE = "demo-timeline.html"


def demo_settings(rest_url: str, tick_wall_s: float, keep_dir: Path | None = None) -> Settings:
    """The daemon's settings; with ``keep_dir``, its state database and decisions are kept there."""
    kept = (
        {
            "state_url": f"sqlite:///{keep_dir / 'state.db'}",
            "decisions_dir": keep_dir / "decisions",
            "decision_history": 100,  # the whole run: explain draws every decision of it
        }
        if keep_dir is not None
        else {"state_url": "memory://", "decisions_dir": None}
    )
    return Settings(
        clusters=[ClusterSettings(name="sim", rest_url=rest_url)],
        control_loop_interval=timedelta(seconds=tick_wall_s),
        metrics_address="",
        autoscaler=DEMO_OPTIONS,
        # The clock runs fast: a slow tick must not outlast the (in-memory, uncontested) lease.
        lease_ttl=timedelta(hours=1),
        **kept,
    )


def run_demo(
    duration_s: float = 75.0,
    speed: float = 10.0,
    log_level: str = "WARNING",
    out: TextIO = sys.stdout,
    keep_dir: Path | None = None,
) -> int:
    """Run the demo; its state goes to ``keep_dir`` (a new temporary directory if None)."""
    configure_logging("console", log_level)
    keep_dir = keep_dir or Path(tempfile.mkdtemp(prefix="flink-autoscaler-demo-"))
    keep_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"flink-autoscaler demo: {duration_s:g} s at {speed:g}x (simulated seconds per wall second)", file=out
    )
    print(
        "starting Spark (one long-lived session; the first start takes a few seconds)...",
        file=out,
        flush=True,
    )
    from autoscaler.evaluate.spark.evaluator import start_evaluator

    with _jvm_output_to(keep_dir / "spark-jvm.log"):
        evaluator = start_evaluator(_quiet_spark(Settings().spark, keep_dir))
    try:
        evaluator.warm_up()
        return asyncio.run(_demo(evaluator, duration_s, speed, out, keep_dir))
    finally:
        evaluator.stop()


async def _demo(evaluator: object, duration_s: float, speed: float, out: TextIO, keep_dir: Path) -> int:
    clock = ScaledClock(speed)
    sim = SimCluster(DEMO_CLUSTER, clock)
    job = work_job(name="load-job", input_rate=DEMO_LOAD)
    job_id = sim.submit(job)
    start_ms = clock.now_ms()
    seen: list[JobOutcome] = []
    runs: list[tuple[float, dict[str, int]]] = [(0.0, sim.parallelism(job_id))]

    with SimulatorServer(sim) as server:
        settings = demo_settings(server.url, tick_wall_s=10.0 / speed, keep_dir=keep_dir)
        config = _write_config(keep_dir, settings)
        record = outcome_recorder(JsonDecisionDir(settings.decisions_dir, settings.decision_history))

        def show(outcome: JobOutcome) -> None:
            seen.append(outcome)
            record(outcome)
            parallelism = sim.parallelism(job_id)
            if parallelism != runs[-1][1]:  # a restart at another parallelism: running since when
                runs.append(((sim.job(job_id).running_since_ms - start_ms) / 1000, parallelism))
            print(
                line(outcome, sim.input_rate(job_id), sim.backlog(job_id), parallelism, start_ms),
                file=out,
                flush=True,
            )

        print(f"simulated Flink 2.3 REST API at {server.url}; job load-job ({job_id})", file=out)
        print(
            "offered load: 800 rec/s, 2000 rec/s from t=60s, 500 rec/s from t=330s; "
            "Work handles 1250 rec/s per subtask\n",
            file=out,
            flush=True,
        )
        stores = await asyncio.to_thread(open_stores, settings.state_url)
        try:
            daemon = Daemon(
                settings,
                evaluator=evaluator,  # type: ignore[arg-type]
                clock=clock,
                state=stores.state,
                events=stores.events,
                on_outcome=show,
            )
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(duration_s, stop.set)
            try:
                await daemon.serve(stop)
            finally:
                await daemon.aclose()
        finally:
            stores.close()

    ups = [o for o in seen if _scaled(o, up=True)]
    downs = [o for o in seen if _scaled(o, up=False)]
    print("", file=out)
    for text in summary_lines(
        restarts=sim.rescale_count(job_id),
        ups=len(ups),
        downs=len(downs),
        final=sim.parallelism(job_id),
        backlog=sim.backlog(job_id),
        reached_at=reached([t for t, _ in DEMO_LOAD.steps[1:]], runs),
    ):
        print(text, file=out)
    print(
        f"its timeline: flink-autoscaler explain sim/load-job --config {config} --html {TIMELINE_FILE}",
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


# Spark's driver JVM logs its start at WARN (the native Hadoop library it does without, the default log4j
# profile it uses) before the evaluator sets its levels: noise a first run need not read. The demo's JVM
# logs errors only until then; a daemon's start keeps Spark's own profile.
_QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


@contextlib.contextmanager
def _jvm_output_to(path: Path) -> Iterator[None]:
    """The Spark JVM started in here writes its own stderr to ``path`` for its whole life: its start-up
    lines (the JDK's "Using incubator modules", Spark's default log level) are the JVM's, not the
    daemon's, and a first run should not show them. The process's own stderr is restored at once, so
    the demo's and the daemon's messages still reach the terminal; a failing start says where to look."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            print(f"Spark did not start; the JVM's output is in {path}", file=sys.stderr)
            raise
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _quiet_spark(spark: SparkSettings, keep_dir: Path) -> SparkSettings:
    """The demo's Spark settings: the daemon's, its driver JVM started with :data:`_QUIET_LOG4J2`."""
    from autoscaler.evaluate.spark.session import DRIVER_JAVA_OPTIONS

    config = keep_dir / "log4j2.properties"
    config.write_text(_QUIET_LOG4J2, encoding="utf-8")
    java = spark.conf.get("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
    conf = {
        **spark.conf,
        "spark.driver.extraJavaOptions": f"{java} -Dlog4j2.configurationFile={config.as_uri()}",
    }
    return spark.model_copy(update={"conf": conf})


def _scaled(outcome: JobOutcome, *, up: bool) -> bool:
    """Whether the outcome is a rescale up (any vertex up) or down (none up)."""
    if outcome.outcome is not Reason.SCALING or outcome.decision is None:
        return False
    return any(c.is_scale_up for c in outcome.decision.changes.values()) == up


def _write_config(keep_dir: Path, settings: Settings) -> Path:
    """The config file ``status`` and ``explain`` read the demo's run with (``--config``)."""
    path = keep_dir / "demo.yaml"
    path.write_text(
        f"state_url: {settings.state_url}\n"
        f"decisions_dir: {settings.decisions_dir}\n"
        f"decision_history: {settings.decision_history}\n",
        encoding="utf-8",
    )
    return path


def line(
    outcome: JobOutcome, offered: float, backlog: float, parallelism: Mapping[str, int], start_ms: int
) -> str:
    """One tick of the demo: the simulated cluster's load, backlog and parallelism (vertex names as Flink
    gives them), the outcome, and the busiest vertex's figures (words where one is not measured)."""
    t_s = (outcome.now_ms - start_ms) / 1000
    running = ", ".join(f"{name}={p}" for name, p in parallelism.items())
    head = f"t={t_s:5.0f}s  offered {offered:5.0f}/s  backlog {backlog:8,.0f}  [{running}]"
    detail = outcome.detail
    ev = outcome.decision.evaluation if outcome.decision else None
    if ev is not None and ev.vertices:
        work = max(ev.vertices.values(), key=lambda v: -1.0 if math.isnan(v.load) else v.load)
        names = {v.id: v.name for v in ev.sample.topology}
        detail = (
            f"{detail}  ({names.get(work.vertex, work.vertex)}: load {_number(work.load, '.2f')}, "
            f"capacity {_number(work.true_processing_rate, ',.0f', '/s')}, "
            f"needs {_number(work.target_data_rate, ',.0f', '/s')}, recommends {work.target_parallelism})"
        )
    return f"{head}  {outcome.outcome!s:<16} {detail}"


def _number(value: float, spec: str, unit: str = "") -> str:
    return NOT_MEASURED if math.isnan(value) else f"{value:{spec}}{unit}"


@dataclass(frozen=True, slots=True)
class Reached:
    """After the load changed at ``change_s``: the parallelism the job ended at, from when it ran."""

    change_s: float
    at_s: float | None  # None: no restart after this change (the parallelism it had held)
    parallelism: Mapping[str, int]
    before: Mapping[str, int]


def reached(changes_s: Sequence[float], runs: Sequence[tuple[float, Mapping[str, int]]]) -> list[Reached]:
    """For each load change, the last parallelism the job started running before the next change (or
    the end), and when: the time the daemon and Flink took to settle on it. ``runs`` are the job's
    (start time, parallelism) in order, its submission first."""
    result = []
    bounds = [*changes_s, math.inf]
    for change, until in itertools.pairwise(bounds):
        before = [p for t, p in runs if t < change][-1] if runs else {}
        after = [(t, p) for t, p in runs if change <= t < until]
        at, parallelism = after[-1] if after else (None, before)
        result.append(Reached(change, at, parallelism, before))
    return result


def summary_lines(
    *,
    restarts: int,
    ups: int,
    downs: int,
    final: Mapping[str, int],
    backlog: float,
    reached_at: Sequence[Reached],
) -> list[str]:
    """The demo's two-line summary: the restarts it made, and how long each load change took to reach
    the parallelism the job then kept."""
    running = ", ".join(f"{name}={p}" for name, p in final.items())
    first = (
        f"summary: {restarts} restart(s) made ({ups} scale-up, {downs} scale-down); "
        f"final parallelism {running}; backlog {backlog:,.0f}"
    )
    parts = []
    for r in reached_at:
        if r.at_s is None:
            parts.append(f"load change at t={r.change_s:.0f}s: no rescale before the next (or the end)")
            continue
        changed = ", ".join(
            f"{name} {r.before.get(name, '?')} -> {p}"
            for name, p in r.parallelism.items()
            if r.before.get(name) != p
        )
        parts.append(
            f"load change at t={r.change_s:.0f}s: {changed or 'unchanged'} running from "
            f"t={r.at_s:.0f}s ({r.at_s - r.change_s:.0f} s later)"
        )
    return [first, "time to the final parallelism: " + "; ".join(parts)]
