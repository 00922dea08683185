"""Shared fixtures: one SparkSession for the whole run, the Flink 2.3 samples, a fake clock."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# Importable by name from any test (a helper in a conftest is not: tests/e2e has its own conftest).
from flink_samples import load_fixture

# Test helpers that assert, or carry fixtures (pytest_plugins), get pytest's assert rewriting like tests.
pytest.register_assert_rewrite("collect_flink", "evaluator_parity", "lease_fleet", "simulator_rest_client")


@pytest.fixture
def fixture() -> Any:
    return load_fixture


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test run, created the way the daemon creates its own."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed; Spark tests need Java 17+")
    from autoscaler.evaluate.spark.evaluator import create_spark_session
    from autoscaler.settings import SparkSettings

    session = create_spark_session(SparkSettings(master="local[2]", app_name="flink-autoscaler-tests"))
    yield session
    session.stop()


@pytest.fixture
def clock() -> Any:
    from autoscaler.clock import FakeClock

    return FakeClock()
