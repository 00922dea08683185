"""Java's double arithmetic, so the formulas' edge cases match the reference autoscaler's.

The reference is Java: ``x / 0`` is an infinity rather than an error, ``Math.max`` lets NaN win, and
``Math.round`` ties towards +inf. Python differs on all three, and the differences are exactly the
edge cases (no input, an unknown metric) where a decision must stay safe, so every formula module
uses these instead of the Python operators.
"""

from __future__ import annotations

import math
from datetime import timedelta

from autoscaler.model import NAN

__all__ = ["java_div", "java_max", "java_round", "whole_seconds"]


def java_div(a: float, b: float) -> float:
    """Java double division: x/0 is ±inf and 0/0 NaN instead of a ZeroDivisionError."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def java_max(a: float, b: float) -> float:
    """Java ``Math.max``: NaN wins (Python's ``max(0, nan)`` would silently return 0)."""
    if math.isnan(a) or math.isnan(b):
        return NAN
    return a if a >= b else b


def java_round(x: float) -> float:
    """Java ``Math.round`` (ties towards +inf); NaN and infinities pass through unchanged."""
    if not math.isfinite(x):
        return x
    floor = math.floor(x)
    return float(floor + 1 if x - floor >= 0.5 else floor)


def whole_seconds(d: timedelta) -> int:
    """Java ``Duration#toSeconds``: whole seconds, which is what the reference feeds its formulas."""
    return d // timedelta(seconds=1)
