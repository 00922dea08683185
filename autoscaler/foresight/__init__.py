"""Foresight: what a plan of parallelisms costs, the best plan in hindsight, and the load ahead.

Pure values and arithmetic, no I/O: the bench, ``backtest`` and (later) the decision price plans with
the same functions, so "cost" means one thing everywhere.
"""
