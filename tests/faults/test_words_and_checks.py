"""Issue 35, items 9 and 10: what the daemon says about a fault must be what happened, and check-config
must refuse what ``run`` refuses.

Focused tests, no daemon process where none is needed: the sanity check's words for a huge or infinite
metric value, the heap gate at ``memory.heap-usage.threshold`` 1.0, a held SQLite lock under a tick's
state write and its lease round, the source an invalid setting is blamed on, and check-config's start
checks (the metrics port in use), the last through the CLI as an operator runs it.
"""

from __future__ import annotations

import math
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from told import told

from autoscaler.cli import main
from autoscaler.cluster import Collected
from autoscaler.collect.sanity import without_impossible
from autoscaler.health import Health, serve_http
from autoscaler.leases import ClusterLease, LeaseKeeper
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef, TaskManagerSample, VertexSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions, ConfigError, Settings
from autoscaler.state import JobState, open_stores
from autoscaler.state import db as db_module
from autoscaler.state.tick import TickStore
from autoscaler.testing import make_evaluation, make_sample, make_topology, vertex_eval
from autoscaler.tick.decide import decide

pytestmark = pytest.mark.faults

GIB = float(1 << 30)


# ------------------------------------------------------------------------------ a value that cannot be
def test_a_huge_or_infinite_value_is_named_as_what_it_is_not_negative() -> None:
    """Before: 1e308 was logged as one of the "negative metric values", and counted without a kind."""
    bad = VertexSample(pending_records=1e308, num_records_in=math.inf, num_records_out=-3.0)
    out, invalid = without_impossible({"v": bad}, {"v": "Src"})
    assert all(
        math.isnan(getattr(out["v"], f)) for f in ("pending_records", "num_records_in", "num_records_out")
    )
    kinds = {v.name: v.kind for v in invalid}
    assert kinds == {
        "pending_records": "too_large",
        "num_records_in": "infinite",
        "num_records_out": "negative",
    }
    said = {v.name: str(v) for v in invalid}
    assert said["pending_records"].startswith("Src.pending_records = 1e+308 (too large")
    assert said["num_records_in"] == "Src.num_records_in = inf (infinite)"
    assert said["num_records_out"] == "Src.num_records_out = -3 (negative)"

    topology = make_topology({"src": 1})
    metrics = MetricsReporter()
    sample = make_sample(topology, invalid_values=invalid)
    with capture_logs() as logs:
        told(collected=Collected(samples=(sample,), read_now=(sample,)), metrics=metrics)
    (line,) = [entry for entry in logs if entry["event"] == "metric_values_invalid"]
    assert line["kinds"] == ["infinite", "negative", "too_large"]
    assert line["detail"].startswith("metric values that cannot be (1 negative, 1 infinite, 1 too large)")
    job = {"cluster": sample.job.cluster, "job": sample.job.name}
    for kind in ("negative", "infinite", "too_large"):
        labels = {**job, "kind": kind}
        assert metrics.registry.get_sample_value("flink_autoscaler_invalid_metric_values_total", labels) == 1

    huge = tuple(v for v in invalid if v.kind == "too_large")
    only_huge = make_sample(topology, invalid_values=huge)
    with capture_logs() as logs:
        told(collected=Collected(samples=(only_huge,), read_now=(only_huge,)), metrics=metrics)
    (line,) = [entry for entry in logs if entry["event"] == "metric_values_invalid"]
    assert "negative" not in line["detail"] and "too large" in line["detail"]
    assert line["values"] == [str(huge[0])] and line["kinds"] == ["too_large"]


# ------------------------------------------------------------------------------ the heap gate
@pytest.mark.parametrize(
    ("used", "heap_max", "ratio"),
    [
        (1.3 * GIB, 1.0 * GIB, 1.0),
        (0.5 * GIB, 1.0 * GIB, 0.5),
        (0.5 * GIB, -1.0, math.nan),
        (5.0, 0.0, math.nan),
    ],
    ids=["used-above-max-is-full", "half", "max-undefined", "max-zero"],
)
def test_the_heap_ratio_is_how_full_the_heap_is(used: float, heap_max: float, ratio: float) -> None:
    got = TaskManagerSample(heap_used=used, heap_max=heap_max).heap_usage_ratio
    assert got == ratio or (math.isnan(got) and math.isnan(ratio))


@pytest.mark.parametrize(
    "tm",
    [
        TaskManagerSample(heap_used=1.3 * GIB, heap_max=1.0 * GIB),
        TaskManagerSample(heap_used=1.0 * GIB, heap_max=-1.0),
        TaskManagerSample(gc_time_ms_per_s=1500.0),
    ],
    ids=["heap-used-above-max", "heap-max-undefined", "gc-above-a-second-per-second"],
)
def test_a_threshold_of_one_never_blocks(tm: TaskManagerSample) -> None:
    """Before: Flink reporting heap used above max (1.3) blocked scaling at the documented "never" 1.0."""
    options = AutoscalerOptions(enabled=True)
    assert options.memory_heap_usage_threshold == 1.0 and options.memory_gc_pressure_threshold == 1.0
    evaluation = make_evaluation([vertex_eval("work", 1, 3)], options=options, taskmanagers=tm)
    decision = decide(evaluation, JobState(), options, 0)
    assert decision.outcome is Reason.SCALING, decision.detail


def test_a_heap_used_above_max_reads_as_full_under_a_lower_threshold() -> None:
    options = AutoscalerOptions(enabled=True, memory_heap_usage_threshold=0.9)
    tm = TaskManagerSample(heap_used=1.3 * GIB, heap_max=1.0 * GIB)
    evaluation = make_evaluation([vertex_eval("work", 1, 3)], options=options, taskmanagers=tm)
    decision = decide(evaluation, JobState(), options, 0)
    assert decision.outcome is Reason.MEMORY_PRESSURE
    assert "heap usage 1.00 above memory.heap-usage.threshold 0.9" in decision.detail


# ------------------------------------------------------------------------------ which source is wrong
def test_an_invalid_log_level_from_the_environment_is_blamed_on_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "invalid configuration in config.yaml: log_level ..." for a file without a log_level."""
    config = tmp_path / "config.yaml"
    config.write_text("clusters:\n  - name: a\n    rest_url: http://127.0.0.1:9\nmetrics_address: ''\n")
    monkeypatch.setenv("FLINK_AUTOSCALER_LOG_LEVEL", "LOUD")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration in the environment variable FLINK_AUTOSCALER_LOG_LEVEL:" in err
    assert "FLINK_AUTOSCALER_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR (got 'LOUD')" in err
    assert str(config) not in err

    config.write_text(config.read_text() + "state_url: mongodb://db/x\n")  # one bad key in each
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert (
        f"invalid configuration in {config} and the environment variable FLINK_AUTOSCALER_LOG_LEVEL:" in err
    )
    assert "\n  state_url: must be" in err and "\n  FLINK_AUTOSCALER_LOG_LEVEL: must be" in err

    monkeypatch.delenv("FLINK_AUTOSCALER_LOG_LEVEL")
    monkeypatch.setenv("FLINK_AUTOSCALER_CLUSTERS", '[{"name": "a", "rest_url": "ftp://jm"}]')
    with pytest.raises(ConfigError) as raised:
        Settings.load(None)
    assert "FLINK_AUTOSCALER_CLUSTERS.0.rest_url: must start with http://" in str(raised.value)


# ------------------------------------------------------------------------------ check-config as run
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as an operator runs it, in its own process (this worktree's code: PYTHONPATH)."""
    return subprocess.run(
        [sys.executable, "-m", "autoscaler", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_check_config_refuses_the_metrics_port_in_use_as_run_does(tmp_path: Path) -> None:
    """Before: check-config said OK and `run` then stopped on the port another process listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "config.yaml"
        config.write_text(
            f"clusters:\n  - name: a\n    rest_url: http://127.0.0.1:9\nmetrics_address: 127.0.0.1:{port}\n"
            "state_url: memory://\ndecisions_dir: null\n"
        )
        checked, ran = _cli("check-config", str(config)), _cli("run", "--config", str(config))
    said = f"metrics_address 127.0.0.1:{port} is in use"
    assert checked.returncode == 2 and said in checked.stderr and "OK" not in checked.stdout
    assert ran.returncode == 2 and said in ran.stderr and "Traceback" not in ran.stderr
    # Released: the check holds nothing, and the same port passes once it is free.
    assert main(["check-config", str(config)]) == 0


def test_a_port_held_by_a_running_daemon_is_a_warning_for_the_restart_it_precedes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/operations.md: check a changed file with the daemon still running, then restart it. Its own
    port (it answers /healthz as a flink-autoscaler) must not fail that check."""
    with serve_http("127.0.0.1:0", MetricsReporter().registry, Health(10.0)) as running:
        config = tmp_path / "config.yaml"
        config.write_text(
            "clusters:\n  - name: a\n    rest_url: http://127.0.0.1:9\n"
            f"metrics_address: 127.0.0.1:{running.port}\nstate_url: memory://\n"
        )
        assert main(["check-config", str(config)]) == 0
    err = capsys.readouterr().err
    assert f"warning: metrics_address 127.0.0.1:{running.port} is in use by a running flink-autoscaler" in err


def test_check_config_refuses_what_run_refuses_before_its_first_tick(tmp_path: Path) -> None:
    """No clusters (run: "no clusters configured"), TLS files that cannot load (run: found only once
    Spark is up), an archive_dir or SQLite state file where a file or directory stands in the way."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "config.yaml"
    config.write_text("metrics_address: ''\nstate_url: memory://\n")
    checked = _cli("check-config", str(config))
    assert checked.returncode == 2 and "no clusters configured" in checked.stderr
    config.write_text(
        "clusters:\n  - name: a\n    rest_url: https://127.0.0.1:9\n"
        f"    ca_file: {tmp_path / 'missing-ca.pem'}\nmetrics_address: ''\n"
        f"archive_dir: {blocker / 'archive'}\nstate_url: sqlite:///{blocker / 'state.db'}\n"
    )
    checked = _cli("check-config", str(config))
    assert checked.returncode == 2, checked.stderr
    assert "cluster 'a': cannot load TLS files" in checked.stderr
    assert (
        f"archive_dir {blocker / 'archive'}: the daemon cannot write there ({blocker} is not a directory)"
        in (checked.stderr)
    )
    assert f"the daemon cannot write the database ({blocker} is not a directory)" in checked.stderr


# ------------------------------------------------------------------------------ a held SQLite lock
async def test_a_held_sqlite_lock_stands_by_without_a_traceback_and_loses_no_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the database's write lock (a second daemon, a ``sqlite3`` shell in BEGIN
    EXCLUSIVE) past the busy timeout. Before: the tick's state write logged ``state_save_failed`` with a
    traceback and the tick's state was lost. Now: the write says why in one line and keeps the state;
    the lease round says ``lease_unavailable`` and ``standing_by``, as docs/operations.md promises; once
    the lock goes, the lease comes back and the kept state is written, since no one else held the lease."""
    monkeypatch.setattr(db_module, "_SQLITE_BUSY_TIMEOUT_S", 0.2)  # SQLite's wait, 30 s in production
    path = tmp_path / "state.db"
    stores = open_stores(f"sqlite:///{path}")
    metrics = MetricsReporter()
    keeper = LeaseKeeper(stores.state, metrics, instance_id="a", ttl_ms=60_000)
    lease, job = ClusterLease("c"), JobRef("c", "f" * 32, "job")
    sample = make_sample(make_topology({"src": 1}), job=job)
    store = TickStore(stores.state, metrics, persist_window=False)
    now = 1_000_000
    try:
        await keeper.renew(lease, now)
        assert lease.holds(now)
        kept = JobState(last_rescale_ms=now, stuck_rescales=1)
        locker = sqlite3.connect(path, isolation_level=None, timeout=5)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            with capture_logs() as logs:
                loaded = await store.load([sample], lambda key: lease.token(key, now))
                await store.flush(
                    [sample], loaded, {job.key: kept}, now, tokens=lambda key: lease.token(key, now)
                )
                await keeper.renew(lease, now + 10_000)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert not [entry for entry in logs if "exc_info" in entry], "a traceback for a held lock"
        (failed,) = [entry for entry in logs if entry["event"] == "state_save_failed"]
        assert failed["error"] == "OperationalError: database is locked" and failed["jobs"] == [job.key]
        assert {"lease_unavailable", "standing_by"} <= {entry["event"] for entry in logs}
        assert not lease.holds(now + 10_000)
        labels = {"cluster": "c", "reason": "StateStoreError"}
        assert metrics.registry.get_sample_value("flink_autoscaler_errors_total", labels) >= 2
        assert stores.state.load(job.key) == JobState()  # not written yet, but not lost:

        later = now + 20_000
        with capture_logs() as logs:
            await keeper.renew(lease, later)
            loaded = await store.load([sample], lambda key: lease.token(key, later))
            assert loaded.states[job.key] == kept  # the tick decides from the kept state
            await store.flush(
                [sample], loaded, {job.key: kept}, later, tokens=lambda key: lease.token(key, later)
            )
        assert "lease_acquired" in {entry["event"] for entry in logs}
        (written,) = [entry for entry in logs if entry["event"] == "state_unsaved_written"]
        assert written["jobs"] == [job.key]
        assert stores.state.load(job.key) == kept
    finally:
        stores.close()


async def test_a_kept_state_is_dropped_when_another_daemon_held_the_lease_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock outlasted the lease and another daemon acted on the job: its stored state is newer."""
    monkeypatch.setattr(db_module, "_SQLITE_BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "state.db"
    stores = open_stores(f"sqlite:///{path}")
    metrics = MetricsReporter()
    a = LeaseKeeper(stores.state, metrics, instance_id="a", ttl_ms=5_000)
    b = LeaseKeeper(stores.state, metrics, instance_id="b", ttl_ms=5_000)
    lease_a, lease_b, job = ClusterLease("c"), ClusterLease("c"), JobRef("c", "f" * 32, "job")
    sample = make_sample(make_topology({"src": 1}), job=job)
    store = TickStore(stores.state, metrics, persist_window=False)
    now = 1_000_000
    try:
        await a.renew(lease_a, now)
        locker = sqlite3.connect(path, isolation_level=None, timeout=5)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            stale = JobState(stuck_rescales=1)
            await store.flush(
                [sample],
                await store.load([sample]),
                {job.key: stale},
                now,
                tokens=lambda k: lease_a.token(k, now),
            )
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        await b.renew(lease_b, now + 6_000)  # a's lease ran out: b takes it and writes the job's state
        newer = JobState(stuck_rescales=5)
        stores.state.save_many({job.key: newer})
        await b.release(lease_b, "stopping")
        later = now + 7_000
        await a.renew(lease_a, later)
        assert lease_a.holds(later)
        with capture_logs() as logs:
            loaded = await store.load([sample], lambda key: lease_a.token(key, later))
        assert loaded.states[job.key] == newer
        assert [entry["job"] for entry in logs if entry["event"] == "state_unsaved_dropped"] == [job.key]
        await store.flush([sample], loaded, {job.key: newer}, later, tokens=lambda k: lease_a.token(k, later))
        assert stores.state.load(job.key) == newer
    finally:
        stores.close()
