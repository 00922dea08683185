"""What the window compares between a job's samples: its cumulative counters, and which metrics it knows.

Two readings of a collected sample that the window's rules (:mod:`autoscaler.evaluate.window.job_window`)
hold against the job's earlier samples, and :class:`~autoscaler.evaluate.window.book.WindowBook` takes
from each sample: a record counter that fell within one job run is a reset without a restart, and no rate
may span it (the window starts over); a metric known now but not early in the window is known over part
of it only, and the window is not full until it has been known over half of it (``KNOWN_REACH``).
Not in ``collect/sanity.py``, which judges one value at a time as it is collected: these compare samples
across ticks, which is the window's business.
"""

from __future__ import annotations

import math

from autoscaler.model import JobSample

__all__ = ["COUNTERS", "EVALUATED", "counters_fell", "known_metrics", "sample_counters"]


COUNTERS = ("num_records_in", "num_records_out")
"""The cumulative fields of a :class:`~autoscaler.model.VertexSample` that never fall within a run.

Not the accumulated busy time: Flink computes it as the time since the task started minus its idle and
back-pressured time, and an idle period is added to the idle time only when it ends, so the busy time
grows through an idle period and falls back when it ends (on the lab cluster, every few ticks at 64 %
busy). Its sum with idle and back-pressured time never falls (``collect/freshness.py`` times readings
by it)."""


def sample_counters(sample: JobSample) -> tuple[float, ...]:
    """A sample's cumulative counters, vertex by vertex in a stable order (NaN where unknown)."""
    vertices = sample.vertices
    return tuple(getattr(vertices[vid], name) for vid in sorted(vertices) for name in COUNTERS)


def counters_fell(before: tuple[float, ...], after: tuple[float, ...]) -> bool:
    """Whether some counter known in both samples is lower in the second (unknown ones never count)."""
    return len(before) == len(after) and any(b > a for b, a in zip(before, after, strict=True))


EVALUATED = (
    "busy_time_ms_per_s",
    "accumulated_busy_time_ms",
    "accumulated_busy_time_agg_ms",
    "num_records_in",
    "num_records_out",
)
"""The read fields whose window rates or averages size a vertex and may come and go with a fault.

Not the lag (a source's ``pendingRecords`` may be missing for a partition while its reader starts) nor
the derived observed rate (unknown whenever nothing was busy): neither going missing for a while is a
fault, and the window must not wait for them."""


def known_metrics(sample: JobSample) -> int:
    """A bit per vertex and :data:`EVALUATED` field, in a stable order, set where the value is known."""
    bits, bit = 0, 1
    vertices = sample.vertices
    for vid in sorted(vertices):
        v = vertices[vid]
        for name in EVALUATED:
            if not math.isnan(getattr(v, name)):
                bits |= bit
            bit <<= 1
    return bits
