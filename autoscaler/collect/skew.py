"""Each vertex's skew, and the slow subtasks of the vertices that can have one (:mod:`autoscaler.skew`).

The skew figure comes from the aggregated answer every vertex was read with (min/max/avg of its busy
time). Only a vertex that can have a slow subtask (its busiest subtask at least the floor and the
multiplier times its least busy) has its subtasks read one by one: one
``GET /jobs/:id/vertices/:vid/metrics?get=0.busyTimeMsPerSecond,…`` with each subtask's busy time and
records-in rate (split into requests of at most :data:`NAMES_PER_REQUEST` names, so that a wide vertex
keeps Flink's request line short). That read is a diagnosis: when it fails the vertex keeps its figure,
the failure is logged, and the job's collection goes on.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence

import structlog

from autoscaler.collect.vertices import VertexRead
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobTopology
from autoscaler.settings import AutoscalerOptions
from autoscaler.skew import SlowSubtaskRule, VertexSkew, busy_skew, judge, worth_reading

__all__ = ["NAMES_PER_REQUEST", "read_skew", "rule_of"]

log = structlog.get_logger(__name__)

NAMES_PER_REQUEST = 64  # about 2 KB of query string per request


def rule_of(options: AutoscalerOptions) -> SlowSubtaskRule:
    return SlowSubtaskRule(options.slow_subtasks_multiplier, options.slow_subtasks_busy_floor)


async def read_skew(
    client: FlinkClient,
    job_id: str,
    topology: JobTopology,
    read: Mapping[str, VertexRead],
    options: AutoscalerOptions,
) -> dict[str, VertexSkew]:
    """Every read vertex's skew; the subtasks of those that can have a slow one are read (never raises)."""
    if not options.slow_subtasks_enabled:
        return {}
    rule = rule_of(options)
    figures: dict[str, VertexSkew] = {}
    suspects: list[tuple[str, str, str | None, int]] = []
    for vid, (query, answer) in read.items():
        busy = answer.get(query.busy)
        if busy is None:
            continue
        parallelism = topology.vertices[vid].parallelism
        figures[vid] = VertexSkew(busy_skew(busy.max, busy.avg), parallelism)
        if worth_reading(parallelism, busy.min, busy.max, rule):
            records_in = query.in_per_s[0] if query.in_per_s else None
            suspects.append((vid, query.busy, records_in, parallelism))
    if suspects:
        judged = await asyncio.gather(
            *(_subtasks(client, job_id, s, figures[s[0]].skew, rule) for s in suspects),
            return_exceptions=True,
        )
        for (vid, *_), result in zip(suspects, judged, strict=True):
            if isinstance(result, VertexSkew):
                figures[vid] = result
            else:  # a diagnosis: the job is collected all the same
                log.info("slow_subtasks_unread", job_id=job_id, vertex_id=vid, error=str(result))
    return figures


async def _subtasks(
    client: FlinkClient,
    job_id: str,
    suspect: tuple[str, str, str | None, int],
    skew: float,
    rule: SlowSubtaskRule,
) -> VertexSkew:
    vid, busy_name, in_name, parallelism = suspect
    names = [f"{i}.{busy_name}" for i in range(parallelism)]
    if in_name is not None:
        names += [f"{i}.{in_name}" for i in range(parallelism)]
    chunks = [names[k : k + NAMES_PER_REQUEST] for k in range(0, len(names), NAMES_PER_REQUEST)]
    answers = await asyncio.gather(*(client.subtask_metrics(job_id, vid, chunk) for chunk in chunks))
    values = {name: value for answer in answers for name, value in answer.items()}
    busy = _by_subtask(values, busy_name, parallelism)
    records_in = _by_subtask(values, in_name, parallelism) if in_name is not None else []
    return judge(skew, busy, records_in, rule)


def _by_subtask(values: Mapping[str, float], name: str, parallelism: int) -> Sequence[float]:
    return [float(values.get(f"{i}.{name}", math.nan)) for i in range(parallelism)]
