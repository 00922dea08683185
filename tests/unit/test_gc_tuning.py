"""The daemon's collector thresholds (autoscaler/gc_tuning.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from autoscaler.gc_tuning import GC_THRESHOLDS, tune_gc


@pytest.fixture
def restored_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored_thresholds")
def test_tune_gc_sets_the_daemons_thresholds_and_returns_the_replaced_ones() -> None:
    gc.set_threshold(700, 10, 10)
    assert tune_gc() == (700, 10, 10)
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.isenabled()  # rarer, never off: reference cycles are still collected
