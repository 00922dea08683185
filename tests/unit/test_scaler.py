"""Target parallelism (flink-autoscaler.md §1.6) and alignment (§1.7), hand-computed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from autoscaler.evaluate.scaler import (
    align_parallelism,
    alignment_applies,
    clamp_scale_factor,
    compute_busy_time_parallelism,
    compute_target_parallelism,
    limit_parallelism,
)
from autoscaler.settings import AlignmentMode, AutoscalerOptions

DEFAULTS = AutoscalerOptions()
# The worked example's thresholds: TDR 1000, no lag, restart 300 s, catch-up 1800 s.
WORKED = {"target_capacity": 1595.0, "scale_up_threshold": 1000.0, "scale_down_threshold": 2667.0}


def scale(parallelism: int, tpr: float, options: AutoscalerOptions = DEFAULTS, **kw: Any) -> Any:
    args: dict[str, Any] = {**WORKED, "max_parallelism": 128, **kw}
    return compute_target_parallelism(
        parallelism=parallelism, true_processing_rate=tpr, options=options, **args
    )


@pytest.mark.parametrize(
    ("p", "tpr", "new_p", "expected_rate", "outside"),
    [
        (4, 800.0, 8, 1600.0, True),  # factor 1.994 -> ceil(7.98) = 8; 800 < 1000
        (10, 3000.0, 6, 1800.0, True),  # factor 0.532 (above the 0.4 floor) -> ceil(5.32) = 6; 3000 > 2667
        (4, 2000.0, 4, 2000.0, False),  # factor 0.7975 -> ceil(3.19) = 4: inside the band, no change
    ],
)
def test_worked_example(p: int, tpr: float, new_p: int, expected_rate: float, outside: bool) -> None:
    rec = scale(p, tpr)
    assert (rec.parallelism, rec.outside_band, rec.changed) == (new_p, outside, new_p != p)
    assert rec.expected_processing_rate == pytest.approx(expected_rate)


def test_in_band_vertex_may_still_get_a_recommendation() -> None:
    """§1.6: outside_band and the target are independent; the job-level gate is the decide stage's."""
    rec = scale(4, 1100.0)  # inside [1000, 2667] but factor 1.45 -> 6
    assert (rec.parallelism, rec.outside_band) == (6, False)


@pytest.mark.parametrize(("tpr", "capacity"), [(math.nan, 1595.0), (800.0, math.nan), (math.nan, math.nan)])
def test_unknown_rates_keep_parallelism(tpr: float, capacity: float) -> None:
    """§1.6: TPR or capacity NaN -> no change, never outside the band."""
    rec = scale(4, tpr, target_capacity=capacity, scale_up_threshold=math.nan, scale_down_threshold=math.nan)
    assert (rec.parallelism, rec.outside_band, rec.changed) == (4, False, False)
    assert math.isnan(rec.scale_factor)


@pytest.mark.parametrize(
    ("factor", "options", "expected"),
    [
        (0.1, DEFAULTS, 0.4),  # 1 - scale-down.max-factor 0.6
        (0.5, DEFAULTS, 0.5),
        (5e5, DEFAULTS, 100001.0),  # 1 + scale-up.max-factor 1e5
        (3.0, AutoscalerOptions(scale_up_max_factor=0.5), 1.5),
        (0.1, AutoscalerOptions(scale_down_max_factor=1.0), 0.1),
    ],
)
def test_clamp_scale_factor(factor: float, options: AutoscalerOptions, expected: float) -> None:
    assert clamp_scale_factor(factor, options) == pytest.approx(expected)


def test_scale_down_floor_and_infinite_tpr() -> None:
    """§1.6: an idle vertex (TPR +inf) scales down by at most 1 - 0.6: 10 -> 4."""
    rec = scale(10, math.inf)
    assert (rec.parallelism, rec.scale_factor, rec.outside_band) == (4, pytest.approx(0.4), True)
    assert rec.expected_processing_rate == math.inf


def test_scale_up_cap_by_max_factor() -> None:
    rec = scale(4, 100.0, AutoscalerOptions(scale_up_max_factor=0.5))  # factor 15.95 -> 1.5
    assert rec.parallelism == 6


def test_zero_scale_factor_never_goes_below_one() -> None:
    """Even with scale-down.max-factor 1 the lower limit (>= 1) holds."""
    rec = scale(3, math.inf, AutoscalerOptions(scale_down_max_factor=1.0), target_capacity=0.0)
    assert rec.parallelism == 1


@pytest.mark.parametrize(
    ("raw", "current", "max_p", "vmin", "vmax", "expected"),
    [
        (8, 4, 128, 1, 5, 5),  # vertex.max-parallelism caps a scale-up
        (8, 4, 6, 1, 200, 6),  # the vertex's max parallelism (key groups) caps it too
        (4, 10, 128, 5, 200, 5),  # vertex.min-parallelism floors a scale-down
        (1, 2, 128, 5, 200, 2),  # lowerLimit = min(current, min): limits never force a change
        (250, 300, 1000, 1, 200, 250),  # upperLimit = max(current, max) lets 300 shrink to 250
        (400, 300, 1000, 1, 200, 300),  # ... but not grow past it
    ],
)
def test_min_max_limits(raw: int, current: int, max_p: int, vmin: int, vmax: int, expected: int) -> None:
    options = AutoscalerOptions(vertex_min_parallelism=vmin, vertex_max_parallelism=vmax)
    assert limit_parallelism(raw, current=current, max_parallelism=max_p, options=options)[0] == expected


def test_limits_apply_in_compute() -> None:
    rec = scale(4, 800.0, AutoscalerOptions(vertex_max_parallelism=5))
    assert rec.parallelism == 5 and rec.expected_processing_rate == pytest.approx(1000.0)


@pytest.mark.parametrize(
    ("n_partitions", "max_p", "current", "target", "mode", "expected"),
    [
        (0, 128, 10, 6, AlignmentMode.BALANCED, 7),  # §1.7 example: 128//7=18 < 128//6=21
        (0, 128, 10, 6, AlignmentMode.EVENLY_SPREAD, 8),  # first divisor of 128 in [6, 10]
        (720, 720, 4, 7, AlignmentMode.BALANCED, 8),  # §1.7 example: 720//7 = 102 = 720//7; 8 divides
        (720, 720, 4, 7, AlignmentMode.EVENLY_SPREAD, 8),
        (0, 128, 10, 6, AlignmentMode.OFF, 6),  # OFF keeps the target
        (0, 128, 10, 9, AlignmentMode.EVENLY_SPREAD, 9),  # no divisor in [9, 10]: keep the target
        (0, 128, 10, 9, AlignmentMode.BALANCED, 10),  # 128//10=12 < 14: lands on current = no scale-down
        (12, 128, 4, 8, AlignmentMode.BALANCED, 12),  # partitions are N: 8..11 fail, 12 divides
        (7, 128, 4, 9, AlignmentMode.BALANCED, 9),  # target above N: empty region, keep the target
    ],
)
def test_align_parallelism(
    n_partitions: int, max_p: int, current: int, target: int, mode: AlignmentMode, expected: int
) -> None:
    got = align_parallelism(
        current=current,
        target=target,
        max_parallelism=max_p,
        upper_limit=max(current, 200),
        num_source_partitions=n_partitions,
        mode=mode,
    )
    assert got == expected


def test_alignment_region_is_capped_by_upper_limit() -> None:
    """upperAlign = min(N, maxParallelism, upperLimit): no divisor of 128 in [6, 7] -> keep 6."""
    got = align_parallelism(
        current=4,
        target=6,
        max_parallelism=128,
        upper_limit=7,
        num_source_partitions=0,
        mode=AlignmentMode.EVENLY_SPREAD,
    )
    assert got == 6


@pytest.mark.parametrize(
    ("partitions", "strategies", "expected"),
    [(0, (), False), (0, ("REBALANCE", "FORWARD"), False), (0, ("REBALANCE", "hash"), True), (3, (), True)],
)
def test_alignment_applies(partitions: int, strategies: tuple[str, ...], expected: bool) -> None:
    """§1.7: only with source partitions or a HASH input edge."""
    assert alignment_applies(partitions, strategies) is expected


def test_alignment_in_compute_and_expected_rate_after_it() -> None:
    """FLINK-39743: the expected rate uses the aligned parallelism (TPR/10*7, not *6)."""
    hashed = scale(10, 3000.0, input_ship_strategies=("HASH",))
    assert hashed.parallelism == 7
    assert hashed.expected_processing_rate == pytest.approx(2100.0)
    plain = scale(10, 3000.0, input_ship_strategies=("REBALANCE",))
    assert plain.parallelism == 6
    evenly = scale(
        10,
        3000.0,
        AutoscalerOptions(parallelism_alignment_mode="EVENLY_SPREAD"),
        input_ship_strategies=("HASH",),
    )
    assert evenly.parallelism == 8


def test_alignment_only_when_parallelism_changes() -> None:
    """§1.6: align only if newP != currentP (p=6 with N=128 stays 6 even though 6 does not divide 128)."""
    rec = scale(6, 1595.0, input_ship_strategies=("HASH",))
    assert rec.parallelism == 6 and not rec.changed


def test_recommendation_rejects_bad_parallelism() -> None:
    from autoscaler.evaluate.scaler import ParallelismRecommendation

    with pytest.raises(ValueError):
        ParallelismRecommendation(0, 1, 1.0, 1.0, False)


def test_scalability_coefficient_divides_the_factor_before_the_clamps() -> None:
    """§1.10: factor / alpha, then clamped: 1595/800 = 1.994 / 0.5 = 3.99 -> ceil(15.95) = 16."""
    assert scale(4, 800.0, scalability_coefficient=0.5).parallelism == 16
    capped = scale(4, 800.0, AutoscalerOptions(scale_up_max_factor=1.0), scalability_coefficient=0.5)
    assert capped.parallelism == 8  # 3.99 clamped to 1 + 1.0


@pytest.mark.parametrize(("capacity", "tpr"), [(0.0, 0.0), (math.inf, math.inf)])
def test_undefined_scale_factor_changes_nothing(capacity: float, tpr: float) -> None:
    """0/0 and inf/inf are NaN factors: no change (a NaN must never reach the Integer.MAX_VALUE cap)."""
    rec = scale(4, tpr, target_capacity=capacity)
    assert (rec.parallelism, rec.changed) == (4, False) and math.isnan(rec.scale_factor)


@pytest.mark.parametrize(
    ("load", "band", "expected", "outside"),
    [
        (1.0, (1.0, 0.4), 15, True),  # saturated: 10 * 1/0.7 = 14.3 -> 15, outside although upper is 1
        (0.9, (0.8, 0.4), 13, True),  # above upper 0.8: ceil(12.86)
        (0.5, (1.0, 0.4), 8, False),  # inside: ceil(7.14)
        (0.1, (1.0, 0.4), 4, True),  # below lower: 0.143 clamped to 0.4
        (0.1, (1.0, 0.0), 4, False),  # backlog band [0, 1]: not outside, same recommendation
        (math.nan, (1.0, 0.4), 10, False),  # unknown: no change
    ],
)
def test_busy_time_parallelism(load: float, band: tuple[float, float], expected: int, outside: bool) -> None:
    """Busy-time-only mode (ours, FLINK-38538): factor = load / utilization.target (0.7)."""
    rec = compute_busy_time_parallelism(
        parallelism=10,
        max_parallelism=128,
        load=load,
        true_processing_rate=500.0,
        band=band,
        options=DEFAULTS,
    )
    assert (rec.parallelism, rec.outside_band) == (expected, outside)
    assert rec.expected_processing_rate == pytest.approx(500.0 / 10 * expected)


def test_busy_time_parallelism_keeps_limits_and_alignment() -> None:
    """Same clamps, limits and alignment as the reference path: 10 * 1/0.7 -> 15 -> BALANCED 16 (N=128)."""
    args = {"parallelism": 10, "max_parallelism": 128, "load": 1.0, "true_processing_rate": 100.0}
    hashed = compute_busy_time_parallelism(
        **args, band=(1.0, 0.4), options=DEFAULTS, input_ship_strategies=["HASH"]
    )
    assert hashed.parallelism == 16
    capped = compute_busy_time_parallelism(
        **args, band=(1.0, 0.4), options=AutoscalerOptions(vertex_max_parallelism=12)
    )
    assert capped.parallelism == 12
