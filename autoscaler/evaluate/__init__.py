"""The evaluate stage: window aggregation on Spark, graph propagation and scaling math in the driver.

``formulas`` is the plain-Python oracle; ``spark`` must agree with it. ``history`` holds the rules that
read past scalings (restart time, ineffective scale-ups, observed scalability, trimming). Importing
this package does not start a JVM: PySpark is imported when a session is created or used.
"""

from __future__ import annotations

from autoscaler.evaluate.formulas import VertexAggregates, aggregate_window, evaluate_vertices
from autoscaler.evaluate.history import record_metrics, restart_time_s, trim_history
from autoscaler.evaluate.spark import SparkEvaluator, create_spark_session

__all__ = [
    "SparkEvaluator",
    "VertexAggregates",
    "aggregate_window",
    "create_spark_session",
    "evaluate_vertices",
    "record_metrics",
    "restart_time_s",
    "trim_history",
]
