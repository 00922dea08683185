"""The demo's first run, as a new user reads it: no warnings about a cluster no Flink is, no ``nan``,
vertex names as Flink gives them, and a summary that says what happened and how to see it.

The daemon runs against the in-process simulator on a fake clock that, like the demo's ScaledClock,
runs ten clock seconds per wall second and moves while the tick's requests are answered.
"""

from __future__ import annotations

import math
from dataclasses import replace

import httpx
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.demo import (
    DEMO_CLUSTER,
    DEMO_LOAD,
    NOT_MEASURED,
    Reached,
    _quiet_spark,
    _write_config,
    demo_settings,
    line,
    reached,
    summary_lines,
)
from autoscaler.evaluate.spark.session import DRIVER_JAVA_OPTIONS
from autoscaler.reasons import Reason
from autoscaler.settings import Settings
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import SimClusterSpec
from autoscaler.state import JobState, MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.testing import JOB, StubEvaluator, make_evaluation, vertex_eval
from autoscaler.tick.decide import decide
from autoscaler.tick.steps import JobOutcome

SPEED = 10.0
NAMES = ("Source: BacklogSource", "Work", "Aggregate -> Sink: Writer")  # /jobs/:id in flink-2.3-rest
START_MS = 1_800_000_000_000


class _MovingClock(FakeClock):
    """Ten clock seconds per wall second, as the demo's: the loop's wall interval is a tenth of a tick."""

    speed = SPEED


def _moving(clock: FakeClock, inner: httpx.MockTransport, step_s: float) -> httpx.MockTransport:
    """The simulator's answers, the clock ``step_s`` further on each: a 10x clock passes 100-300 ms
    between a tick's requests where a real one passes 10-30."""

    def respond(request: httpx.Request) -> httpx.Response:
        clock.advance(step_s)
        return inner.handle_request(request)

    return httpx.MockTransport(respond)


async def _run_demo_ticks(spec: SimClusterSpec, ticks: int) -> list[dict]:
    clock = _MovingClock(START_MS)
    sim = SimCluster(spec, clock)
    sim.submit(work_job(name="load-job", input_rate=DEMO_LOAD))
    settings = demo_settings("http://sim.invalid:8081", tick_wall_s=10.0 / SPEED)
    daemon = Daemon(
        settings,
        evaluator=StubEvaluator(),
        clock=clock,
        state=MemoryStateStore(),
        events=EventLog(),
        transports={"sim": _moving(clock, transport(sim), 0.2)},
    )
    with capture_logs() as logs:
        for tick in range(1, ticks + 1):
            clock.advance_to(START_MS + tick * 10_000)
            await daemon.run_tick()
    await daemon.aclose()
    return logs


async def test_the_demo_cluster_gives_no_warning_on_its_sped_up_clock() -> None:
    """Past the 60 s stabilization interval too, where a real disagreement is a warning: the demo's
    cluster answers a tick from one fetch, and its 1 s loop at 10x is a 10 s loop for its 5 s fetcher."""
    logs = await _run_demo_ticks(DEMO_CLUSTER, ticks=15)
    assert [e for e in logs if e["log_level"] == "warning"] == []
    assert not [e for e in logs if e["event"] == "metric_fetches_disagree"]


async def test_a_cluster_whose_answers_come_from_different_fetches_is_still_warned_about() -> None:
    """What the demo's cluster used to be (every query read at its own instant, no fetcher): the busy
    times of /jobs/:id and the vertices never agree, and past stabilization that is a warning."""
    logs = await _run_demo_ticks(DEMO_CLUSTER.model_copy(update={"metric_fetch_interval_s": 0.0}), ticks=15)
    disagree = [e for e in logs if e["event"] == "metric_fetches_disagree"]
    assert "warning" in [e["log_level"] for e in disagree]


def _outcome(**rates: float) -> JobOutcome:
    work = replace(vertex_eval("work", 1, 3, tpr=1250.0, tdr=2000.0), **{"load": 0.9, **rates})
    ev = make_evaluation([vertex_eval("src", 1), work, vertex_eval("agg", 1)])
    topology = replace(
        ev.sample.topology,
        vertices={
            vid: replace(v, name=name)
            for (vid, v), name in zip(ev.sample.topology.vertices.items(), NAMES, strict=True)
        },
    )
    ev = replace(ev, sample=replace(ev.sample, topology=topology))
    decision = decide(ev, JobState(), ev.sample.target.options, START_MS)
    return JobOutcome(JOB, START_MS + 61_000, Reason.WINDOW_NOT_FULL, "metric window not full yet", decision)


def test_a_demo_line_keeps_flink_vertex_names_and_says_what_is_not_measured_yet() -> None:
    parallelism = dict(zip(NAMES, (1, 1, 1), strict=True))
    text = line(_outcome(target_data_rate=math.nan), 2000.0, 12_577.0, parallelism, START_MS)
    assert "[Source: BacklogSource=1, Work=1, Aggregate -> Sink: Writer=1]" in text
    assert f"Work: load 0.90, capacity 1,250/s, needs {NOT_MEASURED}, recommends 3" in text
    assert "t=   61s" in text and "nan" not in text.lower()


@given(
    st.fixed_dictionaries(
        {
            field: st.one_of(st.just(math.nan), st.floats(0, 1e6))
            for field in ("load", "true_processing_rate", "target_data_rate")
        }
    )
)
def test_no_demo_line_says_nan(rates: dict[str, float]) -> None:
    text = line(_outcome(**rates), 800.0, 0.0, {"Work": 1}, START_MS)
    assert "nan" not in text.lower()


def test_the_time_from_each_load_change_to_the_parallelism_it_settled_on() -> None:
    runs = [(0.0, {"Work": 1}), (142.0, {"Work": 3}), (455.0, {"Work": 1})]
    got = reached([60.0, 330.0], runs)
    assert got == [
        Reached(60.0, 142.0, {"Work": 3}, {"Work": 1}),
        Reached(330.0, 455.0, {"Work": 1}, {"Work": 3}),
    ]
    assert reached([60.0], [(0.0, {"Work": 1})]) == [Reached(60.0, None, {"Work": 1}, {"Work": 1})]


def test_the_summary_is_two_lines_restarts_then_time_to_the_final_parallelism() -> None:
    lines = summary_lines(
        restarts=2,
        ups=1,
        downs=1,
        final={"Source: BacklogSource": 1, "Work": 1},
        backlog=0.0,
        reached_at=[
            Reached(
                60.0, 142.0, {"Source: BacklogSource": 1, "Work": 3}, {"Source: BacklogSource": 1, "Work": 1}
            ),
            Reached(330.0, None, {"Work": 3}, {"Work": 3}),
        ],
    )
    assert len(lines) == 2
    assert lines[0].startswith("summary: 2 restart(s) made (1 scale-up, 1 scale-down)")
    assert "final parallelism Source: BacklogSource=1, Work=1" in lines[0]
    assert "load change at t=60s: Work 1 -> 3 running from t=142s (82 s later)" in lines[1]
    assert "load change at t=330s: no rescale" in lines[1]


def test_the_demo_keeps_its_state_where_the_command_it_prints_finds_it(tmp_path) -> None:
    """``explain --config <dir>/demo.yaml`` reads the state database and decisions the demo's daemon
    wrote (a daemon of its own reads the same settings)."""
    settings = demo_settings("http://127.0.0.1:1", tick_wall_s=1.0, keep_dir=tmp_path)
    read = Settings.load(_write_config(tmp_path, settings))
    assert read.state_url == settings.state_url == f"sqlite:///{tmp_path / 'state.db'}"
    assert read.decisions_dir == settings.decisions_dir == tmp_path / "decisions"
    assert read.decision_history == settings.decision_history


def test_the_demo_s_spark_starts_quietly_and_keeps_the_daemon_s_jvm_options(tmp_path) -> None:
    spark = _quiet_spark(Settings().spark, tmp_path)
    java = spark.conf["spark.driver.extraJavaOptions"]
    assert java.startswith(DRIVER_JAVA_OPTIONS + " -Dlog4j2.configurationFile=file:")
    assert "rootLogger.level = error" in (tmp_path / "log4j2.properties").read_text()
