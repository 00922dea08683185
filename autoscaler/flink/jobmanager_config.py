"""What the daemon reads from a cluster's ``/jobmanager/config``: the adaptive scheduler's cooldown, the
metric fetcher's interval and how long idle slots stay a job's, each with Flink's default when the
cluster does not say or says it badly."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from autoscaler.durations import parse_duration, to_ms

__all__ = [
    "FETCH_INTERVAL_KEY",
    "FLINK_DEFAULT_COOLDOWN_MS",
    "FLINK_DEFAULT_SLOT_IDLE_TIMEOUT_MS",
    "flink_cooldown_ms",
    "flink_fetch_interval_ms",
    "slot_idle_timeout_ms",
]

log = structlog.get_logger(__name__)

FLINK_DEFAULT_COOLDOWN_MS = 30_000
FLINK_DEFAULT_SLOT_IDLE_TIMEOUT_MS = 50_000
SLOT_IDLE_TIMEOUT_KEY = "slot.idle.timeout"
FETCH_INTERVAL_KEY = "metrics.fetcher.update-interval"
_COOLDOWN_KEYS = (
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling",
    "jobmanager.adaptive-scheduler.scaling-interval.min",  # Flink < 2.0 spelling, the deprecated fallback
)


def flink_fetch_interval_ms(jobmanager_config: Mapping[str, str]) -> int | None:
    """``metrics.fetcher.update-interval`` from ``/jobmanager/config``; None if unset or unreadable.

    Flink 1.x spells it in milliseconds (a bare number, which Flink's duration syntax also reads as ms),
    2.x may give a duration ("10 s"); both parse here. A value Flink itself would reject (negative) is
    not trusted either.
    """
    return _duration_ms(jobmanager_config, FETCH_INTERVAL_KEY, "unparsable_metric_fetch_interval")


def _duration_ms(jobmanager_config: Mapping[str, str], key: str, warning: str) -> int | None:
    """A duration key in milliseconds (either spelling); None if unset, or unreadable or negative (said
    with ``warning`` in the log)."""
    value = jobmanager_config.get(key)
    if value is None:
        return None
    try:
        duration_ms = to_ms(parse_duration(value))
    except ValueError:
        duration_ms = -1
    if duration_ms < 0:
        log.warning(warning, key=key, value=value)
        return None
    return duration_ms


def flink_cooldown_ms(jobmanager_config: Mapping[str, str]) -> int:
    """The adaptive scheduler's cooldown from ``/jobmanager/config``; Flink's default if unset or bad."""
    for key in _COOLDOWN_KEYS:
        if key in jobmanager_config:
            try:
                return to_ms(parse_duration(jobmanager_config[key]))
            except ValueError:
                log.warning("unparsable_flink_cooldown", key=key, value=jobmanager_config[key])
    return FLINK_DEFAULT_COOLDOWN_MS


def slot_idle_timeout_ms(jobmanager_config: Mapping[str, str]) -> int:
    """``slot.idle.timeout`` from ``/jobmanager/config`` (Flink 1.x: bare milliseconds, 2.x: a duration);
    Flink's default, 50 s, if unset or unreadable. A job's slot pool keeps slots a smaller run left idle
    about this long, and some 20-30 s more, before they are free for other jobs (docs/e2e.md, "Slots")."""
    timeout_ms = _duration_ms(jobmanager_config, SLOT_IDLE_TIMEOUT_KEY, "unparsable_slot_idle_timeout")
    return FLINK_DEFAULT_SLOT_IDLE_TIMEOUT_MS if timeout_ms is None else timeout_ms
