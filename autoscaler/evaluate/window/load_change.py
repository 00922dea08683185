"""Telling a change of the offered load from noise and blips (ours, ``metrics.load-change.threshold``).

A window half full of the old load averages two loads: after a step up it under-estimates the new rate
(one restart too few), after a step down it over-estimates it, and the scale-down delay then keeps the
largest of those half-old recommendations, so a job steps down one restart at a time. So the window
(``evaluate/window/job_window.py``) restarts at the first sample of the new load. The detector compares the
offered rate of each of the two newest intervals with the rate over the rest of the window; the offered
rate is what the
sources took in plus what their backlog grew by (``numRecordsIn + pendingRecords``), so a
back-pressured job shows its real load. After a change the window must fill again before a decision,
which also lets a burst shorter than the window pass without a restart (its backlog is caught up
afterwards). Noise cannot trigger it: with the rate within +-x % of a level the largest relative
difference is 2x/(1+x), 26 % for +-15 %, under the default 30 %; and both of the two newest intervals
must show the change, so one odd interval does not.

Until the second interval has told, a full window whose newest interval alone moved past the threshold
is *changing*: a decision on it would size the job from a window one interval into a step (a step up
by 4 then took two restarts on the benchmark, 1 -> 2 -> 4). The window waits that one interval
(``LoadChanging``): a change restarts it, a blip leaves it as it was and it decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.model import JobSample

__all__ = ["load_changed", "load_changing", "offered_records"]


def offered_records(sample: JobSample) -> float:
    """The records the job's sources were offered so far: taken in plus still pending.

    Its rate is the offered load whether or not the job keeps up (a back-pressured source takes in
    less and its backlog grows by the rest). NaN if a source's input or backlog is unknown in this
    sample: a hole read as 0 would look like a load change. So a job whose sources report no backlog
    (``pendingRecords``) gets no load-change detection, only the reference's window.
    """
    topology = sample.topology
    fed = {e.target for e in topology.edges}  # not topology.is_source: that scans the edges per vertex
    total = 0.0
    for vid in topology.vertices:
        if vid in fed:
            continue
        v = sample.vertices.get(vid)
        if v is None:
            return math.nan
        total += v.num_records_in + v.pending_records
    return total


def load_changing(points: Sequence[tuple[int, float]], threshold: float) -> bool:
    """Whether the offered rate of the newest interval alone differs from the rate over the rest of the
    window by more than ``threshold`` of the larger of the two: a load change may be starting.

    A decision on that window would average two loads (the newest interval is the first of the new
    one), and the next interval tells a change (:func:`load_changed`, the window restarts) from a blip
    (the window decides as it is). Waiting costs one interval; deciding costs a second restart when it
    was a change: a step up sized from a window one interval into the step, then again from the next.
    """
    if threshold <= 0 or len(points) < 3:
        return False
    (t0, a0), (tb, ab), (tn, an) = points[0], points[-2], points[-1]
    if not t0 < tb < tn:
        return False
    before, newest = (ab - a0) / (tb - t0), (an - ab) / (tn - tb)
    if not (math.isfinite(before) and math.isfinite(newest) and before >= 0 and newest >= 0):
        return False
    larger = max(before, newest)
    return larger > 0 and abs(newest - before) / larger > threshold


def load_changed(points: Sequence[tuple[int, float]], threshold: float) -> bool:
    """Whether the offered rate of each of the two newest intervals differs from the rate over the rest
    of the window by more than ``threshold`` of the larger of the two, in the same direction.

    Two intervals, not one: a single odd interval is what a late metric fetch looks like on a real
    cluster (one interval short of records, the next one long), not a new load. Needs three intervals;
    unknown or falling counts (a reset) never count as a change.
    """
    if threshold <= 0 or len(points) < 4:
        return False
    (t0, a0), (tb, ab), (tm, am), (tn, an) = points[0], points[-3], points[-2], points[-1]
    if not t0 < tb < tm < tn:
        return False
    before = (ab - a0) / (tb - t0)
    first, second = (am - ab) / (tm - tb), (an - am) / (tn - tm)
    rates = (before, first, second)
    if not all(math.isfinite(r) and r >= 0 for r in rates):
        return False

    def moved(recent: float) -> float:
        larger = max(before, recent)
        return 0.0 if larger == 0 else (recent - before) / larger

    up, down = moved(first), moved(second)
    return (up > threshold and down > threshold) or (up < -threshold and down < -threshold)
