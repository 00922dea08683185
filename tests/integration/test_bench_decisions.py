"""The decision-quality benchmark's runner (``bench/decisions.py``) on one short trace, and its doc writer.

The runner drives the real daemon against the simulator over HTTP on a fake clock, so this checks that
what the benchmark scores comes from a real run: a step up makes the daemon rescale, the scores see the
restart, the time to converge and the backlog the step built. Behaviour only: no timings.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from autoscaler.evaluate.spark.evaluator import SparkEvaluator
from autoscaler.settings.profiles import PROFILES
from autoscaler.simulator.spec import Steps

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """The benchmark's modules, imported the way the script imports them (from ``bench/``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("decisions"), importlib.import_module("bench_decisions")


@pytest.mark.spark
async def test_a_step_up_is_scored_from_the_simulated_cluster(bench: Any, spark: Any) -> None:
    decisions, _ = bench
    # Work at 2 (1500 rec/s is 60 % busy), then twice the load: it needs 4 at the 0.7 yardstick.
    trace = decisions.Trace(
        "short-step",
        "1500 -> 3000 rec/s",
        Steps([(0, 1500), (120, 3000)]),
        duration_s=360,
        sized_for=1500,
        change_at_s=120,
        step_changes=1,
    )
    profile = {"recommended": PROFILES["recommended"]}

    (run,) = await decisions.run_traces([trace], profile, SparkEvaluator(spark))
    quality = decisions.score(run)

    assert [r.t_s for r in run.readings] == [float(t) for t in range(361)]  # one reading a second
    assert run.readings[0].slots == 2 and run.readings[-1].optimum == 4
    assert quality.warm_up_restarts == 0  # right-sized before the change
    assert quality.restarts >= 1 and run.rescales[0].after > run.rescales[0].before
    assert quality.converge_s is not None and 0 < quality.converge_s < trace.duration_s - trace.change_at_s
    assert quality.final_slots >= 3
    assert quality.backlog_s > 0  # the load outran Work until the rescale, and the restart paused it
    assert quality.reversals == 0
    assert math.isfinite(quality.overprovision_pct) and quality.overprovision_pct >= 0
    assert quality.ticks > 0 and {n.outcome for n in run.notes} >= {"Scaling"}


def test_the_doc_section_is_replaced_and_the_rest_of_the_file_kept(bench: Any, tmp_path: Path) -> None:
    _, cli = bench
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## Evaluator\n\nkept\n", encoding="utf-8")

    cli.write_doc("## Decision quality\n\nfirst\n", doc)
    cli.write_doc("## Decision quality\n\nsecond\n", doc)

    text = doc.read_text(encoding="utf-8")
    assert text == "# Performance\n\n## Evaluator\n\nkept\n\n## Decision quality\n\nsecond\n"
