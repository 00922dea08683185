"""The evaluator's SparkSession: one long-lived session per process, local, on a standalone cluster, or
over Spark Connect.

Its own module because making and configuring the session is independent of the window it will hold: the
settings (``/work/shared/reference/spark.md`` §2: UI off, ~2x cores partitions, Arrow, UTC; only runtime
SQL confs over Connect, with the plan cache off), the environment the local JVM reads once at its start,
the Connect client's fail-fast retry policy, and the loggers quieted for what the evaluator does on
purpose. :func:`session_conf` and :func:`is_connect` need no JVM. The evaluator
(:mod:`autoscaler.evaluate.spark.evaluator`) starts its session with :func:`create_spark_session`, and makes a
new one with it when a Connect server lost the old one, or when the local driver JVM died
(:func:`local_jvm_alive`, :func:`discard_local_session`); :func:`spark_error` tells such a loss by the
error class in a failed call's message.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autoscaler.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DRIVER_JAVA_OPTIONS",
    "create_spark_session",
    "discard_local_session",
    "is_connect",
    "is_connect_session",
    "local_cores",
    "local_jvm_alive",
    "session_conf",
    "spark_error",
]

# Connect's default retry policy waits out an unreachable server for at least 10 minutes inside one
# call. A tick fails fast instead (about 17 s: 5 retries from 50 ms, x4, at most 15 s apart): nothing
# scales on a tick without Spark, and the next tick reconnects.
_CONNECT_RETRIES = {"max_retries": 5, "max_backoff": 15_000}
_STATIC_CONF = ("spark.ui.", "spark.default.parallelism", "spark.driver.", "spark.executor.")
# A Connect server keeps each session's last resolved plans (16 by default). Every plan of ours reads a
# window checkpoint that the next tick supersedes, so that cache would pin up to 16 stale windows in the
# server's memory; our plans never repeat, so it saves nothing. Without it the server's ContextCleaner
# unpersists a superseded checkpoint at its first GC after the client drops it (see
# :func:`autoscaler.evaluate.spark.frames.release_frame`).
_CONNECT_CONF = {"spark.connect.session.planCache.enabled": "false"}
# The garbage collector of a driver JVM the daemon starts (local mode; a standalone cluster's driver).
# JDK 17's default, G1, lets the heap grow to its maximum and keeps it: a 1,000-job window lives in some
# 150 MB of heap, yet the JVM's RSS rose to 1.4 GB under the default 1 GiB heap. The parallel collector
# with a 20 % GC-time goal (GCTimeRatio=4) grows the heap only as far as that goal needs: 0.9 GB of RSS,
# at the same evaluation time (docs/performance.md, "Memory"). Not a cap on the free heap
# (Min/MaxHeapFreeRatio, the default before): with at most 30 % free, a JVM that met a 10,000-job fleet
# at its first tick never grew its heap past 400 MB and ran 14 full collections a second, for minutes,
# instead of a tick. An operator's own ``spark.driver.extraJavaOptions`` replaces these.
DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:GCTimeRatio=4"


# ---------------------------------------------------------------------------------------------- session
def local_cores(master: str) -> int:
    """Cores the session may use: N of ``local[N]`` / ``local[N,F]``; the machine's for ``local[*]`` etc."""
    m = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", master.strip())
    if m:
        return max(1, int(m.group(1)))
    if master.strip() == "local":
        return 1
    return os.cpu_count() or 1


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """The session settings (spark.md §2): UI off, ~2x cores partitions, Arrow, UTC, adaptive execution
    off, the driver JVM's collector (:data:`DRIVER_JAVA_OPTIONS`); the user's win."""
    partitions = str(2 * local_cores(settings.master))
    connect = is_connect(settings.master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": partitions,
        "spark.default.parallelism": partitions,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Off, so that a checkpoint keeps its plan's partitioning: an adaptive plan reports none, and a
        # window checkpointed as one partition must read as one (spark_frames.extend_window), or its join
        # and aggregation shuffle it again. With the partitions at 2x cores there is nothing for
        # adaptive execution to coalesce (spark.md §2).
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        **(_CONNECT_CONF if connect else {}),
    }
    conf.update(settings.conf)
    if connect:  # a Connect client can only set runtime SQL confs
        conf = {k: v for k, v in conf.items() if not k.startswith(_STATIC_CONF)}
    return conf


def is_connect(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``sc://host:port``) rather than a classic master."""
    return master.strip().startswith("sc://")


def is_connect_session(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client, which has no SparkContext, JVM or RDDs of its own."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _on_loopback(master: str) -> bool:
    """Whether every host of a ``spark://h1:p1,h2:p2`` master is this machine's loopback."""
    hosts = [part.rsplit(":", 1)[0].strip("[]") for part in master.strip()[len("spark://") :].split(",")]
    for host in hosts:
        try:
            address = ipaddress.ip_address(host if host != "localhost" else "127.0.0.1")
        except ValueError:
            try:
                address = ipaddress.ip_address(socket.gethostbyname(host))
            except OSError:
                return False
        if not address.is_loopback:
            return False
    return bool(hosts)


def _prepare_environment(master: str) -> None:
    """Environment for the local JVM, which reads it once, at the first session.

    Local mode binds to loopback and runs this venv's Python. A standalone cluster's executors must
    reach the driver, so the driver binds to loopback only when the master is on loopback too, and an
    operator's ``PYSPARK_PYTHON`` (the executors' interpreter) is kept. A Connect client starts no JVM.
    """
    if is_connect(master):
        return
    if master.strip().startswith("spark://"):
        if _on_loopback(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        return
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must run this venv's Python (pyarrow)


def create_spark_session(settings: SparkSettings) -> SparkSession:
    """Start (or join) the process's one SparkSession: local, on a standalone cluster, or over Connect."""
    _prepare_environment(settings.master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(settings.app_name)
    if is_connect(settings.master):
        builder = builder.remote(settings.master.strip())
    else:
        builder = builder.master(settings.master)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except ImportError as err:  # PySpark's own message names one package, not how to get them all
        if not is_connect(settings.master):
            raise
        raise ImportError(
            f"spark.master {settings.master} needs the Spark Connect client: "
            f"pip install 'flink-autoscaler[connect]' ({err})"
        ) from err
    if is_connect(settings.master):
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session.client.set_retry_policies([DefaultPolicy(**_CONNECT_RETRIES)])  # type: ignore[attr-defined]
    else:
        session.sparkContext.setLogLevel("WARN")
        _quiet_expected_warnings(session)
    return session


# Loggers that warn on every tick about things this evaluator does on purpose: releasing a superseded
# local checkpoint, and printing a wide plan. Everything else keeps Spark's WARN level.
_EXPECTED_WARNINGS = ("org.apache.spark.rdd.MapPartitionsRDD", "org.apache.spark.util.SparkStringUtils")


def _quiet_expected_warnings(session: SparkSession) -> None:
    with contextlib.suppress(Exception):  # only classic sessions expose log4j through py4j
        jvm = session.sparkContext._jvm  # type: ignore[attr-defined]
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in _EXPECTED_WARNINGS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)


# ---------------------------------------------------------------------------------------------- a dead JVM
def local_jvm_alive() -> bool:
    """Whether this process's driver JVM (the py4j gateway's child process) is running.

    A classic session (``local[*]``, ``spark://``) lives in a JVM that PySpark started as a child of
    this process. If it dies (the OOM killer, a ``kill``), every call fails with "Connection refused"
    and PySpark never starts another on its own: its singletons still point at the dead one. False
    also when there is no gateway at all (discarded, or never started).
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return proc is not None and proc.poll() is None


def discard_local_session(session: SparkSession) -> int | None:
    """Forget a classic session whose JVM died, so that the next :func:`create_spark_session` starts a
    new JVM; reap the dead one (else it stays a zombie). Returns the old JVM's exit code, if known.

    ``SparkSession.stop`` alone does not do it: against a dead JVM it fails half-way, leaving the
    session, context and gateway singletons set, and PySpark would hand the dead session out again.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.context import SQLContext

    with contextlib.suppress(Exception):  # fails part-way against a dead JVM; what it cleared stays cleared
        session.stop()
    gateway = SparkContext._gateway
    with SparkContext._lock:
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    if gateway is None:
        return None
    with contextlib.suppress(Exception):  # closes py4j's sockets and callback server
        gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    with contextlib.suppress(Exception):
        proc.kill()  # a JVM that only lost its py4j connection is stopped for good
    try:
        return proc.wait(timeout=30)
    except Exception:
        return None


def spark_error(err: BaseException, classes: Sequence[str]) -> str | None:
    """The first line of Spark's message from one of the error ``classes`` on, if ``err`` has one.

    Matched in the text: classic (py4j) and Connect errors carry the class alike.
    """
    try:
        text = str(err)
    except Exception:  # a py4j error whose JVM is gone cannot even describe itself
        return None
    found = [at for at in (text.find(c) for c in classes) if at >= 0]
    return text[min(found) :].split("\n", 1)[0] if found else None
