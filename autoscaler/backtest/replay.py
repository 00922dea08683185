"""Replay one job's history through a configuration: the daemon itself, on a fake clock.

The replay runs the real :class:`~autoscaler.daemon.Daemon` (plain-Python evaluator, memory state) at
each tick of the history, with two stand-ins at the edges: the samples come from the history instead of
Flink's REST API (``metrics_source.RecordedHistory``), and a fake Flink answers the realize stage's
``resource-requirements`` GET and PUT. So every decision goes through the same evaluate, decide, gates,
slots and realize code as live, with the same state from tick to tick.

The replay reads the recorded samples for as long as it asks Flink for what the live daemon asked for
at the same ticks: until then both ran the same job. At the first tick where they differ (a rescale one
sent and the other did not, or other targets), it diverges: from then on the job is re-simulated from
its last recorded reading at the parallelism the replay asked for (``autoscaler.backtest.world``).
A replay of the configuration the daemon ran never diverges, and decides what the daemon decided
(``tests/integration/test_backtest_replay.py``).

The replay ticks only at the history's ticks: a re-evaluation the replayed decisions would have
scheduled at the end of a cooldown (and the live daemon did not) happens at the next recorded tick.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import httpx

from autoscaler.backtest.history import JobHistory
from autoscaler.backtest.score import Score, Scorer, Trace, slots_of
from autoscaler.backtest.workload import Workload
from autoscaler.backtest.world import World
from autoscaler.clock import FakeClock
from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.metrics_source import RecordedHistory
from autoscaler.model import JobSample, JobTarget, VertexId
from autoscaler.offload import inline
from autoscaler.settings import AutoscalerOptions, ClusterSettings, Settings
from autoscaler.state import MemoryStateStore
from autoscaler.state.events import EventLog
from autoscaler.tick.steps import JobOutcome

__all__ = ["Replayed", "replay_job", "score_actual", "trace_actual"]

_FAKE_URL = "http://backtest.invalid"


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a configuration did to one job in a replay, and how the job fared."""

    puts: Mapping[int, Mapping[VertexId, int]]  # by tick: the upper bounds the replay asked Flink for
    outcomes: Mapping[int, str]  # by tick: the job's outcome (its reason), as the daemon reports it
    diverged_ms: int | None  # the first tick the replay asked for other than the live daemon did
    score: Score
    final_parallelism: Mapping[VertexId, int]  # what the job runs (or restarts to) at the end
    final_slots: int
    trace: Trace = ()  # every tick's slots and backlog, when the replay was asked to keep them


def replay_settings(settings: Settings, cluster: str) -> Settings:
    """The configuration for replaying a job of ``cluster``: its options as configured (the cluster's
    own overrides when the configuration names it), one cluster answered by the fake Flink, and
    nothing served, persisted or archived."""
    known = next((c for c in settings.clusters if c.name == cluster), None)
    overrides = known.autoscaler if known is not None else {}
    replayed = ClusterSettings(name=cluster, rest_url=_FAKE_URL, autoscaler=overrides)
    return settings.model_copy(
        update={"clusters": [replayed], "metrics_address": "", "persist_window": False, "archive_dir": None}
    )


class _FakeFlink:
    """Flink's ``resource-requirements`` for one job: what was asked last, and each PUT by tick."""

    def __init__(self) -> None:
        self.requirements: dict[VertexId, tuple[int, int]] = {}
        self.puts: dict[int, dict[VertexId, int]] = {}
        self.now_ms = 0

    def follow(self, sample: JobSample) -> None:
        """A job graph with other vertices (a resubmission) starts from the parallelism it runs."""
        if set(sample.topology.vertices) != set(self.requirements):
            self.requirements = {vid: (1, p) for vid, p in sample.topology.parallelisms.items()}

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/resource-requirements"):
            return httpx.Response(404, json={"errors": ["not in a backtest"]})
        if request.method == "PUT":
            body = json.loads(request.content)
            self.requirements = {
                vid: (b["parallelism"]["lowerBound"], b["parallelism"]["upperBound"])
                for vid, b in body.items()
            }
            self.puts[self.now_ms] = {vid: upper for vid, (_, upper) in self.requirements.items()}
            return httpx.Response(200, json={})
        answer = {
            vid: {"parallelism": {"lowerBound": lo, "upperBound": up}}
            for vid, (lo, up) in self.requirements.items()
        }
        return httpx.Response(200, json=answer)


class _Replay:
    """One job's replay: the daemon, its fake Flink and clock, the re-simulated job once diverged, and
    the score as it goes."""

    def __init__(
        self,
        history: JobHistory,
        settings: Settings,
        workload: Workload,
        *,
        flink_cooldown_ms: int,
        lag_target_s: float,
        trace: bool = False,
    ) -> None:
        self.history = history
        self.workload = workload
        self.options: AutoscalerOptions = settings.options_for(settings.clusters[0])
        self.flink = _FakeFlink()
        self.clock = FakeClock(history.ticks[0])
        self.scorer = Scorer(workload, lag_target_s, trace=trace)
        self.world: World | None = None
        self.diverged_ms: int | None = None
        self.outcomes: dict[int, str] = {}
        self.now: tuple[frozenset[str], Sequence[JobSample]] = (frozenset(), ())
        self.daemon = Daemon(
            settings,
            evaluator=PythonEvaluator(incremental=True),  # the oracle's aggregates, slid tick to tick
            clock=self.clock,
            state=MemoryStateStore(),
            events=EventLog(),
            metrics=MetricsReporter(vertex_metrics="off"),  # no one scrapes a replay
            transports={history.cluster: httpx.MockTransport(self.flink.handle)},
            on_outcome=self._outcome,
            source=RecordedHistory(lambda _cluster, _now: self.now),
        )
        self.daemon.clusters[history.cluster].flink_cooldown_ms = flink_cooldown_ms  # not in the archive

    def _outcome(self, outcome: JobOutcome) -> None:
        self.outcomes[outcome.now_ms] = outcome.outcome.value

    async def run(self) -> Replayed:
        try:
            for tick in self.history.ticks:
                await self._tick(tick)
        finally:
            await self.daemon.aclose()
        if self.world is not None:
            topology, running = self.world.topology, self.world.requested or self.world.parallelism
        else:
            topology = self.history.samples[max(self.history.samples)].topology
            running = dict(topology.parallelisms)
        score = self.scorer.score()
        return Replayed(
            self.flink.puts,
            self.outcomes,
            self.diverged_ms,
            score,
            running,
            slots_of(topology, running),
            self.scorer.traced(),
        )

    async def _tick(self, tick: int) -> None:
        self.clock.advance(ms=tick - self.clock.now_ms())
        self.flink.now_ms = tick
        sample = self._read(tick)
        if sample is not None:
            self.flink.follow(sample)
            sample = replace(sample, target=JobTarget(sample.job, self.options))
        self.now = (frozenset({self.history.key}), () if sample is None else (sample,))
        await self.daemon.run_tick()
        put = self.flink.puts.get(tick)
        if put is not None:
            self.scorer.restart()
        if self.world is None and put != self.history.puts.get(tick):
            self._diverge(tick)
        if self.world is not None and put is not None:
            self.world.put(tick, put)

    def _read(self, tick: int) -> JobSample | None:
        """The tick's sample (recorded, or the re-simulated job's), scored as it runs."""
        recorded = self.history.samples.get(tick)
        if self.world is None:
            _score_recorded(self.scorer, tick, recorded)
            return recorded
        template = self.history.sample_at_or_before(tick)
        sample = self.world.advance(tick, template)
        world = self.world
        slots = slots_of(world.topology, world.requested or world.parallelism)
        self.scorer.tick(
            tick, dict(world.parallelism) if world.running else None, world.total_backlog(), slots
        )
        return sample

    def _diverge(self, tick: int) -> None:
        """From this tick on, the recorded samples are another job's: re-simulate from the last one."""
        self.diverged_ms = tick
        last = self.history.sample_at_or_before(tick)
        assert last is not None  # a replay starts at the first sample
        self.world = World(self.workload, last, tick)
        # A rescale both asked for that Flink has not run yet (the job restarts in both worlds).
        common = [t for t in self.history.puts if t < tick and t > last.running_since_ms]
        if common and self.history.puts[max(common)] == self.flink.puts.get(max(common)):
            self.world.put(max(common), self.history.puts[max(common)])


def _score_recorded(scorer: Scorer, tick: int, sample: JobSample | None) -> None:
    if sample is None:  # the job was not running (restarting) when the daemon looked
        scorer.tick(tick, None)
        return
    lags = (v.pending_records for vid, v in sample.vertices.items() if sample.topology.is_source(vid))
    parallelism = dict(sample.topology.parallelisms)
    backlog = sum(lag for lag in lags if math.isfinite(lag))
    scorer.tick(tick, parallelism, backlog, slots_of(sample.topology, parallelism))


async def replay_job(
    history: JobHistory,
    settings: Settings,
    workload: Workload,
    *,
    flink_cooldown_ms: int = 30_000,
    lag_target_s: float = 30.0,
    trace: bool = False,
) -> Replayed:
    """Replay ``history`` through ``settings`` (see the module's docstring); with ``trace``, its every
    tick's slots and backlog kept (``Replayed.trace``)."""
    replayed = replay_settings(settings, history.cluster)
    with inline():  # memory state, plain-Python evaluator: no call worth a thread hand-off
        replay = _Replay(
            history,
            replayed,
            workload,
            flink_cooldown_ms=flink_cooldown_ms,
            lag_target_s=lag_target_s,
            trace=trace,
        )
        return await replay.run()


def score_actual(history: JobHistory, workload: Workload, lag_target_s: float = 30.0) -> Score:
    """What actually happened, scored like a replay: the recorded parallelism, backlog and rescales."""
    return trace_actual(history, workload, lag_target_s, trace=False)[0]


def trace_actual(
    history: JobHistory, workload: Workload, lag_target_s: float = 30.0, *, trace: bool = True
) -> tuple[Score, Trace]:
    """:func:`score_actual`, and (with ``trace``) every tick's recorded slots and backlog."""
    scorer = Scorer(workload, lag_target_s, trace=trace)
    for _ in history.puts:
        scorer.restart()
    for tick in history.ticks:
        _score_recorded(scorer, tick, history.samples.get(tick))
    return scorer.score(), scorer.traced()
