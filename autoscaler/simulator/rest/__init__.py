"""Flink 2.3 REST answers for a ``SimCluster``: same endpoints, same JSON shapes, same quirks.

``handle`` is a pure function of the cluster and one request, so it serves both the HTTP server and
an in-process ``httpx.MockTransport``. Shapes follow the answers recorded from a real cluster
(tests/fixtures/flink-2.3); the quirks worth knowing are in docs of the functions that produce them.

The package: ``routes`` dispatches a request to its handler (``handle``, ``transport``); ``view`` is
what every handler is given and ``errors`` how it fails; the handlers are grouped by what they answer:
``cluster`` (overview, configuration, TaskManagers), ``jobs`` (jobs and vertices), ``control`` (cancel
and rescale), ``checkpoints``, and ``metrics`` (the metric endpoints and Flink's value formats);
``counts`` counts the requests answered, by endpoint template, for benchmarks.
"""

from __future__ import annotations

from autoscaler.simulator.rest.cluster import FLINK_COMMIT, FLINK_VERSION
from autoscaler.simulator.rest.counts import NO_ROUTE, RequestCounts
from autoscaler.simulator.rest.metrics import java_string
from autoscaler.simulator.rest.routes import handle, transport

__all__ = ["FLINK_COMMIT", "FLINK_VERSION", "NO_ROUTE", "RequestCounts", "handle", "java_string", "transport"]
