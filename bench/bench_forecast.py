"""What the load forecast (``forecast.enabled``, issue 38) costs a tick of a fleet: a micro-benchmark.

N jobs of 10 vertices (a source and 9 more), each with three weeks of 5-minute buckets and a warm
record of scored forecasts (ten such histories, shared by the jobs), through the parts the forecast
adds to a tick:

- ``foresee, open``: the foresee stage on a tick that closes no bucket (most ticks: a sum per job);
- ``foresee, close``: the same on the tick where every job's bucket closes (once per bucket: the
  outlook, the scoring and the choice for every job; buckets are epoch-aligned, so the whole fleet
  closes on the same tick);
- ``write``: that tick's history rows in one SQLite transaction (the record stage's flush);
- ``restore``: a started daemon reading every job's history back (once per process).

Usage: ``.venv/bin/python bench/bench_forecast.py [--jobs 1000] [--repeat 3]``; prints the best of the
repeats per part, in ms.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

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


def best(repeat: int, run: Callable[[], object]) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t)
    return min(times) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    end = 2_000_000  # a bucket index (about 19 years after the epoch)
    t = time.perf_counter()
    warm = [history(j, end) for j in range(min(args.jobs, 10))]  # a day of closes each: slow to make
    histories = {f"c/job-{j}": warm[j % len(warm)] for j in range(args.jobs)}
    setup_s = time.perf_counter() - t
    open_ms = (end * PARAMS.bucket_ms) + 20_000  # inside the open bucket
    close_ms = (end + 1) * PARAMS.bucket_ms + 1_000  # the first tick of the next bucket
    open_tick = Evaluated({f"c/job-{j}": evaluation(j, open_ms) for j in range(args.jobs)})
    close_tick = Evaluated({f"c/job-{j}": evaluation(j, close_ms) for j in range(args.jobs)})
    loaded = Loaded(histories=histories)

    open_cost, _ = best(args.repeat, lambda: foresee(open_tick, loaded, open_ms))
    close_cost, foreseen = best(args.repeat, lambda: foresee(close_tick, loaded, close_ms))
    off_cost, _ = best(args.repeat, lambda: foresee(open_tick, Loaded(), open_ms))
    after = {key: f.history for key, f in foreseen.items()}  # type: ignore[attr-defined]

    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStateStore.from_url(f"sqlite:///{tmp}/state.db")
        full = {key: history_write(None, h) for key, h in histories.items()}
        store.write_load_history({k: w for k, w in full.items() if w is not None})

        def write() -> None:
            writes = {key: history_write(histories[key], h) for key, h in after.items()}
            with store.transaction():
                store.write_load_history({k: w for k, w in writes.items() if w is not None})

        write_cost, _ = best(args.repeat, write)

        def restore() -> dict[str, LoadHistory]:
            rows = store.read_load_history(histories)
            return {key: history_from(key, rows.get(key, []), PARAMS) for key in histories}

        restore_cost, restored = best(args.repeat, restore)
        size = Path(f"{tmp}/state.db").stat().st_size
        store.close()
    same = all(restored[k].series == h.series for k, h in after.items())  # type: ignore[index]
    buckets = len(next(iter(histories.values())).series)
    print(f"{args.jobs} jobs x 10 vertices, {buckets} buckets each (setup {setup_s:.1f} s)")
    print(f"foresee, forecast off:  {off_cost:8.2f} ms")
    print(f"foresee, open bucket:   {open_cost:8.2f} ms")
    print(f"foresee, bucket closes: {close_cost:8.2f} ms")
    print(f"write (SQLite, 1 tx):   {write_cost:8.2f} ms")
    print(f"restore (read + build): {restore_cost:8.2f} ms  (read back equal: {same})")
    print(f"database: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
