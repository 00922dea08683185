"""The daemon's garbage-collector thresholds: young collections rarer, full ones only now and then.

CPython's default thresholds, (700, 10, 10), run a young collection every 700 net allocations and a
full one every 100 young ones once the objects that survived since the last full one are a quarter of
the rest. The daemon keeps each job's metric window as Python objects (10,000 jobs x 10 vertices x 12
samples: over a million) and a tick allocates hundreds of thousands more (every REST answer parsed,
every sample, every result), many of which live until the tick ends. Full collections, which walk all
of them, then come every tick, several times. Measured with the ``gc`` module's callbacks on this
project's 2-core machine (docs/performance.md, "Fleet" and "Evaluator"):

* the collect stage of 1,000 jobs x 10 vertices (11,000 REST answers) ran 2-4 full collections and
  some 400 younger ones, 0.5-0.8 s of its 3.2-3.5 s of CPU; with :data:`GC_THRESHOLDS`, one young
  collection (0.1 s), and its CPU fell to 2.6-2.9 s;
* the Spark evaluator's tick of 10,000 jobs x 10 vertices (``bench/bench_evaluator.py``) ran 2-3 full
  collections (0.36-0.47 s) and some 440 younger ones (0.1 s); with them, 6 young ones (0.1 s).

The garbage the daemon makes is almost all free of reference cycles (frozen dataclasses, dicts of
floats, Arrow and JSON buffers), which reference counting frees at once, so rarer collections hold
back little memory; the cycles there are (exceptions with tracebacks, asyncio tasks) are collected by
the young collections, which still run every 50,000 allocations.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> tuple[int, int, int]:
    """Set :data:`GC_THRESHOLDS` for this process; returns the thresholds it replaced."""
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    return previous
