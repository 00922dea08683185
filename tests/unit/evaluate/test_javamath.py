"""Java double arithmetic the formulas rely on for their edge cases."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from formula_builders import INF

from autoscaler.evaluate.javamath import (
    java_div,
    java_double_text,
    java_fixed,
    java_max,
    java_round,
    whole_seconds,
)
from autoscaler.model import NAN


@pytest.mark.parametrize(
    ("x", "expected"), [(2.5, 3.0), (-2.5, -2.0), (1595.238, 1595.0), (0.49999999999999994, 0.0), (INF, INF)]
)
def test_java_round(x: float, expected: float) -> None:
    """AutoScalerUtils uses Math.round: ties go towards +inf."""
    assert java_round(x) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(6.0, 3.0, 2.0), (5.0, 0.0, INF), (-5.0, 0.0, -INF), (5.0, -0.0, -INF), (0.0, 0.0, NAN), (NAN, 0, NAN)],
)
def test_java_div_gives_infinities_where_python_raises(a: float, b: float, expected: float) -> None:
    """Java doubles: x/0 is a signed infinity, 0/0 is NaN; the formulas read "no input" as +inf capacity."""
    assert java_div(a, b) == pytest.approx(expected, nan_ok=True)


def test_java_max_lets_nan_win() -> None:
    """Math.max(0, NaN) is NaN in Java; Python's max would hide an unknown rate as 0."""
    assert math.isnan(java_max(0.0, NAN)) and math.isnan(java_max(NAN, 0.0))
    assert java_max(0.0, -3.0) == 0.0 and java_max(2.0, 1.0) == 2.0


def test_whole_seconds_truncates_like_duration_to_seconds() -> None:
    assert whole_seconds(timedelta(seconds=299, milliseconds=999)) == 299


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (90.0, "90.0"),
        (5.0, "5.0"),
        (-5.0, "-5.0"),
        (0.0, "0.0"),
        (0.001, "0.001"),
        (9_999_999.5, "9999999.5"),
        (0.1 + 0.2, "0.30000000000000004"),  # the shortest digits that read back
        (1e7, "1.0E7"),  # plain notation ends below 1e7 ...
        (12_345_678.0, "1.2345678E7"),
        (-2.5e8, "-2.5E8"),
        (5e-4, "5.0E-4"),  # ... and starts at 1e-3
        (1e20, "1.0E20"),
        (NAN, "NaN"),
        (INF, "Infinity"),
        (-INF, "-Infinity"),
    ],
)
def test_java_double_text_is_double_to_string(x: float, text: str) -> None:
    """Java's Double.toString, what the reference's "%s" event texts print."""
    assert java_double_text(x) == text


def test_java_fixed_spells_non_finite_values_as_java_does() -> None:
    assert (java_fixed(4972.71), java_fixed(3729.5325), java_fixed(NAN), java_fixed(-INF)) == (
        "4972.71",
        "3729.53",
        "NaN",
        "-Infinity",
    )
