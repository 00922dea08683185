"""The Spark evaluator: the daemon's backend, one long-lived session and one aggregation query per tick.

``evaluator.SparkEvaluator`` keeps every job's window as rows in Spark across ticks and reduces it to
one row per vertex in one batched query; ``session`` makes and repairs the session, ``frames`` holds the
frames' layout and the query, ``series`` the rows' integer key, ``checkpointing`` the background
checkpoints that cut the lineage, ``tick_jobs`` what each job needs around the batch, and ``phases``
where a tick's time went. The driver's arithmetic on the collected rows is ``evaluate.fleet``; which
rows count is ``evaluate.window``; and the whole backend must give what ``evaluate.oracle`` gives (the
Spark tests compare the two tick by tick). Importing this package starts no JVM: PySpark is imported
when a session is made.
"""
