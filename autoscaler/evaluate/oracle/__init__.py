"""The plain-Python oracle: the reference's evaluation on plain floats, one vertex and one job at a time.

``rates`` (one vertex's rates, capacities and thresholds), ``propagation`` (rates along the job graph's
edges) and ``formulas`` (the graph walk that wires them together with the custom evaluators and the
scaler) are what the faster copies must equal: the vectorised fleet arithmetic (``evaluate.fleet``)
holds a numpy twin of each formula, and the Spark evaluator (``evaluate.spark``) is compared tick by tick
with ``evaluator.PythonEvaluator``: the same windows and evaluation without a JVM, built on these
formulas and on ``sliding`` (the window's aggregates kept up to date as it slides, equal to
``aggregate_window``). The backtest and the decision benchmark replay their ticks on it.

The fleet reuses a few of these functions as they are (where a rule is Python by nature), so the
dependency runs one way: the fleet and Spark import the oracle, never the other way round. What every
role shares (the aggregates, the scaler, the history rules, Java's arithmetic, the custom evaluators)
lives one level up, in :mod:`autoscaler.evaluate`.
"""
