"""A repeating load on a real cluster: the daemon scales up ahead of a later peak (issue 38, item 8).

The load repeats every ``PERIOD_S`` (90 s): ``BASE`` (500 rec/s) with a ``PEAK`` (2,000 rec/s) of
``PEAK_S`` (24 s). Work costs 800 us per record, 1,250 rec/s per subtask, and starts at 1: the base
keeps it 40 % busy, a peak needs 2 or 3 subtasks. No peak is ever answered by a reaction: the window
restarts at the rise (``metrics.load-change.threshold``) and is full again one ``metrics.window`` (40 s)
after the last sample before it, at least 34 s after the rise, by when the fall (at 24 s) has restarted
it again. (With a 30 s window, one run in three decided on a sample that held only 2 s of the fall, too
little to tell a change, and scaled up on the first peak.) The history the forecast reads
(``forecast.bucket`` 10 s, ``forecast.periods`` 90 s, ``forecast.horizon`` 50 s) is the window's offered
rate, so its peak is the load's, a sample late.

With today's forecast (``autoscaler/foresight/forecast.py``) the period basis speaks from its fifth
peak or so, not its second: this peak comes in a jump, which it foresees from the same time one and two
periods ago (of two, the lower; a rise that builds up over buckets, as a day's does, is foreseen from one
period), so only once the history holds two periods and three buckets, and it is trusted only after 12
of its forecasts were scored, each a horizon after it was made: 2 x 9 + 3 + 11 + 5 = 37 buckets (370 s)
after the history's first one (about 35 s after the load began). Each tick's forecast (or why there is
none) is kept from the daemon's decision file and printed, so the learning can be read off a run.

What is asserted, once the first ``Scaling`` came:

- it names the forecast: Work sized ahead for the forecast peak, basis ``every 90 s`` (the decision's
  detail and the forecast the tick's record carries);
- it was made while the load was at its base, after a peak's fall, and Flink ran Work at the new
  parallelism (``/jobs/overview``, ``/jobs/:id/plan``) before the harness raised the load for the next
  peak: the rescale landed before the rise;
- it is the only rescale (no reaction to any earlier peak), and no rescale ever scaled a vertex down.

The cost gate (``cost.enabled``, which the forecast's scale-ups pass through) prices waiting at the
forecast's peak against changing now. ``catch-up.duration`` 0 makes every record waiting count as lag:
a restart made later, when more of the peak arrives during its pause, then leaves a longer backlog, so
the cheapest plan changes now rather than just before the job would fall behind (with the 30 min
catch-up bound, a backlog that drains within it costs nothing, and a change later only saves slots: the
rescale would come seconds before the rise). ``forecast.max-error`` is 0.5: a peak 2.4 buckets long is
foreseen through a three-bucket mean, about 20 % under the highest bucket that then comes.

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

pytestmark = pytest.mark.e2e

BASE, PEAK = 500.0, 2000.0
PERIOD_S = 90
PEAK_S = 24  # the window (40 s) fills 34 s or more after the rise, long after the fall: no reaction
# The first peak's rise, after the pattern starts. The forecast is learned about 405 s in (the module
# docstring): the fifth rise, at 440 s, comes a horizon later, so the forecast sees all of that peak,
# and the window, restarted by the fourth peak's fall (at 374 s), is full again at about 410 s. A
# learning 30 s faster still comes after the fourth rise (350 s), with nothing to foresee before it.
FIRST_RISE_S = 80
BASIS = f"every {PERIOD_S} s"
OPTIONS = {
    "job.autoscaler.enabled": "true",
    "job.autoscaler.stabilization.interval": "20 s",
    "job.autoscaler.metrics.window": "40 s",
    "job.autoscaler.forecast.enabled": "true",
    "job.autoscaler.forecast.bucket": "10 s",
    "job.autoscaler.forecast.horizon": "50 s",
    "job.autoscaler.forecast.periods": f"{PERIOD_S} s",
    "job.autoscaler.forecast.max-error": "0.5",
    "job.autoscaler.cost.enabled": "true",
    "job.autoscaler.catch-up.duration": "0 s",
}
CHANGE = re.compile(r"(\S+) (\d+)->(\d+)")


class Pattern:
    """The repeating load, set from a thread of its own at fixed instants: BASE from the start, PEAK
    for ``PEAK_S`` every ``PERIOD_S`` from ``FIRST_RISE_S`` on. Keeps when each rise and fall was set."""

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
            for at, rate, kept in ((rise, PEAK, self.rises), (rise + PEAK_S, BASE, self.falls)):
                if self._stop.wait(max(0.0, at - time.time())):
                    return
                t = self.job.set_load(rate=rate)
                with self._lock:
                    kept.append(t)

    def rise_after(self, t: float) -> tuple[int, float] | None:
        """The first rise set after ``t``: (which peak, 1 the first; when)."""
        with self._lock:
            return next(((i + 1, r) for i, r in enumerate(self.rises) if r > t), None)

    def level_at(self, t: float) -> float:
        """The load the harness offered at ``t``."""
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


@pytest.mark.e2e_seconds(470)
def test_a_repeating_load_is_met_by_a_rescale_ahead_of_its_peak(submit_job, run_daemon, test_dir, timings):
    test = "forecast"
    daemon = run_daemon(OPTIONS)
    job = submit_job(work_parallelism=1, cost_us=800)
    source_id, _ = job.vertex(SOURCE)
    with (
        JobWatcher(job, quiet=True) as watcher,
        TickWatcher(daemon, job, source_id) as recorder,
        Pattern(job) as pattern,
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
