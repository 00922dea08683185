"""The archive's two tables as explicit Arrow schemas, and the rows one tick's values become.

Why explicit schemas: a backtest months later reads files written by many daemon versions; inferred
types would drift with the data (an all-null column, an int that once was a float), so every file is
written with one of the schemas below and carries :data:`SCHEMA_VERSION` in a column and in its
metadata. A column added later bumps the version; readers merge the versions by name.

``samples``: one row per vertex and collected sample (the job-level fields repeated on each vertex's
row, which Parquet's dictionary and run-length encoding store almost for free). ``decisions``: one row
per vertex and job outcome, or one row with ``vertex`` null when the job ended its tick without an
evaluation (unavailable, failed). NaN in a float column means "not measured", as in a ``JobSample``;
null means "not recorded" (a field the source did not hold, as in ``export-history``).

The cluster, the JobID and the UTC day are not columns: they are the Hive partition directories
(``cluster=…/job=…/day=…``), which Spark and pyarrow's datasets turn back into columns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from autoscaler.model import JobSample, TaskManagerMemory, TaskManagerSample, VertexSample
from autoscaler.reasons import Reason
from autoscaler.tick.steps import JobOutcome

__all__ = [
    "DECISIONS",
    "DECISIONS_SCHEMA",
    "SAMPLES",
    "SAMPLES_SCHEMA",
    "SAMPLE_FIELDS",
    "SCHEMA_VERSION",
    "TABLES",
    "day_of",
    "decision_rows",
    "decision_status",
    "nan_if_none",
    "sample_rows",
]

SCHEMA_VERSION = 1
SAMPLES, DECISIONS = "samples", "decisions"
SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(VertexSample))
SOURCE_ONLY_FIELDS = ("pending_records", "observed_tpr")  # null on the rows of other vertices
# TaskManagerSample's float and int fields, as tm_<name> columns (its memory pools are a struct).
_TM_FLOATS = tuple(f.name for f in fields(TaskManagerSample) if f.type == "float")
_TM_INTS = tuple(f.name for f in fields(TaskManagerSample) if f.type == "int")
_MEMORY_FIELDS = tuple(f.name for f in fields(TaskManagerMemory))
_MEMORY = pa.struct([pa.field(name, pa.int64()) for name in _MEMORY_FIELDS])
_METRICS = pa.map_(pa.string(), pa.float64())
_INPUT = pa.struct([pa.field("source", pa.string()), pa.field("ship_strategy", pa.string())])

SAMPLES_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("tick_ms", pa.int64()),
        pa.field("job_name", pa.string(), nullable=False),
        pa.field("running_since_ms", pa.int64(), nullable=False),
        pa.field("vertex", pa.string(), nullable=False),
        pa.field("vertex_name", pa.string()),
        pa.field("vertex_index", pa.int32()),
        pa.field("parallelism", pa.int32()),
        pa.field("max_parallelism", pa.int32()),
        pa.field("vertex_status", pa.string()),
        pa.field("slot_sharing_group", pa.string()),
        pa.field("inputs", pa.list_(_INPUT)),
        pa.field("num_source_partitions", pa.int32()),
        *(pa.field(name, pa.float64()) for name in SAMPLE_FIELDS),
        pa.field("custom_metrics", _METRICS),
        pa.field("job_custom_metrics", _METRICS),
        pa.field("stale_ticks", pa.int32()),
        pa.field("restamped_ms", pa.int64()),
        *(pa.field(f"tm_{name}", pa.float64()) for name in _TM_FLOATS),
        *(pa.field(f"tm_{name}", pa.int64()) for name in _TM_INTS),
        pa.field("tm_memory", _MEMORY),
    ],
    metadata={"autoscaler.table": SAMPLES, "autoscaler.schema_version": str(SCHEMA_VERSION)},
)

_EVALUATED = (
    "load",
    "true_processing_rate",
    "target_data_rate",
    "catch_up_data_rate",
    "lag",
    "expected_processing_rate",
)

DECISIONS_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("job_name", pa.string(), nullable=False),
        pa.field("sample_ts_ms", pa.int64()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
        pa.field("rescale_issued", pa.bool_()),
        pa.field("forced", pa.bool_()),
        pa.field("retry_at_ms", pa.int64()),
        pa.field("vetoed_by", pa.string()),
        pa.field("vertex", pa.string()),
        pa.field("parallelism", pa.int32()),
        pa.field("recommended_parallelism", pa.int32()),
        pa.field("target_parallelism", pa.int32()),
        pa.field("requested_parallelism", pa.int32()),
        *(pa.field(name, pa.float64()) for name in _EVALUATED),
        pa.field("outside_band", pa.bool_()),
    ],
    metadata={"autoscaler.table": DECISIONS, "autoscaler.schema_version": str(SCHEMA_VERSION)},
)

TABLES: Mapping[str, pa.Schema] = {SAMPLES: SAMPLES_SCHEMA, DECISIONS: DECISIONS_SCHEMA}


def day_of(ts_ms: int) -> str:
    """The UTC day (``YYYY-MM-DD``) a row's ``ts_ms`` falls on: its ``day=`` partition."""
    return datetime.fromtimestamp(ts_ms / 1000, UTC).strftime("%Y-%m-%d")


def _memory(memory: TaskManagerMemory | None) -> dict[str, int] | None:
    return None if memory is None else {name: getattr(memory, name) for name in _MEMORY_FIELDS}


def sample_rows(sample: JobSample, tick_ms: int | None = None) -> list[dict[str, Any]]:
    """One row per vertex of ``sample``, in topological order (``vertex_index``), with everything the
    evaluator reads: the vertex's metrics, its place in the graph, and the job-level values.

    ``tick_ms`` is the tick that read it (the evaluator's ``now``), which a replay needs: a stale
    sample keeps the ``ts_ms`` of its first reading, and ticks are not always one interval apart."""
    tm = sample.taskmanagers
    job: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "ts_ms": sample.ts_ms,
        "tick_ms": tick_ms,
        "job_name": sample.job.name,
        "running_since_ms": sample.running_since_ms,
        "job_custom_metrics": list(sample.custom_job_metrics.items()),
        "stale_ticks": sample.stale_ticks,
        "restamped_ms": sample.restamped_ms,
        **{f"tm_{name}": getattr(tm, name) for name in (*_TM_FLOATS, *_TM_INTS)},
        "tm_memory": _memory(tm.memory),
    }
    topology, rows = sample.topology, []
    for index, info in enumerate(topology):
        metrics = sample.vertices[info.id]
        values = {name: getattr(metrics, name) for name in SAMPLE_FIELDS}
        if not topology.is_source(info.id):  # a source's column on another vertex: not recorded (null)
            for name in SOURCE_ONLY_FIELDS:
                if math.isnan(values[name]):
                    values[name] = None
        rows.append(
            {
                **job,
                "vertex": info.id,
                "vertex_name": info.name,
                "vertex_index": index,
                "parallelism": info.parallelism,
                "max_parallelism": info.max_parallelism,
                "vertex_status": info.status,
                "slot_sharing_group": info.slot_sharing_group,
                "inputs": [
                    {"source": e.source, "ship_strategy": e.ship_strategy} for e in topology.inputs(info.id)
                ],
                "num_source_partitions": sample.num_source_partitions.get(info.id),
                **values,
                "custom_metrics": list(sample.custom_vertex_metrics.get(info.id, {}).items()),
            }
        )
    return rows


def decision_status(outcome: JobOutcome) -> str:
    """What became of the job's tick, in one word a query can group by:

    ``applied`` (the changes were asked of Flink, or Flink already had them), ``vetoed`` (an executor
    plugin said no), ``blocked`` (changes wanted, but a gate, the slots, the lease or Flink stopped
    them: ``outcome`` says which), ``unchanged`` (nothing to change) or ``not_evaluated`` (no decision:
    ``outcome`` says why).
    """
    decision = outcome.decision
    if decision is None:
        return "not_evaluated"
    if outcome.realized is not None and outcome.outcome is Reason.SCALING:
        return "applied"
    if outcome.chain is not None and outcome.chain.changes is None:
        return "vetoed"
    return "blocked" if decision.changes else "unchanged"


def nan_if_none(value: float | None) -> float:
    """Null (not recorded) as NaN (not measured): to the evaluator both are unknown."""
    return math.nan if value is None else float(value)


def decision_rows(outcome: JobOutcome) -> list[dict[str, Any]]:
    """One row per vertex the outcome's evaluation saw (one vertexless row without an evaluation)."""
    decision, chain, realized = outcome.decision, outcome.chain, outcome.realized
    evaluation = decision.evaluation if decision is not None else None
    vetoed = chain.vetoed_by if chain is not None else None
    job: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "ts_ms": outcome.now_ms,
        "job_name": outcome.job.name,
        "sample_ts_ms": evaluation.sample.ts_ms if evaluation is not None else None,
        "outcome": str(outcome.outcome),
        "status": decision_status(outcome),
        "detail": outcome.detail,
        "rescale_issued": realized.issued if realized is not None else False,
        "forced": decision.forced if decision is not None else False,
        "retry_at_ms": decision.retry_at_ms if decision is not None else None,
        "vetoed_by": vetoed.plugin if vetoed is not None else None,
    }
    if decision is None or evaluation is None:
        return [{**job, "vertex": None}]
    # The outcome's decision holds the changes as the plugins and the slots left them (tick/slots.py replaces
    # it); a vetoed one keeps those the plugins were asked about.
    changes = decision.changes
    requested = realized.requirements if realized is not None else {}
    rows = []
    for info in evaluation.sample.topology:
        ev = evaluation.vertices.get(info.id)
        change = changes.get(info.id)
        bounds = requested.get(info.id)
        rows.append(
            {
                **job,
                "vertex": info.id,
                "parallelism": info.parallelism,
                "recommended_parallelism": ev.target_parallelism if ev is not None else None,
                "target_parallelism": change.target if change is not None else info.parallelism,
                "requested_parallelism": bounds.upper if bounds is not None else None,
                **{name: nan_if_none(getattr(ev, name, None)) for name in _EVALUATED},
                "outside_band": ev.outside_band if ev is not None else None,
            }
        )
    return rows
