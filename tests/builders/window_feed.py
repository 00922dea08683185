"""Samples fed to a window book: one job of two vertices that reached RUNNING at a fixed instant.

The window tests and the tests of what reaches the window (sanity, load change) feed it the same way.
"""

from __future__ import annotations

from typing import Any

from autoscaler.evaluate.window.book import WindowBook
from autoscaler.evaluate.window.job_window import WindowStatus

S = 1000  # ms
M = 60 * S
RUNNING = 1_000 * M  # the job reached RUNNING here
V = ("src", "sink")


def feed(book: WindowBook, t_ms: int, key: str = "j", **kw: Any) -> WindowStatus:
    """One sample at `t_ms`, observed at `now_ms` (default: the same instant), defaults 5 min / 15 min."""
    now_ms = kw.pop("now_ms", t_ms)
    args: dict[str, Any] = {
        "running_since_ms": RUNNING,
        "vertex_ids": V,
        "metrics_window_ms": 15 * M,
        "stabilization_ms": 5 * M,
        **kw,
    }
    return book.observe(key, ts_ms=t_ms, now_ms=now_ms, **args)
