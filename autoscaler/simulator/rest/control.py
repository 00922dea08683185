"""The endpoints that change a job: cancel (``PATCH /jobs/:id``) and its resource requirements (rescale).

A rescale is accepted at once and takes effect when the engine's adaptive scheduler restarts the job;
only a full, well-formed body is accepted, with Flink's own error answers otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autoscaler.simulator.engine import ResourceRequirementsError, UnknownJobError
from autoscaler.simulator.rest.errors import (
    HANDLER_EXCEPTION,
    NOT_FOUND_EXCEPTION,
    HttpError,
    bad_parameter,
    stringified,
)
from autoscaler.simulator.rest.view import JOB_ID, Params, Response, View

__all__ = ["cancel_job", "get_requirements", "put_requirements"]


def cancel_job(view: View, params: Params, query: Mapping[str, str], *_: Any) -> Response:
    job = view.job(params["jobid"])
    mode = query.get("mode", "cancel")
    if mode != "cancel":
        raise bad_parameter("query", "mode", mode)
    if job.state not in ("RUNNING", "RESTARTING"):
        raise HttpError(
            409,
            stringified(
                HANDLER_EXCEPTION,
                "Job cancellation failed because the job has already reached another terminal state "
                f"({job.state}).",
                "job.JobCancellationHandler.handleRequest:131",
            ),
        )
    view.cluster.cancel(job.job_id)
    return 202, {}


def get_requirements(view: View, params: Params, *_: Any) -> Response:
    job = view.job(params["jobid"])
    return 200, {
        vid: {"parallelism": {"lowerBound": lower, "upperBound": upper}}
        for vid, (lower, upper) in job.requirements.items()
    }


def put_requirements(
    view: View, params: Params, query: Mapping[str, str], body: bytes | None, headers: Mapping[str, str]
) -> Response:
    """Rescale. Flink answers 200 ``{}`` at once and restarts later; it only accepts a full body."""
    job = view.job(params["jobid"])
    content_type = headers.get("content-type")
    if content_type is not None and not content_type.lower().startswith("application/json"):
        raise HttpError(400, "Bad request received. Content-Type must be application/json.")
    requirements = _parse_requirements(body)
    try:
        view.cluster.set_resource_requirements(job.job_id, requirements)
    except ResourceRequirementsError as error:
        raise HttpError(
            400,
            stringified(
                HANDLER_EXCEPTION, str(error), "job.JobResourceRequirementsUpdateHandler.handleRequest:80"
            ),
        ) from None
    except UnknownJobError:
        raise HttpError(
            404,
            stringified(
                NOT_FOUND_EXCEPTION,
                f"Job {job.job_id} not found",
                "job.JobResourceRequirementsUpdateHandler.handleRequest:80",
            ),
        ) from None
    return 200, {}


def _parse_requirements(body: bytes | None) -> dict[str, tuple[int, int]]:
    """``{vid: {"parallelism": {"lowerBound": l, "upperBound": u}}}``; an empty body reads as ``{}``."""
    malformed = HttpError(
        400,
        stringified(
            HANDLER_EXCEPTION,
            "Request did not match expected format JobResourceRequirementsBody.",
            "AbstractHandler.respondAsLeader:193",
        ),
    )
    try:
        data = json.loads(body) if body and body.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise malformed from None
    if not isinstance(data, dict):
        raise malformed
    result: dict[str, tuple[int, int]] = {}
    for vid, entry in data.items():
        parallelism = entry.get("parallelism") if isinstance(entry, dict) else None
        if not (JOB_ID.match(vid) and isinstance(parallelism, dict)):
            raise malformed
        lower, upper = parallelism.get("lowerBound"), parallelism.get("upperBound")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lower, upper)):
            raise malformed
        assert isinstance(lower, int) and isinstance(upper, int)
        result[vid.lower()] = (lower, upper)
    return result
