"""What the load forecast (``forecast.enabled``, issue 38) costs a tick of a fleet: a micro-benchmark.

N jobs of 10 vertices (a source and 9 more), each with three weeks of 5-minute buckets and a warm
record of scored forecasts (ten such histories, shared by the jobs), through the parts the forecast
adds to a tick:

- ``foresee``: the foresee stage on each tick of one bucket (every job's bucket closes on one of
  them, its own phase: a sum per job on the other ticks, the outlook, the scoring and the choice on
  that one);
- ``write``: each tick's history rows in one SQLite transaction (the record stage's flush);
- ``restore``: a started daemon reading every job's history back (once per process).

Usage: ``.venv/bin/python bench/bench_forecast.py [--jobs 1000] [--interval-s 10]``; prints ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from autoscaler.evaluate.stage import Evaluated  # noqa: E402
from autoscaler.foresight.forecast import ForecastParams  # noqa: E402
from autoscaler.foresight.history import LoadHistory  # noqa: E402
from autoscaler.foresight.series import LoadSeries  # noqa: E402
from autoscaler.model import JobEvaluation, JobRef  # noqa: E402
from autoscaler.settings import AutoscalerOptions  # noqa: E402
from autoscaler.state.load_history import history_from, history_write  # noqa: E402
from autoscaler.state.sql import SqlStateStore  # noqa: E402
from autoscaler.state.tick import Loaded  # noqa: E402
from autoscaler.testing import make_sample, make_topology, vertex_eval  # noqa: E402
from autoscaler.tick.foresee import foresee  # noqa: E402

OPTIONS = AutoscalerOptions(enabled=True, forecast_enabled=True)
PARAMS = ForecastParams.of(OPTIONS)
DAY = 86_400_000 // PARAMS.bucket_ms
T = TypeVar("T")
NAMES = [f"v{i}" for i in range(10)]
TOPOLOGY = make_topology({n: 2 for n in NAMES}, [(a, b, "HASH") for a, b in itertools.pairwise(NAMES)])


def history(job: int, end: int) -> LoadHistory:
    """Three weeks of a noisy daily cycle up to bucket ``end``, then a day's worth of ticks through
    ``observe`` so the record of scored forecasts is warm."""
    start = end - 3 * 7 * DAY
    rates = [
        1000 * (1 - 0.5 * math.cos(2 * math.pi * i / DAY)) * (1 + 0.02 * math.sin(i * 7.1 + job))
        for i in range(start, end - DAY)
    ]
    h = LoadHistory(LoadSeries(PARAMS.bucket_ms, start, array("f", rates).tobytes()))
    for i in range(end - DAY, end + 1):
        h = h.observe(i * PARAMS.bucket_ms, 1000 * (1 - 0.5 * math.cos(2 * math.pi * i / DAY)), PARAMS)
    return h


def evaluation(job: int, ts_ms: int) -> JobEvaluation:
    ref = JobRef("c", f"{job:032x}", f"job-{job}")
    sample = make_sample(TOPOLOGY, job=ref, ts_ms=ts_ms, options=OPTIONS)
    vertices = {vid: vertex_eval(vid, 2, tdr=1000.0) for vid in TOPOLOGY.vertices}
    return JobEvaluation(sample, vertices, processing_backlog=False, window_samples=10, window_full=True)


def timed(run: Callable[[], T]) -> tuple[float, T]:
    t = time.perf_counter()
    out = run()
    return (time.perf_counter() - t) * 1000, out


def phased(h: LoadHistory, key: str) -> LoadHistory:
    """``h`` on the job's own bucket phase (what ``ForecastParams.of(options, key)`` gives it)."""
    phase = ForecastParams.of(OPTIONS, key).phase_ms
    return dataclasses.replace(h, series=dataclasses.replace(h.series, phase_ms=phase))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--interval-s", type=int, default=10, help="the control loop's interval")
    args = parser.parse_args()
    end = 2_000_000  # a bucket index (about 19 years after the epoch)
    t = time.perf_counter()
    warm = [history(j, end) for j in range(min(args.jobs, 10))]  # a day of closes each: slow to make
    keys = [f"c/job-{j}" for j in range(args.jobs)]
    histories = {key: phased(warm[j % len(warm)], key) for j, key in enumerate(keys)}
    setup_s = time.perf_counter() - t
    start_ms = (end + 1) * PARAMS.bucket_ms  # every job's bucket `end` is open, then closes once
    ticks = [
        start_ms + i * args.interval_s * 1000 for i in range(PARAMS.bucket_ms // (args.interval_s * 1000))
    ]
    off = Evaluated({key: evaluation(j, ticks[0]) for j, key in enumerate(keys)})
    off_ms = min(timed(lambda: foresee(off, Loaded(), ticks[0]))[0] for _ in range(3))

    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStateStore.from_url(f"sqlite:///{tmp}/state.db")
        full = {key: history_write(None, h) for key, h in histories.items()}
        store.write_load_history({k: w for k, w in full.items() if w is not None})
        per_tick, closed = [], []
        for now in ticks:  # one bucket of ticks: each job's bucket closes on one of them
            tick = Evaluated({key: evaluation(j, now) for j, key in enumerate(keys)})
            loaded = Loaded(histories=histories)
            foresee_ms, foreseen = timed(lambda: foresee(tick, loaded, now))  # noqa: B023
            after = {key: f.history for key, f in foreseen.items()}

            def write() -> int:
                writes = {key: history_write(histories[key], h) for key, h in after.items()}  # noqa: B023
                writes = {k: w for k, w in writes.items() if w is not None}
                with store.transaction():
                    store.write_load_history(writes)
                return len(writes)

            write_ms, written = timed(write)
            per_tick.append((foresee_ms, write_ms))
            closed.append(written)
            histories = after

        def restore() -> dict[str, LoadHistory]:
            rows = store.read_load_history(histories)
            return {
                key: history_from(key, rows.get(key, []), ForecastParams.of(OPTIONS, key)) for key in keys
            }

        restore_ms, restored = timed(restore)
        size = Path(f"{tmp}/state.db").stat().st_size
        store.close()
    same = all(restored[k].series == h.series for k, h in histories.items())
    buckets = len(next(iter(histories.values())).series)
    foresees, writes = [f for f, _ in per_tick], [w for _, w in per_tick]
    print(f"{args.jobs} jobs x 10 vertices, {buckets} buckets each (setup {setup_s:.1f} s)")
    print(f"foresee, forecast off:       {off_ms:8.2f} ms per tick")
    print(
        f"{len(ticks)} ticks of {args.interval_s} s (one bucket), jobs whose bucket closed per tick: "
        f"{min(closed)} to {max(closed)}, {sum(closed)} in all"
    )
    print(
        f"foresee per tick:            {statistics.mean(foresees):8.2f} ms mean, {max(foresees):8.2f} ms max"
    )
    print(f"write per tick (SQLite, tx): {statistics.mean(writes):8.2f} ms mean, {max(writes):8.2f} ms max")
    print(f"over the bucket:             {sum(foresees):8.2f} ms foresee, {sum(writes):8.2f} ms write")
    print(f"restore (read + build):      {restore_ms:8.2f} ms  (read back equal: {same})")
    print(f"database: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
