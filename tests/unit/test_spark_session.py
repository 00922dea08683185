"""The session's settings (:mod:`autoscaler.evaluate.spark_session`), without a JVM.

Making real sessions (local, ``spark://``, ``sc://``) is in ``tests/integration/test_spark_remote.py``.
"""

from __future__ import annotations

import pytest

from autoscaler.evaluate.spark_session import session_conf
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
