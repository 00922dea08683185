"""Target parallelism (flink-autoscaler.md §1.6) and alignment (§1.7), hand-computed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from autoscaler.evaluate.scaler import (
    align_legacy,
    align_parallelism,
    alignment_applies,
    clamp_scale_factor,
    compute_busy_time_parallelism,
    compute_target_parallelism,
    expected_processing_rate,
    limit_parallelism,
)
from autoscaler.model import AlignmentBounds
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


# ---- the deprecated scaling.key-group.partitions.adjust.mode (§1.7 "Legacy mode"), hand-computed
@pytest.mark.parametrize(
    ("partitions", "current", "target", "upper", "maximize", "expected"),
    [
        # Found in the region: returned as the built-in modes would (N=128: 6 -> 8, or 7 maximizing).
        (0, 10, 6, 128, False, (8, False)),
        (0, 10, 6, 128, True, (7, False)),
        # N=7, region [5, 6] holds no divisor: walk down to p=3 (7//3=2 > 7//5=1), 3 does not divide 7,
        # so back up to 4 = current: the scale-up would be cancelled, so it is blocked (and reported).
        (7, 4, 5, 6, False, (4, True)),
        # N=7, scale-down 3 -> 2, region [2, 3] has no divisor: down to p=1 (7 > 3), 1 divides 7: 1.
        # Further down than the target (FLINK-39299's complaint), reported.
        (7, 3, 2, 7, False, (1, True)),
        # MAXIMIZE_UTILISATION finds 3 in the region (7//3=2 < 7//2=3): the current parallelism, no event.
        (7, 3, 2, 7, True, (3, False)),
        # N=7, 2 -> 3 with the region capped at 5: the fallback lands on the target itself: 3, no event.
        (7, 2, 3, 5, False, (3, False)),
    ],
)
def test_legacy_alignment(
    partitions: int, current: int, target: int, upper: int, maximize: bool, expected: tuple[int, bool]
) -> None:
    got = align_legacy(
        current=current,
        target=target,
        max_parallelism=128,
        upper_limit=upper,
        lower_limit=1,
        num_source_partitions=partitions,
        maximize_utilisation=maximize,
    )
    assert got == expected


def test_legacy_fallback_keeps_the_lower_limit() -> None:
    """Walking down from target 1 never finds fewer units per subtask: p ends at 0, the limit wins."""
    got = align_legacy(
        current=2,
        target=1,
        max_parallelism=128,
        upper_limit=128,
        lower_limit=1,
        num_source_partitions=7,
        maximize_utilisation=False,
    )
    assert got == (1, False)  # 1 divides 7: found in the region [1, 2] already


def test_legacy_mode_applies_only_while_the_new_key_is_unset() -> None:
    """ParallelismAligner#resolve: the new key wins; the legacy one is honoured only without it."""
    conf = {
        "job.autoscaler.scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD",
        "job.autoscaler.vertex.max-parallelism": "6",
    }
    # 1595 / 1000 = 1.595 x 4 -> 7, capped at 6. N = 7 partitions: 6 does not divide 7, and walking
    # down ends at 4 = current, so the legacy mode blocks the scale-up and reports it.
    blocked = scale(4, 1000.0, AutoscalerOptions.from_flink_conf(conf), num_source_partitions=7)
    assert (blocked.parallelism, blocked.limited_from, blocked.changed) == (4, 6, False)
    newer = {**conf, "job.autoscaler.scaling.parallelism-alignment.mode": "BALANCED"}
    balanced = scale(4, 1000.0, AutoscalerOptions.from_flink_conf(newer), num_source_partitions=7)
    assert (balanced.parallelism, balanced.limited_from) == (6, None)  # BALANCED never blocks


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


def test_a_limited_legacy_alignment_states_what_it_aligned_to() -> None:
    """Reference JobVertexScalerTest#testSendingScalingLimitedEvents: p=10, TPR 100 for a target of 200
    at utilization 1.0 -> 20; 15 partitions leave no aligned p in [20, 15], the legacy fallback walks down
    to 15. The ScalingLimited event states N=15, min(maxParallelism 720, upper limit 200)=200, limit 1."""
    legacy = AutoscalerOptions.from_flink_conf(
        {"job.autoscaler.scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD"}
    )
    rec = scale(
        10,
        100.0,
        legacy,
        target_capacity=200.0,
        scale_up_threshold=200.0,
        scale_down_threshold=math.inf,
        max_parallelism=720,
        num_source_partitions=15,
    )
    assert (rec.parallelism, rec.outside_band, rec.limited_from) == (15, True, 20)
    assert rec.limited_by == AlignmentBounds(key_groups_or_partitions=15, upper_bound=200, lower_limit=1)
    unlimited = scale(10, 100.0, legacy, target_capacity=200.0, max_parallelism=720)  # no partitions
    assert (unlimited.limited_from, unlimited.limited_by) == (None, None)


@pytest.mark.parametrize("name", ["myMode", "PRIME_AWARE"])
def test_an_unknown_alignment_mode_aligns_as_balanced_and_wins_over_the_legacy_key(name: str) -> None:
    """Reference ParallelismAligner#resolve: the new key is set, so the legacy key is not honoured;
    the name is no built-in mode, so BALANCED aligns (10 -> 7 for 128 key groups, as BALANCED does)."""
    conf = {
        "job.autoscaler.scaling.parallelism-alignment.mode": name,
        "job.autoscaler.scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD",
    }
    rec = scale(10, 3000.0, AutoscalerOptions.from_flink_conf(conf), input_ship_strategies=("HASH",))
    assert (rec.parallelism, rec.limited_from) == (7, None)  # EVENLY_SPREAD (either key) would give 8


def test_expected_processing_rate_is_linear_in_the_parallelism_it_is_stated_for() -> None:
    """Reference EXPECTED_PROCESSING_RATE = TPR / current * new; NaN stays unknown."""
    assert expected_processing_rate(4972.71, 4, 3) == pytest.approx(3729.5325)
    assert expected_processing_rate(4972.71, 4, 2) == pytest.approx(2486.355)
    assert math.isnan(expected_processing_rate(math.nan, 4, 3))
