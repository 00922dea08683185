"""A job's load history completed from its older recorded samples (the history archive), issue 38 item 3.

The state store holds a job's buckets only from when the daemon began keeping them: a new daemon, a
reset or new state database, or a history table added after the archive had recorded months of ticks
starts the forecast from nothing, although the offered load of every past tick is on disk. Here the
recorded samples (``(ts_ms, offered rate)``: what the foresee stage added, one per tick) become the
buckets the stage would have closed, and the history is what it would hold had it seen them live:

- the buckets are the series' own (:meth:`LoadSeries.index_of`, the job's bucket size and phase), each
  the mean of its samples; what cannot be a rate (NaN, infinite, negative) is left out, as
  :meth:`LoadHistory.observe` leaves it out (:attr:`Completion.skipped` counts them);
- the store's buckets are never replaced: a recorded bucket counts only where the store has none (before
  its oldest kept one, after its newest);
- the buckets are replayed through :meth:`LoadHistory.observe`, one value each, so the forecasts are
  made and scored exactly as live (the same closing, scoring and choice). Only the newest
  :func:`replayed_buckets` are replayed so: those before them enter the series without a forecast
  being made (what a forecast reads of them is the series; what their own forecasts would have scored
  is older than every record kept). A fleet's job costs a few dozen forecasts once, not one per bucket
  of three weeks (0.2 ms each);
- the newest recorded bucket stays open with its samples' sum and count, as the stage leaves the bucket
  it is in: the next tick's sample adds to it, or closes it. A history that already has an open bucket
  (live ticks came before the archive was read) keeps it: the recorded buckets from it on are not
  taken, and the ones before it are closed by it, as live.

Pure: the reading is the caller's (``autoscaler.archive.offered``), done once per job and process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from autoscaler.foresight.forecast import ForecastParams
from autoscaler.foresight.history import LoadHistory, OpenBucket
from autoscaler.foresight.series import LoadSeries

__all__ = ["Completion", "bucket_sums", "complete", "replayed_buckets"]


@dataclass(frozen=True, slots=True)
class Completion:
    """The history after completion, how many recorded buckets it took in, and the samples left out
    (not a rate)."""

    history: LoadHistory
    added: int
    skipped: int


def bucket_sums(
    samples: Iterable[tuple[int, float]], series: LoadSeries
) -> tuple[dict[int, tuple[float, int]], int]:
    """Each bucket's (sum, count) of the recorded ``(ts_ms, rate)`` samples, in ``series``' buckets, and
    how many samples were not a rate (left out)."""
    sums: dict[int, tuple[float, int]] = {}
    skipped = 0
    for ts_ms, rate in samples:
        if not (math.isfinite(rate) and rate >= 0):
            skipped += 1
            continue
        index = series.index_of(ts_ms)
        total, count = sums.get(index, (0.0, 0))
        sums[index] = (total + rate, count + 1)
    return sums, skipped


def replayed_buckets(params: ForecastParams) -> int:
    """How many of the newest buckets a completion replays with their forecasts: enough for every
    basis to have its whole record (``scored``) settled, the forecasts of the last horizon pending."""
    return 2 * params.scored + params.horizon + 1


def complete(stored: LoadHistory, samples: Iterable[tuple[int, float]], params: ForecastParams) -> Completion:
    """``stored`` (what the state store holds) completed with the recorded ``samples``' buckets where it
    has none (module doc). When the samples hold no bucket older than the stored ones, or the store
    already keeps as many buckets as the forecast reads, ``stored`` is returned as it is."""
    empty = LoadHistory.empty(params)
    if (stored.series.bucket_ms, stored.series.phase_ms) != (params.bucket_ms, params.phase_ms):
        stored = empty  # other buckets (history_from gives none for them): nothing of it is usable
    have, live = stored.series, stored.open
    sums, skipped = bucket_sums(samples, empty.series)
    if live is not None:  # the bucket live ticks are in, and later ones: theirs, not the archive's
        sums = {i: s for i, s in sums.items() if i < live.index}
    if len(have):
        sums = {i: s for i, s in sums.items() if not have.first <= i <= have.last}
        older = [i for i in sums if i < have.first]
        if not older or len(have) >= params.capacity:
            return Completion(stored, 0, skipped)
    if not sums:
        return Completion(stored, 0, skipped)
    rates = {i: total / count for i, (total, count) in sums.items()}
    for i in range(have.first, have.end) if len(have) else ():
        rate = have.at(i)
        if not math.isnan(rate):  # a gap in the store stays one (no recorded bucket is put in it)
            rates[i] = rate
    order = sorted(rates)
    newest = order[-1]
    replay_from = max(order[0], newest - replayed_buckets(params))
    series = empty.series
    for i in order:
        if i >= replay_from:
            break
        series = series.extended(i, rates[i], params.capacity)
    history = LoadHistory(series)
    for i in order:
        if i >= replay_from:
            history = history.observe(series.start_ms(i), rates[i], params)
    if live is not None:  # closes the newest replayed bucket, as its first sample did live
        history = history.observe(series.start_ms(live.index), live.mean, params)
        history = replace(history, open=live)
    elif newest in sums:  # the newest bucket is a recorded one: open, with its samples as they were
        total, count = sums[newest]
        history = replace(history, open=OpenBucket(newest, total, count))
    return Completion(history, len(sums), skipped)
