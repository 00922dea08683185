"""The executor-plugin contract (the reference's FLIP-575 ``ScalingExecutorPlugin``, in Python).

A plugin sees the changes the autoscaler wants to make for one job and returns:
- the same mapping to approve,
- a different mapping (vertex id -> VertexChange) to modify, or
- ``None`` or an empty mapping to veto the whole scaling,
- or any of these wrapped in a :class:`Verdict` with the reason, which its ``ScalingModified`` or
  ``ScalingVetoed`` event and ``explain`` then carry.

Plugins run by ascending ``priority()`` (default 0; equal priorities keep their configured order),
each receiving the previous plugin's output. A plugin that raises or exceeds its time budget vetoes,
so a broken plugin can never make the daemon scale.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autoscaler.model import JobEvaluation, JobRef, VertexChange, VertexId
from autoscaler.settings import AutoscalerOptions

if TYPE_CHECKING:
    from autoscaler.flink.client import FlinkClient

__all__ = ["Changes", "PluginContext", "ScalingExecutorPlugin", "Verdict"]

Changes = Mapping[VertexId, VertexChange]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A plugin's answer with its reason: ``changes`` as a plain answer would be (``None`` or ``{}``
    vetoes), ``reason`` for the operator."""

    changes: Changes | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PluginContext:
    job: JobRef
    options: AutoscalerOptions
    evaluation: JobEvaluation
    config: Mapping[str, str] = field(default_factory=dict)  # the plugin's own keys, prefix stripped
    client: FlinkClient | None = None  # for extra queries against the job's cluster


class ScalingExecutorPlugin(ABC):
    """Base class of executor plugins; ``apply`` may be a plain or an ``async`` method."""

    name: str = "unnamed"

    def priority(self) -> int:
        return 0

    @abstractmethod
    def apply(
        self, context: PluginContext, changes: Changes
    ) -> Changes | Verdict | Awaitable[Changes | Verdict | None] | None:
        """Return the changes to keep (maybe modified); ``None`` or ``{}`` vetoes the scaling."""
