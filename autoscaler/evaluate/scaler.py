"""Target parallelism of one vertex: scale factor, max-factor clamps, min/max limits, alignment.

Pure arithmetic on plain numbers (reference ``JobVertexScaler#computeScaleTargetParallelism`` and
``alignment/*``). The scale-down *delay* (``scale-down.interval``) belongs to the decide stage: this module
returns the raw recommendation of the current window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.model import AlignmentBounds
from autoscaler.settings import AlignmentMode, AutoscalerOptions

__all__ = [
    "ParallelismRecommendation",
    "align_legacy",
    "align_parallelism",
    "alignment_applies",
    "clamp_scale_factor",
    "compute_busy_time_parallelism",
    "compute_target_parallelism",
    "expected_processing_rate",
    "limit_parallelism",
    "scale_by_factor",
]

_INT_MAX = 2**31 - 1  # Java Integer.MAX_VALUE caps the raw parallelism


@dataclass(frozen=True, slots=True)
class ParallelismRecommendation:
    """What the scaler recommends for one vertex (``parallelism`` == current when unknown or unchanged)."""

    current: int
    parallelism: int
    scale_factor: float  # after the max-factor clamps; NaN when the rates are unknown
    expected_processing_rate: float  # TPR / current * parallelism, after alignment (FLINK-39743)
    outside_band: bool
    limited_from: int | None = None  # the target the legacy alignment could not keep (ScalingLimited)
    limited_by: AlignmentBounds | None = None  # with limited_from: what that alignment worked with

    def __post_init__(self) -> None:
        if self.current < 1 or self.parallelism < 1:
            raise ValueError(f"parallelism must be >= 1: {self!r}")

    @property
    def changed(self) -> bool:
        return self.parallelism != self.current


def expected_processing_rate(true_processing_rate: float, current: int, new: int) -> float:
    """Reference EXPECTED_PROCESSING_RATE = TPR / current * new: the capacity a vertex should have at
    ``new`` subtasks if it scales linearly (no scalability coefficient, as in the reference).

    One formula for every place that states an expectation: the recommendation, the ScalingReport and
    the scaling history, each for the parallelism it talks about (FLINK-39743: the one really set).
    """
    return true_processing_rate / current * new


def clamp_scale_factor(factor: float, options: AutoscalerOptions) -> float:
    """Reference §1.6: clamp to [1 - scale-down.max-factor, 1 + scale-up.max-factor]."""
    low = 1.0 - options.scale_down_max_factor
    high = 1.0 + options.scale_up_max_factor
    if factor < low:
        return low
    if factor > high:
        return high
    return factor


def limit_parallelism(
    raw: int, *, current: int, max_parallelism: int, options: AutoscalerOptions
) -> tuple[int, int, int]:
    """Reference §1.6: newP = min(max(lowerLimit, raw), min(maxParallelism, upperLimit)).

    Returns ``(newP, lower_limit, upper_limit)``; the limits never force a change by themselves
    (lowerLimit = min(current, vertex.min-parallelism), upperLimit = max(current, vertex.max-parallelism)).
    """
    lower_limit = min(current, options.vertex_min_parallelism)
    upper_limit = max(current, options.vertex_max_parallelism)
    return min(max(lower_limit, raw), min(max_parallelism, upper_limit)), lower_limit, upper_limit


def alignment_applies(num_source_partitions: int, input_ship_strategies: Sequence[str]) -> bool:
    """Reference §1.7: align when the source reports partitions or any input edge is HASH-partitioned."""
    return num_source_partitions > 0 or any(s.upper() == "HASH" for s in input_ship_strategies)


def align_parallelism(
    *,
    current: int,
    target: int,
    max_parallelism: int,
    upper_limit: int,
    num_source_partitions: int,
    mode: AlignmentMode,
) -> int:
    """Reference §1.7 BALANCED / EVENLY_SPREAD / OFF: scan upward for a parallelism that spreads N evenly.

    N is the partition count (or the key-group count = max parallelism). Scale-ups search
    [target, upperAlign], scale-downs [target, min(current, upperAlign)]. BALANCED also accepts a p with
    fewer units per subtask than the target gets; it never blocks. Nothing found keeps the target.
    """
    if mode is AlignmentMode.OFF:
        return target
    n = num_source_partitions if num_source_partitions > 0 else max_parallelism
    found = _first_aligned(n, current, target, max_parallelism, upper_limit, mode is AlignmentMode.BALANCED)
    return target if found is None else found


def align_legacy(
    *,
    current: int,
    target: int,
    max_parallelism: int,
    upper_limit: int,
    lower_limit: int,
    num_source_partitions: int,
    maximize_utilisation: bool,
) -> tuple[int, bool]:
    """Reference §1.7, the deprecated ``scaling.key-group.partitions.adjust.mode``, kept as it was.

    The same upward search (MAXIMIZE_UTILISATION accepts like BALANCED, EVENLY_SPREAD divisors only).
    If it finds nothing: walk down from the target to where a subtask would get more units, step back
    up unless that p divides N, and keep at least the lower limit; a result that would turn the
    scaling around (or cancel it) blocks it, i.e. the current parallelism stays. The flag says the
    fallback moved or blocked the target: the reference then warns with a ``ScalingLimited`` event.
    """
    n = num_source_partitions if num_source_partitions > 0 else max_parallelism
    found = _first_aligned(n, current, target, max_parallelism, upper_limit, maximize_utilisation)
    if found is not None:
        return found, False
    p = target
    while p > 0:
        if n // p > n // target:
            if n % p != 0:
                p += 1
            break
        p -= 1
    candidate = max(p, lower_limit)
    turned = candidate <= current if target > current else candidate >= current
    result = current if turned else candidate
    return result, result != target


def _first_aligned(
    n: int, current: int, target: int, max_parallelism: int, upper_limit: int, accept_load_reducing: bool
) -> int | None:
    """The first p from the target up that divides N (or, if accepted, gives each subtask fewer units),
    within the region of the scaling direction; None if there is none."""
    upper_align = min(n, max_parallelism, upper_limit)
    stop = upper_align if target > current else min(current, upper_align)
    per_target = n // target
    for p in range(target, stop + 1):
        if n % p == 0 or (accept_load_reducing and n // p < per_target):
            return p
    return None


def compute_target_parallelism(
    *,
    parallelism: int,
    max_parallelism: int,
    true_processing_rate: float,
    target_capacity: float,
    scale_up_threshold: float,
    scale_down_threshold: float,
    options: AutoscalerOptions,
    num_source_partitions: int = 0,
    input_ship_strategies: Sequence[str] = (),
    scalability_coefficient: float = 1.0,
) -> ParallelismRecommendation:
    """Reference §1.6: factor = target capacity / TPR, clamped, ceil(factor * p), limited, then aligned.

    Unknown rates (NaN TPR or capacity) recommend no change and are never outside the band.
    """
    tpr = true_processing_rate
    outside = tpr < scale_up_threshold or tpr > scale_down_threshold  # NaN compares False
    if math.isnan(tpr) or math.isnan(target_capacity):
        return _no_change(parallelism, tpr)
    return scale_by_factor(
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        factor=_ieee_div(target_capacity, tpr),
        true_processing_rate=tpr,
        outside_band=outside,
        options=options,
        num_source_partitions=num_source_partitions,
        input_ship_strategies=input_ship_strategies,
        scalability_coefficient=scalability_coefficient,
    )


def compute_busy_time_parallelism(
    *,
    parallelism: int,
    max_parallelism: int,
    load: float,
    true_processing_rate: float,
    band: tuple[float, float],
    options: AutoscalerOptions,
    num_source_partitions: int = 0,
    input_ship_strategies: Sequence[str] = (),
    scalability_coefficient: float = 1.0,
) -> ParallelismRecommendation:
    """Busy-time-only mode (ours, FLINK-38538): size the vertex from its own busy time alone.

    factor = load / utilization.target, so a vertex 100% busy at target 0.7 grows by 1/0.7 whatever
    the output ratios upstream say. ``band`` is (upper, lower) utilization; the vertex is outside it
    when its load is above upper, below lower, or saturated (load >= 1: busy time cannot exceed 1, so
    with the default upper bound of 1 a saturated vertex could otherwise never count as overloaded).
    The clamps, limits and alignment are the reference's. Unknown load recommends no change.
    """
    if math.isnan(load):
        return _no_change(parallelism, true_processing_rate)
    upper, lower = band
    outside = load >= 1.0 or load > upper or load < lower
    return scale_by_factor(
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        factor=_ieee_div(load, options.utilization_target),
        true_processing_rate=true_processing_rate,
        outside_band=outside,
        options=options,
        num_source_partitions=num_source_partitions,
        input_ship_strategies=input_ship_strategies,
        scalability_coefficient=scalability_coefficient,
    )


def scale_by_factor(
    *,
    parallelism: int,
    max_parallelism: int,
    factor: float,
    true_processing_rate: float,
    outside_band: bool,
    options: AutoscalerOptions,
    num_source_partitions: int = 0,
    input_ship_strategies: Sequence[str] = (),
    scalability_coefficient: float = 1.0,
) -> ParallelismRecommendation:
    """Reference §1.6 from the raw factor on: / alpha (§1.10), clamp, ceil, limits, alignment (§1.7).

    The expected processing rate is taken after alignment (FLINK-39743), so effectiveness detection
    compares against the parallelism really requested. A NaN factor (0/0, inf/inf) changes nothing.
    """
    factor = _ieee_div(factor, scalability_coefficient)
    if math.isnan(factor):
        return _no_change(parallelism, true_processing_rate)
    factor = clamp_scale_factor(factor, options)
    scaled = factor * parallelism
    raw = _INT_MAX if not math.isfinite(scaled) else min(math.ceil(scaled), _INT_MAX)
    new_p, lower_limit, upper_limit = limit_parallelism(
        raw, current=parallelism, max_parallelism=max_parallelism, options=options
    )
    unaligned, limited, bounds = new_p, False, None
    legacy = options.key_group_partitions_adjust_mode if options.parallelism_alignment_mode is None else None
    if new_p != parallelism and alignment_applies(num_source_partitions, input_ship_strategies):
        new_p, bounds = aligned_parallelism(
            parallelism,
            new_p,
            max_parallelism,
            upper_limit,
            lower_limit,
            num_source_partitions,
            options.alignment_mode or AlignmentMode.BALANCED,
            legacy,
        )
        limited = bounds is not None
    expected = expected_processing_rate(true_processing_rate, parallelism, new_p)
    return ParallelismRecommendation(
        parallelism,
        new_p,
        factor,
        expected,
        outside_band,
        limited_from=unaligned if limited else None,
        limited_by=bounds if limited else None,
    )


def aligned_parallelism(
    current: int,
    target: int,
    max_parallelism: int,
    upper_limit: int,
    lower_limit: int,
    partitions: int,
    mode: AlignmentMode,
    legacy: str | None,
) -> tuple[int, AlignmentBounds | None]:
    """The alignment step of :func:`scale_by_factor` (§1.7): (aligned parallelism, the bounds when the
    legacy mode (``legacy``: ``key-group-partitions.adjust-mode``) had to give up the target)."""
    if legacy is None:
        aligned = align_parallelism(
            current=current,
            target=target,
            max_parallelism=max_parallelism,
            upper_limit=upper_limit,
            num_source_partitions=partitions,
            mode=mode,
        )
        return aligned, None
    aligned, limited = align_legacy(
        current=current,
        target=target,
        max_parallelism=max_parallelism,
        upper_limit=upper_limit,
        lower_limit=lower_limit,
        num_source_partitions=partitions,
        maximize_utilisation=legacy == "MAXIMIZE_UTILISATION",
    )
    if not limited:
        return aligned, None
    # What the reference's ScalingLimited event states: N, min(maxParallelism, upper limit) (not capped
    # by N, unlike the search region) and the lower limit.
    units = partitions if partitions > 0 else max_parallelism
    return aligned, AlignmentBounds(units, min(max_parallelism, upper_limit), lower_limit)


def _no_change(parallelism: int, true_processing_rate: float) -> ParallelismRecommendation:
    return ParallelismRecommendation(parallelism, parallelism, math.nan, true_processing_rate, False)


def _ieee_div(a: float, b: float) -> float:
    """Java double division: x/0 is ±inf (NaN for 0/0) instead of raising."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b
