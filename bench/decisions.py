"""The decision-quality runner behind ``bench_decisions.py``: load traces, the simulated run, the scores.

Every trace is one ``work_job`` (Source -> Work at 1,250 rec/s per subtask -> Sink) whose offered load
follows the trace. All traces of every profile run as separate jobs of ONE simulated cluster watched by
ONE daemon, so each tick collects and evaluates them together, as the daemon does a fleet. The daemon
runs its real tick (``Daemon.run_tick``: collect over Flink's REST API, evaluate, decide, plugins,
realize with ``PUT /jobs/:id/resource-requirements``) on a ``FakeClock`` moved one control-loop interval
per tick, against the simulator served over HTTP on 127.0.0.1 (or in-process, which skips only the
sockets).

The set-up is the issue 11 lab's (a real Flink 2.3 cluster): control loop 5 s, Flink's lazy metric
fetcher refreshing every 5 s, metric window 30 s, stabilization 30 s, scale-down interval 1 min; a
restart pauses processing for ``RESTART_PAUSE_S`` and the backlog it builds must be caught up. Flink's
fetcher refreshes only when its last fetch is more than an interval old, so with the fetch interval
equal to the loop interval a tick reads new counters only if it comes later after the last fetching
tick than the interval; the others read that fetch again, stamped with their own time (stale samples).
Tick instants jitter by up to ``JITTER_MS`` (seeded), as a real scheduler's and its REST round trips do,
so which ticks are stale, and how many samples a 30 s window holds, vary as on the real cluster. On the
fake clock's exact grid every other tick would be stale and the window's two ends always equally old:
the rates would come out right by accident.

Between ticks the runner reads the simulated cluster once a second (offered rate, parallelism, backlog,
capacity) and scores each trace from those readings only, never from what the daemon believes. The cost
of a run is :func:`autoscaler.foresight.cost.price` of those readings, and the yardstick it is divided
by (the regret) is the best plan in hindsight for the trace's load (:func:`hindsight`), priced with the
same function.

The module is some 460 lines because its three parts (the traces, the run, the scores) are one
definition of the lab: the scores read the readings the run takes with the constants the traces are
sized by, and a teammate tuning a profile reads them together.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.stage import Evaluator
from autoscaler.foresight.cost import Cost, CostModel, Interval, above_target, price
from autoscaler.foresight.forecast import Forecast
from autoscaler.foresight.hindsight import BestPlan, best_plan
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster, SimJob
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.server import SimulatorServer
from autoscaler.simulator.spec import (
    Bursts,
    Noise,
    Product,
    Ramp,
    RateSchedule,
    SimClusterSpec,
    Sine,
    Steps,
)
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.tick.steps import Decision, TickReport

__all__ = [
    "CATCH_UP_TARGET_S",
    "DEFAULT_COST",
    "JITTER_MS",
    "OPTIMUM_UTILIZATION",
    "QUICK_TRACES",
    "SEED",
    "SETUP",
    "SLOTS_PER_JOB",
    "TRACES",
    "JobRun",
    "Quality",
    "Reading",
    "Rescale",
    "RunConfig",
    "TickNote",
    "Trace",
    "hindsight",
    "optimum",
    "run_sync",
    "run_traces",
    "score",
]

_P = "job.autoscaler."
TICK_S = 5.0
FETCH_S = 5.0
RESTART_PAUSE_S = 10.0
COOLDOWN_S = 30.0  # Flink's jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling default
WORK_CAPACITY = 1250.0  # records/s one Work subtask processes (the lab job at 800 µs per record)
WARM_UP_S = 300.0  # steady load before the change: stabilization, a full window, and time to spare
SLOTS_PER_JOB = 8  # the cluster has this many slots per job (jobs never compete for slots)
JITTER_MS = 20  # a tick comes up to this late (uniform, seeded); about a third of the samples are stale
SEED = 1

SETUP: Mapping[str, str] = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.scale-down.interval": "1 min",
}
"""The lab's time scale, the daemon's ``autoscaler:`` section: a profile that sets one of these wins."""

OPTIMUM_UTILIZATION = 0.7
"""The yardstick for over-provisioning: the reference's ``utilization.target``, the same for every
profile, so a profile cannot look leaner by aiming at a higher utilization."""

CATCH_UP_TARGET_S = 1800.0
"""The reference's ``catch-up.duration``: a backlog is above target when the job, at its capacity now,
would not drain it within this long (always, while it is restarting or slower than its input)."""

DEFAULT_COST = CostModel(catch_up_s=CATCH_UP_TARGET_S)
"""The prices when a profile sets none (``autoscaler.foresight.cost``'s defaults)."""


# ---------------------------------------------------------------------------------------------- traces
@dataclass(frozen=True, slots=True)
class Trace:
    """One load trace: the offered rate over time (offsets from the job's start) and what it tests."""

    name: str
    description: str
    rate: RateSchedule
    duration_s: float
    sized_for: float  # the steady rate Work starts right-sized for (the rate before the change, or the mean)
    change_at_s: float = WARM_UP_S  # the load change; everything is scored from here to the end
    step_changes: int = 0  # step changes in the scored part: the target is <= 1 restart each
    settles: bool = True  # the load ends steady, so "time to the final parallelism" means something
    day_s: float | None = None  # a cycle's day, squeezed: what forecast.periods' "1 d;7 d" are here
    forecast_horizon: str = "30 min"

    def forecast_options(self) -> dict[str, str]:
        """The lab's ``forecast.*`` options for this trace, as an operator would set them for its load
        (they matter only where a profile turns the forecast on). The trace squeezes time, so "daily
        and weekly" are its day and seven of them, in whole buckets of a minute; a trace with no day
        keeps the defaults, which its two hours never reach."""
        options = {
            f"{_P}forecast.bucket": "1 min",
            f"{_P}forecast.horizon": self.forecast_horizon,
        }
        if self.day_s is not None:
            day_min = round(self.day_s / 60)
            options[f"{_P}forecast.periods"] = f"{day_min} min;{7 * day_min} min"
        return options


def _traces(long_s: float) -> dict[str, Trace]:
    """The trace set; ``long_s`` is the scored length of the two long traces (2 h, shorter with --quick)."""
    w = WARM_UP_S
    traces = [
        Trace(
            "step-up-x2", "1500 -> 3000 rec/s", Steps([(0, 1500), (w, 3000)]), w + 1200, 1500, step_changes=1
        ),
        Trace("step-up-x4", "800 -> 3200 rec/s", Steps([(0, 800), (w, 3200)]), w + 1200, 800, step_changes=1),
        Trace(
            "step-down-4", "3000 -> 750 rec/s", Steps([(0, 3000), (w, 750)]), w + 1500, 3000, step_changes=1
        ),
        Trace("ramp", "800 -> 3200 rec/s over 20 min", Ramp([(w, 800), (w + 1200, 3200)]), w + 1800, 800),
        Trace(
            "sine",
            f"500..3500 rec/s, a day in {long_s / 3600:g} h",
            Sine(base=2000, amplitude=1500, period_s=long_s),
            w + long_s,
            2000,
            settles=False,
            day_s=long_s,
        ),
        Trace(
            # Sized for the mean at 4 subtasks (54 % busy): a reading 26 % low would take it below the
            # band's 40 %, which noise alone (15 %) never does; a stale sample (17 % low) on top can.
            "noise",
            f"2700 rec/s +-15 % for {long_s / 3600:g} h",
            Noise(base=2700, spread=0.15, hold_s=10, seed=11),
            w + long_s,
            2700,
            settles=False,
        ),
        Trace(
            # Shorter than the 30 s window: the load-change window should let them pass.
            "short-bursts",
            "1500 rec/s, 15 s at 3000 every 10 min",
            Bursts(base=1500, peak=3000, every_s=600, duration_s=15, start_s=w),
            w + 3600,
            1500,
            settles=False,
        ),
        Trace(
            # As long as the window: a full window of the burst, the edge of what a window tells apart.
            "bursts",
            "1500 rec/s, 30 s at 3000 every 10 min",
            Bursts(base=1500, peak=3000, every_s=600, duration_s=30, start_s=w),
            w + 3600,
            1500,
            settles=False,
        ),
        # Issue 38: the shapes a production fleet has. A day is squeezed into long_s / 3 (40 min in
        # the full set), and six of them are run: a forecast needs two days of history and a dozen of
        # its own forecasts scored before it says one, so the last three days are where it can act;
        # the noise is the noise trace's kind, +-10 %.
        Trace(
            "daily-noisy",
            f"800..3200 rec/s +-10 %, 6 days of {long_s / 3 / 60:g} min",
            Product(
                [
                    Sine(base=2000, amplitude=1200, period_s=long_s / 3),
                    Noise(base=1, spread=0.10, hold_s=10, seed=21),
                ]
            ),
            w + 2 * long_s,
            2000,
            settles=False,
            day_s=long_s / 3,
        ),
        Trace(
            # One week from the job's start to its end (7,500 s in the full set: a week 81 times
            # faster, a day in 17.9 min): five days cycling +-40 % around 2400 rec/s, then a weekend at
            # half the level, +-5 % noise on top.
            "weekly",
            f"5 days 1440..3360 rec/s, 2 days half that, a week in {(w + long_s) / 3600:.1f} h",
            Product(
                [
                    Sine(base=1, amplitude=0.4, period_s=(w + long_s) / 7),
                    Steps([(0, 2400), (5 * (w + long_s) / 7, 1200)]),
                    Noise(base=1, spread=0.05, hold_s=10, seed=41),
                ]
            ),
            w + long_s,
            2400,
            settles=False,
            day_s=(w + long_s) / 7,
            forecast_horizon="15 min",  # shorter than its day (18 min), as a period must be
        ),
        Trace(
            "ramp-noisy",
            "800 -> 3200 rec/s over 40 min, +-10 %",
            Product([Ramp([(w, 800), (w + 2400, 3200)]), Noise(base=1, spread=0.10, hold_s=10, seed=31)]),
            w + 3600,
            800,
        ),
        Trace(
            # A crowd arrives in 10 s (three times the load) and leaves over half an hour.
            "flash-crowd",
            "1500 -> 4500 rec/s in 10 s, back to 1500 over 30 min",
            Ramp([(w, 1500), (w + 10, 4500), (w + 300, 3600), (w + 900, 2200), (w + 1800, 1500)]),
            w + 2400,
            1500,
        ),
    ]
    return {t.name: t for t in traces}


TRACES = _traces(7200.0)
"""The full set: the long traces score 2 simulated hours."""
QUICK_TRACES = _traces(1800.0)
"""``--quick``: the long traces score 30 simulated minutes (not comparable with the full set)."""


def optimum(job: SimJob, rate: float) -> int:
    """Slots the job needs at ``rate``: per vertex the smallest parallelism whose capacity at
    ``OPTIMUM_UTILIZATION`` covers the vertex's share of the rate; a job holds its widest vertex's."""
    need = 1
    for name, spec in job.vertex_specs.items():
        load = rate * job.gains[name] / (spec.capacity_per_subtask * OPTIMUM_UTILIZATION)
        need = max(need, math.ceil(load - 1e-9))
    return need


# ---------------------------------------------------------------------------------------------- a run
@dataclass(frozen=True, slots=True)
class Reading:
    """The simulated cluster's truth about one job at one second."""

    t_s: float
    rate: float
    slots: int
    optimum: int
    backlog: float
    capacity: float  # records/s the job processes at most now (0 while restarting)


@dataclass(frozen=True, slots=True)
class Rescale:
    """A restart the cluster applied: when the job ran again, and its total parallelism before and after."""

    t_s: float
    before: int
    after: int
    slots: int


@dataclass(frozen=True, slots=True)
class TickNote:
    """What the daemon made of one job in one tick (for ``--log`` and the report's evidence)."""

    t_s: float
    outcome: str
    detail: str
    window_samples: int | None = None
    records_in: float | None = None  # the Work vertex's counter in the sample: unchanged = stale
    tdr: float | None = None
    tpr: float | None = None
    target: int | None = None
    forecast: str = ""  # the job's forecast (its basis, peak and when), or why there is none


@dataclass
class JobRun:
    """One trace run under one profile: its job on the cluster and everything seen of it."""

    trace: Trace
    profile: str
    name: str
    job_id: str
    readings: list[Reading] = field(default_factory=list)
    rescales: list[Rescale] = field(default_factory=list)
    notes: list[TickNote] = field(default_factory=list)
    _seen_rescales: int = 0
    _total: int = 0


class _Server(Protocol):
    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RunConfig:
    """How the simulated lab runs (the defaults are the issue 11 set-up)."""

    tick_s: float = TICK_S
    fetch_s: float = FETCH_S
    restart_pause_s: float = RESTART_PAUSE_S
    jitter_ms: int = JITTER_MS
    seed: int = SEED
    http: bool = True  # False: the simulator's REST handlers in-process, no sockets
    setup: Mapping[str, str] = field(default_factory=lambda: dict(SETUP))


async def run_traces(
    traces: Sequence[Trace],
    profiles: Mapping[str, Mapping[str, str]],
    evaluator: Evaluator,
    config: RunConfig = RunConfig(),
    progress: Callable[[float, float], None] | None = None,
) -> list[JobRun]:
    """Run every trace under every profile in one cluster and one daemon; return each job's readings."""
    clock = FakeClock()
    start_ms = clock.now_ms()
    runs_wanted = len(traces) * len(profiles)
    slots = 16
    sim = SimCluster(
        SimClusterSpec(
            slots=slots,
            taskmanagers=max(1, math.ceil(runs_wanted * SLOTS_PER_JOB / slots)),
            cooldown_after_rescaling_s=COOLDOWN_S,
            restart_pause_s=config.restart_pause_s,
            metric_fetch_interval_s=config.fetch_s,
            step_s=0.5,
        ),
        clock,
    )
    runs: list[JobRun] = []
    for trace in traces:
        for profile, options in profiles.items():
            name = f"{trace.name}.{profile}"
            job = work_job(
                name=name,
                work_capacity=WORK_CAPACITY,
                input_rate=trace.rate,
                work_parallelism=_initial_parallelism(trace),
                job_config={**options, **trace.forecast_options()},
            )
            runs.append(JobRun(trace, profile, name, sim.submit(job)))
    server: _Server | None = None
    transports: dict[str, Any] = {}
    if config.http:
        started = SimulatorServer(sim).start()
        server, rest_url = started, started.url
    else:
        rest_url = "http://simulator.invalid"
        transports["sim"] = transport(sim)
    settings = Settings(
        # The collect stage waits up to metric_fetch_wait for the fetch a tick started, on the daemon's
        # clock (fake time here since issue 36). Off in the bench: every figure in docs/performance.md
        # was measured with ticks that read what Flink had at their instant; turning it on moves each
        # reading a poll later and starts the fetch-drift cycle (docs/algorithm.md), a change of its own.
        clusters=[ClusterSettings(name="sim", rest_url=rest_url, metric_fetch_wait=timedelta(0))],
        control_loop_interval=timedelta(seconds=config.tick_s),
        metrics_address="",
        decisions_dir=None,
        persist_window=False,
        autoscaler=dict(config.setup),
    )
    daemon = Daemon(
        settings,
        evaluator=evaluator,
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        metrics=MetricsReporter(),
        transports=transports,
    )
    try:
        await _drive(sim, daemon, clock, start_ms, runs, config, progress)
    finally:
        await daemon.aclose()
        if server is not None:
            server.stop()
    return runs


def _initial_parallelism(trace: Trace) -> int:
    """Work starts right-sized for the load before the change, so the warm-up is a steady state."""
    return max(1, math.ceil(trace.sized_for / (WORK_CAPACITY * OPTIMUM_UTILIZATION) - 1e-9))


async def _drive(
    sim: SimCluster,
    daemon: Daemon,
    clock: FakeClock,
    start_ms: int,
    runs: list[JobRun],
    config: RunConfig,
    progress: Callable[[float, float], None] | None,
) -> None:
    """Ticks at ``k * tick_s + jitter``; between them a reading of every live job each second."""
    rng = random.Random(config.seed)
    end_s = max(r.trace.duration_s for r in runs)
    tick_ms = round(config.tick_s * 1000)
    by_name = {r.name: r for r in runs}
    live = list(runs)
    for run in runs:
        _read(sim, run, 0.0, start_ms)
    k = 1
    next_tick = tick_ms + rng.randint(0, config.jitter_ms)
    for second in range(1, math.ceil(end_s) + 1):
        while next_tick <= second * 1000:
            clock.advance(ms=start_ms + next_tick - clock.now_ms())
            report = await daemon.run_tick()
            _note(report, by_name, start_ms)
            k += 1
            next_tick = k * tick_ms + rng.randint(0, config.jitter_ms)
        clock.advance(ms=start_ms + second * 1000 - clock.now_ms())
        for run in list(live):
            _read(sim, run, float(second), start_ms)
            if second >= run.trace.duration_s:
                sim.cancel(run.job_id)  # its trace is over: no more ticks spent on it
                live.remove(run)
        if progress is not None and second % 60 == 0:
            progress(float(second), end_s)


def _read(sim: SimCluster, run: JobRun, t_s: float, start_ms: int) -> None:
    with sim.locked():
        job = sim.job(run.job_id)
        rate = sim.input_rate(run.job_id)
        total = sum(job.parallelism.values())
        if job.num_rescales > run._seen_rescales:
            run._seen_rescales = job.num_rescales
            back = (job.running_since_ms - start_ms) / 1000
            run.rescales.append(Rescale(back, run._total, total, job.slots_used))
        run._total = total
        capacity = job.max_emission_rate if job.state == "RUNNING" else 0.0
        run.readings.append(Reading(t_s, rate, job.slots_used, optimum(job, rate), job.backlog, capacity))


def _note(report: TickReport, runs: Mapping[str, JobRun], start_ms: int) -> None:
    t_s = (report.now_ms - start_ms) / 1000
    for outcome in report.outcomes:
        run = runs.get(outcome.job.name)
        if run is None:
            continue
        evaluation = outcome.decision.evaluation if outcome.decision is not None else None
        note = TickNote(t_s, str(outcome.outcome), outcome.detail)
        if evaluation is not None:
            work = next((v for v in evaluation.sample.topology if v.name == "Work"), None)
            sample = evaluation.sample.vertices.get(work.id) if work is not None else None
            vertex = evaluation.vertices.get(work.id) if work is not None else None
            note = TickNote(
                t_s,
                note.outcome,
                note.detail,
                evaluation.window_samples,
                sample.num_records_in if sample is not None else None,
                vertex.target_data_rate if vertex is not None else None,
                vertex.true_processing_rate if vertex is not None else None,
                vertex.target_parallelism if vertex is not None else None,
                _forecast_note(outcome.decision, report.now_ms),
            )
        run.notes.append(note)


def _forecast_note(decision: Decision | None, now_ms: int) -> str:
    forecast = decision.forecast if decision is not None else None
    if isinstance(forecast, Forecast):
        return f"{forecast.basis}: peak {forecast.peak_rate:.0f} in {forecast.peak_in_s(now_ms):.0f} s"
    return f"{forecast.why}: {forecast.detail}" if forecast is not None else ""


# ---------------------------------------------------------------------------------------------- scores
@dataclass(frozen=True, slots=True)
class Quality:
    """One trace's scores under one profile (definitions in ``bench_decisions.DEFINITIONS``)."""

    restarts: int
    warm_up_restarts: int
    converge_s: float | None  # None: the trace does not settle
    overprovision_pct: float
    backlog_s: float
    reversals: int
    final_slots: int
    final_optimum: int
    stale_ticks: int  # ticks whose sample repeated the previous tick's Work counter (no fetch landed)
    ticks: int  # ticks with a sample
    slot_s_above: float  # over-provisioning's numerator and denominator, to total them over traces
    slot_s_needed: float
    cost: Cost  # the readings priced (slot-seconds, restarts, seconds above the lag target)
    best: BestPlan | None = None  # the trace's best plan in hindsight, under the same prices

    @property
    def regret(self) -> float | None:
        """Cost / the best plan's: 1 is as good as knowing the future."""
        if self.best is None or self.best.cost.total <= 0:
            return None
        return self.cost.total / self.best.cost.total


def score(run: JobRun, model: CostModel = DEFAULT_COST, best: BestPlan | None = None) -> Quality:
    """Score one run from the cluster's readings, from the load change to the end of its trace; its cost
    priced with ``model``, and ``best`` the trace's best plan in hindsight under the same model."""
    trace = run.trace
    scored = [r for r in run.readings if trace.change_at_s <= r.t_s < trace.duration_s]
    rescales = [r for r in run.rescales if r.t_s >= trace.change_at_s]
    above = sum(max(0, r.slots - r.optimum) for r in scored)
    needed = sum(r.optimum for r in scored)
    directions = [1 if r.after > r.before else -1 for r in rescales if r.after != r.before]
    converge: float | None = None
    if trace.settles:
        converge = rescales[-1].t_s - trace.change_at_s if rescales else 0.0
    last = scored[-1] if scored else run.readings[-1]
    notes = [n for n in run.notes if n.records_in is not None]
    stale = sum(
        1 for a, b in itertools.pairwise(notes) if b.records_in == a.records_in and b.t_s >= trace.change_at_s
    )
    target = CostModel(catch_up_s=CATCH_UP_TARGET_S)  # "backlog s": the catch-up notion, whatever the prices
    return Quality(
        restarts=len(rescales),
        warm_up_restarts=len(run.rescales) - len(rescales),
        converge_s=converge,
        overprovision_pct=100.0 * above / needed if needed else 0.0,
        backlog_s=float(sum(1 for r in scored if above_target(r.backlog, r.rate, r.capacity, target))),
        reversals=sum(1 for a, b in itertools.pairwise(directions) if a != b),
        final_slots=last.slots,
        final_optimum=last.optimum,
        stale_ticks=stale,
        ticks=sum(1 for n in notes if n.t_s >= trace.change_at_s),
        slot_s_above=float(above),
        slot_s_needed=float(needed),
        cost=price(
            (Interval(1.0, r.slots, r.rate, r.capacity, r.backlog) for r in scored), len(rescales), model
        ),
        best=best,
    )


def hindsight(trace: Trace, model: CostModel, config: RunConfig = RunConfig()) -> BestPlan:
    """The trace's best plan in hindsight over its scored part, one step a second as the readings are:
    from the parallelism it starts at with nothing waiting, at 1 to ``SLOTS_PER_JOB`` slots of
    ``WORK_CAPACITY`` each (Work is the lab job's bottleneck: its source and sink are 80 and 16 times
    faster), a restart pausing for the lab's ``restart_pause_s``."""
    start = trace.change_at_s
    rates = [trace.rate.rate_at(start + t) for t in range(math.ceil(trace.duration_s - start))]
    return best_plan(
        rates,
        1.0,
        lambda p: p * WORK_CAPACITY,
        levels=range(1, SLOTS_PER_JOB + 1),
        start=_initial_parallelism(trace),
        pause_s=config.restart_pause_s,
        model=model,
    )


def run_sync(
    traces: Sequence[Trace],
    profiles: Mapping[str, Mapping[str, str]],
    evaluator: Evaluator,
    config: RunConfig = RunConfig(),
    progress: Callable[[float, float], None] | None = None,
) -> list[JobRun]:
    """``run_traces`` from synchronous code (the CLI)."""
    return asyncio.run(run_traces(traces, profiles, evaluator, config, progress))
