"""The plugin stage of a tick: each job's configured executor chain approves, modifies or vetoes its
decided changes (:mod:`autoscaler.plugins.chain` runs a chain; this module runs one per job)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import structlog

from autoscaler.cluster import Clusters
from autoscaler.model import JobRef
from autoscaler.plugins.api import PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.chain import ChainResult, PluginOutcome, order_plugins, run_chain
from autoscaler.plugins.configured import ConfiguredChain, PluginInstances
from autoscaler.reasons import Reason
from autoscaler.tick.each import each_job
from autoscaler.tick.steps import Decision, JobOutcome, JobStep, PluginsRan, Vetoed
from autoscaler.tick.texts import vetoed_text

__all__ = ["ChainLog", "run_plugins"]

log = structlog.get_logger(__name__)


class ChainLog:
    """Logs each job's executor chain, in the order it runs, whenever it changes."""

    def __init__(self) -> None:
        self._logged: dict[str, tuple[str, ...]] = {}

    def forget(self, job_keys: Iterable[str]) -> None:
        """Jobs this process no longer acts on: their chain is logged again if they come back (and a
        fleet's departed jobs are not remembered forever)."""
        for key in job_keys:
            self._logged.pop(key, None)

    def __call__(self, job: JobRef, configured: ConfiguredChain) -> None:
        order = tuple(f"{p.name}(priority {p.priority()})" for p in order_plugins(configured.plugins))
        if self._logged.get(job.key) != order:
            self._logged[job.key] = order
            log.info("executor_chain", job=job.key, chain=list(order), problems=list(configured.problems))


async def run_plugins(
    steps: Sequence[JobStep],
    now_ms: int,
    *,
    plugins: PluginInstances,
    clusters: Clusters,
    chain_log: ChainLog,
) -> list[JobStep]:
    """Each job's configured executor chain approves, modifies or vetoes its decided changes; a vetoed
    job ends here, with its decided state."""

    async def one(step: JobStep) -> JobStep:
        decision, options = step.decision, step.sample.target.options
        assert decision is not None
        configured = plugins.chain_for(options)
        chain_log(step.job, configured)
        if not configured.plugins and not configured.problems:
            return step
        chain = await _run_chain(decision, configured, clusters)
        step = replace(step.noting(PluginsRan(chain)), chain=chain)
        if chain.vetoed_by is not None or chain.changes is None:
            # A plugin that broke (raised, overran, answered garbage) is not a deliberate veto: the job's
            # outcome says PluginFailed, so an alert on it fires (the scaling is vetoed all the same).
            failed = chain.vetoed_by is not None and chain.vetoed_by.outcome is Reason.PLUGIN_FAILED
            reason = Reason.PLUGIN_FAILED if failed else Reason.SCALING_VETOED
            ended = JobOutcome(step.job, now_ms, reason, vetoed_text(chain), decision, chain)
            return step.ended(ended, Vetoed(chain), state=decision.state)
        decision = decision.with_changes(chain.changes, Reason.SCALING, decision.detail)
        return replace(step, decision=decision)

    return await each_job(steps, now_ms, one)


async def _run_chain(decision: Decision, configured: ConfiguredChain, clusters: Clusters) -> ChainResult:
    """The job's configured chain; a plugin that could not be loaded vetoes before any runs."""
    if configured.problems:
        return ChainResult(
            None, tuple(PluginOutcome("config", Reason.PLUGIN_FAILED, p) for p in configured.problems)
        )
    job, evaluation = decision.job, decision.evaluation
    assert evaluation is not None
    client = clusters[job.cluster].client
    options = evaluation.sample.target.options

    def context(plugin: ScalingExecutorPlugin) -> PluginContext:
        return PluginContext(job, options, evaluation, configured.config_for(plugin), client)

    return await run_chain(configured.plugins, context, decision.changes)
