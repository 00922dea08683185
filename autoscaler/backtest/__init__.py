"""Backtest: replay a job's recorded history through any configuration (``docs/backtest.md``)."""
