"""Which jobs of a cluster to autoscale this tick, each with its effective options.

Options are layered as in the reference's standalone daemon: the daemon's and the cluster's
``job.autoscaler.*`` keys, then the job's own configuration as the JobManager reports it. A bad job
configuration or a failed per-job fetch costs that job only, never the cluster's other jobs, and the two
are told apart: a configuration that could not be read (5xx, unreachable, an unreadable answer) makes
the job unavailable this tick (``Discovery.unreadable``), not an invalid-options event.

A running job's configuration cannot change (a new one means a new submission, with a new JobID), so
it is read once per JobID and kept while the job runs (``configs``): one request per cluster and tick
for discovery, not one per job.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import structlog

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.models import JobOverview
from autoscaler.model import JobRef, JobTarget, Unavailable
from autoscaler.reasons import Reason
from autoscaler.settings import (
    KEY_PREFIX,
    LEGACY_KEY_PREFIX,
    AutoscalerOptions,
    ClusterSettings,
    ConfigError,
    flatten_keys,
)

__all__ = ["Discovery", "discover"]

log = structlog.get_logger(__name__)

STREAMING = "STREAMING"
RUNNING = "RUNNING"
# States a job passes through and comes back from with the same JobID (a rescale, a failover, a
# JobManager failover): the job is still there, only not measurable this tick. Its state, stored window
# and series stay; treating it as gone deleted the window at every rescale a tick happened to see.
TRANSIENT = frozenset({"INITIALIZING", "CREATED", "RESTARTING", "FAILING", "RECONCILING", "SUSPENDED"})


@dataclass(frozen=True, slots=True)
class Discovery:
    """One cluster's jobs sorted by what the daemon does with them this tick."""

    cluster: str
    targets: tuple[JobTarget, ...]  # jobs to autoscale this tick
    # there but not measurable this tick: RUNNING with tasks not running yet, or restarting (TRANSIENT)
    not_running: tuple[JobRef, ...]
    disabled: tuple[JobRef, ...]  # job.autoscaler.enabled is false for them
    invalid: tuple[tuple[JobRef, str], ...]  # (job, why): its options are invalid; job skipped
    # jobs whose configuration could not be read this tick (options unknown): skipped, not invalid
    unreadable: tuple[Unavailable, ...] = ()


async def discover(
    client: FlinkClient,
    cluster: ClusterSettings,
    base_options: AutoscalerOptions,
    configs: MutableMapping[str, Mapping[str, str]] | None = None,
    *,
    keep: Callable[[str], bool] | None = None,
) -> Discovery:
    """List the cluster's running streaming jobs and resolve their options.

    ``configs`` (JobID -> configuration) keeps each job's configuration between ticks: read when a
    JobID is new, dropped when it no longer runs. ``keep`` (a job key -> bool) leaves out the jobs of
    shards another daemon holds: their configurations are not read, nor their problems reported, here.
    Raises the FlinkError of ``/jobs/overview``: a cluster that cannot be listed is the daemon's to
    handle.
    """
    jobs = await client.jobs_overview()
    # Re-applying the cluster keys is harmless if base_options already holds them, and right if not.
    cluster_options = AutoscalerOptions.from_flink_conf(
        cluster.autoscaler, base_options, source=f"clusters[{cluster.name}].autoscaler"
    )
    streaming = [j for j in jobs if j.state == RUNNING and _is_streaming(j)]
    ambiguous = _duplicate_names(streaming)
    not_running: list[JobRef] = [
        ref
        for ref in _between_runs(jobs, cluster.name, taken={j.name for j in streaming})
        if keep is None or keep(ref.key)
    ]
    candidates: list[JobOverview] = []
    invalid: list[tuple[JobRef, str]] = []
    unreadable: list[Unavailable] = []
    for job in streaming:
        ref = JobRef(cluster=cluster.name, job_id=job.jid, name=job.name)
        if keep is not None and not keep(ref.key):
            continue
        if job.name in ambiguous:
            invalid.append(
                (ref, f"{ambiguous[job.name]} running jobs are named {job.name!r}; job names must be unique")
            )
        elif job.effective_running:
            candidates.append(job)
        else:
            not_running.append(ref)
    known: MutableMapping[str, Mapping[str, str]] = configs if configs is not None else {}
    for jid in set(known) - {job.jid for job in candidates} - {ref.job_id for ref in not_running}:
        del known[jid]  # a restarting job keeps its configuration: same JobID, same configuration
    confs = await asyncio.gather(*(_job_configuration(client, job, known) for job in candidates))

    targets: list[JobTarget] = []
    disabled: list[JobRef] = []
    for job, conf in zip(candidates, confs, strict=True):
        ref = JobRef(cluster=cluster.name, job_id=job.jid, name=job.name)
        if isinstance(conf, FlinkError):
            unreadable.append(_read_failure(JobTarget(ref, cluster_options), conf))
            continue
        try:
            options = AutoscalerOptions.from_flink_conf(
                conf, cluster_options, source=f"job {job.name} ({job.jid})"
            )
        except ConfigError as err:
            if _enabled_only(conf, cluster_options) is False:
                disabled.append(ref)
                continue
            log.warning(
                "job_config_invalid", cluster=cluster.name, job=ref.key, job_id=job.jid, error=str(err)
            )
            invalid.append((ref, str(err)))
            continue
        _warn_once(ref, [*AutoscalerOptions.unknown_keys(conf), *options.warnings()])
        if options.enabled:
            targets.append(JobTarget(job=ref, options=options, state=job.state))
        else:
            disabled.append(ref)
    log.debug(
        "jobs_discovered",
        cluster=cluster.name,
        targets=len(targets),
        not_running=len(not_running),
        disabled=len(disabled),
        invalid=len(invalid),
        unreadable=len(unreadable),
    )
    return Discovery(
        cluster=cluster.name,
        targets=tuple(targets),
        not_running=tuple(not_running),
        disabled=tuple(disabled),
        invalid=tuple(invalid),
        unreadable=tuple(unreadable),
    )


def _is_streaming(job: JobOverview) -> bool:
    """Flink before 1.20 does not report the job type; such jobs are taken as streaming."""
    return job.job_type is None or job.job_type.upper() == STREAMING


def _between_runs(jobs: list[JobOverview], cluster: str, taken: set[str]) -> list[JobRef]:
    """The streaming jobs in a transient state (restarting, say): present, not autoscaled this tick.

    A name a RUNNING job has is that job's key; transient jobs sharing a name are left out, as before
    (no key could say whose window it is).
    """
    between = [j for j in jobs if j.state in TRANSIENT and _is_streaming(j) and j.name not in taken]
    shared = _duplicate_names(between)
    return [JobRef(cluster=cluster, job_id=j.jid, name=j.name) for j in between if j.name not in shared]


def _duplicate_names(jobs: list[JobOverview]) -> dict[str, int]:
    """Job names shared by several running jobs: the job key (cluster/name) would mix their state."""
    counts = Counter(j.name for j in jobs)
    return {name: n for name, n in counts.items() if n > 1}


async def _job_configuration(
    client: FlinkClient, job: JobOverview, known: MutableMapping[str, Mapping[str, str]]
) -> Mapping[str, str] | FlinkError:
    """The job's configuration: as read for its JobID before, else read now (and kept).

    ``/jobs/:id/jobmanager/config`` is the configuration the JobManager runs the job with: the job's own
    in an application cluster, but the cluster's in a session cluster, where a job's submitted options
    (``-D``, a jar run's ``flinkConfiguration``) do not show. So the job's global job parameters
    (``pipeline.global-job-parameters``, ``/jobs/:id/config``) are read too, and their
    ``job.autoscaler.*`` keys win: the one place a session cluster's job can carry options of its own.
    """
    if (conf := known.get(job.jid)) is not None:
        return conf
    try:
        conf, parameters = await asyncio.gather(
            client.job_configuration(job.jid), _global_job_parameters(client, job.jid)
        )
        conf = {**conf, **parameters}
    except FlinkError as err:
        log.warning(
            "job_config_fetch_failed", cluster=client.cluster, job_id=job.jid, job=job.name, error=str(err)
        )
        return err
    known[job.jid] = conf
    return conf


async def _global_job_parameters(client: FlinkClient, job_id: str) -> dict[str, str]:
    """The ``job.autoscaler.*`` keys (either prefix) among the job's global job parameters; none on 404."""
    try:
        execution = await client.job_execution_config(job_id)
    except FlinkHTTPError as err:
        if err.status == 404:
            return {}
        raise
    prefixes = (KEY_PREFIX, LEGACY_KEY_PREFIX)
    return {str(k): str(v) for k, v in execution.user_config.items() if str(k).startswith(prefixes)}


def _read_failure(target: JobTarget, err: FlinkError) -> Unavailable:
    """The job's configuration could not be read: its options are unknown, so it is not scaled this tick,
    and the reason is the REST call's (as for a cluster that cannot be listed), not its options'."""
    reason = Reason.CLUSTER_UNREACHABLE if isinstance(err, FlinkUnreachable) else Reason.CLUSTER_ERROR
    detail = f"cannot read the job's configuration this tick, not scaling it: {err}"
    return Unavailable(target, reason, detail)


def _enabled_only(conf: Mapping[str, Any], base: AutoscalerOptions) -> bool | None:
    """The job's ``enabled`` switch alone, so a disabled job with other bad keys is not reported."""
    keys = AutoscalerOptions.option_keys()
    switch = {
        key: value
        for key, value in flatten_keys(conf).items()
        for prefix in (LEGACY_KEY_PREFIX, KEY_PREFIX)
        if key.startswith(prefix) and keys.get(key[len(prefix) :]) == "enabled"
    }
    try:
        return AutoscalerOptions.from_flink_conf(switch, base).enabled
    except ConfigError:
        return None


_WARNED: set[tuple[str, str]] = set()  # (job id, warning) already logged: once per job run, not per tick


def _warn_once(ref: JobRef, warnings: list[str]) -> None:
    """Log once per job run each key of its configuration that no option reads, and each value that is
    valid but hardly meant (``AutoscalerOptions.unknown_keys`` and ``.warnings``)."""
    for warning in warnings:
        if (ref.job_id, warning) not in _WARNED:
            _WARNED.add((ref.job_id, warning))
            log.warning("job_option_unknown", cluster=ref.cluster, job=ref.key, detail=warning)
