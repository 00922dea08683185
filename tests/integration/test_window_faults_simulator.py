"""Faulty ticks around a load step, and the verification of a rescale: the daemon against the simulator's
lazy metric fetcher on a fake clock, with the lab settings of issue 36 (a 5 s loop on Flink's 5 s fetch
interval, so every other tick reads a stale fetch; 30 s window and stabilization; the recommended
profile's load-change threshold).

Item 3: a tick whose vertex metrics fail (``PartialMetrics``) adds no sample, and the window slides by
the clock. After ``LoadChanging`` and a few such ticks, or a gap over the step itself, the window held
no point of the old load to tell the change with and decided at once from a mix of both loads (Work
1 -> 3 where the clean run went 1 -> 4). Now the first rescale after the step is the clean run's.

Item 4: after the daemon's own rescale, the first readings came from the old run's last fetch, the
counters fell, and the window's origin stayed at that sample inside the stabilization interval: it was
"full" 10 s after stabilization and a ScalingVerified judged the rescale from 2-3 samples. Now the
verification comes from a window as full as the decisions' after any restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.settings import ClusterSettings, Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS, work_job
from autoscaler.simulator.spec import Constant, RateSchedule, SimClusterSpec, Steps
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.testing import FaultyTransport
from autoscaler.tick.steps import JobOutcome

TICK_S = 5
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.stabilization.interval": "30 s",
    "job.autoscaler.scale-down.interval": "1 min",
}
WORK = LAB_VERTEX_IDS["Work"]
# Every vertex's subtask metrics answer 500: the job's collection ends PartialMetrics for the tick.
PARTIAL = {("GET", r".*/vertices/[^/]+/subtasks/metrics"): httpx.Response(500, json={"errors": ["fault"]})}


@dataclass
class Run:
    """One daemon run against one simulated job: every tick's outcome and the job's events."""

    outcomes: list[JobOutcome]
    events: EventLog
    sim: SimCluster
    job_id: str

    def first_rescale(self) -> tuple[int, int]:
        """(the tick's offset in s, Work's target) of the first rescale."""
        for i, o in enumerate(self.outcomes):
            if o.outcome is Reason.SCALING:
                assert o.decision is not None
                return (i + 1) * TICK_S, o.decision.changes[WORK].target
        raise AssertionError("no rescale")


Faulty = Callable[[int, list[JobOutcome]], bool]  # (tick offset s, outcomes so far): a faulty tick?


async def run(
    rate: RateSchedule,
    ticks: int,
    *,
    work_capacity: float = 1250.0,
    work_parallelism: int = 1,
    faulty: Faulty | None = None,
    until_rescale: bool = True,
) -> Run:
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=8, metric_fetch_interval_s=TICK_S), clock)
    flink = FaultyTransport(transport(sim))
    events = EventLog()
    daemon = Daemon(
        Settings(
            clusters=[ClusterSettings(name="sim", rest_url="http://sim.invalid:8081")],
            control_loop_interval=timedelta(seconds=TICK_S),
            metrics_address="",
            autoscaler=OPTIONS,
        ),
        evaluator=PythonEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=events,
        metrics=MetricsReporter(),
        transports={"sim": flink},
    )
    spec = work_job(name="j", input_rate=rate, work_capacity=work_capacity, work_parallelism=work_parallelism)
    job_id = sim.submit(spec)
    outcomes: list[JobOutcome] = []
    try:
        for i in range(ticks):
            clock.advance(TICK_S)
            flink.faults = PARTIAL if faulty is not None and faulty((i + 1) * TICK_S, outcomes) else {}
            outcome = (await daemon.run_tick()).for_job("j")
            assert outcome is not None
            outcomes.append(outcome)
            if until_rescale and outcome.outcome is Reason.SCALING:
                break
    finally:
        await daemon.aclose()
    return Run(outcomes, events, sim, job_id)


def after_load_changing(count: int) -> Faulty:
    """The ``count`` ticks right after the first ``LoadChanging`` are faulty (the issue's sequence)."""

    def faulty(_: int, outcomes: list[JobOutcome]) -> bool:
        reasons = [o.outcome for o in outcomes]
        if Reason.LOAD_CHANGING not in reasons:
            return False
        return len(reasons) - reasons.index(Reason.LOAD_CHANGING) <= count

    return faulty


def between(first_s: int, last_s: int) -> Faulty:
    return lambda t, _: first_s <= t <= last_s


@pytest.mark.parametrize(
    ("rate", "capacity", "parallelism", "faulty"),
    [
        # 800 -> 3000 rec/s; LoadChanging, then three PartialMetrics ticks (a Work of 1,400 rec/s per
        # subtask, where the mixed window's 2,780 rec/s asks for 3 and the new load's 3,000 for 4).
        (Steps([(0, 800), (88, 3000)]), 1400.0, 1, after_load_changing(3)),
        # The lab job: four PartialMetrics ticks over the step itself; no LoadChanging could come first.
        (Steps([(0, 800), (88, 3000)]), 1250.0, 1, between(85, 100)),
        # 3000 -> 800 rec/s with Work at 4: the same over a step down (the clean run goes 4 -> 1).
        (Steps([(0, 3000), (91, 800)]), 1250.0, 4, between(95, 110)),
    ],
    ids=[
        "partial-ticks-after-load-changing",
        "partial-ticks-over-a-step-up",
        "partial-ticks-over-a-step-down",
    ],
)
async def test_the_first_rescale_after_a_load_step_with_faulty_ticks_is_the_clean_runs(
    rate: RateSchedule, capacity: float, parallelism: int, faulty: Faulty
) -> None:
    clean = await run(rate, 60, work_capacity=capacity, work_parallelism=parallelism)
    faults = await run(rate, 60, work_capacity=capacity, work_parallelism=parallelism, faulty=faulty)
    assert Reason.PARTIAL_METRICS in {o.outcome for o in faults.outcomes}  # the faults did hit
    clean_s, clean_target = clean.first_rescale()
    faulty_s, faulty_target = faults.first_rescale()
    assert faulty_target == clean_target, (
        f"clean run: Work -> {clean_target} at {clean_s} s; with faulty ticks: Work -> {faulty_target} at "
        f"{faulty_s} s"
    )
    assert faulty_target in (4, 1)  # the new load's: 3,000 rec/s needs 4, 800 needs 1


async def test_a_rescale_is_verified_only_from_a_full_window_and_as_expected_when_it_delivers() -> None:
    """3,000 rec/s against Work at 1 (1,250 rec/s): 1 -> 4, which delivers 5,000 rec/s, as expected."""
    result = await run(Constant(rate=3000), 40, until_rescale=False)
    outcomes = result.outcomes
    rescales = [i for i, o in enumerate(outcomes) if o.outcome is Reason.SCALING]
    assert len(rescales) == 1
    # Full windows before the rescale hold this many samples (a fetch every 10 s over 30 s).
    full_before = max(
        o.decision.evaluation.window_samples
        for o in outcomes[: rescales[0] + 1]
        if o.decision is not None
        and o.decision.evaluation is not None
        and o.decision.evaluation.not_ready is None
    )
    verified = [e for e in result.events.events("sim/j") if e.reason is Reason.SCALING_VERIFIED]
    assert len(verified) == 1, [e.message for e in verified]
    event = verified[0]
    assert event.type.value == "Normal" and "100% of the 5000.00 expected" in event.message, event.message
    tick = next(o for o in outcomes if o.now_ms == event.ts_ms)
    assert tick.decision is not None and tick.decision.evaluation is not None
    samples = tick.decision.evaluation.window_samples
    assert samples >= full_before, f"verified from {samples} samples; a full window holds {full_before}"
    assert f"verified over a full metric window ({samples} samples)" in event.message
    # Not before the new run's stabilization (30 s) and a whole window (30 s) after it.
    running_since = result.sim.job(result.job_id).running_since_ms
    assert event.ts_ms >= running_since + 60_000
