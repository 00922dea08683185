"""The job-level gates of the decision stage as one table: inputs -> outcome, each row citing its rule.

Rules are the reference study's sections (``/work/shared/reference/flink-autoscaler.md``): §1.8 lists the
``ScalingExecutor`` gates in order (1: memory pressure, excluded vertices, band; 4: advisor mode and
excluded periods; 6: quota). Times are UTC; 2026-11-23 is a Monday, 2026-11-28 a Saturday.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from autoscaler.model import JobEvaluation, JobTopology, TaskManagerSample, VertexInfo
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState
from autoscaler.testing import make_sample, vertex_eval
from autoscaler.tick.decide import decide

GIB = 1 << 30
MONDAY_10 = "2026-11-23 10:00:00"
SATURDAY_10 = "2026-11-28 10:00:00"

# One 8-slot TaskManager with 4 cores and 4 GiB; the job below uses 8 slots of one group.
TM_4CPU_4GIB = TaskManagerSample(count=1, cpu_cores_per_tm=4.0, memory_per_tm=4.0 * GIB, slots_per_tm=8.0)


@dataclass(frozen=True)
class V:
    """A vertex: current parallelism, recommended target, band flag, slot-sharing group."""

    id: str
    p: int
    target: int | None = None
    outside: bool | None = None
    group: str | None = None


SCALE_UP = (V("src", 4), V("work", 8, 12))  # 8 -> 12 slots: a second TaskManager
SCALE_DOWN = (V("src", 4), V("work", 8, 4))


@dataclass(frozen=True)
class Case:
    rule: str
    vertices: tuple[V, ...] = SCALE_UP
    options: dict[str, Any] = field(default_factory=dict)
    tm: TaskManagerSample = field(default_factory=TaskManagerSample)
    now: str = MONDAY_10
    expected: Reason = Reason.SCALING
    changes: dict[str, int] | None = None  # the targets in the decision, when the row cares


CASES: dict[str, Case] = {
    # ------------------------------------------------------------------------------------------------ band
    "band: every vertex that would change is in band": Case(
        "§1.8 step 1 band gate", (V("work", 4, 5, outside=False),), expected=Reason.IN_BAND
    ),
    "band: an in-band change rides along with one outside": Case(
        "§1.8 step 1 band gate",
        (V("a", 4, 5, outside=False), V("b", 1, 2, outside=True)),
        changes={"a": 5, "b": 2},
    ),
    "band: a vertex outside its band but at its limit opens nothing": Case(
        "§1.8 step 1 band gate",
        (V("src", 1, 1, outside=True), V("work", 3, 4, outside=False)),
        expected=Reason.IN_BAND,
    ),
    # ------------------------------------------------------------------------------------- memory pressure
    "memory: GC 0.95 > threshold 0.9 blocks": Case(
        "§1.8 step 1 memory pressure (GC)",
        options={"memory_gc_pressure_threshold": 0.9},
        tm=TaskManagerSample(gc_time_ms_per_s=950.0),
        expected=Reason.MEMORY_PRESSURE,
    ),
    "memory: GC 0.9 == threshold 0.9 does not block": Case(
        "§1.8 step 1 memory pressure (GC, strictly above)",
        options={"memory_gc_pressure_threshold": 0.9},
        tm=TaskManagerSample(gc_time_ms_per_s=900.0),
    ),
    "memory: GC NaN never blocks": Case(
        "§1.8 step 1 memory pressure (NaN never blocks)",
        options={"memory_gc_pressure_threshold": 0.0},
        tm=TaskManagerSample(gc_time_ms_per_s=math.nan),
    ),
    "memory: heap 0.99 > threshold 0.95 blocks": Case(
        "§1.8 step 1 memory pressure (heap)",
        options={"memory_heap_usage_threshold": 0.95},
        tm=TaskManagerSample(heap_used=0.99 * GIB, heap_max=1.0 * GIB),
        expected=Reason.MEMORY_PRESSURE,
    ),
    "memory: heap 0.5 under threshold 0.95 does not block": Case(
        "§1.8 step 1 memory pressure (heap)",
        options={"memory_heap_usage_threshold": 0.95},
        tm=TaskManagerSample(heap_used=0.5 * GIB, heap_max=1.0 * GIB),
    ),
    "memory: heap unknown (NaN max) never blocks": Case(
        "§1.8 step 1 memory pressure (NaN never blocks)",
        options={"memory_heap_usage_threshold": 0.0},
        tm=TaskManagerSample(heap_used=0.99 * GIB, heap_max=math.nan),
    ),
    # ----------------------------------------------------------------------------------- excluded vertices
    "exclude: an excluded vertex is skipped, the others scale": Case(
        "§1.8 step 1 vertex.exclude.ids",
        (V("work", 1, 3), V("sink", 1, 2)),
        options={"vertex_exclude_ids": ("work",)},
        changes={"sink": 2},
    ),
    "exclude: excluding the only changing vertex leaves nothing to do": Case(
        "§1.8 step 1 vertex.exclude.ids",
        (V("src", 2), V("work", 1, 3)),
        options={"vertex_exclude_ids": "work"},
        expected=Reason.IN_BAND,
    ),
    # ---------------------------------------------------------------------------------------- advisor mode
    "advisor: scaling.enabled=false reports the changes": Case(
        "§1.8 step 4 advisor mode",
        options={"scaling_enabled": False},
        expected=Reason.ADVISOR_MODE,
        changes={"work": 12},
    ),
    "advisor: reported first when also in an excluded period": Case(
        "§1.8 step 4 advisor mode / excluded periods",
        options={"scaling_enabled": False, "excluded_periods": ("* * * ? * *",)},
        expected=Reason.ADVISOR_MODE,
    ),
    # ------------------------------------------------------------------------------------ excluded periods
    "period: cron working hours, Monday 10:00": Case(
        "§1.8 step 4 excluded periods (cron)",
        options={"excluded_periods": "* * 9-17 ? * MON-FRI"},
        expected=Reason.EXCLUDED_PERIOD,
        changes={"work": 12},
    ),
    "period: cron working hours, Saturday 10:00 does not match": Case(
        "§1.8 step 4 excluded periods (cron, non-matching)",
        options={"excluded_periods": "* * 9-17 ? * MON-FRI"},
        now=SATURDAY_10,
    ),
    "period: cron with a fixed second matches only that second": Case(
        "§1.8 step 4 excluded periods (cron, second-granular)",
        options={"excluded_periods": "0 0 10 ? * MON"},
        now="2026-11-23 10:00:01",
    ),
    "period: daily range 09:00-17:00 at 12:00": Case(
        "§1.8 step 4 excluded periods (daily range)",
        options={"excluded_periods": "09:00:00-17:00:00"},
        now="2026-11-23 12:00:00",
        expected=Reason.EXCLUDED_PERIOD,
    ),
    "period: daily range 09:00-17:00 at 17:00:01": Case(
        "§1.8 step 4 excluded periods (daily range, non-matching)",
        options={"excluded_periods": "09:00:00-17:00:00"},
        now="2026-11-23 17:00:01",
    ),
    "period: daily range wrapping midnight, 03:00": Case(
        "§1.8 step 4 excluded periods (daily range wraps midnight)",
        options={"excluded_periods": "22:00:00-06:00:00"},
        now="2026-11-23 03:00:00",
        expected=Reason.EXCLUDED_PERIOD,
    ),
    "period: daily range wrapping midnight, 12:00": Case(
        "§1.8 step 4 excluded periods (daily range wraps midnight, non-matching)",
        options={"excluded_periods": "22:00:00-06:00:00"},
        now="2026-11-23 12:00:00",
    ),
    "period: && both parts hold": Case(
        "§1.8 step 4 excluded periods (&&)",
        options={"excluded_periods": "08:00-12:00 && * * * ? * MON-FRI"},
        expected=Reason.EXCLUDED_PERIOD,
    ),
    "period: && one part fails": Case(
        "§1.8 step 4 excluded periods (&&, non-matching)",
        options={"excluded_periods": "08:00-12:00 && * * * ? * MON-FRI"},
        now=SATURDAY_10,
    ),
    "period: the second of two periods matches": Case(
        "§1.8 step 4 excluded periods (any entry)",
        options={"excluded_periods": "* * 0-5 ? * *;* * 10 ? * MON"},
        expected=Reason.EXCLUDED_PERIOD,
    ),
    "period: the band gate comes first": Case(
        "§1.8 steps 1-4 order",
        (V("work", 4, 5, outside=False),),
        options={"excluded_periods": "* * * ? * *"},
        expected=Reason.IN_BAND,
    ),
    "period: memory pressure comes first": Case(
        "§1.8 steps 1-4 order",
        options={"excluded_periods": "* * * ? * *", "memory_gc_pressure_threshold": 0.5},
        tm=TaskManagerSample(gc_time_ms_per_s=900.0),
        expected=Reason.MEMORY_PRESSURE,
    ),
    # ----------------------------------------------------------------------------------------------- quota
    "quota: CPU, 2 TaskManagers x 4 cores = 8 > 6": Case(
        "§1.8 step 6 quota (CPU)",
        options={"quota_cpu": 6.0},
        tm=TM_4CPU_4GIB,
        expected=Reason.RESOURCE_QUOTA_REACHED,
    ),
    "quota: CPU, 8 cores == quota 8 is allowed": Case(
        "§1.8 step 6 quota (CPU, not above)", options={"quota_cpu": 8.0}, tm=TM_4CPU_4GIB
    ),
    "quota: memory, 2 x 4 GiB = 8 GiB > 6 GiB": Case(
        "§1.8 step 6 quota (memory)",
        options={"quota_memory": "6 gb"},
        tm=TM_4CPU_4GIB,
        expected=Reason.RESOURCE_QUOTA_REACHED,
    ),
    "quota: memory, 8 GiB within 16 GiB": Case(
        "§1.8 step 6 quota (memory)", options={"quota_memory": "16 gb"}, tm=TM_4CPU_4GIB
    ),
    "quota: shrinking is allowed even above the quota": Case(
        "§1.8 step 6 quota (TaskManagers do not grow)",
        SCALE_DOWN,
        options={"quota_cpu": 1.0, "quota_memory": "1 gb", "scale_down_interval": "0 s"},
        tm=TM_4CPU_4GIB,
        changes={"work": 4},
    ),
    "quota: growing within the same TaskManager is allowed": Case(
        "§1.8 step 6 quota (TaskManagers do not grow)",
        (V("src", 4), V("work", 4, 8)),
        options={"quota_cpu": 1.0},
        tm=TM_4CPU_4GIB,
    ),
    "quota: unknown TaskManager resources never block": Case(
        "§1.8 step 6 quota (unknown never blocks)",
        options={"quota_cpu": 1.0, "quota_memory": "1 gb"},
        tm=TaskManagerSample(),
    ),
    "quota: unknown CPU never blocks the CPU quota": Case(
        "§1.8 step 6 quota (unknown never blocks)",
        options={"quota_cpu": 1.0},
        tm=TaskManagerSample(count=1, memory_per_tm=4.0 * GIB, slots_per_tm=8.0),
    ),
    "quota: slots add up over slot-sharing groups": Case(
        "§1.8 step 6 quota (per-group max, summed)",
        (V("src", 4, group="a"), V("work", 4, 5, group="b")),  # 8 -> 9 slots: a second TaskManager
        options={"quota_cpu": 6.0},
        tm=TM_4CPU_4GIB,
        expected=Reason.RESOURCE_QUOTA_REACHED,
    ),
    "quota: comes after the excluded period": Case(
        "§1.8 steps 4-6 order",
        options={"quota_cpu": 1.0, "excluded_periods": "* * * ? * *"},
        tm=TM_4CPU_4GIB,
        expected=Reason.EXCLUDED_PERIOD,
    ),
}


def _now_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _evaluation(case: Case, options: AutoscalerOptions) -> JobEvaluation:
    topology = JobTopology.build(
        [VertexInfo(v.id, v.id, v.p, 128, slot_sharing_group=v.group) for v in case.vertices], []
    )
    sample = make_sample(topology, options=options, taskmanagers=case.tm)
    vertices = {v.id: vertex_eval(v.id, v.p, v.target, outside_band=v.outside) for v in case.vertices}
    return JobEvaluation(sample, vertices, processing_backlog=False, window_samples=90, window_full=True)


def test_the_table_is_large_enough_and_every_row_cites_its_rule():
    assert len(CASES) >= 18
    assert all(c.rule.startswith("§") for c in CASES.values())


@pytest.mark.parametrize("name", list(CASES))
def test_gate(name):
    case = CASES[name]
    options = AutoscalerOptions.model_validate({"enabled": True, **case.options})
    decision = decide(_evaluation(case, options), JobState(), options, _now_ms(case.now))
    assert decision.outcome is case.expected, f"{name} ({case.rule}): {decision.detail}"
    assert decision.applies is (case.expected is Reason.SCALING)
    if case.changes is not None:
        assert {vid: c.target for vid, c in decision.changes.items()} == case.changes, case.rule


def test_explain_names_the_gates_in_the_order_the_decision_stage_runs_them() -> None:
    from autoscaler.explain.build import GATES as EXPLAINED
    from autoscaler.tick.decide import GATES

    explained = [name for name, _, _ in EXPLAINED]
    assert [name for name, _ in GATES if name in explained] == explained
