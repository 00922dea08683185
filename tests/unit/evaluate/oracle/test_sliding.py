"""The incremental window aggregates (``autoscaler.evaluate.oracle.sliding``) equal the oracle's
``aggregate_window`` exactly, for any sequence of windows: slides, jumps, new epochs, NaN and infinite
values, values whose float sums depend on the order."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.evaluate.aggregates import aggregate_window
from autoscaler.evaluate.oracle.sliding import ExactSum, SlidingWindows
from autoscaler.model import VertexSample
from autoscaler.testing import make_sample, make_topology

TOPOLOGY = make_topology({"src": 2, "sink": 3}, [("src", "sink", "HASH")])

values = st.one_of(
    st.floats(min_value=-1e12, max_value=1e12),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 1.0, math.nan, math.inf, -math.inf]),
)
vertex_samples = st.builds(
    VertexSample,
    busy_time_ms_per_s=values,
    backpressured_ms_per_s=values,
    num_records_in=values,
    num_records_out=values,
    accumulated_busy_time_ms=values,
    num_records_in_per_s=values,
    pending_records=values,
    observed_tpr=values,
    accumulated_busy_time_agg_ms=values,
)


def same(a: object, b: object) -> bool:
    """Field by field, NaN equal to NaN."""
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not (
            x == y or (isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y))
        ):
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(
    points=st.lists(st.tuples(vertex_samples, vertex_samples), min_size=1, max_size=40),
    windows=st.lists(st.tuples(st.integers(0, 39), st.integers(1, 12)), min_size=1, max_size=25),
)
def test_the_slid_aggregates_equal_the_oracle(points: list, windows: list) -> None:
    samples = [
        make_sample(TOPOLOGY, ts_ms=1000 * i, vertices={"src": a, "sink": b})
        for i, (a, b) in enumerate(points)
    ]
    sliding = SlidingWindows()
    start = 0
    for jump, size in windows:
        start = start + jump % 3 if jump % 7 else jump  # mostly small slides, sometimes anywhere
        window = samples[start % len(samples) : start % len(samples) + size]
        got = sliding.aggregates("c1/job", window, TOPOLOGY.vertices)
        for vid in TOPOLOGY.vertices:
            assert same(got[vid], aggregate_window([(s.ts_ms, s.vertices[vid]) for s in window])), vid


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300), max_size=30)
)
def test_an_exact_sum_is_fsum_of_what_it_holds_after_any_removals(xs: list[float]) -> None:
    total = ExactSum()
    for x in xs:
        total.add(x)
    for x in xs[: len(xs) // 2]:
        total.remove(x)
    assert total.value() == math.fsum(xs[len(xs) // 2 :])
