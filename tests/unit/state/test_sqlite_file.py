"""A SQLite state file deleted or replaced under a running daemon: no split brain, no state lost.

Each daemon opens the file on its own, as two processes would; one fake clock and one simulated cluster.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lease_fleet import KEY, Fleet

from autoscaler.reasons import Reason
from autoscaler.state import Stores, open_stores


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


async def _running(path: Path) -> tuple[Stores, Fleet]:
    """Daemon "a" on the file at ``path``, three ticks in: it holds the lease and rescaled the job."""
    stores = open_stores(f"sqlite:///{path}")
    fleet = Fleet(stores.state, ("a",))
    for _ in range(3):
        await fleet.tick("a")
    return stores, fleet


def _errors(fleet: Fleet, name: str) -> float | None:
    labels = {"cluster": "prod", "reason": str(Reason.STATE_STORE_ERROR)}
    return fleet.metrics[name].registry.get_sample_value("flink_autoscaler_errors_total", labels)


async def test_a_deleted_file_is_put_back_with_everything_and_the_lease_keeps_a_second_daemon_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    first, fleet = await _running(path)
    history = first.state.load(KEY).history
    assert len(history) == 1 and fleet.puts("a") == 1
    _delete(path)  # `rm state.db*` while the daemon runs

    await fleet.tick("a")  # puts the file back before it renews its lease
    assert path.exists() and _errors(fleet, "a") == 1
    second = open_stores(f"sqlite:///{path}")  # a second daemon started on the path now
    assert second.state.load(KEY).history == history
    fleet.state = second.state
    fleet.start("b")
    for _ in range(3):
        reports = await fleet.tick("a", "b")
        assert reports["b"].outcomes == () and fleet.held("b") == 0
    assert fleet.held("a") == 1 and fleet.puts("b") == 0
    assert [(lease.name, lease.owner) for lease in second.state.leases()] == [("prod", "a")]
    assert len(first.state.load(KEY).history) == len(second.state.load(KEY).history) == 1  # one file again
    first.close()
    second.close()


async def test_a_replaced_file_is_kept_beside_it_and_the_daemon_joins_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first, fleet = await _running(path)
    _delete(path)
    second = open_stores(f"sqlite:///{path}")  # a new daemon made a new file before a's next tick
    fleet.state = second.state
    fleet.start("b")
    await fleet.tick("b")
    assert fleet.held("b") == 1

    reports = await fleet.tick("a", "b")
    assert reports["a"].outcomes == () and fleet.held("a") == 0 and _errors(fleet, "a") == 1
    (kept,) = tmp_path.glob("state.db.orphaned-*")
    with sqlite3.connect(kept) as conn:  # a's history and window, for the operator
        (rows,) = conn.execute("SELECT count(*) FROM autoscaler_scaling_history").fetchone()
    assert rows == 1
    assert [(lease.name, lease.owner) for lease in first.state.leases()] == [("prod", "b")]
    first.close()
    second.close()


async def test_an_intact_file_is_left_alone(tmp_path: Path) -> None:
    stores, fleet = await _running(tmp_path / "state.db")
    assert _errors(fleet, "a") is None and list(tmp_path.glob("*orphaned*")) == []
    stores.close()
