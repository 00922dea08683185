"""Whether a tick read a new metric fetch, or Flink's last one served again (a *stale* reading).

Flink's ``MetricFetcher`` is lazy: a query is answered from the store of the last fetch and starts a
new fetch only if the last one started more than ``metrics.fetcher.update-interval`` ago (strictly
more). A tick that comes sooner, or whose own fetch has not landed by the end of its wait, reads the
last fetch again. Stamped with the tick's time, that reading would stretch a rate span by a tick that
holds no records: with a 30 s window and 5 s ticks the source rate came out ~20 % low, and once caused a
wrong scale-down under unchanged load.

How a stale reading is told from an idle job: the IO counters of ``/jobs/:id`` (read anyway, one
request) include each vertex's accumulated busy, idle and back-pressured time, and a running subtask is
always in one of the three. So every new fetch moves some counter, records or none; a reading whose
counters all equal the job's last reading *is* the last fetch. An idle job's time counters still move:
its readings are new, and its rates come out 0, as they should.

A new reading is stamped with its *fetch* time, not the tick's. Flink computes a subtask's busy time as
the wall-clock time since the task started minus its idle and back-pressured time, so busy + idle +
back-pressured, summed over a vertex's subtasks and divided by its parallelism, advances exactly with the
clock of the TaskManagers at each fetch (Flink's own ``TaskIOMetricGroupTest`` asserts that identity).
The first reading of a job run anchors that clock to its tick's time; every later one is the anchor plus
the clock's advance. A fetch that landed late in the tick before, or early because another client (the
web UI, a dashboard) started it, thus still spans exactly the time its records took: on the lab cluster,
tick stamps put single intervals at 407 and 1,344 rec/s for 800 offered.

The stamps are then one fixed offset from the fetches' times, and the offset is harmless: rates take
differences. The anchor moves only when a stamp would lie in the future: after the moment the reading
was in hand (``read_ms``), which no fetch can follow. That happens only when the anchor's fetch was
older than its tick (another client had started it), and then the move is a correction. A stamp merely
later than its own tick's start is no such thing: the tick's own fetch starts with its first query and
lands within its wait, and how long after the tick's start varies from tick to tick. Measured on the lab
(a 5 s loop on Flink's 5 s fetch interval; issue 36): 250, 350, 460, ... 1,600 ms, a poll more each tick,
because Flink starts a fetch only for a query *more* than an interval after the last one started. Bounded
by the tick's start instead, the anchor moved ~100 ms on each of those ticks, the moves added up past
:data:`~autoscaler.evaluate.window.job_window.RESTAMP_REACH` every 15-60 s, and the window restarted each
time: half the ticks of a run ended ``WindowNotFull``. A reading whose clock cannot be read (a legacy source
reports no busy time on every vertex) or does not agree with the tick's time (going backwards, or
older than a fetch can be) is stamped with its tick's time and re-anchors, as before.

A stale reading keeps the time of its first read (its fetch's). The window already holds a sample at
that time, so the stale one adds no point: Spark and the oracle see the same rows, the state store
(which keeps one row per time) the same, and no query is added. Bounds:

- One fetch may come back for at most :attr:`FetchTiming.stale_limit_ms` (Flink's interval, the loop's,
  and the tick's wait: by then some tick's query must have started a fetch and seen it land). A reading
  older than that means the fetcher is not delivering; the job is then ``StaleMetrics`` for the tick,
  a clear outcome instead of a silent reuse, until a new fetch lands.
- A reading with no time counters at all (nothing in it moves with the clock) that stays unchanged for
  that long is a job whose counters really stopped: it is taken as new again, so it reads idle (rate 0)
  instead of stale forever.

:func:`fetch_interval_warning` is the other half: telling the operator when the loop is too fast for
the cluster's fetch interval, so that stale readings are routine rather than rare.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from autoscaler.collect.catch_up import CatchUpBook
from autoscaler.collect.fetch import Reading, io_reading
from autoscaler.flink.jobmanager_config import FETCH_INTERVAL_KEY
from autoscaler.flink.models import JobDetails

__all__ = [
    "FETCH_INTERVAL_FACTOR",
    "FLINK_DEFAULT_FETCH_INTERVAL_MS",
    "FetchBook",
    "FetchCheck",
    "FetchTiming",
    "Freshness",
    "StaleMetrics",
    "fetch_interval_warning",
    "task_clock_ms",
]

FLINK_DEFAULT_FETCH_INTERVAL_MS = 10_000
FETCH_INTERVAL_FACTOR = 2  # control_loop_interval below this many fetch intervals gets a warning


class StaleMetrics(Exception):
    """Flink served one metric fetch for longer than its fetcher should take: the tick is skipped."""


@dataclass(frozen=True, slots=True)
class FetchTiming:
    """What bounds how long one fetch may be served: Flink's fetch interval, the loop's, the tick's wait."""

    fetch_interval_ms: int  # metrics.fetcher.update-interval; 0: every query reads live values
    loop_interval_ms: int  # control_loop_interval
    wait_ms: int = 0  # how long a tick waits for the fetch it started (metric_fetch_wait)

    @property
    def stale_limit_ms(self) -> int:
        """The oldest a reading may be while the fetcher still works.

        The fetch behind a reading started at the latest by the end of the wait of the tick that first
        read it. The next one is due a fetch interval later, and the first tick after that starts it
        with its first query, then sees it land within its wait. Older than the sum, it never landed.
        """
        return self.fetch_interval_ms + self.loop_interval_ms + self.wait_ms


@dataclass(frozen=True, slots=True)
class Freshness:
    """What the book made of one tick's reading of a job."""

    ts_ms: int  # the sample's time: its fetch's as the time counters tell (see the module doc)
    stale_ticks: int = 0  # 0: a new reading; n: the n-th tick in a row that read it again
    expired: str | None = None  # why the reading is too old to use (the job is StaleMetrics this tick)
    # How far the stamps moved at this reading (ms): the earlier ones of the run were this much off,
    # relative to this one. The window restarts when such moves add up (evaluate/window/job_window.py).
    moved_ms: int = 0


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A tick's time and the job's task clock then: later fetches are stamped relative to it."""

    tick_ms: int
    clock_ms: float


@dataclass(frozen=True, slots=True)
class _Last:
    reading: Reading
    running_since_ms: int
    first_read_ms: int  # the tick that first read this reading
    ts_ms: int  # its stamp (its fetch's time)
    anchor: _Anchor | None = None
    stale_ticks: int = 0
    idle: bool = False  # clockless and unchanged past the limit: the counters really stopped


class FetchBook:
    """Each job's last reading on one cluster, to tell a new fetch from the last one served again.

    In memory only: after a restart the first reading of a job counts as new. It usually is (the
    tick's first query starts a fetch, and the tick waits for it to land); when another client had
    just started one, it is at most a fetch interval old.
    """

    def __init__(self) -> None:
        self._last: dict[str, _Last] = {}
        # The same jobs' other memory of their readings: since when each source has been catching up.
        self.catch_up = CatchUpBook()

    def judge(
        self, job_key: str, details: JobDetails, now_ms: int, timing: FetchTiming, read_ms: int | None = None
    ) -> Freshness:
        """Remember this tick's reading of the job and say whether it is new (see the module doc).

        ``now_ms`` is the tick's time, ``read_ms`` when the reading was in hand (the tick's time if not
        given): no fetch in it can be newer than that.
        """
        reading = io_reading(details)
        last = self._last.get(job_key)
        if last is not None and last.running_since_ms != details.running_since_ms:
            last = None  # a new job run: its task clocks started again
        if last is None or last.reading != reading:
            read_ms = now_ms if read_ms is None else max(now_ms, read_ms)
            ts_ms, anchor, moved_ms = _stamp(last, task_clock_ms(details), now_ms, read_ms, timing)
            self._last[job_key] = _Last(reading, details.running_since_ms, now_ms, ts_ms, anchor)
            return Freshness(ts_ms, moved_ms=moved_ms)
        if now_ms <= last.first_read_ms:  # read again within the same tick's time: nothing to count
            return Freshness(last.ts_ms)
        if last.idle:
            self._last[job_key] = replace(last, first_read_ms=now_ms, ts_ms=now_ms)
            return Freshness(now_ms)
        age_ms = now_ms - last.first_read_ms
        if age_ms > timing.stale_limit_ms and not _has_clock(details):
            self._last[job_key] = replace(last, first_read_ms=now_ms, ts_ms=now_ms, stale_ticks=0, idle=True)
            return Freshness(now_ms)
        ticks = last.stale_ticks + 1
        self._last[job_key] = replace(last, stale_ticks=ticks)
        expired = _expired(age_ms, ticks, timing) if age_ms > timing.stale_limit_ms else None
        return Freshness(last.ts_ms, ticks, expired)

    def last_reading(self, job_key: str) -> Reading | None:
        """The job's reading at the last tick that read it (what a new fetch must differ from)."""
        last = self._last.get(job_key)
        return last.reading if last is not None else None

    def forget(self, job_keys: Iterable[str]) -> None:
        keys = list(job_keys)
        for key in keys:
            self._last.pop(key, None)
        self.catch_up.forget(keys)

    def __contains__(self, job_key: object) -> bool:
        return job_key in self._last


@dataclass(frozen=True, slots=True)
class FetchCheck:
    """A cluster's book and timing, as the collect stage takes them; ``clock_ms`` reads the daemon's
    clock when a job's reading is in hand (the bound of its stamp), or is None to use the tick's time."""

    book: FetchBook
    timing: FetchTiming
    clock_ms: Callable[[], int] | None = None

    def judge(self, job_key: str, details: JobDetails, now_ms: int) -> Freshness:
        read_ms = self.clock_ms() if self.clock_ms is not None else None
        return self.book.judge(job_key, details, now_ms, self.timing, read_ms)


def task_clock_ms(details: JobDetails) -> float | None:
    """The job's task clock at its fetch: busy + idle + back-pressured ms per subtask (module doc).

    Each running vertex that reports its busy time gives one reading of the clock (its subtasks' mean
    time since they started); the median of them stands for the job, so one vertex whose subtasks did
    not all report does not move it. None when no vertex gives one. A vertex whose times add up to 0 has
    not been fetched yet (right after a restart Flink's ``/jobs/:id`` shows the new tasks with zeros
    until its next fetch) and gives none: anchored on it, the next reading would seem seconds newer
    than it was read and move every stamp.
    """
    clocks = sorted(
        total / v.parallelism
        for v in details.vertices
        if v.status == "RUNNING"
        and v.parallelism > 0
        and v.io().accumulated_busy_time_ms >= 0
        and (total := v.accumulated_time_ms()) > 0
    )
    return statistics.median(clocks) if clocks else None


def _stamp(
    last: _Last | None, clock_ms: float | None, now_ms: int, read_ms: int, timing: FetchTiming
) -> tuple[int, _Anchor | None, int]:
    """A new reading's time, the anchor to keep, and how far the stamps moved (ms; 0 if they did not).

    The stamp is the anchor's tick plus how far the clock moved. The tick's own time (and a new anchor
    there) when there is no clock or no anchor yet, when the stamp would come after ``read_ms`` (the
    anchor's fetch was older than its tick: move it here), and when the clock disagrees with the ticks:
    not after the last reading's stamp, or older than a fetch may be. A move (the first case) says the
    stamps since the anchor were that much late against the new ones: on the lab cluster, the first
    reading of a run, an older fetch stamped with its tick, was 1 s late, and a 30 s window spanning it
    read the source's rate 3 % high until that reading left the window. A stamp between the tick's time
    and ``read_ms`` is kept: the tick's own fetch lands after the tick began (module doc).
    """
    if clock_ms is None:
        return now_ms, None, 0
    here = _Anchor(now_ms, clock_ms)
    if last is None or last.anchor is None:
        return now_ms, here, 0
    ts_ms = last.anchor.tick_ms + round(clock_ms - last.anchor.clock_ms)
    if ts_ms > read_ms:  # from after it was read: every stamp since the anchor was (at least) this much late
        return now_ms, here, ts_ms - now_ms
    if ts_ms <= last.ts_ms or now_ms - ts_ms > timing.stale_limit_ms:
        return now_ms, here, 0  # a clock that disagrees says nothing of the stamps: the tick's, as without
    return ts_ms, last.anchor, 0


def _has_clock(details: JobDetails) -> bool:
    """Whether the reading holds counters that move with the wall clock (Flink's always do)."""
    return any(v.accumulated_time_ms() > 0 for v in details.vertices)


def _expired(age_ms: int, ticks: int, timing: FetchTiming) -> str:
    return (
        f"Flink has answered with the same metrics for {age_ms / 1000:g} s ({ticks} ticks in a row): no new "
        f"metric fetch landed, although {FETCH_INTERVAL_KEY} is {timing.fetch_interval_ms / 1000:g} s and "
        f"the daemon queries every {timing.loop_interval_ms / 1000:g} s; not evaluated on stale metrics "
        "(can the JobManager's metric fetcher reach the TaskManagers?)"
    )


def fetch_interval_warning(
    loop_interval_ms: int, fetch_interval_ms: int, *, assumed: bool = False
) -> str | None:
    """Why ``control_loop_interval`` is too short for the cluster's metric fetcher, or None if it is not.

    The factor, :data:`FETCH_INTERVAL_FACTOR` = 2: Flink starts a fetch only for a query that comes
    *more* than its interval after the last fetch started, and a tick's own fetch may start as late as
    the end of its wait. A loop exactly as fast as the fetcher finds no fetch due at its first query:
    without a wait it reads a new fetch every other tick; with one, its polls start the fetch a little
    later each tick until one falls past the wait (on the lab cluster, 5 s and 5 s, such ticks put a
    window's rate ~20 % off). Anything else reading the REST API (the web UI, a dashboard, a second
    daemon) also starts fetches the tick then cannot renew. Twice the interval leaves a whole fetch
    interval of slack for all of that, so each tick finds a fetch due and reads a new one. Below it
    nothing breaks (stale readings add no point to the window), but the window gets fewer points than
    the loop promises: an operator who wants a tick's worth of data per tick should know.
    ``fetch_interval_ms`` 0 (a fetcher that reads live values on every query) never warns.
    """
    if fetch_interval_ms <= 0 or loop_interval_ms >= FETCH_INTERVAL_FACTOR * fetch_interval_ms:
        return None
    source = " (Flink's default; /jobmanager/config did not say)" if assumed else ""
    loop_s, fetch_s, factor = loop_interval_ms / 1000, fetch_interval_ms / 1000, FETCH_INTERVAL_FACTOR
    return (
        f"control_loop_interval ({loop_s:g} s) is less than {factor} x Flink's {FETCH_INTERVAL_KEY} "
        f"({fetch_s:g} s{source}): many ticks will find no new metric fetch and add nothing to the metric "
        f"window. Use a control_loop_interval of at least {factor * fetch_s:g} s, or lower "
        f"{FETCH_INTERVAL_KEY} on the cluster"
    )
