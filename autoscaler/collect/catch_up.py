"""When a source's observed true processing rate counts: once it has caught up for a minute (ours).

A catching-up source's observed TPR (reference ``OBSERVED_TPR``) divides its ``numRecordsInPerSecond``
by its unpressured share of time, ``1 - backPressuredTimeMsPerSecond / 1000``. Both are Flink's 60 s
views: a ``MeterView`` and a ``TimerGauge`` that average the last minute. The quotient is the source's
capacity only when the source ran flat out for that whole minute, that is, when it was catching up
throughout. Right after a load step the minute still holds the calm before it, when the source read what
it was offered, well below what it can: on the lab cluster a source whose capacity is far above
4,000 rec/s was measured at 703 rec/s five samples into a window restarted at the step, and sized
1 -> 9. The simulator's meters behave the same (1 -> 8). After a (re)start the meter ramps from zero
for a minute, which under-states the rate in the same way.

So a sample's observed TPR counts only once the source has been catching up for ``settle_ms``
(``observed-true-processing-rate.settle-time``, 60 s) in a row and its job has been running that long;
before that it is NaN (not measured), as when the source is not catching up at all. The reference counts
every catching-up sample (``settle_ms`` 0). The busy-time TPR, or the observed samples of a minute later,
size the source instead.

The cluster's :class:`~autoscaler.collect.freshness.FetchBook` holds the book, which remembers, per
job run, since when each source has been catching up. In memory only: after a daemon restart a
catching-up source waits ``settle_ms`` again, the safe side. The stored window holds the samples as
settled here, so a restarted daemon replays what its predecessor decided on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from autoscaler.model import VertexSample

__all__ = ["CatchUpBook"]


@dataclass(slots=True)
class _JobRun:
    running_since_ms: int
    since_ms: dict[str, int] = field(default_factory=dict)  # source vertex -> first catching-up sample


class CatchUpBook:
    """Per job run, since when each of its sources has been catching up; one per cluster."""

    def __init__(self) -> None:
        self._runs: dict[str, _JobRun] = {}

    def settle(
        self,
        job_key: str,
        *,
        running_since_ms: int,
        ts_ms: int,
        vertices: Mapping[str, VertexSample],
        settle_ms: int,
    ) -> Mapping[str, VertexSample]:
        """``vertices`` with the observed TPR of each source that has not settled yet read as NaN.

        A finite observed TPR means the source is catching up in this sample; NaN that it is not, which
        ends its run of catching up; +inf (no input at all) is not catching up either, and counts once
        the job has run ``settle_ms``, since a meter that ramps after a start can read 0 too.
        """
        run = self._runs.get(job_key)
        if run is None or run.running_since_ms != running_since_ms:
            run = self._runs[job_key] = _JobRun(running_since_ms)  # a new job run: its meters restart
        if settle_ms <= 0:
            return vertices
        started = ts_ms - running_since_ms >= settle_ms
        settled: dict[str, VertexSample] | None = None
        for vid, sample in vertices.items():
            observed = sample.observed_tpr
            if math.isnan(observed):
                run.since_ms.pop(vid, None)
                continue
            if math.isinf(observed):
                run.since_ms.pop(vid, None)
                trusted = started
            else:
                since = run.since_ms.setdefault(vid, ts_ms)
                trusted = started and ts_ms - since >= settle_ms
            if not trusted:
                settled = settled if settled is not None else dict(vertices)
                settled[vid] = replace(sample, observed_tpr=math.nan)
        return vertices if settled is None else settled

    def forget(self, job_keys: Iterable[str]) -> None:
        for key in job_keys:
            self._runs.pop(key, None)
