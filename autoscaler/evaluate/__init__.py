"""The evaluate stage: window aggregation on Spark, graph propagation and scaling math in the driver.

``stage`` is the stage as the daemon calls it: every job of the tick in one call to a backend. The rest
is by role, one subpackage each:

- ``oracle``: the reference's formulas on plain floats (``rates``, ``propagation``, the graph walk in
  ``formulas``) and ``PythonEvaluator``, the same evaluation without a JVM: the test oracle that Spark
  and the fleet arithmetic must equal, and the backend the backtest replays on;
- ``fleet``: the same formulas for every vertex of a tick at once, in numpy (Spark's driver side);
- ``spark``: the daemon's backend, the window kept in Spark and one aggregation query per tick;
- ``window``: which samples count, each job's window kept in the driver between ticks (both backends).

The modules at this level are what the roles share and none owns: ``aggregates`` (a vertex's window
reduced to one value, what every backend produces and the custom evaluators read), ``scaler`` (the
target parallelism of a vertex), ``history`` (the rules that read past scalings: restart time,
ineffective scale-ups, observed scalability, trimming, verification; the decide stage calls them too),
``javamath`` (Java's double arithmetic) and ``custom`` (the custom-evaluator SPI, FLIP-514, and its
merge). They import no subpackage; among the subpackages the imports run one way: fleet -> oracle,
oracle -> window, spark -> fleet, oracle and window. Importing this package does not start a JVM: PySpark
is imported when a session is created or used.
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
