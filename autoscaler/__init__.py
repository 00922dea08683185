"""flink-autoscaler: a standalone autoscaler daemon for Apache Flink jobs, evaluated on Apache Spark."""

from __future__ import annotations

__version__ = "0.1.0"
