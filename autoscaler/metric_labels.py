"""The ``job`` label of the Prometheus series, capped in length.

A job name is whatever its owner submitted: 10,000 characters are possible, and the name is repeated in
every series of the job (some twenty per job, more per vertex), which turned one such job into 735 KB of
``/metrics``. So a ``job`` label value over :data:`MAX_JOB_LABEL` characters is exported as its first
characters (readable in a dashboard), ``~`` and 16 hex digits of the whole name's SHA-256 (two long
names that share their beginning stay two series): :func:`job_label`.

Every metric with a ``job`` label is a :class:`JobCounter` or :class:`JobGauge`, which apply the cap
wherever label values go in (``labels`` and ``remove``), so it cannot be forgotten at one call site.
:class:`JobLabels` remembers which name each capped label stands for, so the reporter can still name a
series' job by its key (``cluster/name``) when it looks for jobs that are gone.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence, Set
from typing import Any

from prometheus_client import Counter, Gauge

__all__ = ["JOB_LABEL", "MAX_JOB_LABEL", "JobCounter", "JobGauge", "JobLabels", "job_label"]

JOB_LABEL = "job"
MAX_JOB_LABEL = 128
"""Characters of a ``job`` label value; a longer job name is exported as a prefix and a hash."""
_DIGEST_HEX = 16


def job_label(name: str) -> str:
    """The ``job`` label value of a job name: the name itself up to :data:`MAX_JOB_LABEL` characters,
    else its first characters, ``~`` and 16 hex digits of its SHA-256 (:data:`MAX_JOB_LABEL` in all)."""
    if len(name) <= MAX_JOB_LABEL:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    return f"{name[: MAX_JOB_LABEL - _DIGEST_HEX - 1]}~{digest}"


class JobLabels:
    """The job names whose label was capped, by label: what turns a series' labels back into its job's
    key. Only long names are kept, and only while a series has their label."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def label(self, name: str) -> str:
        """:func:`job_label`, remembering the name behind a capped one."""
        if len(name) <= MAX_JOB_LABEL:
            return name
        capped = job_label(name)
        with self._lock:
            self._names[capped] = name
        return capped

    def name(self, label: str) -> str:
        """The job name a label value stands for (itself unless it was capped here)."""
        return self._names.get(label, label)

    def retain(self, labels: Set[str]) -> None:
        """Forget the names behind capped labels no series holds any more."""
        with self._lock:
            self._names = {label: name for label, name in self._names.items() if label in labels}

    def __len__(self) -> int:
        return len(self._names)


class _CapsJobLabel:
    """Mixin for a prometheus_client metric with a ``job`` label: its value is capped on the way in.

    The parent metric's ``labels`` and ``remove`` are the only ways label values enter or leave it (its
    children are built by ``labels`` with the values already capped). Listed before the metric class,
    so its methods run first and hand on to the metric's with ``super()``.
    """

    def __init__(self, *args: Any, job_labels: JobLabels | None = None, **kwargs: Any) -> None:
        names = tuple(_labelnames(args, kwargs))
        self._job_at = names.index(JOB_LABEL) if JOB_LABEL in names else None
        self._job_labels = job_labels
        super().__init__(*args, **kwargs)

    def labels(self, *values: object, **kwargs: object) -> Any:
        values, kwargs = self._capped(values, kwargs)
        return super().labels(*values, **kwargs)  # type: ignore[misc]

    def remove(self, *values: Any) -> None:
        super().remove(*self._capped(values, {})[0])  # type: ignore[misc]

    def _cap(self, value: object) -> str:
        text = str(value)
        return job_label(text) if self._job_labels is None else self._job_labels.label(text)

    def _capped(
        self, values: Sequence[object], kwargs: dict[str, object]
    ) -> tuple[Sequence[object], dict[str, object]]:
        at = self._job_at
        if at is not None and len(values) > at:
            values = (*values[:at], self._cap(values[at]), *values[at + 1 :])
        if JOB_LABEL in kwargs:
            kwargs = {**kwargs, JOB_LABEL: self._cap(kwargs[JOB_LABEL])}
        return values, kwargs


class JobCounter(_CapsJobLabel, Counter):
    """A ``Counter`` whose ``job`` label values are capped (:func:`job_label`)."""


class JobGauge(_CapsJobLabel, Gauge):
    """A ``Gauge`` whose ``job`` label values are capped (:func:`job_label`)."""


def _labelnames(args: Sequence[Any], kwargs: dict[str, Any]) -> Iterable[str]:
    """The label names a prometheus_client metric was built with: ``(name, documentation, labelnames)``,
    positional or by keyword."""
    return kwargs.get("labelnames", args[2] if len(args) > 2 else ())
