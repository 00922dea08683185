"""What the explain tests (tests/unit/explain) share: real decisions, made by ``decide``, as the
daemon's outcomes.

Records are built from these rather than written by hand, so the tests follow what the decision stage
really produces.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState
from autoscaler.testing import JOB, make_evaluation, vertex_eval
from autoscaler.tick.decide import decide
from autoscaler.tick.steps import JobOutcome

NOW = 1_800_000_000_000
OPTS = AutoscalerOptions(enabled=True)


def thresholds(v, up: float, down: float, lag: float = math.nan):
    return replace(v, scale_up_threshold=up, scale_down_threshold=down, lag=lag)


def scale_up_evaluation(options: AutoscalerOptions = OPTS, **kwargs):
    """src keeps up; work (capacity 1,000 rec/s, needs 1,500) is too slow and is recommended 3."""
    return make_evaluation(
        [
            thresholds(vertex_eval("src", 2, tpr=5000.0, tdr=1500.0), 1500.0, 3750.0, lag=12_000.0),
            thresholds(vertex_eval("work", 1, 3, tpr=1000.0, tdr=1500.0), 1500.0, 3750.0),
        ],
        options=options,
        **kwargs,
    )


def outcome_of(evaluation, state=None, options=OPTS, chain=None, realized=None, flink_cooldown_ms=0):
    d = decide(evaluation, state or JobState(), options, NOW, flink_cooldown_ms=flink_cooldown_ms)
    reason = d.outcome
    if chain is not None and chain.changes is None:
        reason = Reason.SCALING_VETOED
    return JobOutcome(JOB, NOW, reason, d.detail, d, chain, realized)
