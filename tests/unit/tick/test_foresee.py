"""The foresee stage: a forecasting job's offered load joins its history, its forecast rides on its
decision to ``explain``, its closed buckets are written by the record stage; other jobs see nothing."""

from __future__ import annotations

import dataclasses
import json
import math

from daemon_world import OPTIONS, World

from autoscaler.archive import ArchiveWriter
from autoscaler.evaluate.stage import Evaluated
from autoscaler.explain import explain
from autoscaler.explain.build import record_from_outcome
from autoscaler.explain.records import DecisionRecord
from autoscaler.foresight.forecast import Forecast, ForecastParams, NoForecast, Why
from autoscaler.foresight.history import LoadHistory
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobEvaluation, JobRef
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, open_stores
from autoscaler.state.tick import Loaded
from autoscaler.testing import StubEvaluator, make_evaluation, make_sample, make_topology, vertex_eval
from autoscaler.tick.foresee import foresee, offered_rate
from autoscaler.tick.steps import Decision, JobOutcome

OPTIONS_ON = AutoscalerOptions(enabled=True, forecast_enabled=True)
PARAMS = ForecastParams.of(OPTIONS_ON)
TOPOLOGY = make_topology(
    {"src": 1, "other-src": 1, "sink": 2}, [("src", "sink", "HASH"), ("other-src", "sink", "HASH")]
)


def evaluation(ts_ms: int, src: float = 300.0, other: float = 200.0, **kwargs: object) -> JobEvaluation:
    sample = make_sample(TOPOLOGY, ts_ms=ts_ms, options=OPTIONS_ON, **kwargs)  # type: ignore[arg-type]
    rates = {"src": src, "other-src": other, "sink": 9999.0}
    vertices = {vid: vertex_eval(vid, 1, tdr=rate) for vid, rate in rates.items()}
    return JobEvaluation(sample, vertices, processing_backlog=False, window_samples=3, window_full=True)


def test_the_offered_load_is_the_sources_target_rates() -> None:
    assert offered_rate(evaluation(0)) == 500.0
    assert math.isnan(offered_rate(evaluation(0, src=math.nan)))
    assert math.isnan(offered_rate(dataclasses.replace(evaluation(0), vertices={})))


def test_a_forecasting_jobs_load_joins_its_history_and_others_are_left_alone() -> None:
    key = evaluation(0).job.key
    params = ForecastParams.of(OPTIONS_ON, key)  # the job's own phase
    history = LoadHistory.empty(params)
    for at, kwargs in ((0, {}), (10_000, {"stale_ticks": 1}), (20_000, {}), (params.bucket_ms, {})):
        ts = params.phase_ms + at
        e = evaluation(ts, **kwargs)
        (after,) = foresee(Evaluated({key: e}), Loaded(histories={key: history}), ts).values()
        history = after.history
    assert history.series.rates(0, 1) == [500.0] and history.open is not None and history.open.count == 1
    assert isinstance(after.forecast, NoForecast) and after.forecast.why is Why.SHORT
    assert foresee(Evaluated({key: evaluation(0)}), Loaded(), 0) == {}, "forecast.enabled is false"
    (kept,) = foresee(Evaluated(), Loaded(histories={key: history}), 0).values()
    assert kept.history is history, "not evaluated: nothing added"


async def test_the_daemon_keeps_writes_and_restores_histories_and_explain_shows_the_forecast(
    tmp_path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    options = {
        **OPTIONS,
        "job.autoscaler.forecast.enabled": "true",
        "job.autoscaler.forecast.bucket": "1 min",
    }
    w = World(StubEvaluator(), options=options, stores=open_stores(url))
    for _ in range(20):  # 200 s: three one-minute buckets closed
        report = await w.tick()
    stored = w.state.read_load_history(["a/job-a", "b/job-b"])
    assert set(stored) == {"a/job-a", "b/job-b"}
    (row,) = stored["a/job-a"]
    assert row.bucket_ms == 60_000 and len(row.rates) >= 3 * 4 and row.scores is not None
    outcome = report.for_job("job-a")
    assert outcome is not None and outcome.decision is not None
    forecast = outcome.decision.forecast
    assert isinstance(forecast, NoForecast) and forecast.why is Why.SHORT
    record = record_from_outcome(outcome)
    assert (
        record.forecast is not None and record.forecast.none == "short" and record.forecast.horizon_s == 3600
    )
    assert DecisionRecord.from_json(record.to_json()) == record
    assert "Load forecast: none (short:" in explain(record)

    again = World(StubEvaluator(), options=options, stores=open_stores(url))  # a restarted daemon
    again.clock.advance(w.clock.now_ms() / 1000)
    loaded = await again.daemon.store.load(w.daemon.evaluator.samples)
    assert loaded.histories["a/job-a"].series == w.daemon.store._histories["a/job-a"].series


async def test_without_forecasts_nothing_is_kept_and_the_records_are_as_before() -> None:
    # Off, as in the reference profile (the recommended one, the daemon's default, has it on).
    w = World(StubEvaluator(), options={**OPTIONS, "job.autoscaler.forecast.enabled": "false"})
    for _ in range(20):
        report = await w.tick()
    assert w.state.read_load_history(["a/job-a", "b/job-b"]) == {}
    outcome = report.for_job("job-a")
    assert outcome is not None and outcome.decision is not None and outcome.decision.forecast is None
    record = record_from_outcome(outcome)
    assert record.forecast is None and "forecast" not in json.loads(record.to_json())
    assert "Load forecast" not in explain(record)


def test_explain_says_a_forecast_in_words() -> None:
    e = evaluation(0)
    forecast = Forecast(2400.0, 1500.0, 600_000, 1_500_000, 3_600_000, 0.93, "daily")
    decision = Decision(e.job, Reason.IN_BAND, "", {}, JobState(), e, forecast=forecast)
    outcome = JobOutcome(e.job, 900_000, Reason.IN_BAND, "", decision)
    record = record_from_outcome(outcome).forecast
    assert record is not None and record.peak_in_s == 600 and record.basis == "daily"
    words = explain(DecisionRecord("c/j", "c", "j", "a" * 32, 900_000, "InBand", "", forecast=record))
    assert (
        "Load forecast: peak 2,400 rec/s expected in 10 min, up from 1,500 rec/s (daily, confidence 0.93, "
        "horizon 60 min); with cost.enabled the decision weighs its changes at that peak"
    ) in words


# ------------------------------------------------------------------------------ history from the archive
PERIOD_MIN = 30  # a 30-minute cycle, in one-minute buckets: a day's pattern, made quick
ARCHIVED = {
    **OPTIONS,
    "job.autoscaler.forecast.enabled": "true",
    "job.autoscaler.forecast.bucket": "1 min",
    "job.autoscaler.forecast.horizon": "5 min",
    "job.autoscaler.forecast.periods": f"{PERIOD_MIN} min",
}


def cycle(ts_ms: int) -> float:
    """1,000 rec/s, rising to 2,000 at each period's middle (a smooth hump), with no noise to speak of."""
    phase = (ts_ms / 60_000 % PERIOD_MIN) / PERIOD_MIN
    return 1000.0 * (1 + max(0.0, math.sin(2 * math.pi * (phase - 0.25))) ** 2)


def archive_cycle(root, until_ms: int, minutes: int) -> None:
    """What an earlier daemon archived of job-a: its source's target rate every 20 s for ``minutes``."""
    job = JobRef("a", "0" * 32, "job-a")  # an earlier run of the job, under its own JobID
    topology = make_topology({"src": 1, "sink": 2}, [("src", "sink", "HASH")])
    writer = ArchiveWriter(root, flush_interval_ms=10**12, metrics=MetricsReporter())
    for ts in range(until_ms - minutes * 60_000, until_ms, 20_000):
        evaluation = make_evaluation(
            [vertex_eval("src", 1, tdr=cycle(ts)), vertex_eval("sink", 2, tdr=5.0)], ts_ms=ts, job=job
        )
        decision = Decision(job, Reason.IN_BAND, "", {}, JobState(), evaluation)
        outcome = JobOutcome(job, ts + 500, Reason.IN_BAND, "", decision)
        writer.add(ts + 500, [make_sample(topology, ts_ms=ts, job=job)], [outcome])
    writer.flush(until_ms)


async def test_a_daemon_with_an_empty_store_forecasts_from_the_archive_at_once(tmp_path) -> None:
    """A new state database and an archive that recorded the cycle's last periods (two whole ones and
    the scoring's share of the next): the first tick's decision already carries the forecast of the
    coming hump, which the same daemon without the archive would give only after two periods and
    their scoring; the completed history is kept in the state store from then on."""
    without = World(StubEvaluator(), options=ARCHIVED)
    start = without.clock.now_ms()
    now = start - start % (PERIOD_MIN * 60_000) + 9 * 60_000  # 6 min before the hump starts rising
    without.clock.advance((now - start) / 1000)
    archive_cycle(tmp_path / "archive", now, 3 * PERIOD_MIN - 2)

    url = f"sqlite:///{tmp_path / 'state.db'}"
    w = World(StubEvaluator(), options=ARCHIVED, stores=open_stores(url), archive_dir=tmp_path / "archive")
    w.clock.advance((now - w.clock.now_ms()) / 1000)
    report = await w.tick()
    outcome = report.for_job("job-a")
    assert outcome is not None and outcome.decision is not None
    forecast = outcome.decision.forecast
    assert isinstance(forecast, Forecast), forecast
    assert forecast.basis == f"every {PERIOD_MIN} min" and forecast.peak_rate > 1.2 * forecast.level_rate

    cold = (await without.tick()).for_job("job-a")
    assert cold is not None and cold.decision is not None
    assert isinstance(cold.decision.forecast, NoForecast) and cold.decision.forecast.why is Why.SHORT

    (row,) = w.state.read_load_history(["a/job-a"])["a/job-a"]  # written whole at the first tick
    assert len(row.rates) // 4 >= 3 * PERIOD_MIN - 4 and row.scores is not None
    other = report.for_job("job-b")
    assert other is not None and other.decision is not None
    assert isinstance(other.decision.forecast, NoForecast), "job-b has no archive: its store's history"
