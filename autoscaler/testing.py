"""Builders and recorders for tests — ours and plugin authors'.

Builders take plain values with sensible defaults so a test states only what it is about.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from autoscaler.clock import FakeClock
from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import (
    AlignmentBounds,
    Edge,
    JobEvaluation,
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    ScaleUpGain,
    VertexEvaluation,
    VertexInfo,
    VertexSample,
)
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions

__all__ = [
    "FaultyTransport",
    "RecordingRequirementsClient",
    "SlowEvaluator",
    "StubEvaluator",
    "make_evaluation",
    "make_sample",
    "make_topology",
    "offered_share",
    "vertex_eval",
]

JOB = JobRef(cluster="c1", job_id="0" * 32, name="job")


def make_topology(
    parallelism: Mapping[str, int], edges: Sequence[tuple[str, str, str]] = (), max_parallelism: int = 128
) -> JobTopology:
    """Vertices named by their ids: ``make_topology({"src": 1, "w": 4}, [("src", "w", "HASH")])``."""
    vertices = [VertexInfo(vid, vid, p, max_parallelism) for vid, p in parallelism.items()]
    return JobTopology.build(vertices, [Edge(s, t, strategy) for s, t, strategy in edges])


def make_sample(
    topology: JobTopology,
    *,
    ts_ms: int = 0,
    running_since_ms: int = 0,
    options: AutoscalerOptions | None = None,
    job: JobRef = JOB,
    vertices: Mapping[str, VertexSample] | None = None,
    **kwargs: Any,
) -> JobSample:
    samples = {vid: VertexSample() for vid in topology.vertices}
    samples.update(vertices or {})
    return JobSample(
        JobTarget(job, options or AutoscalerOptions(enabled=True)),
        ts_ms,
        running_since_ms,
        topology,
        samples,
        **kwargs,
    )


def vertex_eval(
    vertex: str,
    parallelism: int,
    target: int | None = None,
    *,
    outside_band: bool | None = None,
    tpr: float = 1000.0,
    tdr: float = 1000.0,
    max_parallelism: int = 128,
) -> VertexEvaluation:
    target = parallelism if target is None else target
    return VertexEvaluation(
        vertex=vertex,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        load=0.5,
        true_processing_rate=tpr,
        target_data_rate=tdr,
        catch_up_data_rate=0.0,
        lag=0.0,
        scale_up_threshold=math.nan,
        scale_down_threshold=math.nan,
        target_parallelism=target,
        expected_processing_rate=tpr / parallelism * target,
        outside_band=(target != parallelism) if outside_band is None else outside_band,
    )


def make_evaluation(
    vertices: Sequence[VertexEvaluation],
    *,
    options: AutoscalerOptions | None = None,
    not_ready: Reason | None = None,
    **sample_kwargs: Any,
) -> JobEvaluation:
    topology = make_topology(
        {v.vertex: v.parallelism for v in vertices},
        max_parallelism=max((v.max_parallelism for v in vertices), default=128),
    )
    sample = make_sample(topology, options=options, **sample_kwargs)
    return JobEvaluation(
        sample,
        {v.vertex: v for v in vertices},
        processing_backlog=False,
        window_samples=10,
        window_full=not_ready is None,
        not_ready=not_ready,
    )


@dataclass
class RecordingRequirementsClient:
    """A fake of the two resource-requirements endpoints that records every PUT."""

    requirements: dict[str, ParallelismBounds]
    puts: list[dict[str, ParallelismBounds]] = field(default_factory=list)

    @classmethod
    def of(cls, parallelism: Mapping[str, int]) -> RecordingRequirementsClient:
        return cls({vid: ParallelismBounds(1, p) for vid, p in parallelism.items()})

    async def resource_requirements(self, job_id: str) -> dict[str, ParallelismBounds]:
        return dict(self.requirements)

    async def set_resource_requirements(
        self, job_id: str, requirements: Mapping[str, ParallelismBounds]
    ) -> None:
        missing = set(self.requirements) - set(requirements)
        if missing:
            raise ValueError(f"partial body, missing {sorted(missing)}")
        self.puts.append(dict(requirements))
        self.requirements = {vid: replace(b) for vid, b in requirements.items()}


def offered_share(parallelism: int, target: int, utilization_target: float) -> float:
    """The target data rate, as a share of the true processing rate, of a vertex at ``parallelism``
    that the reference's sizing, ``ceil(p x TDR / (TPR x utilization.target))``, takes to ``target``.

    A scale-up p -> t: ``utilization.target x t / p``, the largest share that sizes it to t; when that
    is not above 1 (a step smaller than the band's, as a capped or hand-picked target), halfway between
    1 and ``t / p``, so the vertex still falls behind now and keeps up at t. A scale-down: the same
    formula, well below the band. No change: ``utilization.target`` (in band, at its target)."""
    ratio = target / parallelism
    if target > parallelism:
        share = utilization_target * ratio
        return share if share > 1 else (1 + ratio) / 2
    return utilization_target * min(ratio, 1.0)


class StubEvaluator:
    """An evaluator that recommends fixed parallelisms by vertex name (no Spark), for daemon tests.

    Vertices named in ``targets`` are outside their band and recommended that parallelism; the rest
    are in band. The rates agree with the recommendation (:func:`offered_share`): a vertex recommended a
    scale-up is offered more than it processes, one recommended a scale-down much less, and one in band
    (the sources too, unless named) is offered its capacity at ``utilization.target``, so the job's only
    bottleneck is a vertex named for a scale-up and pricing a rescale (``cost.enabled``) sees why it is
    asked for. ``fail=True`` makes every evaluation raise, as a broken Spark session would.
    ``ineffective`` names vertices whose last scale-up was ineffective (a mapping gives each one's
    (expected, actual) increase); ``limited`` maps a vertex name to the target a legacy alignment could
    not keep, with the bounds the job's options and topology give. Vertices named in ``unknown`` have
    NaN rates, as when Flink reports nothing usable for them. ``tpr`` gives a vertex's true processing
    rate as a function of its parallelism (1000 rec/s whatever the parallelism otherwise), so a rescale
    can deliver what it promised or not; ``not_ready`` (settable between ticks) makes every evaluation
    not ready with that reason, as a window that is stabilizing or not full yet.
    """

    def __init__(
        self,
        targets: Mapping[str, int] | None = None,
        *,
        fail: bool = False,
        ineffective: Sequence[str] | Mapping[str, tuple[float, float]] = (),
        limited: Mapping[str, int] | None = None,
        unknown: Sequence[str] = (),
        tpr: Mapping[str, Callable[[int], float]] | None = None,
        not_ready: Reason | None = None,
    ) -> None:
        self.targets = dict(targets or {})
        self.tpr = dict(tpr or {})  # vertex name -> its TPR at a parallelism
        self.not_ready = not_ready
        self.unknown = set(unknown)  # vertex names whose true processing and target data rates are NaN
        # vertex names flagged as an ineffective last scale-up -> (expected, actual) increase
        self.ineffective = (
            {name: ScaleUpGain(*gain) for name, gain in ineffective.items()}
            if isinstance(ineffective, Mapping)
            else {name: ScaleUpGain(math.nan, math.nan) for name in ineffective}
        )
        self.limited = dict(limited or {})  # vertex name -> the target a legacy alignment could not keep
        self.fail = fail
        self.checks = 0
        self.calls: list[list[str]] = []
        self.histories: list[dict[str, Any]] = []
        self.restored: list[dict[str, int]] = []  # per call: job key -> stored samples replayed
        self.replayed: list[dict[str, Sequence[JobSample]]] = []  # per call: those samples
        self.forgotten: list[str] = []
        self.reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None
        self.samples: list[JobSample] = []  # the last call's

    def evaluate(
        self,
        samples: Sequence[JobSample],
        now_ms: int,
        *,
        history: Mapping[str, Any] | None = None,
        evaluators: Mapping[str, Any] | None = None,
        restored: Mapping[str, Sequence[JobSample]] | None = None,
        reload: Callable[[Sequence[JobSample]], Mapping[str, Sequence[JobSample]]] | None = None,
    ) -> dict[str, JobEvaluation]:
        self.reload = reload  # how the daemon would refill windows Spark lost
        self.samples = list(samples)
        self.calls.append([s.job.key for s in samples])
        self.restored.append({key: len(past) for key, past in (restored or {}).items()})
        self.replayed.append(dict(restored or {}))
        self.histories.append(dict(history or {}))
        if self.fail:
            raise RuntimeError("Spark session is gone")
        out = {}
        for s in samples:
            vertices = {}
            for vid, info in s.topology.vertices.items():
                target = self.targets.get(info.name, info.parallelism)
                tpr = math.nan if info.name in self.unknown else self._tpr(info)
                share = offered_share(info.parallelism, target, s.target.options.utilization_target)
                vertices[vid] = replace(
                    vertex_eval(
                        vid,
                        info.parallelism,
                        target,
                        outside_band=info.name in self.targets,
                        max_parallelism=info.max_parallelism,
                        tpr=tpr,
                        tdr=tpr * share,
                    ),
                    ineffective_scale_up=info.name in self.ineffective,
                    scale_up_gain=self.ineffective.get(info.name),
                    limited_from=self.limited.get(info.name),
                    limited_by=self._bounds(s, info) if info.name in self.limited else None,
                )
            ready = self.not_ready is None
            out[s.job.key] = JobEvaluation(
                s,
                vertices,
                processing_backlog=False,
                window_samples=10,
                window_full=ready,
                not_ready=self.not_ready,
            )
        return out

    def _tpr(self, info: VertexInfo) -> float:
        rate = self.tpr.get(info.name)
        return 1000.0 if rate is None else rate(info.parallelism)

    def forget(self, job_keys: Iterable[str]) -> None:
        self.forgotten.extend(job_keys)

    def check(self) -> None:
        """Fails while ``fail`` is set, as a Spark session that cannot be replaced would."""
        self.checks += 1
        if self.fail:
            raise RuntimeError("Spark session is gone")

    @staticmethod
    def _bounds(sample: JobSample, info: VertexInfo) -> AlignmentBounds:
        """What the scaler's legacy alignment would state for this vertex (``scale_by_factor``)."""
        options, p, max_p = sample.target.options, info.parallelism, info.max_parallelism
        units = sample.num_source_partitions.get(info.id) or max_p
        upper = min(max_p, max(p, options.vertex_max_parallelism))
        return AlignmentBounds(units, upper, min(p, options.vertex_min_parallelism))


class SlowEvaluator(StubEvaluator):
    """A :class:`StubEvaluator` whose every evaluation moves the fake clock by ``stall_s``: a stalled
    Spark or a long GC pause, for tests of what a tick that outlasts a lease may still do."""

    def __init__(self, clock: FakeClock, stall_s: float, targets: Mapping[str, int] | None = None) -> None:
        super().__init__(targets)
        self.clock = clock
        self.stall_s = stall_s

    def evaluate(self, samples: Sequence[JobSample], now_ms: int, **kwargs: Any) -> dict[str, JobEvaluation]:
        self.clock.advance(self.stall_s)
        return super().evaluate(samples, now_ms, **kwargs)


class FaultyTransport(httpx.AsyncBaseTransport):
    """Wraps a transport and answers chosen requests with a fault instead.

    ``faults`` maps ``(METHOD, path regex)`` to an ``httpx.Response``, an exception to raise, or a
    callable returning either. Every request is recorded in ``requests``.
    """

    def __init__(
        self, inner: httpx.AsyncBaseTransport, faults: Mapping[tuple[str, str], Any] | None = None
    ) -> None:
        self.inner = inner
        self.faults = dict(faults or {})
        self.requests: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        for (method, pattern), fault in self.faults.items():
            if request.method == method and re.fullmatch(pattern, request.url.path):
                fault = fault(request) if callable(fault) and not isinstance(fault, type) else fault
                if isinstance(fault, BaseException):
                    raise fault
                return fault
        return await self.inner.handle_async_request(request)
