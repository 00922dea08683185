"""Which vertices a tick could not judge: the metrics-known gate of the decide stage, and its words.

Unknown is not "in band" (issue 11): a tick whose rates are NaN or missing for the vertices that
matter ends in ``MetricsUnknown`` and scales nothing; an unknown vertex among known ones is left as
it is and named in the in-band text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.model import JobEvaluation, VertexId
    from autoscaler.settings import AutoscalerOptions

__all__ = ["metrics_unknown", "partly_unknown"]


def metrics_unknown(evaluation: JobEvaluation, options: AutoscalerOptions) -> str | None:
    """Why this tick cannot judge the job at all, or None: the metrics of the vertices that matter are
    NaN or missing (a vertex absent from the evaluation counts as unknown).

    What matters:

    - every source's target data rate, excluded sources included: every other vertex's target rate
      is propagated from the sources, so one unknown source leaves everything downstream of it
      unknown (the reference's evaluator fails the whole job there);
    - at least one vertex that could be scaled (not in ``vertex.exclude.ids``) with known rates.

    An unknown vertex among known ones is only left as it is, while the others are decided; the
    in-band text then names it, so "in band" never covers a vertex nobody measured.
    """
    topology = evaluation.sample.topology
    vertices = evaluation.vertices
    names = {v.id: v.name for v in topology}
    sources = [
        vid
        for vid in topology.vertices
        if topology.is_source(vid) and (vid not in vertices or math.isnan(vertices[vid].target_data_rate))
    ]
    if sources:
        which = (
            f"source {_names(sources, names)} is"
            if len(sources) == 1
            else f"sources {_names(sources, names)} are"
        )
        return (
            f"metrics unknown: the target data rate of {which} NaN or missing, so no vertex downstream "
            "can be judged; nothing is scaled"
        )
    candidates = [vid for vid in topology.vertices if vid not in options.vertex_exclude_ids]
    if candidates and all(vid not in vertices or vertices[vid].unknown for vid in candidates):
        return (
            f"metrics unknown for every vertex that could be scaled ({_names(candidates, names)}): "
            "true processing rate or target data rate is NaN or missing; nothing is scaled"
        )
    return None


def partly_unknown(evaluation: JobEvaluation, options: AutoscalerOptions) -> str:
    """The vertices that were not judged because their metrics are unknown, for an in-band text."""
    names = {v.id: v.name for v in evaluation.sample.topology}
    unknown = [
        vid
        for vid in evaluation.sample.topology.vertices
        if vid not in options.vertex_exclude_ids
        and (vid not in evaluation.vertices or evaluation.vertices[vid].unknown)
    ]
    return f"; metrics unknown for {_names(unknown, names)} (not judged)" if unknown else ""


def _names(vids: list[VertexId], names: Mapping[VertexId, str]) -> str:
    return ", ".join(names.get(vid, vid) for vid in vids)
