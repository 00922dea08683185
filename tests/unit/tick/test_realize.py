"""The realizer converges Flink's requirements to the decision, idempotently."""

from __future__ import annotations

import pytest

from autoscaler.flink.models import ParallelismBounds
from autoscaler.state import PendingRescale
from autoscaler.testing import JOB, RecordingRequirementsClient, make_sample, make_topology
from autoscaler.tick.decide import confirm
from autoscaler.tick.realize import realize


async def test_puts_the_full_body_once_and_then_nothing():
    client = RecordingRequirementsClient.of({"src": 1, "work": 1, "sink": 1})
    first = await realize(client, JOB, {"work": 3})
    assert first.issued
    assert client.puts == [
        {"src": ParallelismBounds(1, 1), "work": ParallelismBounds(1, 3), "sink": ParallelismBounds(1, 1)}
    ]
    second = await realize(client, JOB, {"work": 3})
    assert not second.issued and len(client.puts) == 1


async def test_unknown_vertex_is_refused_before_any_put():
    client = RecordingRequirementsClient.of({"src": 1})
    with pytest.raises(ValueError, match="not in the job's resource requirements"):
        await realize(client, JOB, {"ghost": 2})
    assert client.puts == []


def _sample(parallelism, running_since_ms):
    return make_sample(make_topology(parallelism), running_since_ms=running_since_ms)


def test_confirm_waits_for_the_restart_then_reports_actual_parallelism():
    pending = PendingRescale(JOB.job_id, 1_000, {"work": 3}, {"work": 1})
    assert not confirm(pending, _sample({"work": 1}, running_since_ms=500)).done
    done = confirm(pending, _sample({"work": 3}, running_since_ms=4_000))
    assert done.done and not done.capped and done.restart_duration_ms == 3_000


def test_confirm_reports_a_capped_rescale_instead_of_waiting_forever():
    pending = PendingRescale(JOB.job_id, 1_000, {"work": 12}, {"work": 1})
    result = confirm(pending, _sample({"work": 8}, running_since_ms=2_000))
    assert result.done and result.capped and result.actual == {"work": 8}
