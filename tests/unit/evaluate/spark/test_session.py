"""The session's settings (:mod:`autoscaler.evaluate.spark.session`), without a JVM but for the one
test that asks the shared session's driver JVM what it was started with.

Making real sessions (local, ``spark://``, ``sc://``) is in ``tests/integration/test_spark_remote.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.evaluate.spark.session import DRIVER_JAVA_OPTIONS, session_conf
from autoscaler.settings import SparkSettings


@pytest.mark.parametrize(("master", "partitions"), [("local[2]", "4"), ("local[3,2]", "6"), ("local", "2")])
def test_session_conf_partitions_follow_cores(master: str, partitions: str) -> None:
    conf = session_conf(SparkSettings(master=master))
    assert conf["spark.sql.shuffle.partitions"] == conf["spark.default.parallelism"] == partitions
    assert conf["spark.ui.enabled"] == "false" and conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"


def test_session_conf_user_settings_win_and_connect_gets_runtime_confs_only() -> None:
    conf = session_conf(
        SparkSettings(conf={"spark.sql.shuffle.partitions": "7", "spark.driver.memory": "2g"})
    )
    assert conf["spark.sql.shuffle.partitions"] == "7" and conf["spark.driver.memory"] == "2g"
    remote = session_conf(SparkSettings(master="sc://localhost:15002", conf={"spark.driver.memory": "2g"}))
    assert "spark.ui.enabled" not in remote and "spark.driver.memory" not in remote
    assert remote["spark.sql.session.timeZone"] == "UTC"


def test_a_driver_jvm_the_daemon_starts_gets_a_collector_that_sizes_its_heap_to_the_window() -> None:
    key = "spark.driver.extraJavaOptions"
    for master in ("local[*]", "spark://127.0.0.1:7077"):
        assert session_conf(SparkSettings(master=master))[key] == DRIVER_JAVA_OPTIONS
    # No cap on the free heap: one kept a JVM that met 10,000 jobs at once in back-to-back full GCs.
    assert "HeapFreeRatio" not in DRIVER_JAVA_OPTIONS
    own = session_conf(SparkSettings(conf={key: "-XX:+UseG1GC"}))
    assert own[key] == "-XX:+UseG1GC"  # replaced, not merged
    assert key not in session_conf(SparkSettings(master="sc://h:15002"))


@pytest.mark.spark
def test_the_local_driver_jvm_runs_with_those_options(spark: Any) -> None:
    """The conftest's session is made as the daemon makes its own: the options reach the JVM's command."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = set(runtime.getInputArguments())
    assert set(DRIVER_JAVA_OPTIONS.split()) <= arguments
