"""A job's load history (``autoscaler.foresight.history``) as stored: chunks of buckets, and back.

The series is cut into chunks of ``CHUNK_BUCKETS`` buckets, one row each (``autoscaler_load_history``).
A tick writes only the chunks that hold a bucket closed since the history was last stored: one row
of about a kilobyte per job and closed bucket, nothing on the ticks in between; a daemon that starts
reads a job's rows once. The forecasts' record (``Scores``) rides on the newest row as JSON, so a
restarted daemon's confidence is the one its predecessor had learned. What is not stored: the bucket
still open (a restart loses the part of one bucket it had summed) and the latest forecast (made again
when the next bucket closes).

Whatever comes back is checked: a row of another bucket size, a row whose buckets are not in its
chunk, a rate that cannot be one, a record that is not ours is left out (logged), never raised.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections.abc import Sequence
from typing import Any

import structlog

from autoscaler.foresight.forecast import ForecastParams
from autoscaler.foresight.history import LoadHistory
from autoscaler.foresight.scores import Foreseen, Scores
from autoscaler.foresight.series import LoadSeries
from autoscaler.state.store import HistoryChunk, HistoryWrite

__all__ = ["CHUNK_BUCKETS", "decode_scores", "encode_scores", "history_from", "history_write"]

log = structlog.get_logger("autoscaler.state")

CHUNK_BUCKETS = 288  # a day of 5-minute buckets per row
SCORES_VERSION = 1


def history_write(stored: LoadHistory | None, history: LoadHistory) -> HistoryWrite | None:
    """What to write of ``history`` when ``stored`` is what the store holds (None: not known, so all of
    it); None when nothing changed that is stored (a tick that only added to the open bucket)."""
    series = history.series
    if not len(series):
        return None
    before = stored.series if stored is not None else None
    if before is not None and (
        not len(before) or (before.bucket_ms, before.phase_ms) != (series.bucket_ms, series.phase_ms)
    ):
        before = None  # nothing stored of these buckets
    unchanged = before is not None and stored is not None and before.last == series.last
    if unchanged and stored is not None and stored.scores == history.scores:
        return None
    start = max(series.first, before.end) if before is not None else series.first
    start = min(start, series.last)  # the newest chunk is written at least: it carries the scores
    data = series.to_bytes()
    newest = series.last // CHUNK_BUCKETS
    chunks = []
    for n in range(start // CHUNK_BUCKETS, newest + 1):
        lo, hi = max(n * CHUNK_BUCKETS, series.first), min((n + 1) * CHUNK_BUCKETS, series.end)
        rates = data[(lo - series.first) * 4 : (hi - series.first) * 4]
        scores = encode_scores(history.scores) if n == newest else None
        chunks.append(HistoryChunk(n, series.bucket_ms, lo, rates, scores))
    keep_from = series.first // CHUNK_BUCKETS
    if before is not None and before.first // CHUNK_BUCKETS == keep_from:
        return HistoryWrite(tuple(chunks), series.bucket_ms, None)  # nothing left the history
    return HistoryWrite(tuple(chunks), series.bucket_ms, keep_from)


def history_from(job_key: str, rows: Sequence[HistoryChunk], params: ForecastParams) -> LoadHistory:
    """The history a job's stored rows hold, for its buckets now (rows of another size: none)."""
    usable = []
    for row in rows:
        if row.bucket_ms != params.bucket_ms:
            continue
        count = len(row.rates) // 4
        if not (
            row.chunk * CHUNK_BUCKETS <= row.first and row.first + count <= (row.chunk + 1) * CHUNK_BUCKETS
        ):
            log.warning("stored_state_discarded", job=job_key, part="load_history", chunk=row.chunk)
            continue
        usable.append(row)
    if not usable:
        return LoadHistory.empty(params)
    usable.sort(key=lambda r: r.chunk)
    end = max(r.first + len(r.rates) // 4 for r in usable)
    first = max(min(r.first for r in usable), end - params.capacity)
    values = array("f", [math.nan]) * (end - first)
    for row in usable:
        rates = array("f", row.rates[: len(row.rates) - len(row.rates) % 4])
        if sys.byteorder != "little":
            rates.byteswap()
        skip = max(0, first - row.first)
        values[row.first + skip - first : row.first + len(rates) - first] = rates[skip:]
    series = LoadSeries.trusted(
        params.bucket_ms, first, values, params.phase_ms
    )  # what cannot be a rate: a gap
    return LoadHistory(series, scores=_scores(job_key, usable[-1].scores))


def _scores(job_key: str, text: str | None) -> Scores:
    if text is None:
        return Scores()
    try:
        return decode_scores(text)
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("stored_state_discarded", job=job_key, part="forecast_scores", error=str(exc))
        return Scores()


def encode_scores(scores: Scores) -> str:
    """The forecasts' record as strict JSON."""
    return json.dumps(
        {
            "v": SCORES_VERSION,
            "pending": [list(p) for p in scores.pending],
            "errors": {basis: list(e) for basis, e in scores.errors.items()},
        },
        allow_nan=False,
        separators=(",", ":"),
    )


def decode_scores(text: str) -> Scores:
    """The record ``encode_scores`` wrote; ValueError for anything else (another version, a value that
    cannot be: an error outside [0, 1], a peak that is no rate)."""
    data: Any = json.loads(text)
    if not isinstance(data, dict) or data.get("v") != SCORES_VERSION:
        raise ValueError("not a forecast record of this version")
    pending = []
    for made, horizon, basis, peak in data["pending"]:
        if not (_int(made) and _int(horizon) and horizon > 0 and isinstance(basis, str) and _rate(peak)):
            raise ValueError(f"not a kept forecast: {[made, horizon, basis, peak]}")
        pending.append(Foreseen(made, horizon, basis, float(peak)))
    errors: dict[str, tuple[float, ...]] = {}
    for basis, values in data["errors"].items():
        if not all(isinstance(e, int | float) and not isinstance(e, bool) and 0 <= e <= 1 for e in values):
            raise ValueError(f"not a record of errors: {basis}")
        errors[basis] = tuple(float(e) for e in values)
    return Scores(tuple(pending), errors)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rate(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )
