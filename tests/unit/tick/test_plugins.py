"""The plugin stage's chain log: each job's executor chain logged when it changes, forgotten with the job."""

from __future__ import annotations

from structlog.testing import capture_logs

from autoscaler.model import JobRef
from autoscaler.plugins.configured import ConfiguredChain
from autoscaler.tick.plugins import ChainLog

JOB = JobRef(cluster="c", job_id="a" * 32, name="orders")


def _logged(chain_log: ChainLog) -> int:
    with capture_logs() as logs:
        chain_log(JOB, ConfiguredChain())
    return sum(1 for e in logs if e["event"] == "executor_chain")


def test_a_chain_is_logged_once_until_the_job_is_forgotten() -> None:
    chain_log = ChainLog()
    assert _logged(chain_log) == 1
    assert _logged(chain_log) == 0  # unchanged: not logged again
    chain_log.forget([JOB.key, "c/unknown"])  # the job left: nothing of it is kept
    assert _logged(chain_log) == 1  # back again: its chain is told again
