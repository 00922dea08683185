"""A fake Flink whose metrics come from a lazy fetcher on a fake clock, like Flink's ``MetricFetcherImpl``.

Built on ``collect_flink.FakeFlink`` (the recorded answers and their REST semantics). Every request is
answered from the last fetch; then, if that fetch started more than ``interval_ms`` ago (strictly, as
Flink compares), a new one starts and lands right after the answer, so the daemon's next read (after
the cluster's wait for the fetch, a job's own ``/jobs/:id``) sees it. The job reads ``rate`` records/s
at the source and passes them all on; each subtask is busy half of the time while records flow and
idle otherwise, so the time counters of ``/jobs/:id`` move with the clock whatever the rate, as
Flink's do.
"""

from __future__ import annotations

from typing import Any

import httpx
from collect_flink import NOW_MS, SRC, WORK, FakeFlink

from autoscaler.clock import FakeClock

RUNNING_MS = 1795246565789  # timestamps.RUNNING of the recorded job.json
_SOURCE_COUNTERS = ("Source__BacklogSource.numRecordsIn", "Source__BacklogSource.numRecordsOut")


class LazyFlink(FakeFlink):
    """The lab job on a fake clock, its metrics served by a lazy fetcher (see the module doc)."""

    def __init__(self, clock: FakeClock, *, interval_ms: int, rate: float, clocked: bool = True) -> None:
        """``clocked`` False leaves the time counters out: nothing in ``/jobs/:id`` moves with time."""
        super().__init__()
        self.clock = clock
        self.interval_ms = interval_ms
        self.clocked = clocked
        self.delivering = True  # False: fetches start but never land (a fetcher that cannot reach TMs)
        self.fetches: list[int] = []  # when each fetch that landed started
        self._rate = rate
        self._since_ms = clock.now_ms()
        self._records = 0.0  # records read by _since_ms
        self._busy_ms = 0.0  # busy ms per subtask by _since_ms
        self.values[SRC]["Source__BacklogSource.pendingRecords"] = _same(0.0)  # keeps up: no lag
        self._started_ms = clock.now_ms()
        self._fetch(self._started_ms)

    def set_rate(self, rate: float) -> None:
        """The offered load from now on (0: the job goes idle; its clocks keep running)."""
        now = self.clock.now_ms()
        self._records, self._busy_ms = self._records_at(now), self._busy_at(now)
        self._since_ms, self._rate = now, rate

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = self._answer(request)
        now = self.clock.now_ms()
        if now - self._started_ms > self.interval_ms:
            self._started_ms = now
            if self.delivering:
                self._fetch(now)
        return response

    def _records_at(self, t_ms: int) -> float:
        return self._records + self._rate * (t_ms - self._since_ms) / 1000

    def _busy_at(self, t_ms: int) -> float:
        return self._busy_ms + (500.0 if self._rate > 0 else 0.0) * (t_ms - self._since_ms) / 1000

    def _fetch(self, at_ms: int) -> None:
        """What a fetch started at ``at_ms`` stores: the counters as of then."""
        self.fetches.append(at_ms)
        records = round(self._records_at(at_ms))
        busy = round(self._busy_at(at_ms))
        idle = (at_ms - RUNNING_MS) - busy
        for vertex in self.job["vertices"]:
            source, sink = vertex["id"] == SRC, vertex["id"] not in (SRC, WORK)
            metrics: dict[str, Any] = {
                **vertex["metrics"],
                "read-records": 0 if source else records,
                "write-records": 0 if sink else records,
            }
            if self.clocked:
                metrics.update(
                    {
                        "accumulated-busy-time": float(busy),
                        "accumulated-idle-time": idle,
                        "accumulated-backpressured-time": 0,
                    }
                )
            else:
                metrics.update(
                    {
                        "accumulated-busy-time": 0.0,
                        "accumulated-idle-time": 0,
                        "accumulated-backpressured-time": 0,
                    }
                )
            vertex["metrics"] = metrics
        for vid in self.values:  # the vertices' busy counters, from the same fetch as /jobs/:id's
            self.values[vid]["accumulateBusyTimeMs"] = _same(float(busy) if self.clocked else 0.0)
        for name in _SOURCE_COUNTERS:
            self.values[SRC][name] = {"max": float(records), "avg": float(records), "sum": float(records)}
        self.values[SRC]["Source__BacklogSource.numRecordsInPerSecond"] = _same(self._rate)


def _same(value: float) -> dict[str, float]:
    return {"min": value, "max": value, "avg": value, "sum": value}


__all__ = ["NOW_MS", "RUNNING_MS", "LazyFlink"]
