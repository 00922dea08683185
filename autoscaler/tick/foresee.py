"""The foresee stage: each forecasting job's offered load added to its history, and its forecast.

Runs after the evaluation, for the jobs with ``forecast.enabled`` (the others cost nothing): the
offered load is the evaluated target rate of the job's sources, summed (what the sources are asked to
read: the records in plus the backlog's growth), the same figure the decision sizes for. A sample read
again (stale) or one whose sources' rates are not all known adds nothing. The values go to the decide
stage (the decision carries the forecast, which ``explain`` shows and, with ``cost.enabled``, the gate
"worth a restart" reads) and to the record stage (the history's closed buckets are written). Pure: per
job, a sum per tick and, once per closed bucket, the forecast (``autoscaler.foresight``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.evaluate.stage import Evaluated
from autoscaler.foresight.forecast import Forecast, ForecastParams, NoForecast
from autoscaler.foresight.history import LoadHistory
from autoscaler.model import JobEvaluation
from autoscaler.state.tick import Loaded

__all__ = ["Foresight", "forecasts", "foresee", "offered_rate"]


@dataclass(frozen=True, slots=True)
class Foresight:
    """A forecasting job after this tick: its history to keep (and write) and the forecast it gives."""

    history: LoadHistory
    forecast: Forecast | NoForecast


def offered_rate(evaluation: JobEvaluation) -> float:
    """The job's offered load (records/s): its sources' target rates summed; NaN when one is unknown,
    or nothing was evaluated."""
    topology = evaluation.sample.topology
    sources = [v for vid, v in evaluation.vertices.items() if topology.is_source(vid)]
    if not sources:
        return math.nan
    total = math.fsum(v.target_data_rate for v in sources)
    return total if math.isfinite(total) else math.nan


def foresee(evaluated: Evaluated, loaded: Loaded, now_ms: int) -> dict[str, Foresight]:
    """Each forecasting job's history with this tick's offered load, and its forecast at ``now_ms``."""
    out: dict[str, Foresight] = {}
    for key, history in loaded.histories.items():
        evaluation = evaluated.evaluations.get(key)
        if evaluation is not None and not evaluation.sample.stale_ticks:
            params = ForecastParams.of(evaluation.sample.target.options, key)
            history = history.observe(evaluation.sample.ts_ms, offered_rate(evaluation), params)
        out[key] = Foresight(history, history.forecast(now_ms))
    return out


def forecasts(foreseen: Mapping[str, Foresight]) -> dict[str, Forecast | NoForecast]:
    """The forecasts alone, for the decide stage."""
    return {key: f.forecast for key, f in foreseen.items()}
