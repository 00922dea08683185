"""A job's last decisions, kept so ``flink-autoscaler status`` and ``explain`` can answer "why?".

The daemon saves one :class:`DecisionRecord` per job and tick (``record_from_outcome`` turns its
``JobOutcome`` into one; :func:`add_decision` folds it into the job's last decisions); the CLI reads
them back through ``autoscaler.decision_store`` and renders them with :func:`explain` and
:func:`status_table`.

Import from this package; its modules, each importing only those above it:

- ``records``: the record values (:class:`DecisionRecord` and its vertices, gate verdicts, plugin
  outcomes and a rescale's verification), their JSON, :func:`add_decision` and :func:`find_record`;
- ``build``: :func:`record_from_outcome` and the decision stage's gates in order (:data:`GATES`);
- ``render``: the records in words, :func:`explain` for one job and :func:`status_table` for all.
"""

from __future__ import annotations

from autoscaler.explain.build import GATES, record_from_outcome
from autoscaler.explain.records import BLOCKED as BLOCKED
from autoscaler.explain.records import FORCED as FORCED
from autoscaler.explain.records import NOT_REACHED as NOT_REACHED
from autoscaler.explain.records import PASSED as PASSED
from autoscaler.explain.records import SCHEMA_VERSION as SCHEMA_VERSION
from autoscaler.explain.records import (
    DecisionRecord,
    GateVerdict,
    PluginRecord,
    VerificationRecord,
    VerifiedVertex,
    VertexRecord,
    add_decision,
    find_record,
)
from autoscaler.explain.render import explain, status_table

# The names imported "as" themselves above were importable from the single explain.py module; they
# stay importable from here without joining __all__.
__all__ = [
    "GATES",
    "DecisionRecord",
    "GateVerdict",
    "PluginRecord",
    "VerificationRecord",
    "VerifiedVertex",
    "VertexRecord",
    "add_decision",
    "explain",
    "find_record",
    "record_from_outcome",
    "status_table",
]
