"""The evaluate stage: window aggregation on Spark, graph propagation and scaling math in the driver.

``formulas`` is the plain-Python oracle (the graph walk, over ``aggregates``, ``rates`` and
``propagation``); ``spark`` (with ``spark_session`` and ``spark_frames``, and ``fleet``: the same
formulas for every vertex of a tick at once, in numpy) must agree with it.
``history`` holds the rules that read past scalings (restart time, ineffective scale-ups, observed
scalability, trimming); ``custom`` the custom-evaluator SPI (FLIP-514) and its merge. Importing this
package does not start a JVM: PySpark is imported when a session is created or used.
"""

from __future__ import annotations

from autoscaler.evaluate.custom import CustomEvaluator, EvaluatorContext, VertexMetrics
from autoscaler.evaluate.history import record_metrics, restart_time_s, trim_history
from autoscaler.evaluate.oracle.formulas import (
    CustomAggregate,
    VertexAggregates,
    aggregate_custom_window,
    aggregate_window,
    evaluate_graph,
    evaluate_vertices,
)
from autoscaler.evaluate.spark.evaluator import SparkEvaluator, create_spark_session, start_evaluator

__all__ = [
    "CustomAggregate",
    "CustomEvaluator",
    "EvaluatorContext",
    "SparkEvaluator",
    "VertexAggregates",
    "VertexMetrics",
    "aggregate_custom_window",
    "aggregate_window",
    "create_spark_session",
    "evaluate_graph",
    "evaluate_vertices",
    "record_metrics",
    "restart_time_s",
    "start_evaluator",
    "trim_history",
]
