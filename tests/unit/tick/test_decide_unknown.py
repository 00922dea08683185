"""Unknown metrics are not "in band" (issue 11, item 6): the decision stage on plain values.

What matters for a decision: every source's target data rate (every other target rate is propagated
from the sources), and at least one vertex that could be scaled with known rates.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autoscaler.model import JobEvaluation, VertexEvaluation
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import DelayedScaleDown, JobState, Recommendation
from autoscaler.testing import make_sample, make_topology, vertex_eval
from autoscaler.tick.decide import decide

MIN = 60_000
OPTS = AutoscalerOptions(enabled=True)
NAN = math.nan


def pipeline(
    vertices: list[VertexEvaluation],
    options: AutoscalerOptions = OPTS,
    edges: tuple[tuple[str, str], ...] = (("src", "work"), ("work", "sink")),
    topology_only: tuple[str, ...] = (),
) -> JobEvaluation:
    """src -> work -> sink (by default); ``topology_only`` vertices are in the job but not evaluated."""
    parallelism = {v.vertex: v.parallelism for v in vertices} | {vid: 1 for vid in topology_only}
    topology = make_topology(parallelism, [(s, t, "HASH") for s, t in edges])
    sample = make_sample(topology, options=options)
    return JobEvaluation(
        sample, {v.vertex: v for v in vertices}, processing_backlog=False, window_samples=10, window_full=True
    )


def unknown(vid: str, parallelism: int = 2, *, tpr: float = NAN, tdr: float = NAN) -> VertexEvaluation:
    return replace(vertex_eval(vid, parallelism), true_processing_rate=tpr, target_data_rate=tdr)


def test_every_metric_nan_is_metrics_unknown_not_in_band():
    """The issue's case: a full window whose rates are all NaN used to end InBand."""
    ev = pipeline([unknown("src"), unknown("work"), unknown("sink")])
    d = decide(ev, JobState(), OPTS, 0)
    assert d.outcome is Reason.METRICS_UNKNOWN and not d.changes and not d.applies
    assert "src" in d.detail and "NaN or missing" in d.detail and "nothing is scaled" in d.detail


def test_a_source_without_a_target_rate_blocks_the_whole_job():
    """Nothing downstream of an unknown source is known: even a known vertex that wants to scale waits."""
    ev = pipeline([unknown("src", tpr=500.0), vertex_eval("work", 2, 4), vertex_eval("sink", 1)])
    d = decide(ev, JobState(), OPTS, 0)
    assert d.outcome is Reason.METRICS_UNKNOWN and not d.changes
    assert d.detail.startswith("metrics unknown: the target data rate of source src")


def test_an_excluded_source_still_matters_because_its_rates_feed_the_rest():
    opts = AutoscalerOptions(enabled=True, vertex_exclude_ids=("src",))
    ev = pipeline([unknown("src"), vertex_eval("work", 2, 4), vertex_eval("sink", 1)], opts)
    assert decide(ev, JobState(), opts, 0).outcome is Reason.METRICS_UNKNOWN


def test_every_vertex_that_could_be_scaled_unknown_is_metrics_unknown():
    """The source's target rate is known but no vertex outside vertex.exclude.ids has usable rates."""
    opts = AutoscalerOptions(enabled=True, vertex_exclude_ids=("src",))
    ev = pipeline([vertex_eval("src", 1, 2), unknown("work", tdr=1000.0), unknown("sink", tpr=800.0)], opts)
    d = decide(ev, JobState(), opts, 0)
    assert d.outcome is Reason.METRICS_UNKNOWN
    assert d.detail.startswith("metrics unknown for every vertex that could be scaled (work, sink)")


def test_a_vertex_missing_from_the_evaluation_counts_as_unknown():
    ev = pipeline([vertex_eval("work", 2, 4), vertex_eval("sink", 1)], topology_only=("src",))
    assert decide(ev, JobState(), OPTS, 0).outcome is Reason.METRICS_UNKNOWN


def test_one_unknown_vertex_among_known_ones_is_left_alone_and_named():
    """Known vertices are still decided; the unknown one is not changed and not called in band."""
    ev = pipeline([vertex_eval("src", 1), unknown("work", 4, tdr=1000.0), vertex_eval("sink", 2, 3)])
    assert decide(ev, JobState(), OPTS, 0).outcome is Reason.SCALING
    quiet = pipeline([vertex_eval("src", 1), unknown("work", 4, tdr=1000.0), vertex_eval("sink", 2)])
    d = decide(quiet, JobState(), OPTS, 0)
    assert d.outcome is Reason.IN_BAND
    assert d.detail == (
        "all vertices that could change are within their utilization band; metrics unknown for work "
        "(not judged)"
    )


def test_a_job_whose_vertices_are_all_excluded_is_not_metrics_unknown():
    opts = AutoscalerOptions(enabled=True, vertex_exclude_ids=("src", "work", "sink"))
    ev = pipeline([vertex_eval("src", 1), unknown("work", tdr=1000.0), vertex_eval("sink", 1)], opts)
    assert decide(ev, JobState(), opts, 0).outcome is Reason.IN_BAND  # nothing to decide, nothing unknown


@pytest.mark.parametrize("partly", [False, True], ids=["all unknown", "one vertex unknown"])
def test_an_unknown_tick_neither_adds_to_nor_clears_a_delayed_scale_down(partly: bool):
    """Unknown is no recommendation: the pending scale-down of the vertex keeps its first trigger and
    its recommendations, so the delay is not restarted by a metrics hiccup."""
    opts = AutoscalerOptions(enabled=True, scale_down_interval="10 min")
    delayed = DelayedScaleDown(0, (Recommendation(0, 6, True),))
    state = JobState(delayed_scale_down={"work": delayed})
    known = vertex_eval("src", 1) if partly else unknown("src", 1)
    ev = pipeline([known, unknown("work", 10, tdr=1000.0), vertex_eval("sink", 1)], opts)
    d = decide(ev, state, opts, 5 * MIN)
    assert d.outcome is (Reason.IN_BAND if partly else Reason.METRICS_UNKNOWN)
    assert d.state.delayed_scale_down == {"work": delayed}


def test_every_unknown_source_is_named():
    """Two sources joined by work: one unknown source already blocks; the text names each one."""
    edges = (("a", "work"), ("b", "work"))
    ev = pipeline([unknown("a"), unknown("b"), unknown("work", tpr=900.0)], edges=edges)
    d = decide(ev, JobState(), OPTS, 0)
    assert d.outcome is Reason.METRICS_UNKNOWN
    assert d.detail.startswith("metrics unknown: the target data rate of sources a, b are NaN or missing")
    one_known = pipeline([vertex_eval("a", 1), unknown("b"), vertex_eval("work", 2, 4)], edges=edges)
    assert decide(one_known, JobState(), OPTS, 0).outcome is Reason.METRICS_UNKNOWN
