"""A synthetic history archive, made fast: N jobs x V vertices x H hours of ``samples`` and ``decisions``.

Why: a backtest benchmark needs a fleet's day of history (1,000 jobs x 10 vertices at 10 s ticks is
86.4 M sample rows), and the daemon's own path, a Python dict per row (``schema.sample_rows``), would
take hours to make it. Here a job's whole run is simulated as numpy arrays and each column built whole,
then written with the archive's own Arrow schemas and layout helpers: one file per table, cluster, job
and UTC day, as compaction leaves a finished day. Each job draws from its own generator (seed, job), so
jobs spread over processes and the archive is the same for a seed whatever the number of workers.

A job is a chain (a source, maps, filters, flatMaps, a sink) under a load with a diurnal sine, noise,
and sometimes a step or a spike. Every third job starts with one vertex over capacity, the next with
one mostly idle, so a backtest finds work from the first hour. A controller like the daemon's (a 15 min
window after 5 min of stabilization, band 0.4..0.9, target 0.7, one rescale per 30 min at most) sizes
it; a rescale restarts the job for 30..90 s without samples, after which the counters start from 0 and
Flink's 60 s meter ramps. The slowest vertex (in source records) caps the throughput: it runs 100 %
busy, those before it are back-pressured, and the source's backlog grows until capacity exceeds load.
The daemon's archive starts with the run (the first 15 min are ``WindowNotFull``).

Each job sees its own TaskManagers (slots for twice its widest need). ``python bench/history_gen.py
--out DIR --jobs 1000 --vertices 10 --hours 24 --sample-interval 10``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from autoscaler.archive import layout, schema
from autoscaler.reasons import Reason

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the daemon (and its archive) starts here
DAY_MS = 86_400_000
MAX_PARALLELISM, SOURCE_PARTITIONS, SLOTS_PER_TM = 128, 32, 4
TARGET, LOW, HIGH = 0.7, 0.4, 0.9
STABILIZE_S, WINDOW_S, COOLDOWN_S, CATCH_UP_S, METER_S = 300, 900, 1800, 1800, 60
_MIB = 2**20
MEMORY = {  # one 4 GiB TaskManager's pools, as Flink's memoryConfiguration reports them
    "process": 4096 * _MIB, "framework_heap": 128 * _MIB, "task_heap": 1408 * _MIB,
    "framework_off_heap": 128 * _MIB, "task_off_heap": 0, "network": 352 * _MIB,
    "managed": 1472 * _MIB, "metaspace": 256 * _MIB, "overhead": 352 * _MIB,
}  # fmt: skip
HEAP_MAX = float(MEMORY["framework_heap"] + MEMORY["task_heap"])
IN_BAND = "all vertices that could change are within their utilization band"
STABILIZING = "job recently (re)started: waiting for stabilization.interval"


@dataclass(frozen=True, slots=True)
class GeneratedHistory:
    """What :func:`generate` wrote: the counts a benchmark reports next to its timings."""

    jobs: int
    vertices: int
    ticks: int  # per job
    sample_rows: int
    decision_rows: int
    rescales: int
    files: int
    bytes: int


@dataclass(frozen=True, slots=True)
class _Spec:
    """One job's fixed shape and load."""

    cluster: str
    job_id: str
    name: str
    ids: list[str]
    names: list[str]
    strategies: list[str | None]  # the edge into each vertex (None: the source)
    ratio: np.ndarray  # records out per record in (0 for the sink, as Flink reports)
    gain: np.ndarray  # records in per source record
    cap: np.ndarray  # records/s of one subtask at 100 % busy
    forward: np.ndarray  # the edge into the vertex is FORWARD: both ends run at one parallelism
    p0: np.ndarray
    since_ms: int  # RUNNING since, before the archive starts
    arrival: np.ndarray  # (T,) records/s offered to the source


@dataclass(slots=True)
class _Run:
    """What the controller did over the run, tick by tick, and what it saw."""

    p: np.ndarray  # (T, V) parallelism
    running: np.ndarray  # (T,)
    since: np.ndarray  # (T,) RUNNING since, ms
    seg: np.ndarray  # (T,) restarts so far
    run_s: np.ndarray  # (T,) seconds of the tick's interval the job ran
    backlog: np.ndarray  # (T,) source records waiting
    processed: np.ndarray  # (T,) source records read in the interval
    busy: np.ndarray  # (T, V) ms/s
    samples: np.ndarray  # (T,) samples in the window
    load: np.ndarray  # (T, V) window busy ratio
    rate: np.ndarray  # (T,) window mean offered load, source records/s; NaN: not evaluated (stabilizing)
    rec: np.ndarray  # (T, V) recommended parallelism
    outside: np.ndarray  # (T, V)
    last_ms: np.ndarray  # (T,) the last rescale (or start): the cooldown's start
    rescales: list[int]


def _hex(*parts: object) -> str:
    """32 hex characters fixed by ``parts``, like a JobID or a JobVertexID."""
    return hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=16).hexdigest()


def _arrival(rng: np.random.Generator, t_s: np.ndarray) -> np.ndarray:
    """Offered load: a base rate, a diurnal sine, slow and fast noise, maybe a step and some spikes."""
    n, k = len(t_s), 30
    load = 3000.0 * rng.lognormal(0.0, 0.8)
    load = load * (1 + rng.uniform(0.3, 0.6) * np.sin(2 * np.pi * (t_s / 86_400 + rng.random())))
    slow = np.convolve(rng.standard_normal(n + k - 1), np.full(k, 0.08 / np.sqrt(k)), "valid")
    load = load * np.exp(slow + 0.03 * rng.standard_normal(n))
    span = t_s[-1] + 1
    if rng.random() < 0.35:
        start, length = rng.uniform(0, span), rng.uniform(3600, 8 * 3600)
        factor = rng.uniform(0.5, 0.75) if rng.random() < 0.5 else rng.uniform(1.4, 2.0)
        load = np.where((t_s >= start) & (t_s < start + length), load * factor, load)
    for _ in range(rng.poisson(0.8 * span / 86_400)):
        start, length = rng.uniform(0, span), rng.uniform(180, 1200)
        load = np.where((t_s >= start) & (t_s < start + length), load * rng.uniform(1.8, 4.0), load)
    return load


def _spec(j: int, seed: int, vertices: int, clusters: int, t_s: np.ndarray) -> _Spec:
    """Job ``j``, drawn from its own generator: the same whichever process makes it, and with it."""
    rng = np.random.default_rng([seed, j])
    v = vertices
    kinds = rng.choice(3, size=v, p=[0.7, 0.15, 0.15])
    ratio = np.select([kinds == 1, kinds == 2], [rng.uniform(0.2, 0.9, v), rng.uniform(1.2, 2.5, v)], 1.0)
    names = [f"{('Map', 'Filter', 'FlatMap')[k]} {i}" for i, k in enumerate(kinds)]
    ratio[0], names[0] = 1.0, "Source: events"
    if v > 1:
        ratio[-1], names[-1] = 0.0, "Sink: out"
    draws = rng.random(v)
    strategies: list[str | None] = [None] + [
        "REBALANCE" if i == 1 and draws[i] < 0.5 else "FORWARD" if i >= 2 and draws[i] < 0.15 else "HASH"
        for i in range(1, v)
    ]
    forward = np.array([s == "FORWARD" for s in strategies])
    p0 = _tied(np.concatenate([rng.integers(1, 9, 1), rng.integers(1, 13, v - 1)]), forward)
    u0 = rng.uniform(0.45, 0.85, v)
    odd = rng.integers(1, v) if v > 1 else 0
    if j % 3 == 0:
        u0[odd] = rng.uniform(1.15, 1.4)  # over capacity: a backlog from the start
    elif j % 3 == 1:
        u0[odd] = rng.uniform(0.12, 0.3)  # mostly idle: a scale-down candidate
    gain = np.concatenate([[1.0], np.cumprod(ratio[:-1])])
    since_ms = START_MS - int(rng.integers(3_600_000, 72 * 3_600_000))
    arrival = _arrival(rng, t_s)
    return _Spec(
        cluster=f"bench-{j % clusters}",
        job_id=_hex(seed, "job", j),
        name=f"job-{j:05d}",
        ids=[_hex(seed, "vertex", j, i) for i in range(v)],
        names=names,
        strategies=strategies,
        ratio=ratio,
        gain=gain,
        cap=arrival[0] * gain / (p0 * u0),
        forward=forward,
        p0=p0,
        since_ms=since_ms,
        arrival=arrival,
    )


def _tied(x: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """Each vertex's value as the max over its run of FORWARD-linked vertices (along the last axis)."""
    return np.maximum.reduceat(x, np.flatnonzero(~forward), axis=-1)[..., np.cumsum(~forward) - 1]


def _flow(a: np.ndarray, limit: float, run_s: np.ndarray, b0: float, dt: float) -> tuple[np.ndarray, ...]:
    """The source's backlog after each tick and the records read in it: a queue served at ``limit``
    records/s while running (``a`` records/s arrive), its recursion max(0, b + in - out) done as
    cumulative sums (no loop)."""
    s = b0 + np.cumsum(a * dt - limit * run_s)
    backlog = np.maximum(s - np.minimum(np.minimum.accumulate(s), 0.0), 0.0)
    return backlog, np.concatenate([[b0], backlog[:-1]]) + a * dt - backlog


def _window(x: np.ndarray, w: int) -> np.ndarray:
    """The mean of the last ``w`` rows of ``x`` (fewer at its start), for every row."""
    cs = np.cumsum(x, axis=0)
    lagged = np.concatenate([np.zeros((w, *x.shape[1:])), cs[:-w]])[: len(x)]
    count = np.minimum(np.arange(1, len(x) + 1), w).reshape((-1,) + (1,) * (x.ndim - 1))
    return (cs - lagged) / count


def _simulate(spec: _Spec, t_ms: np.ndarray, dt: float, rng: np.random.Generator) -> _Run:
    """Run the controller: each pass simulates the rest of the run at the current parallelism and
    finds the first tick that rescales; a few passes a day, each a handful of whole-array operations."""
    n, v, w = len(t_ms), len(spec.cap), max(1, round(WINDOW_S / dt))
    max_p = np.where(np.arange(v) == 0, SOURCE_PARTITIONS, MAX_PARALLELISM)  # a source: its partitions
    noise = np.exp(0.03 * rng.standard_normal((n, v)))
    run = _Run(
        np.tile(spec.p0, (n, 1)), np.ones(n, bool), np.full(n, spec.since_ms), np.zeros(n, np.int64),
        np.zeros(n), np.zeros(n), np.zeros(n), np.zeros((n, v)), np.zeros(n, np.int64),
        np.full((n, v), np.nan), np.full(n, np.nan), np.tile(spec.p0, (n, 1)), np.zeros((n, v), bool),
        np.full(n, spec.since_ms), [],
    )  # fmt: skip
    start = 0
    while start < n:
        r, p = slice(start, n), run.p[start]
        run.run_s[r] = np.where(run.running[r], np.clip((t_ms[r] - run.since[r]) / 1000, 0, dt), 0.0)
        limit = (p * spec.cap / spec.gain).min()
        b0 = run.backlog[start - 1] if start else 0.0
        run.backlog[r], run.processed[r] = _flow(spec.arrival[r], limit, run.run_s[r], b0, dt)
        rate = np.divide(run.processed[r], run.run_s[r], out=np.zeros(n - start), where=run.run_s[r] > 0)
        run.busy[r] = np.minimum(1000 * rate[:, None] * spec.gain / (p * spec.cap) * noise[r], 1000)
        settled = run.running[r] & (t_ms[r] - run.since[r] >= STABILIZE_S * 1000)
        if not settled.any():
            break
        e = slice(ws := start + int(np.argmax(settled)) if start else 0, n)  # the window's first tick
        run.samples[e] = np.minimum(np.arange(1, n - ws + 1), w)
        run.load[e] = _window(run.busy[e] / 1000, w)
        run.rate[e] = _window(spec.arrival[e], w)
        demand = (run.rate[e] + run.backlog[e] / CATCH_UP_S)[:, None] * spec.gain
        rec = np.clip(np.ceil(demand / (TARGET * spec.cap) - 1e-9), 1, max_p).astype(np.int64)
        # FORWARD-linked vertices share one parallelism, sized (and judged) by their busiest
        rec, util = _tied(rec, spec.forward), _tied(demand / (p * spec.cap), spec.forward)
        run.rec[e], run.outside[e] = rec, (util < LOW) | (util > HIGH)
        due = (run.samples[e] >= w) & (run.outside[e] & (rec != p)).any(1)  # an outside vertex can move
        due &= t_ms[e] - run.last_ms[e] >= COOLDOWN_S * 1000
        if not due.any():
            break
        k = ws + int(np.argmax(due))
        nxt = slice(k + 1, n)
        run.rescales.append(k)
        since = int(t_ms[k] + rng.integers(30_000, 90_000))
        run.p[nxt], run.rec[nxt], run.since[nxt], run.last_ms[nxt] = run.rec[k], run.rec[k], since, t_ms[k]
        run.seg[nxt], run.running[nxt], run.outside[nxt] = len(run.rescales), t_ms[nxt] >= since, False
        run.samples[nxt], run.load[nxt], run.rate[nxt] = 0, np.nan, np.nan
        start = k + 1
    return run


# ------------------------------------------------------------------------------------------ the columns
def _since_restart(x: np.ndarray, run: _Run, offset: np.ndarray) -> np.ndarray:
    """Cumulative sums of per-tick increments that start from 0 at every restart, as Flink's counters
    do; ``offset`` is what the first run had counted before the archive started."""
    cs = np.cumsum(x, axis=0)
    starts = np.concatenate([[0], np.asarray(run.rescales, dtype=np.int64) + 1])
    out = cs - np.concatenate([np.zeros((1, *x.shape[1:])), cs])[starts][run.seg]
    out[run.seg == 0] += offset
    return out


def _take(values: list, type_: pa.DataType, index: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """A column of a few distinct values (names, structs, maps) by index: no Python object per row."""
    return pa.array(values, type=type_).take(pa.array(index, mask=mask))


def _table(table: pa.Schema, cols: dict) -> pa.Table:
    """``cols`` in the schema's order and types: numpy arrays, (values, null mask) or Arrow arrays."""
    arrays = []
    for field in table:
        col = cols[field.name]
        if isinstance(col, pa.Array):
            arrays.append(col)
            continue
        values, mask = col if isinstance(col, tuple) else (col, None)
        arrays.append(pa.array(np.asarray(values).astype(field.type.to_pandas_dtype()), mask=mask))
    return pa.Table.from_arrays(arrays, schema=table)


def _samples(spec: _Spec, run: _Run, t_ms: np.ndarray, dt: float, rng: np.random.Generator) -> pa.Table:
    n, v = run.p.shape
    rows = np.flatnonzero(run.running)
    m, vi, zero = len(rows) * v, np.tile(np.arange(v), len(rows)), np.zeros(len(rows) * v, np.int64)
    rate = np.divide(run.processed, run.run_s, out=np.zeros(n), where=run.run_s > 0)
    ran = run.processed[:, None] * spec.gain  # records in over each interval
    age0 = (START_MS - spec.since_ms) / 1000 - dt  # ran before the first tick's interval
    cum_in = _since_restart(ran, run, rate[0] * spec.gain * age0)
    cum_busy = _since_restart(run.busy * run.run_s[:, None], run, run.busy[0] * age0)  # one subtask's
    k = max(1, round(METER_S / dt))  # Flink's meter: the counter's rise over 60 s, from 0 after a restart
    lagged = np.concatenate([cum_in[0] - ran[0] * np.arange(k, 0, -1)[:, None], cum_in])[:n]
    same = np.concatenate([np.zeros(k, np.int64), run.seg])[:n] == run.seg
    meter = (cum_in - np.where(same[:, None], lagged, 0.0)) / (k * dt)
    neck = (run.p * spec.cap / spec.gain).argmin(1)  # the vertex that caps the throughput
    upstream = (run.backlog > 0.5)[:, None] & (np.arange(v) < neck[:, None])
    pending = run.backlog + spec.arrival * rng.uniform(0.2, 1.0, n)  # in flight besides the backlog

    def per_vertex(x: np.ndarray) -> np.ndarray:
        return x[rows].ravel()

    def per_tick(x: np.ndarray) -> np.ndarray:
        return np.repeat(np.asarray(x)[rows], v)

    used = run.p.max(1)  # one slot-sharing group: the widest vertex's slots
    slots = SLOTS_PER_TM * -(-max(2 * int(used.max()), 8) // SLOTS_PER_TM)
    t_s = (t_ms - START_MS) / 1000
    saw = (t_s / rng.uniform(60, 300) + rng.random()) % 1  # heap fills between garbage collections
    cpu = np.clip(0.05 + 0.9 * run.busy.mean(1) / 1000 + 0.02 * rng.standard_normal(n), 0, 1)
    managed = MEMORY["managed"] * rng.uniform(0.4, 0.8)
    constants = {
        "heap_max": HEAP_MAX, "cpu_cores_per_tm": SLOTS_PER_TM, "memory_per_tm": MEMORY["process"],
        "slots_per_tm": SLOTS_PER_TM, "metaspace_used": 131 * _MIB, "heap_used_avg": HEAP_MAX * 0.525,
        "managed_used_avg": managed, "metaspace_used_avg": 131 * _MIB, "count": slots // SLOTS_PER_TM,
        "slots_total": slots,
    }  # fmt: skip
    not_source = vi != 0  # null for them: pending records, observed TPR, partitions
    inputs = [
        [{"source": spec.ids[i - 1], "ship_strategy": s}] if s else [] for i, s in enumerate(spec.strategies)
    ]
    cols = {
        "schema_version": np.full(m, schema.SCHEMA_VERSION),
        "ts_ms": per_tick(t_ms),
        "tick_ms": per_tick(t_ms),
        "job_name": _take([spec.name], pa.string(), zero),
        "running_since_ms": per_tick(run.since),
        "vertex": _take(spec.ids, pa.string(), vi),
        "vertex_name": _take(spec.names, pa.string(), vi),
        "vertex_index": vi,
        "parallelism": per_vertex(run.p),
        "max_parallelism": np.full(m, MAX_PARALLELISM),
        "vertex_status": _take(["RUNNING"], pa.string(), zero),
        "slot_sharing_group": _take(["default"], pa.string(), zero),
        "inputs": _take(inputs, schema.SAMPLES_SCHEMA.field("inputs").type, vi),
        "num_source_partitions": (np.full(m, SOURCE_PARTITIONS), not_source),
        "busy_time_ms_per_s": per_vertex(run.busy),
        "backpressured_ms_per_s": per_vertex(np.where(upstream, 1000 - run.busy, 0.0)),
        "num_records_in": per_vertex(np.round(cum_in)),
        "num_records_out": per_vertex(np.round(cum_in * spec.ratio)),
        "accumulated_busy_time_ms": per_vertex(np.round(cum_busy * run.p)),
        "num_records_in_per_s": per_vertex(meter),
        "pending_records": (per_tick(np.round(pending)), not_source),
        "observed_tpr": (np.full(m, np.nan), not_source),
        "accumulated_busy_time_agg_ms": per_vertex(np.round(cum_busy)),
        "custom_metrics": _take([[]], schema.SAMPLES_SCHEMA.field("custom_metrics").type, zero),
        "job_custom_metrics": _take([[]], schema.SAMPLES_SCHEMA.field("job_custom_metrics").type, zero),
        "stale_ticks": zero,
        "restamped_ms": zero,
        "tm_gc_time_ms_per_s": per_tick(rng.gamma(2.0, 4.0, n)),
        "tm_heap_used": per_tick(HEAP_MAX * (0.3 + 0.45 * saw)),
        "tm_cpu_load_avg": per_tick(cpu),
        "tm_managed_used": per_tick(managed * np.exp(0.01 * rng.standard_normal(n))),
        "tm_slots_free": per_tick(slots - used),
        **{f"tm_{name}": np.full(m, value) for name, value in constants.items()},
        "tm_memory": _take([MEMORY], schema.SAMPLES_SCHEMA.field("tm_memory").type, zero),
    }
    return _table(schema.SAMPLES_SCHEMA, cols)


def _decisions(spec: _Spec, run: _Run, t_ms: np.ndarray, dt: float) -> pa.Table:
    """One row per vertex and tick (one vertexless ``NotRunning`` row while restarting), with the
    outcome the daemon's gates would have given and the evaluation's values."""
    n, v = run.p.shape
    ti, vi = np.nonzero(run.running[:, None] | (np.arange(v) == 0))  # tick-major, as the writer adds
    evaluated = ~np.isnan(run.rate)
    gone, ev = ~run.running[ti], evaluated[ti]
    rescale = np.zeros(n, bool)
    rescale[run.rescales] = True
    w, retry = max(1, round(WINDOW_S / dt)), run.last_ms + COOLDOWN_S * 1000
    defer = (run.samples >= w) & (run.outside & (run.rec != run.p)).any(1) & (t_ms < retry) & ~rescale
    code = np.select([~run.running, ~evaluated, run.samples < w, rescale, defer], range(5), 5)
    outcomes = [Reason.NOT_RUNNING, Reason.STABILIZING, Reason.WINDOW_NOT_FULL, Reason.SCALING]
    outcomes += [Reason.COOLDOWN_DEFERRED, Reason.IN_BAND]
    statuses = ["not_evaluated", "unchanged", "unchanged", "applied", "blocked", "unchanged"]
    texts = [f"job {spec.name} ({spec.job_id}) is RESTARTING", STABILIZING, IN_BAND]
    texts += [f"metric window not full yet ({s} samples)" for s in range(1, w + 1)]
    detail = np.select([code == 0, code == 1, code == 2], [0, 1, 2 + run.samples], 2)
    for t in np.flatnonzero(rescale | defer):
        moved = np.flatnonzero(run.rec[t] != run.p[t])  # as decide.describe_changes names them
        changes = ", ".join(f"{spec.names[i]} {run.p[t, i]}->{run.rec[t, i]}" for i in moved)
        if defer[t]:
            until = datetime.fromtimestamp(retry[t] // 1000, UTC)
            changes += f" deferred by scaling-interval.min until {until:%Y-%m-%dT%H:%M:%SZ} "
            changes += f"({(retry[t] - t_ms[t]) / 1000:.0f} s)"
        detail[t] = len(texts)
        texts.append(changes)
    p, rec = run.p[ti, vi], run.rec[ti, vi]
    target = np.where((rescale | defer)[ti], rec, p)
    nan_unless_ev = lambda x: np.where(ev, x, np.nan)  # noqa: E731
    gain, cap = spec.gain[vi], spec.cap[vi]
    cols = {
        "schema_version": np.full(len(ti), schema.SCHEMA_VERSION),
        "ts_ms": t_ms[ti],
        "job_name": _take([spec.name], pa.string(), np.zeros(len(ti), np.int64)),
        "sample_ts_ms": (t_ms[ti], gone),
        "outcome": _take([str(o) for o in outcomes], pa.string(), code[ti]),
        "status": _take(statuses, pa.string(), code[ti]),
        "detail": _take(texts, pa.string(), detail[ti]),
        "rescale_issued": rescale[ti],
        "forced": np.zeros(len(ti), bool),
        "retry_at_ms": (retry[ti], ~defer[ti]),
        "vetoed_by": pa.nulls(len(ti), pa.string()),
        "vertex": _take(spec.ids, pa.string(), vi, gone),
        "parallelism": (p, gone),
        "recommended_parallelism": (rec, gone | ~ev),
        "target_parallelism": (target, gone),
        "requested_parallelism": (rec, ~rescale[ti]),
        "load": (nan_unless_ev(run.load[ti, vi]), gone),
        "true_processing_rate": (nan_unless_ev(p * cap), gone),
        "target_data_rate": (nan_unless_ev(run.rate[ti] * gain), gone),
        "catch_up_data_rate": (nan_unless_ev(run.backlog[ti] / CATCH_UP_S * gain), gone),
        "lag": (np.where(ev & (vi == 0), run.backlog[ti], np.nan), gone),
        "expected_processing_rate": (nan_unless_ev(target * cap), gone),
        "outside_band": (run.outside[ti, vi], gone | ~ev),
    }
    return _table(schema.DECISIONS_SCHEMA, cols)


# ---------------------------------------------------------------------------------------- the archive
def _write(
    root: Path, table: str, spec: _Spec, rows: pa.Table, per_tick: np.ndarray, t_ms: np.ndarray
) -> tuple[int, int]:
    """Write ``rows`` (``per_tick`` rows for each tick) as one file per UTC day: (files, bytes)."""
    day, ends, written = (t_ms - START_MS) // DAY_MS, np.cumsum(per_tick), [0, 0]
    for d in np.unique(day):
        ticks = np.flatnonzero(day == d)
        lo, hi = int(ends[ticks[0]] - per_tick[ticks[0]]), int(ends[ticks[-1]])
        if hi > lo:
            day_name = schema.day_of(int(t_ms[ticks[0]]))
            directory = layout.partition_dir(root, table, spec.cluster, spec.job_id, day_name)
            name = f"part-{START_MS + (int(d) + 1) * DAY_MS:013d}-{spec.job_id[:12]}.parquet"
            written[0] += 1
            written[1] += layout.write_file(directory, name, rows.slice(lo, hi - lo)).stat().st_size
    return written[0], written[1]


def _job(task: tuple[int, Path, int, int, int, float, int]) -> tuple[int, int, int, int, int]:
    """Simulate and write one job: (sample rows, decision rows, rescales, files, bytes)."""
    j, root, seed, vertices, ticks, dt, clusters = task
    t_ms = START_MS + np.arange(ticks, dtype=np.int64) * round(dt * 1000)
    spec = _spec(j, seed, vertices, clusters, (t_ms - START_MS) / 1000)
    rng = np.random.default_rng([seed, j, 1])
    run = _simulate(spec, t_ms, dt, rng)
    samples, decisions = _samples(spec, run, t_ms, dt, rng), _decisions(spec, run, t_ms, dt)
    files, size = _write(root, schema.SAMPLES, spec, samples, run.running * vertices, t_ms)
    more, size2 = _write(root, schema.DECISIONS, spec, decisions, np.where(run.running, vertices, 1), t_ms)
    return samples.num_rows, decisions.num_rows, len(run.rescales), files + more, size + size2


def generate(
    out: Path,
    *,
    jobs: int,
    vertices: int,
    hours: float,
    sample_interval_s: float,
    seed: int = 1,
    clusters: int = 1,
    workers: int | None = None,
) -> GeneratedHistory:
    """Write the archive of ``jobs`` jobs of ``vertices`` vertices over ``hours`` under ``out``, a job
    per task over ``workers`` processes (the CPUs by default; 1 runs in this process)."""
    ticks = int(hours * 3600 // sample_interval_s)
    if min(jobs, vertices, clusters, ticks) < 1:
        raise ValueError("jobs, vertices, clusters and hours / sample interval must be >= 1")
    tasks = [(j, Path(out), seed, vertices, ticks, float(sample_interval_s), clusters) for j in range(jobs)]
    workers = min(workers or os.cpu_count() or 1, jobs)
    if workers == 1:
        results = [_job(task) for task in tasks]
    else:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(_job, tasks, chunksize=4))
    totals = [sum(column) for column in zip(*results, strict=True)]
    return GeneratedHistory(jobs, vertices, ticks, *totals)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    for flag, default in {"jobs": 1000, "vertices": 10, "hours": 24.0, "seed": 1, "clusters": 1}.items():
        parser.add_argument(f"--{flag}", type=type(default), default=default)
    parser.add_argument("--sample-interval", dest="sample_interval_s", type=float, default=10.0)
    parser.add_argument("--workers", type=int, help="processes (default: the CPUs)")
    args = vars(parser.parse_args(argv))
    began, out = time.perf_counter(), args.pop("out")
    made = generate(out, **args)
    print(f"{made}\n{time.perf_counter() - began:.1f} s, {made.bytes / 2**20:.1f} MiB under {out}")


if __name__ == "__main__":
    main()
