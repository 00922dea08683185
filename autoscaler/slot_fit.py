"""Whether a rescale fits the cluster's free slots, and what of it fits when it does not.

Flink's adaptive scheduler treats a job's upper bound as a wish. With too few free slots it restarts the
job at what fits once its resource-stabilization timeout passes, and restarts it again each time more
slots appear, at moments nobody chose (``flink-rest.md``: 12 requested on 8 slots ran at 8). So the
daemon checks before it asks, with what the tick read from ``GET /taskmanagers``: the slots a job holds
are, per slot-sharing group, the highest parallelism among the group's vertices, summed over groups
(:func:`autoscaler.resources.required_slots`), and a rescale fits when what it needs is at most the
cluster's free slots plus the job's own. The jobs of one cluster claim free slots one after another in
a tick (:class:`SlotBudget`), so two rescales that each fit alone cannot both be sent when together
they do not: by ``scaling.slot-priority`` (higher first), then by backlog pressure
(:func:`backlog_seconds`, more first), then by job key.

When a rescale does not fit, ``scaling.insufficient-slots`` says what happens: CAP asks for what fits,
WAIT asks for nothing until all of it fits, IGNORE asks for all of it as before. Capping shares the room
among the slot-sharing groups that grow, in proportion to how much each wanted to grow, and trims each
growing vertex to its group's share, to a parallelism that spreads its key groups or source partitions
evenly where the scaler aligns it. Scale-downs are never trimmed: they only free slots.

A rescale that was asked for whole may still run below it: slots taken in between, a TaskManager lost,
IGNORE. Flink keeps the request and scales the job up to it as slots come, so the daemon keeps it too
(:func:`below_request`): it does not ask for it again, and says so instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.evaluate.scaler import alignment_applies
from autoscaler.model import JobEvaluation, JobTopology, VertexId, frozen_map
from autoscaler.resources import group_slots, required_slots, slot_groups

__all__ = [
    "CAPPED_TEXT",
    "IdleSlots",
    "SlotBudget",
    "SlotFit",
    "backlog_seconds",
    "below_request",
    "below_text",
    "fit_slots",
    "slots_short_of_request",
]

CAPPED_TEXT = "asking for what fits"  # in a capped rescale's detail (``explain`` finds it there)


@dataclass(frozen=True, slots=True)
class IdleSlots:
    """Slots a job's smaller run leaves idle in its slot pool, free for others by ``until_ms`` at the
    latest (``autoscaler.idle_slots``)."""

    job: str  # the job key whose scale-down left them
    slots: int
    until_ms: int


@dataclass
class SlotBudget:
    """One cluster's slots in this tick, as its jobs' rescales claim the free ones in turn."""

    total: int  # 0: unknown (no TaskManager listing this tick): nothing is held back
    free: int
    claimed: int = 0  # free slots the rescales before took this tick
    claims: list[str] = field(default_factory=list)  # who took them, in order
    idle: list[IdleSlots] = field(default_factory=list)  # slots coming free, not yet waited for

    @property
    def known(self) -> bool:
        return self.total > 0

    def claim(self, fit: SlotFit, who: str) -> None:
        """Take the slots a rescale about to be asked for adds to its job's (none if it shrinks)."""
        taken = min(self.free, max(0, fit.needed_after - fit.own))
        if taken:
            self.free -= taken
            self.claimed += taken
            self.claims.append(f"{who} took {taken}")

    @property
    def coming(self) -> int:
        """Slots that smaller runs left idle and that no rescale this tick waits for yet."""
        return sum(i.slots for i in self.idle)

    def promise(self, fit: SlotFit) -> list[IdleSlots]:
        """A rescale that fits with the idle slots (``fit``, against the free and the idle ones) waits
        for them. The free slots it will need stay its own this tick, and so do as many idle ones as it
        needs beyond them, soonest first. Returns the idle slots it waits for."""
        wanted = max(0, fit.needed_after - fit.own)
        from_free = min(self.free, wanted)
        self.free -= from_free
        self.claimed += from_free
        short, waited = wanted - from_free, []
        for idle in sorted(self.idle, key=lambda i: i.until_ms):
            if short <= 0:
                break
            waited.append(idle)
            short -= idle.slots
        self.idle = [i for i in self.idle if i not in waited]
        return waited


@dataclass(frozen=True, slots=True)
class SlotFit:
    """A rescale against the free slots: what it needs, what fits, and the parallelism that fits."""

    own: int  # slots the job holds now
    needed: int  # slots the decided parallelism needs
    free: int  # the cluster's free slots before this job's claim
    targets: Mapping[VertexId, int]  # the decided targets, trimmed to what fits (== decided if it fits)
    needed_after: int  # slots ``targets`` need

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", frozen_map(self.targets))

    @property
    def fits(self) -> bool:
        return self.needed <= self.own + self.free

    @property
    def numbers(self) -> str:
        """The figures an event and ``explain`` show."""
        return (
            f"needs {self.needed} slots, the job holds {self.own} and {self.free} are free "
            f"({self.needed - self.own - self.free} short)"
        )


def fit_slots(
    topology: JobTopology,
    targets: Mapping[VertexId, int],
    free: int,
    num_source_partitions: Mapping[VertexId, int] | None = None,
) -> SlotFit:
    """``targets`` (new parallelism of the vertices that change) against ``free`` slots; when they need
    more than the job holds plus ``free``, the targets trimmed to what fits.

    The room (own + free, less what the groups that do not grow need) is shared among the growing
    groups in proportion to their growth, by largest remainder (ties by group name), each getting at
    most what it asked for; a group never goes below the slots it holds.
    """
    current, wanted = group_slots(topology), group_slots(topology, targets)
    own, needed = sum(current.values()), sum(wanted.values())
    if needed <= own + free:
        return SlotFit(own, needed, free, targets, needed)
    growing = {g: wanted[g] - current[g] for g in wanted if wanted[g] > current[g]}
    room = own + free - sum(wanted[g] for g in wanted if g not in growing) - sum(current[g] for g in growing)
    shares = _shares(growing, max(0, room))
    caps = {g: current[g] + shares[g] for g in growing}
    groups = slot_groups(topology)
    partitions = num_source_partitions or {}
    trimmed: dict[VertexId, int] = {}
    for vid, target in targets.items():
        vertex = topology.vertices[vid]
        cap = caps.get(groups[vid], target)
        if target <= vertex.parallelism or target <= cap:
            trimmed[vid] = target
            continue
        strategies = [e.ship_strategy for e in topology.inputs(vid)]
        units = partitions.get(vid, 0)
        if alignment_applies(units, strategies):
            cap = _even_below(cap, vertex.parallelism, units or vertex.max_parallelism)
        trimmed[vid] = cap
    return SlotFit(own, needed, free, trimmed, required_slots(topology, trimmed))


def _shares(wants: Mapping[str, int], room: int) -> dict[str, int]:
    """``room`` slots shared in proportion to ``wants``, by largest remainder, none above its want."""
    total = sum(wants.values())
    if room >= total:
        return dict(wants)
    exact = {g: room * w / total for g, w in wants.items()}
    shares = {g: math.floor(x) for g, x in exact.items()}
    left = room - sum(shares.values())
    for g in sorted(wants, key=lambda g: (shares[g] - exact[g], g))[:left]:
        shares[g] += 1
    return shares


def _even_below(cap: int, current: int, units: int) -> int:
    """The highest parallelism in (current, cap] that spreads ``units`` (partitions or key groups)
    evenly; ``cap`` itself when none does (some growth beats none: the next rescale aligns again)."""
    for p in range(cap, current, -1):
        if units % p == 0:
            return p
    return cap


def below_request(topology: JobTopology, asked: Mapping[VertexId, int]) -> dict[VertexId, tuple[int, int]]:
    """The vertices Flink runs below the parallelism ``asked`` for them (the last rescale, once Flink
    restarted the job for it), as (running, asked)."""
    out: dict[VertexId, tuple[int, int]] = {}
    for vid, wanted in asked.items():
        vertex = topology.vertices.get(vid)
        if vertex is not None and vertex.parallelism < wanted:
            out[vid] = (vertex.parallelism, wanted)
    return out


def below_text(below: Mapping[VertexId, tuple[int, int]], names: Mapping[VertexId, str]) -> str:
    """``Work at 8 of the 12 asked``, per vertex of :func:`below_request`: how events and decisions say it."""
    return ", ".join(
        f"{names.get(v, v)} at {running} of the {asked} asked" for v, (running, asked) in below.items()
    )


def slots_short_of_request(topology: JobTopology, below: Mapping[VertexId, tuple[int, int]]) -> int:
    """The slots the job would hold more at the request than it holds now."""
    if not below:
        return 0
    at_request = required_slots(topology, {vid: asked for vid, (_, asked) in below.items()})
    return at_request - required_slots(topology)


def backlog_seconds(evaluation: JobEvaluation | None) -> float:
    """Backlog pressure: how long the job's largest backlog takes to process at its vertex's capacity
    now (lag / true processing rate, in seconds); 0 when no vertex has a known backlog."""
    if evaluation is None:
        return 0.0
    worst = 0.0
    for v in evaluation.vertices.values():
        if v.lag > 0 and math.isfinite(v.lag) and v.true_processing_rate > 0:
            worst = max(worst, v.lag / v.true_processing_rate)
    return worst if math.isfinite(worst) else 0.0
