"""The vectorised fleet arithmetic: every job of a tick evaluated at once, in numpy, from Arrow columns.

The driver side of the Spark evaluator (issue 13): ``evaluator.FleetEvaluator`` takes the aggregation
query's rows (``columns``), reads each job's options once (``terms``), propagates the rates along every
job graph at once (``plan``), computes every vertex's rates, thresholds and parallelism with
``vector_formulas`` (each function the twin of one formula of ``evaluate.oracle``) and builds the
results (``vertex_rows``). Its results equal the oracle's, job by job; a job the arithmetic does not
take (custom evaluators, a graph out of topological order) is evaluated by the oracle's own graph walk.
No Spark in here: ``evaluate.spark`` calls it with the collected table.
"""
