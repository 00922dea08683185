"""Java's double arithmetic, so the formulas' edge cases match the reference autoscaler's.

The reference is Java: ``x / 0`` is an infinity rather than an error, ``Math.max`` lets NaN win, and
``Math.round`` ties towards +inf. Python differs on all three, and the differences are exactly the
edge cases (no input, an unknown metric) where a decision must stay safe, so every formula module
uses these instead of the Python operators. ``java_double_text`` and ``java_fixed`` write a double as
the reference's event texts do, so ours read the same.
"""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

from autoscaler.model import NAN

__all__ = ["java_div", "java_double_text", "java_fixed", "java_max", "java_round", "whole_seconds"]


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


def java_double_text(x: float) -> str:
    """Java ``Double.toString`` (what ``"%s"`` and string concatenation give): the shortest digits that
    read back as ``x``, in plain notation for 1e-3 <= |x| < 1e7 (``90.0``) and as ``1.0E7`` / ``5.0E-4``
    outside it; ``NaN``, ``Infinity``, ``-Infinity``. Python's ``repr`` agrees inside that range only.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # the shortest round-trip digits, plain notation in this range
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    assert isinstance(exponent, int)  # finite
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + exponent - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_fixed(x: float, decimals: int = 2) -> str:
    """Java ``String.format("%.2f", x)``: Python's fixed notation, but ``NaN`` / ``Infinity`` spelled
    as Java spells them (Python would write ``nan`` / ``inf``)."""
    return f"{x:.{decimals}f}" if math.isfinite(x) else java_double_text(x)
