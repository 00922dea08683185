"""Named scenarios for the demo, the tests and ``flink-autoscaler simulate``, plus YAML loading.

``work_job`` has the shape of the real lab job (flink-rest.md §3): ``Source: BacklogSource`` →
REBALANCE → ``Work`` (about 1250 rec/s per subtask) → HASH → ``Aggregate -> Sink: Writer``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from autoscaler.simulator.spec import (
    Constant,
    RateSchedule,
    SimClusterSpec,
    SimEdgeSpec,
    SimJobSpec,
    SimVertexSpec,
    Sine,
    Steps,
)

__all__ = ["DEMO_RATE", "LAB_VERTEX_IDS", "SCENARIOS", "Scenario", "demo_job", "load_scenario", "work_job"]

Scenario = tuple[SimClusterSpec, list[SimJobSpec]]

DEMO_RATE = Steps([(0, 800), (120, 2000), (420, 500)])
"""Calm (Work at 1 is enough), a surge that needs Work at 2, then quiet enough to scale back down."""
_DEFAULT_RATE = Constant(2000)
LAB_VERTEX_IDS = {
    "Source: BacklogSource": "e5a72f353fc1e6bbf3bd96a41384998c",
    "Work": "674df9b0384c0348e0b9d1034a44c46c",
    "Aggregate -> Sink: Writer": "96eed58e350a66c179f06330f5425345",
}
"""The real lab job's vertex ids: Flink derives them from the topology, so every submission shares them."""
_RATE = TypeAdapter(RateSchedule)


def work_job(
    name: str = "load-job",
    work_capacity: float = 1250.0,
    input_rate: RateSchedule = _DEFAULT_RATE,
    work_parallelism: int = 1,
    *,
    source_parallelism: int = 1,
    sink_parallelism: int = 1,
    partitions: int = 8,
    initial_backlog: float = 0.0,
    max_parallelism: int = 128,
    source_counts_records_in: bool = True,
    in_flight_records: float = 0.0,
    job_config: Mapping[str, str] | None = None,
) -> SimJobSpec:
    """The lab job: a partitioned backlog source, a CPU-bound ``Work`` vertex, a keyed sink chain.

    ``in_flight_records``: what the network buffers in front of each Work and sink subtask hold before
    their inputs are back-pressured (``LAB_IN_FLIGHT_RECORDS`` is the lab's; 0: none).
    """
    source = "Source: BacklogSource"
    sink = "Aggregate -> Sink: Writer"
    return SimJobSpec(
        name=name,
        vertices=(
            SimVertexSpec(
                name=source,
                vertex_id=LAB_VERTEX_IDS[source],
                capacity_per_subtask=100_000.0,
                parallelism=source_parallelism,
                max_parallelism=max_parallelism,
                source_partitions=partitions,
                counts_records_in=source_counts_records_in,
            ),
            SimVertexSpec(
                name="Work",
                vertex_id=LAB_VERTEX_IDS["Work"],
                capacity_per_subtask=work_capacity,
                parallelism=work_parallelism,
                max_parallelism=max_parallelism,
                in_flight_records=in_flight_records,
            ),
            SimVertexSpec(
                name=sink,
                vertex_id=LAB_VERTEX_IDS[sink],
                capacity_per_subtask=20_000.0,
                parallelism=sink_parallelism,
                max_parallelism=max_parallelism,
                output_ratio=0.0,
                in_flight_records=in_flight_records,
            ),
        ),
        edges=(
            SimEdgeSpec(source=source, target="Work", ship_strategy="REBALANCE"),
            SimEdgeSpec(source="Work", target=sink, ship_strategy="HASH"),
        ),
        input_rate=input_rate,
        initial_backlog=initial_backlog,
        job_config=dict(job_config or {}),
    )


def demo_job(name: str = "demo-job", **kwargs: Any) -> SimJobSpec:
    """``work_job`` under ``DEMO_RATE``: 800 rec/s for 120 s, 2000 rec/s until 420 s, then 500 rec/s."""
    return work_job(name=name, input_rate=DEMO_RATE, **kwargs)


def _demo() -> Scenario:
    """The lab's fast settings (cooldown 10 s, metric fetch every 5 s) so a compressed demo moves along."""
    return SimClusterSpec(cooldown_after_rescaling_s=10.0, metric_fetch_interval_s=5.0), [demo_job()]


def _steady() -> Scenario:
    """2000 rec/s forever against Work at 1 (1250 rec/s): the autoscaler should settle on Work at 2."""
    return SimClusterSpec(), [work_job()]


def _sine() -> Scenario:
    """A 10-minute 'day' between 500 and 2500 rec/s: scale-up, scale-down and the delay between them."""
    return SimClusterSpec(), [
        work_job(name="sine-job", input_rate=Sine(base=1500, amplitude=1000, period_s=600))
    ]


SCENARIOS: dict[str, Callable[[], Scenario]] = {"demo": _demo, "steady": _steady, "sine": _sine}

_TEMPLATES: dict[str, Callable[..., SimJobSpec]] = {"work_job": work_job, "demo_job": demo_job}


def load_scenario(path: str | Path) -> Scenario:
    """Read ``cluster:`` (a SimClusterSpec) and ``jobs:`` from YAML.

    A job is either a full SimJobSpec mapping or ``{template: work_job | demo_job, <keyword>: ...}``.
    Raises ValueError naming the file and the bad entry.
    """
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not isinstance(data.get("jobs", []), list):
        raise ValueError(f"{path}: expected a mapping with 'cluster:' and a 'jobs:' list")
    try:
        cluster = SimClusterSpec.model_validate(data.get("cluster") or {})
    except ValidationError as error:
        raise ValueError(f"{path}: cluster: {error}") from error
    jobs = []
    for index, entry in enumerate(data.get("jobs") or []):
        try:
            jobs.append(_job_from_yaml(entry))
        except (ValidationError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: jobs[{index}]: {error}") from error
    return cluster, jobs


def _job_from_yaml(entry: Any) -> SimJobSpec:
    if not isinstance(entry, dict):
        raise ValueError("a job must be a mapping")
    if "template" not in entry:
        return SimJobSpec.model_validate(entry)
    kwargs = dict(entry)
    template = kwargs.pop("template")
    if template not in _TEMPLATES:
        raise ValueError(f"unknown template {template!r}; known: {sorted(_TEMPLATES)}")
    if "input_rate" in kwargs:
        kwargs["input_rate"] = _RATE.validate_python(kwargs["input_rate"])
    return _TEMPLATES[template](**kwargs)
