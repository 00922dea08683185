"""The archive read back as JobSamples: partitions kept as strings, a cluster's name decoded, the
samples of ``export-history`` (which has no job graph) counted apart, nothing for an empty archive."""

from __future__ import annotations

import math
from pathlib import Path

from archive_values import JOB, OTHER, T0, sample

from autoscaler.archive import ArchiveWriter
from autoscaler.archive.export import export_history
from autoscaler.archive.reader import read_samples
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobRef
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import open_stores
from autoscaler.state.store import window_rows

DIGITS = JobRef("c1", "1234", "digits")  # Spark and pyarrow would read an inferred job=1234 as a number


def write(root: Path, *samples_by_tick: list) -> None:
    writer = ArchiveWriter(root, flush_interval_ms=3_600_000, metrics=MetricsReporter())
    for n, samples in enumerate(samples_by_tick):
        writer.add(T0 + n * 10_000 + 500, samples, [])
    writer.flush(T0 + 3_600_000)


def test_samples_come_back_per_job_in_order_with_the_options_asked_for(tmp_path: Path) -> None:
    write(
        tmp_path,
        [sample(T0, JOB), sample(T0, OTHER), sample(T0, DIGITS)],
        [sample(T0 + 10_000, JOB, busy=700.0)],
    )
    strict = AutoscalerOptions(utilization_target=0.5)
    read = read_samples(tmp_path, lambda ref: strict if ref == JOB else AutoscalerOptions())
    assert read.incomplete == 0
    assert set(read.jobs) == {"c1/orders", "c 2/x/clicks", "c1/digits"}
    orders = read.jobs["c1/orders"]
    assert [(t.tick_ms, t.sample.ts_ms) for t in orders] == [(T0 + 500, T0), (T0 + 10_500, T0 + 10_000)]
    assert orders[1].sample.vertices["work"].busy_time_ms_per_s == 700.0
    assert orders[0].sample.target.options is strict and orders[0].sample.job == JOB
    assert read.jobs["c1/digits"][0].sample.job.job_id == "1234"  # a string, as the daemon had it
    first = orders[0].sample
    assert [e.ship_strategy for e in first.topology.edges] == ["HASH"]
    assert first.taskmanagers.memory is not None and first.taskmanagers.slots_total == 12
    assert first.custom_vertex_metrics == {"work": {"queue": 3.0}}
    assert first.stale_ticks == 1 and math.isnan(first.vertices["src"].busy_time_ms_per_s)


def test_clusters_and_names_narrow_the_read(tmp_path: Path) -> None:
    write(tmp_path, [sample(T0, JOB), sample(T0, OTHER)])
    options = AutoscalerOptions()
    assert set(read_samples(tmp_path, options, clusters=["c 2/x"]).jobs) == {"c 2/x/clicks"}
    assert set(read_samples(tmp_path, options, job_names=["orders"]).jobs) == {"c1/orders"}
    assert read_samples(tmp_path / "nothing", options).jobs == {}


def test_exported_samples_lack_the_graph_and_are_counted_not_rebuilt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    stores = open_stores(url)
    stores.state.append_windows({"c1/orders": window_rows(sample(T0))})
    stores.close()
    export_history(url, tmp_path / "archive")
    read = read_samples(tmp_path / "archive", AutoscalerOptions())
    assert read.jobs == {} and read.incomplete == 1
