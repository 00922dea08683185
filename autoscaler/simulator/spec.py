"""What a simulated cluster and its jobs look like: pydantic models, so scenarios load from YAML too.

A job is a DAG of vertices, each with a fixed capacity per subtask (records/s one subtask can process),
fed by one offered input rate (``RateSchedule``) that every source vertex receives in full.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

__all__ = [
    "Bursts",
    "Constant",
    "Noise",
    "Product",
    "Ramp",
    "RateSchedule",
    "ShipStrategy",
    "SimClusterSpec",
    "SimEdgeSpec",
    "SimJobSpec",
    "SimVertexSpec",
    "Sine",
    "Steps",
    "stable_hex_id",
]

ShipStrategy = Literal["FORWARD", "REBALANCE", "HASH", "RESCALE", "BROADCAST"]
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


def stable_hex_id(*parts: str) -> str:
    """A 32-hex id derived only from ``parts``: a resubmitted job keeps its vertex ids, like in Flink."""
    return hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=16).hexdigest()


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Constant(_Spec):
    """The same offered rate forever. ``Constant(2000)`` or ``{rate: 2000}`` in YAML."""

    kind: Literal["constant"] = "constant"
    rate: float = Field(ge=0)

    def __init__(self, rate: float | None = None, /, **data: Any) -> None:
        if rate is not None:
            data["rate"] = rate
        super().__init__(**data)

    def rate_at(self, t_s: float) -> float:
        return self.rate


class Steps(_Spec):
    """Piecewise-constant rate: ``steps=[(at_s, rate), ...]``, offsets from submission; 0 before the first."""

    kind: Literal["steps"] = "steps"
    steps: tuple[tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]], ...] = Field(
        min_length=1
    )

    def __init__(self, steps: Any = None, /, **data: Any) -> None:
        if steps is not None:
            data["steps"] = steps
        super().__init__(**data)

    @model_validator(mode="after")
    def _sorted(self) -> Steps:
        offsets = [at for at, _ in self.steps]
        if offsets != sorted(offsets):
            raise ValueError("steps must be sorted by their offset (at_s)")
        return self

    def rate_at(self, t_s: float) -> float:
        rate = 0.0
        for at_s, step_rate in self.steps:
            if t_s < at_s:
                break
            rate = step_rate
        return rate


class Sine(_Spec):
    """``base + amplitude * sin(2π t / period_s)``, never below 0: a daily pattern squeezed into minutes."""

    kind: Literal["sine"] = "sine"
    base: float = Field(ge=0)
    amplitude: float = Field(ge=0)
    period_s: float = Field(gt=0)

    def rate_at(self, t_s: float) -> float:
        return max(0.0, self.base + self.amplitude * math.sin(2 * math.pi * t_s / self.period_s))


class Ramp(_Spec):
    """Piecewise-linear rate through ``points=[(at_s, rate), ...]``: the first rate before the first point,
    the last after the last, a straight line between two. ``[(300, 800), (1500, 3200)]`` is a 20-minute
    ramp from 800 to 3200 rec/s after 5 steady minutes."""

    kind: Literal["ramp"] = "ramp"
    points: tuple[tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]], ...] = Field(
        min_length=1
    )

    def __init__(self, points: Any = None, /, **data: Any) -> None:
        if points is not None:
            data["points"] = points
        super().__init__(**data)

    @model_validator(mode="after")
    def _sorted(self) -> Ramp:
        offsets = [at for at, _ in self.points]
        if offsets != sorted(offsets):
            raise ValueError("points must be sorted by their offset (at_s)")
        return self

    def rate_at(self, t_s: float) -> float:
        if t_s <= self.points[0][0]:
            return self.points[0][1]
        for (t0, r0), (t1, r1) in zip(self.points, self.points[1:], strict=False):
            if t_s < t1:
                return r0 + (r1 - r0) * (t_s - t0) / (t1 - t0)
        return self.points[-1][1]


class Noise(_Spec):
    """Stationary load: ``base * (1 + spread * u)`` with ``u`` uniform in [-1, 1], a new draw every
    ``hold_s`` seconds. Each draw hashes ``seed`` and its interval's index, so the rate is a pure
    function of time: the same seed gives the same load whatever the integration step or query order."""

    kind: Literal["noise"] = "noise"
    base: float = Field(ge=0)
    spread: float = Field(ge=0, le=1, description="0.15: +-15 % around base")
    hold_s: float = Field(default=10.0, gt=0)
    seed: int = 0

    def rate_at(self, t_s: float) -> float:
        index = math.floor(t_s / self.hold_s)
        digest = hashlib.blake2b(f"{self.seed}:{index}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / float(2**64 - 1) * 2.0 - 1.0
        return self.base * (1.0 + self.spread * u)


class Bursts(_Spec):
    """``base``, and ``peak`` for ``duration_s`` every ``every_s`` from ``start_s`` on: short bursts that
    a backlog absorbs better than a restart does."""

    kind: Literal["bursts"] = "bursts"
    base: float = Field(ge=0)
    peak: float = Field(ge=0)
    every_s: float = Field(gt=0)
    duration_s: float = Field(gt=0)
    start_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _fits(self) -> Bursts:
        if self.duration_s > self.every_s:
            raise ValueError("a burst (duration_s) cannot last longer than the period (every_s)")
        return self

    def rate_at(self, t_s: float) -> float:
        if t_s < self.start_s:
            return self.base
        return self.peak if (t_s - self.start_s) % self.every_s < self.duration_s else self.base


def _infer_kind(value: Any) -> Any:
    """Let YAML say ``input_rate: 2000`` or ``{steps: [...]}`` without spelling out ``kind``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"kind": "constant", "rate": value}
    if isinstance(value, dict) and "kind" not in value:
        for key, kind in (
            ("rate", "constant"),
            ("steps", "steps"),
            ("points", "ramp"),
            ("spread", "noise"),
            ("peak", "bursts"),
            ("base", "sine"),
            ("factors", "product"),
        ):
            if key in value:
                return {"kind": kind, **value}
    return value


class Product(_Spec):
    """The product of schedules at each instant: a shape times a level, or times noise
    around 1. ``Product([Sine(base=1, amplitude=0.4, period_s=900), Noise(base=2000, spread=0.1)])`` is a
    daily cycle of +-40 % around 2000 rec/s with +-10 % noise on top; a weekly shape is a daily cycle
    times ``Steps`` of the weekday and weekend levels."""

    kind: Literal["product"] = "product"
    factors: tuple[RateSchedule, ...] = Field(min_length=1)

    def __init__(self, factors: Any = None, /, **data: Any) -> None:
        if factors is not None:
            data["factors"] = factors
        super().__init__(**data)

    def rate_at(self, t_s: float) -> float:
        rate = 1.0
        for factor in self.factors:
            rate *= factor.rate_at(t_s)
        return rate


RateSchedule = Annotated[
    Constant | Steps | Sine | Ramp | Noise | Bursts | Product,
    Field(discriminator="kind"),
    BeforeValidator(_infer_kind),
]
Product.model_rebuild()


class SimVertexSpec(_Spec):
    """One job vertex. A name with ``" -> "`` is an operator chain (each operator gets its own metrics)."""

    name: str = Field(min_length=1)
    capacity_per_subtask: float = Field(gt=0, description="records/s one subtask can process")
    parallelism: int = Field(default=1, ge=1)
    max_parallelism: int = Field(default=128, ge=1, le=32768)
    output_ratio: float = Field(default=1.0, ge=0, description="records out per record in")
    vertex_id: str | None = None
    source_partitions: int = Field(default=0, ge=0, description="> 0: Kafka-style partition offset metrics")
    legacy_source: bool = Field(
        default=False, description="a legacy SourceFunction: busy time is NaN and there is no pendingRecords"
    )
    counts_records_in: bool = Field(
        default=True,
        description="False: a source reader not built on SourceReaderBase, whose numRecordsIn stays 0",
    )
    in_flight_records: float = Field(
        default=0.0,
        ge=0,
        description="records the network buffers in front of each subtask hold (its input channels' "
        "buffers and its upstream's output buffers for it) before its inputs are back-pressured; 0: none, "
        "an upstream is back-pressured the moment this vertex saturates",
    )
    hot_key_share: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="share of the vertex's input that carries one hot key: it all goes to subtask 0, the "
        "rest is spread evenly over every subtask (a keyed vertex whose load sits on one subtask; more "
        "parallelism cannot spread it)",
    )

    @model_validator(mode="after")
    def _check(self) -> SimVertexSpec:
        if self.vertex_id is not None and not _HEX32.match(self.vertex_id):
            raise ValueError(f"vertex_id must be 32 lowercase hex digits, got {self.vertex_id!r}")
        if self.parallelism > self.max_parallelism:
            raise ValueError(f"parallelism {self.parallelism} exceeds max_parallelism {self.max_parallelism}")
        return self


class SimEdgeSpec(_Spec):
    source: str
    target: str
    ship_strategy: ShipStrategy = "REBALANCE"


class SimJobSpec(_Spec):
    name: str = Field(min_length=1)
    vertices: tuple[SimVertexSpec, ...] = Field(min_length=1)
    edges: tuple[SimEdgeSpec, ...] = ()
    input_rate: RateSchedule
    initial_backlog: float = Field(default=0.0, ge=0)
    job_config: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_graph(self) -> SimJobSpec:
        names = [v.name for v in self.vertices]
        if len(set(names)) != len(names):
            raise ValueError(f"vertex names must be unique: {names}")
        ids = list(self.resolved_vertex_ids().values())
        if len(set(ids)) != len(ids):
            raise ValueError("vertex ids must be unique")
        seen: set[tuple[str, str]] = set()
        for edge in self.edges:
            for end in (edge.source, edge.target):
                if end not in names:
                    raise ValueError(f"edge {edge.source} -> {edge.target}: unknown vertex {end!r}")
            if edge.source == edge.target or (edge.source, edge.target) in seen:
                raise ValueError(f"edge {edge.source} -> {edge.target} is a self-loop or a duplicate")
            seen.add((edge.source, edge.target))
        targets = {edge.target for edge in self.edges}
        for vertex in self.vertices:
            if vertex.in_flight_records > 0 and vertex.name not in targets:
                raise ValueError(
                    f"vertex {vertex.name!r} is a source (it has no inputs): it cannot set in_flight_records"
                )
            if vertex.hot_key_share > 0 and vertex.name not in targets:
                raise ValueError(
                    f"vertex {vertex.name!r} is a source (it has no inputs): it cannot set hot_key_share"
                )
        self.topological_order()  # raises on a cycle
        return self

    def resolved_vertex_ids(self) -> dict[str, str]:
        """Vertex name -> id; an unset id hashes job name and vertex name (stable across submissions)."""
        return {v.name: v.vertex_id or stable_hex_id(self.name, v.name) for v in self.vertices}

    def topological_order(self) -> list[str]:
        """Vertex names, sources first (Kahn's algorithm, ties in declaration order, like Flink's plan)."""
        indegree = {v.name: 0 for v in self.vertices}
        for edge in self.edges:
            indegree[edge.target] += 1
        ready = [name for name, deg in indegree.items() if deg == 0]
        order: list[str] = []
        while ready:
            name = ready.pop(0)
            order.append(name)
            for edge in self.edges:
                if edge.source == name:
                    indegree[edge.target] -= 1
                    if indegree[edge.target] == 0:
                        ready.append(edge.target)
        if len(order) != len(self.vertices):
            raise ValueError("the job graph has a cycle")
        return order


class SimClusterSpec(_Spec):
    """The session cluster. ``slots`` is per TaskManager (``taskmanager.numberOfTaskSlots``)."""

    slots: int = Field(default=8, ge=1)
    taskmanagers: int = Field(default=1, ge=1)
    cooldown_after_rescaling_s: float = Field(
        default=30.0, ge=0, description="Flink default; also from job start"
    )
    restart_pause_s: float = Field(default=2.0, ge=0, description="no processing while restarting")
    idle_slot_release_s: float = Field(
        default=70.0,
        ge=0,
        description="how long after a restart to fewer slots the idle ones go back to the cluster (Flink "
        '2.3 with its default slot.idle.timeout of 50 s: 69-78 s on the e2e cluster, docs/e2e.md, "Slots")',
    )
    metric_fetch_interval_s: float = Field(
        default=0.0, ge=0, description="0: fresh metrics on every query; > 0: Flink's lazy metric fetcher"
    )
    taskmanager_heap_bytes: int = Field(
        default=436_207_616,
        gt=0,
        description="a TaskManager's Status.JVM.Memory.Heap.Max (the lab's small TM by default); its heap "
        "use is 150 MB + 8 MB per task, so a fleet's many-slot TaskManagers need more not to read as "
        "memory pressure",
    )
    step_s: float = Field(default=0.1, gt=0, le=5.0)
    config: dict[str, str] = Field(
        default_factory=dict, description="extra keys served by /jobmanager/config"
    )

    @property
    def slots_total(self) -> int:
        return self.slots * self.taskmanagers
