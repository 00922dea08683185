"""One evaluator's results equal another's: the Spark evaluator against the plain-Python oracle.

Floats within rel 1e-9 (NaN == NaN), everything else exactly. Registered for pytest's assert rewriting
(tests/conftest.py), so a failed comparison shows its values as a test's own assert would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple
from typing import Any

import pytest

from autoscaler.model import JobEvaluation


def close(actual: Any, expected: Any) -> bool:
    """Dataclasses equal field by field: floats within rel 1e-9 (NaN == NaN), everything else exactly."""
    pairs = list(zip(astuple(actual), astuple(expected), strict=True))
    floats = [(x, y) for x, y in pairs if isinstance(y, float)]
    others = [(x, y) for x, y in pairs if not isinstance(y, float)]
    return all(x == y for x, y in others) and [x for x, _ in floats] == pytest.approx(
        [y for _, y in floats], rel=1e-9, nan_ok=True
    )


def assert_same_custom(
    ours: Mapping[str, Mapping[str, tuple[float, float]]],
    theirs: Mapping[str, Mapping[str, tuple[float, float]]],
    key: str,
) -> None:
    """Same scopes and names; (current, average) within rel 1e-9, NaN == NaN."""
    assert {s: set(m) for s, m in ours.items()} == {s: set(m) for s, m in theirs.items()}, key
    for scope, per_name in ours.items():
        for name, pair in per_name.items():
            assert list(pair) == pytest.approx(list(theirs[scope][name]), rel=1e-9, nan_ok=True), (
                key,
                scope,
                name,
            )


def assert_same(spark_evs: Mapping[str, JobEvaluation], oracle_evs: Mapping[str, JobEvaluation]) -> None:
    assert spark_evs.keys() == oracle_evs.keys()
    for key, ours in spark_evs.items():
        theirs = oracle_evs[key]
        assert (ours.window_samples, ours.window_full, ours.not_ready, ours.processing_backlog) == (
            theirs.window_samples,
            theirs.window_full,
            theirs.not_ready,
            theirs.processing_backlog,
        ), key
        assert ours.restart_time_s == pytest.approx(theirs.restart_time_s, nan_ok=True), key
        assert (ours.not_ready_detail, ours.evaluator_failures) == (
            theirs.not_ready_detail,
            theirs.evaluator_failures,
        ), key
        assert_same_custom(ours.custom_metrics, theirs.custom_metrics, key)
        assert ours.vertices.keys() == theirs.vertices.keys(), key
        for vid, ev in ours.vertices.items():
            assert close(ev, theirs.vertices[vid]), (key, vid, ev, theirs.vertices[vid])
