"""Metric values that cannot be: a negative or impossibly large count, rate, time or lag is read as
unknown (NaN).

Every field of a :class:`~autoscaler.model.VertexSample` is a cumulative counter, a per-second rate, a
busy/back-pressured share or a backlog: none of them can be negative. A negative one is a fault between
Flink and the daemon (a proxy, a metric reporter, a TaskManager answering with garbage), and read as a
number it becomes a rate: a busy-time counter that came back negative for 15 s made a window's busy
rate huge and its processing capacity tiny, and the job was scaled 4 -> 18 after the fault had ended
(issue 12). Read as NaN it is a hole: the window's rates span the good points around it (the reference's
``getRate`` takes the first and last non-NaN points), and a tick whose rates are unknown ends
``MetricsUnknown``. Each such value is named in a warning with its kind (negative, infinite, too large)
and counted by kind (``flink_autoscaler_invalid_metric_values_total{kind=...}``).

Too large is just as impossible, and just as dangerous: a ``pendingRecords`` of 1e300 is a catch-up
rate no parallelism can reach, and every vertex went to its maximum (the fault matrix). Flink's counts,
lags and gauges are Java longs, so nothing summed over a job's subtasks reaches 2^63; a share of a
second (busy, back-pressured ms/s: the aggregators are average, minimum and maximum over subtasks) never
exceeds 1000 ms (a tenth more is allowed for timer jitter).

A counter that falls between two samples of one job run (a reset without a restart) is the window's to
handle: no rate may span it (``evaluate/window/readings.py`` tells it, ``job_window.py`` starts the window
over).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace

from autoscaler.model import InvalidValue, VertexId, VertexSample

__all__ = [
    "KINDS",
    "LARGEST",
    "describe_invalid",
    "without_impossible",
]

LARGEST = float(2**63)
"""No count, lag or rate of a Flink job reaches a Java long's range (module doc)."""
_SHARE_OF_A_SECOND = ("busy_time_ms_per_s", "backpressured_ms_per_s")
_LARGEST_SHARE_MS = 1100.0
_DERIVED = ("observed_tpr",)  # computed by the collector, not read: infinite when nothing was busy

NEGATIVE, INFINITE, TOO_LARGE = "negative", "infinite", "too_large"
KINDS = (NEGATIVE, INFINITE, TOO_LARGE)
"""What can be wrong with a value, in the warning's words and the counter's ``kind`` label: a value of
1e308 is named too large, not negative (issue 35)."""


def _fault(name: str, value: float) -> tuple[str, str] | None:
    """The value's kind of impossible and why, in words; None when it can be. NaN compares false
    throughout: unknown stays unknown, and is not counted."""
    if math.isinf(value):
        if name in _DERIVED and value > 0:
            return None
        return INFINITE, "infinite"
    if value < 0:
        return NEGATIVE, "negative"
    if name in _DERIVED:
        return None
    if value >= LARGEST:
        return TOO_LARGE, "too large: at or above 2^63, beyond any Java long Flink reports"
    if name in _SHARE_OF_A_SECOND and value > _LARGEST_SHARE_MS:
        return TOO_LARGE, f"too large: a share of a second above {_LARGEST_SHARE_MS:g} ms/s"
    return None


def without_impossible(
    vertices: Mapping[VertexId, VertexSample], names: Mapping[VertexId, str]
) -> tuple[dict[VertexId, VertexSample], tuple[InvalidValue, ...]]:
    """The samples with every negative, infinite or impossibly large value replaced by NaN, and what
    was replaced, each with its kind."""
    out: dict[VertexId, VertexSample] = {}
    invalid: list[InvalidValue] = []
    for vid, sample in vertices.items():
        bad = {
            f.name: (value, fault)
            for f in fields(sample)
            if isinstance(value := getattr(sample, f.name), float) and (fault := _fault(f.name, value))
        }
        out[vid] = replace(sample, **dict.fromkeys(bad, math.nan)) if bad else sample
        vertex = names.get(vid, vid)
        invalid.extend(InvalidValue(vertex, name, value, *fault) for name, (value, fault) in bad.items())
    return out, tuple(invalid)


def describe_invalid(values: Sequence[InvalidValue]) -> str:
    """The warning's detail: how many of each kind, and what became of them."""
    counts = Counter(v.kind for v in values)
    said = ", ".join(f"{counts[kind]} {kind.replace('_', ' ')}" for kind in KINDS if counts[kind])
    return f"metric values that cannot be ({said}) read as unknown (NaN): no rate is taken from them"
