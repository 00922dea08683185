"""One job's archived history, as a backtest replays it: the instants the live daemon ticked, the
sample it read at each, and the rescales it asked Flink for.

The archive holds two tables (``docs/backtest.md``): ``samples`` gives what the daemon read, tick by
tick; ``decisions`` gives every tick that reached the job (also the ones without a sample: the job
restarting, the cluster unreachable) and which of them sent Flink new resource requirements. A replay
ticks at the same instants, and it stays on the recorded samples for as long as it asks Flink for
what the live daemon asked, at the same ticks (``autoscaler.backtest.replay``).

A job is its name on its cluster (``cluster/name``), as in the state database: a resubmitted job's
rows under a new JobID continue its history.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from autoscaler.archive.reader import Options, samples_from_table
from autoscaler.model import JobSample, VertexId, frozen_map

__all__ = ["DECISION_COLUMNS", "JobHistory", "histories_from_tables"]

# What a replay reads of the decisions table: the ticks, and the PUTs sent at them.
DECISION_COLUMNS = ("ts_ms", "rescale_issued", "vertex", "requested_parallelism")


@dataclass(frozen=True, slots=True)
class JobHistory:
    """What the live daemon saw of and did to one job."""

    key: str  # cluster/name
    cluster: str
    ticks: tuple[int, ...]  # every tick that read the job or decided for it, in order (epoch ms)
    samples: Mapping[int, JobSample] = field(default_factory=dict)  # by tick: the sample read then
    puts: Mapping[int, Mapping[VertexId, int]] = field(default_factory=dict)  # by tick: upper bounds sent

    _sampled: tuple[int, ...] = field(init=False, repr=False, compare=False)  # the ticks with a sample

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", frozen_map(self.samples))
        object.__setattr__(self, "puts", frozen_map({t: frozen_map(p) for t, p in self.puts.items()}))
        object.__setattr__(self, "_sampled", tuple(sorted(self.samples)))

    @property
    def first(self) -> JobSample:
        """The earliest sample: the job graph and parallelism the replay starts from."""
        return self.samples[self._sampled[0]]

    def sample_at_or_before(self, tick_ms: int) -> JobSample | None:
        """The recorded sample of the latest tick not after ``tick_ms`` (None before the first)."""
        at = bisect.bisect_right(self._sampled, tick_ms)
        return self.samples[self._sampled[at - 1]] if at else None


def histories_from_tables(
    samples: pa.Table, decisions: pa.Table | None, options: Options
) -> list[JobHistory]:
    """Every job's history from rows of the two tables (with their ``cluster`` and ``job`` columns).

    Samples without the tick that read them (``export-history`` rows: no ``tick_ms``, no job graph)
    are not replayable and left out; a job with no replayable sample is left out.
    """
    archived = samples_from_table(samples, options)
    by_job: dict[str, dict[int, JobSample]] = {}
    for key, ticks in archived.jobs.items():
        for tick in ticks:
            if tick.tick_ms is not None:
                by_job.setdefault(key, {})[tick.tick_ms] = tick.sample  # the tick's last reading
    ticks, puts = _decided(decisions) if decisions is not None else ({}, {})
    histories = []
    for key, recorded in sorted(by_job.items()):
        cluster = next(iter(recorded.values())).job.cluster
        instants = tuple(sorted(set(recorded) | ticks.get(key, set())))
        histories.append(JobHistory(key, cluster, instants, recorded, puts.get(key, {})))
    return histories


def _decided(decisions: pa.Table) -> tuple[dict[str, set[int]], dict[str, dict[int, dict[VertexId, int]]]]:
    """Per job: the ticks that decided for it, and the upper bounds of each PUT it sent."""
    columns = ("cluster", "job_name", *DECISION_COLUMNS)
    ticks: dict[str, set[int]] = {}
    puts: dict[str, dict[int, dict[VertexId, int]]] = {}
    for row in decisions.select(list(columns)).to_pylist():
        key = f"{row['cluster']}/{row['job_name']}"
        ticks.setdefault(key, set()).add(row["ts_ms"])
        if row["rescale_issued"] and row["vertex"] is not None and row["requested_parallelism"] is not None:
            puts.setdefault(key, {}).setdefault(row["ts_ms"], {})[row["vertex"]] = row[
                "requested_parallelism"
            ]
    return ticks, puts
