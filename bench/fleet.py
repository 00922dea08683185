"""The fleet ``bench_fleet.py`` simulates: N jobs x V vertices, the same on every run and machine.

Most jobs sit in the utilization band, one in ten has a vertex over capacity and one in twenty is mostly
idle, so a measured tick holds the decisions a real fleet's would (``tests/unit/bench/test_bench_fleet.py``
checks the utilizations in the simulator itself). ``serve_simulator`` is the simulator process's body.
"""

from __future__ import annotations

import argparse
import hashlib
import math

from autoscaler.simulator.spec import Noise, SimClusterSpec, SimEdgeSpec, SimJobSpec, SimVertexSpec

CLUSTER = "fleet"
SLOTS_PER_TM = 16
SLOTS_PER_JOB = 6  # room per job: its widest vertex (at most 4) and a scale-up or two


# ---------------------------------------------------------------------------------------------- the fleet
def _unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``: the fleet is the same on every run and machine."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def job_kind(j: int) -> str:
    """One job in ten has a vertex over capacity (it must scale up), one in twenty is mostly idle (a
    scale-down candidate once ``scale-down.interval`` has passed); the rest sit in the utilization band."""
    if j % 10 == 3:
        return "hot"
    if j % 20 == 7:
        return "cold"
    return "in-band"


def fleet_job(j: int, vertices: int) -> SimJobSpec:
    """Job ``j``: a source, then a chain whose every third vertex also reads the vertex two back (a small
    DAG with joins), then a sink. Its load is 500..5000 rec/s with +-10 % noise (a new draw every 10 s);
    each vertex's capacity is set from its share of that load so it runs at the utilization its kind
    asks: 0.45..0.85 in band, 1.3 for the hot vertex of a hot job, 0.2 everywhere in a cold job."""
    rate = 500.0 * (1 + int(_unit("rate", j) * 10))
    names = ["Source: Events", *(f"Stage {k}" for k in range(1, vertices - 1)), "Sink: Out"][:vertices]
    if vertices == 1:
        names = ["Source: Events"]
    edges: list[SimEdgeSpec] = []
    for k in range(1, vertices):
        edges.append(
            SimEdgeSpec(source=names[k - 1], target=names[k], ship_strategy="REBALANCE" if k == 1 else "HASH")
        )
        if k >= 3 and k % 3 == 0:
            edges.append(SimEdgeSpec(source=names[k - 2], target=names[k], ship_strategy="HASH"))
    gains = [1.0] + [0.0] * (vertices - 1)  # records per source record reaching each vertex
    for edge in edges:
        gains[names.index(edge.target)] += gains[names.index(edge.source)]
    kind = job_kind(j)
    hot = 1 + int(_unit("hot", j) * (vertices - 1)) if vertices > 1 else 0
    specs = []
    for k, name in enumerate(names):
        parallelism = (1, 2, 2, 4)[int(_unit("p", j, k) * 4)]
        if kind == "cold":
            utilization = 0.2
        elif kind == "hot" and k == hot:
            utilization = 1.3
        else:
            utilization = 0.45 + 0.4 * _unit("u", j, k)
        specs.append(
            SimVertexSpec(
                name=name,
                capacity_per_subtask=gains[k] * rate / (parallelism * utilization),
                parallelism=parallelism,
                output_ratio=0.0 if k == vertices - 1 and vertices > 1 else 1.0,
                source_partitions=8 if k == 0 else 0,
            )
        )
    return SimJobSpec(
        name=f"fleet-{j:05d}",
        vertices=tuple(specs),
        edges=tuple(edges),
        input_rate=Noise(base=rate, spread=0.1, hold_s=10.0, seed=j),
    )


def fleet_cluster(jobs: int, fetch_interval_s: float, step_s: float) -> SimClusterSpec:
    """Room for every job and its scale-ups in 16-slot TaskManagers with an 8 GiB heap (a slot holds a
    subtask of each vertex, so the lab's 416 MiB heap would read as memory pressure and block every
    decision); Flink's lazy metric fetcher; Flink's default cooldown."""
    return SimClusterSpec(
        slots=SLOTS_PER_TM,
        taskmanager_heap_bytes=8 * 1024**3,
        taskmanagers=max(1, math.ceil(jobs * SLOTS_PER_JOB / SLOTS_PER_TM)),
        metric_fetch_interval_s=fetch_interval_s,
        step_s=step_s,
    )


def serve_simulator(args: argparse.Namespace) -> None:
    """The simulator process: the fleet over HTTP until SIGTERM (the benchmark reads its URL on stdout)."""
    from autoscaler.simulator.server import run_simulator

    jobs = [fleet_job(j, args.vertices) for j in range(args.jobs)]
    run_simulator(
        fleet_cluster(args.jobs, args.fetch_interval, args.step), jobs, port=0, speed=1.0, duration_s=None
    )
