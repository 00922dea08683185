"""The fault matrix: the real daemon process run through faults injected on the Flink REST side.

A package (unlike the other test directories) so that its helpers import as ``faults.proxy`` and
``faults.harness`` and never collide with ``tests/e2e/harness.py``, which is imported as ``harness``.
"""
