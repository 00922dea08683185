"""A job's memory in this process: each cache registers once and is told when a job is forgotten."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from daemon_world import World

from autoscaler.job_memory import JobMemory
from autoscaler.testing import StubEvaluator


class Cache:
    def __init__(self) -> None:
        self.told: list[tuple[str, ...]] = []

    def forget(self, job_keys: Iterable[str]) -> None:
        self.told.append(tuple(job_keys))


def test_a_registered_cache_is_told_each_forgotten_job_once() -> None:
    first, second = Cache(), Cache()
    memory = JobMemory(first)
    memory.register(second)
    memory.forget(key for key in ["c/a", "c/b"])  # a one-shot iterable reaches every cache whole
    assert first.told == [("c/a", "c/b")]
    assert second.told == [("c/a", "c/b")]


def test_a_cache_registered_twice_is_a_wiring_mistake() -> None:
    cache = Cache()
    memory = JobMemory(cache)
    with pytest.raises(ValueError, match="registered already"):
        memory.register(cache)
    assert len(memory) == 1


def test_the_daemon_registers_every_cache_of_a_job_once() -> None:
    world = World(StubEvaluator())
    daemon = world.daemon
    caches = [daemon.evaluator, daemon.store, daemon.schedule, daemon._chain_log, daemon.metrics]
    caches += [cache for c in daemon.clusters for cache in (c.names, c.fetches)]
    assert len(daemon.memory) == len(caches)  # and registering any again would raise
    for cache in caches:
        with pytest.raises(ValueError):
            daemon.memory.register(cache)


def test_forgetting_a_job_reaches_the_daemons_caches() -> None:
    evaluator = StubEvaluator()
    world = World(evaluator)
    daemon = world.daemon
    daemon.schedule.retries["a/job-a"] = 1
    daemon.memory.forget(["a/job-a"])
    assert evaluator.forgotten == ["a/job-a"]
    assert daemon.retries == {}
