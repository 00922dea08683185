"""The tick-CPU A/B benchmark's pieces that decide what it reports: the order of its runs, one run's
figures, and the table. The benchmark itself is a script (``bench/bench_tick_cpu.py``); no timings
are asserted here, only that every figure is there and adds up."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The benchmark, imported the way the script runs (from ``bench/``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("bench_tick_cpu")


def test_runs_alternate_so_each_side_goes_first_as_often(bench: ModuleType) -> None:
    assert bench.order(1) == ["base", "this"]
    assert bench.order(2) == ["base", "this", "this", "base"]
    runs = bench.order(4)
    assert runs.count("base") == runs.count("this") == 4
    firsts = [runs[k] for k in range(0, len(runs), 2)]
    assert firsts.count("base") == firsts.count("this")


def test_a_run_gives_every_stage_of_every_tick_and_the_simulators_share(bench: ModuleType) -> None:
    """A small fleet through the real tick in this process: each tick's row has every figure, the
    stages fit in the tick's CPU, and the simulator's answers are part of the collect stage."""
    rows = bench.measure(jobs=3, ticks=3)
    assert len(rows) == 3
    for row in rows:
        assert set(row) >= {"tick", "simulator", "collect, the daemon's part", *bench.STAGES}
        assert all(value >= 0 for key, value in row.items() if key != "collect, the daemon's part")
        assert 0 < row["simulator"] <= row["collect"]


def test_the_table_has_a_row_per_figure_with_both_sides_and_the_difference(bench: ModuleType) -> None:
    def row(tick: float) -> dict[str, float]:
        figures = {s: 0.1 for s in bench.STAGES} | {"simulator": 0.05, "collect, the daemon's part": 0.05}
        return figures | {"tick": tick}

    runs = {"base": [[row(9.0), row(1.0), row(1.0)]], "this": [[row(9.0), row(1.2), row(1.4)]]}
    table = bench.summarize(runs, skip=1)
    tick = next(line for line in table if line.startswith("| tick |"))
    assert tick == "| tick | 1.000 (1.000-1.000) | 1.300 (1.300-1.300) | +0.300 (+30.0 %) |"
    assert len(table) == 2 + 2 + 1 + len(bench.STAGES)
