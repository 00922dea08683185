"""A repeating load on a real cluster: the daemon scales up ahead of its second peak (issue 38, item 8).

The job runs at ``BASE`` (500 rec/s); from the history's first bucket, the pattern's clock runs:
``FIRST_RISE_S`` (170 s) more at the base, then a peak comes every ``PERIOD_S``
(270 s): the load climbs to ``PEAK`` (2,000 rec/s) in five steps of 300 rec/s ``STEP_S`` (8 s) apart,
as a day's load builds up over hours, and falls back to the base ``PEAK_S`` (60 s) after the climb
began. Work costs 600 us per record, 1,667 rec/s per subtask, and starts at 1: the base keeps it 30 %
busy, a peak needs 2 subtasks. No peak is ever answered by a reaction: the window restarts at the first
step (``metrics.load-change.threshold``, 30 %: the first two steps are above it) and is full again one
``metrics.window`` (80 s) after the last sample before it, at least 74 s after the climb began, by when
the fall (at 60 s) has restarted it again. (With a 40 s window and the peak held 40 s, the window
filled 2 s after the fall and the daemon scaled up on the first peak.)

The history the forecast reads (``forecast.bucket`` 5 s, ``forecast.periods`` 270 s,
``forecast.horizon`` 90 s) is the window's offered rate, a sample late; the ticks (6 s) leave one
bucket in six without a sample, a gap the forecast allows for. Why the second peak can be foreseen
(``autoscaler/foresight/forecast.py``, ``docs/algorithm.md`` 9.1):

- a climb that built up over buckets is foreseen from one period of history (one that came in a jump, a
  step or a flash crowd, needs two); no step here adds more than a fifth of it, and two that fall in one
  bucket not half;
- a basis is trusted once a dozen of its forecasts were scored, and while it learns a forecast is scored
  once a quarter of its horizon has come: the period basis' first prediction needs one period and three
  buckets of history (57 buckets), a dozen are scored 5 + 11 buckets later, 73 buckets (365 s) after
  the history's first one, some 75 s before the second climb (440 s), which it has foreseen from 90 s
  before;
- the first peak is in the history's first period, and the second period's buckets before the second
  climb are compared with the first's before the first: the noise one period apart, which a basis held
  for one period must rise above, is the base load's. (A first peak after a first period of base load
  would be compared with that base, and its whole rise read as noise one period apart.)

Each tick's forecast (or why there is none) is kept from the daemon's decision file and printed, so the
learning can be read off a run.

What is asserted, once the first ``Scaling`` came:

- it names the forecast: Work sized ahead for the forecast peak, basis ``every 270 s`` (the decision's
  detail and the forecast the tick's record carries);
- it was made while the load was at its base, after the first peak's fall, and Flink ran Work at the new
  parallelism (``/jobs/overview``, ``/jobs/:id/plan``) before the harness raised the load for the
  **second** peak: the rescale landed before the rise;
- it is the only rescale (no reaction to the first peak), and no rescale ever scaled a vertex down.

The cost gate (``cost.enabled``, which the forecast's scale-ups pass through) prices waiting at the
forecast's peak against changing now. ``catch-up.duration`` 0 makes every record waiting count as lag:
a restart made later, when more of the peak arrives during its pause, then leaves a longer backlog, so
the cheapest plan changes now rather than just before the job would fall behind (with the 30 min
catch-up bound, a backlog that drains within it costs nothing, and a change later only saves slots: the
rescale would come seconds before the rise).

No wall-clock assertion: "before the rise" compares the instant Flink ran the new parallelism with the
instant the harness raised the load, both read on this machine's clock.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from itertools import count

import pytest
from harness import (
    SOURCE,
    WORK,
    WORK_ID,
    JobWatcher,
    LoadJob,
    Tick,
    TickWatcher,
    log,
    requested_bounds,
    wait_until,
)

from autoscaler.foresight.forecast import period_name

pytestmark = pytest.mark.e2e

BASE, PEAK = 500.0, 2000.0
PERIOD_S = 270
STEP_S = 8  # the climb comes in five steps this far apart: 800, 1,100, 1,400, 1,700, 2,000 rec/s
PEAK_S = 60  # the fall, after the climb began: the window (80 s) fills 74 s or more after it
# The first peak's climb, after the history's first bucket: late enough for the forecast to have learned
# the base before the second climb's (440 s) horizon (about 365 s, the module docstring), and early
# enough for the first peak and the fall of its rate to be over within the history's first period (270
# s). Counted from the load's start instead (195 s), one CI run whose first evaluations came 82 s late
# learned only at the second climb and scaled on it.
FIRST_RISE_S = 170
RISE = (*((i * STEP_S, BASE + 300.0 * (i + 1)) for i in range(5)), (PEAK_S, BASE))
BASIS = period_name(PERIOD_S * 1000)  # every 270 s
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "20 s",
    "job.autoscaler.metrics.window": "80 s",
    "job.autoscaler.forecast.enabled": "true",
    "job.autoscaler.forecast.bucket": "5 s",
    "job.autoscaler.forecast.horizon": "90 s",
    "job.autoscaler.forecast.periods": f"{PERIOD_S} s",
    "job.autoscaler.cost.enabled": "true",
    "job.autoscaler.catch-up.duration": "0 s",
}
CHANGE = re.compile(r"(\S+) (\d+)->(\d+)")


class Pattern:
    """The repeating load, set from a thread of its own at fixed instants: BASE from the start, then from
    ``FIRST_RISE_S`` on every ``PERIOD_S`` the steps of ``RISE``. Keeps when each rise began (its first
    step) and each fall was set."""

    def __init__(self, job: LoadJob) -> None:
        self.job = job
        self.rises: list[float] = []
        self.falls: list[float] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"pattern-{job.name}", daemon=True)

    def __enter__(self) -> Pattern:
        self.started = self.job.set_load(rate=BASE)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        for k in count():
            rise = self.started + FIRST_RISE_S + k * PERIOD_S
            for i, (after, rate) in enumerate(RISE):
                if self._stop.wait(max(0.0, rise + after - time.time())):
                    return
                t = self.job.set_load(rate=rate)
                kept = self.rises if i == 0 else self.falls if rate == BASE else None
                if kept is not None:
                    with self._lock:
                        kept.append(t)

    def rise_after(self, t: float) -> tuple[int, float] | None:
        """The first rise set after ``t``: (which peak, 1 the first; when)."""
        with self._lock:
            return next(((i + 1, r) for i, r in enumerate(self.rises) if r > t), None)

    def level_at(self, t: float) -> float:
        """The load the harness offered at ``t`` (BASE, or PEAK for any step of a rise)."""
        with self._lock:
            rises, falls = [r for r in self.rises if r <= t], [f for f in self.falls if f <= t]
        return PEAK if rises and (not falls or rises[-1] > falls[-1]) else BASE


def _forecast_text(tick: Tick) -> str:
    f = tick.forecast or {}
    if f.get("peak_rate") is not None:
        ahead = f"in {f.get('peak_in_s') or 0:.0f} s from {f['level_rate']:.0f}"
        return f"{f['basis']}: peak {f['peak_rate']:.0f} {ahead}"
    return f"{f.get('none', '-')}: {f.get('detail', '')}"


def _table(ticks: Sequence[Tick], pattern: Pattern) -> str:
    """Each tick: time from the pattern's start, the load offered, outcome, the forecast (or why none)."""
    lines = ["   t(s)  offered  outcome           forecast"]
    for t in ticks:
        lines.append(
            f"  {t.t - pattern.started:6.1f}  {pattern.level_at(t.t):7.0f}  {t.outcome:<17} "
            f"{_forecast_text(t)[:110]}"
        )
    return "\n".join(lines)


def _after_first_bucket(recorder: TickWatcher, pattern: Pattern) -> Pattern:
    """``pattern``, once the daemon's history of the job has closed its first bucket."""

    def begun() -> bool:
        ticks, _ = recorder.snapshot()
        return any(t.forecast and "no bucket has closed" not in t.forecast.get("detail", "x") for t in ticks)

    wait_until("the forecast history's first bucket", begun, 300, every_s=0.5)
    return pattern


@pytest.mark.e2e_seconds(490)
def test_a_repeating_load_is_met_by_a_rescale_ahead_of_its_peak(submit_job, run_daemon, test_dir, timings):
    test = "forecast"
    daemon = run_daemon(OPTIONS)
    job = submit_job(work_parallelism=1, cost_us=600)
    source_id, _ = job.vertex(SOURCE)
    job.set_load(rate=BASE)
    with (
        JobWatcher(job, quiet=True) as watcher,
        TickWatcher(daemon, job, source_id) as recorder,
        # The pattern's clock starts with the history's first bucket: on a busy machine the daemon's
        # first evaluations of the job come a minute late (82 s in one CI run), and every instant of
        # the pattern is counted from the history's start.
        _after_first_bucket(recorder, Pattern(job)) as pattern,
    ):
        scaling = daemon.wait_for_event("Scaling", timeout_s=900)
        put = daemon.put_before(scaling)
        _, target = requested_bounds(scaling, WORK_ID)
        running_at = wait_until(
            f"Work running at parallelism {target}",
            lambda: watcher.first_running_at(WORK, target, after=put["t"] - 1),
            120,
        )
        peak, rise_at = wait_until(
            "the next peak's rise", lambda: pattern.rise_after(put["t"]), PERIOD_S + 30, every_s=0.5
        )
        assert daemon.stop() == 0
    ticks, _ = recorder.snapshot()
    evidence = _table(ticks, pattern)
    log(
        f"{test}: {len(ticks)} ticks, rises at (s) "
        f"{[round(r - pattern.started) for r in pattern.rises]}\n{evidence}"
    )
    (test_dir / "ticks.json").write_text(
        json.dumps({"started": pattern.started, "rises": pattern.rises, "ticks": [asdict(t) for t in ticks]})
    )

    foreseen = [t for t in ticks if t.forecast and t.forecast.get("peak_rate") is not None]
    decided = next(d for d in daemon.decisions() if d.get("outcome") == "Scaling")
    said = next((t for t in ticks if t.outcome == "Scaling"), None)
    if foreseen:
        timings.add(test, "load pattern start -> first forecast of a rise", foreseen[0].t - pattern.started)
    timings.add(test, f"load pattern start -> Scaling (ahead of peak {peak})", scaling["t"] - pattern.started)
    timings.add(test, "PUT -> Work running at its new parallelism", running_at - put["t"])
    timings.add(test, f"Work running at {target} -> the load rises", rise_at - running_at)

    # The rescale names the forecast: Work sized ahead for the period's peak.
    assert "sized ahead for the forecast peak" in decided["detail"] and BASIS in decided["detail"], (
        decided,
        evidence,
    )
    assert said is not None and said.forecast is not None and said.forecast.get("basis") == BASIS, evidence
    assert said.forecast["peak_rate"] > said.forecast["level_rate"], said.forecast
    assert target > 1, scaling
    # Made at the base load, after a peak's fall; running before the next rise.
    assert pattern.level_at(put["t"]) == BASE, (put, pattern.rises, pattern.falls)
    assert pattern.rises and pattern.rises[0] < put["t"], "a peak came before: nothing was foreseen"
    assert peak == 2, f"ahead of peak {peak}, not the second\n{evidence}"
    assert running_at < rise_at, (running_at, rise_at, evidence)
    # The only rescale (no reaction to an earlier peak), and never a scale-down.
    assert len(daemon.events("Scaling")) == 1, (daemon.events("Scaling"), evidence)
    assert [p for _, p in watcher.running_parallelisms(WORK)] == [1, target], evidence
    downs = [
        (d["detail"], m.group(0))
        for d in daemon.decisions()
        if d.get("outcome") == "Scaling"
        for m in CHANGE.finditer(d["detail"])
        if int(m.group(3)) < int(m.group(2))
    ]
    assert not downs, downs
