"""The ``/metrics`` page: rendered by one scrape, served as bytes to every scrape while it is fresh.

Why: prometheus_client renders the whole registry in Python on each ``generate_latest`` call, holding the
GIL for all of it. Rendered per request, a scrape flood (a dashboard's refreshes, several Prometheus
replicas, a scraper gone wrong) on a daemon with a large page (thousands of vertex series) ran fifty
renders at once on the HTTP server's threads: they starved the control loop (ticks skipped) and the
probes (a ``/healthz`` answered after a minute). Here:

* at most one render runs at a time, and a scrape that comes while it runs gets the page before it
  (the very first scrapes wait for the first page);
* a page is reused for ``cost_factor`` times what its render took (between ``min_age_s`` and
  ``max_age_s``), so rendering takes at most about ``1 / (cost_factor + 1)`` of a core however many
  scrapes come. A page is never older than that: a few milliseconds for a small page, a second for
  one that takes 0.1 s to render, so a scraper polling once a second or slower sees every change at once;
* the gzip body (Prometheus asks for it) is compressed once per page, by the first scrape that wants it.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest

__all__ = ["MetricsPage", "Page", "accepts_gzip"]


class Page:
    """One rendering of the registry, and until when (the page clock) it is served."""

    __slots__ = ("_gzip_lock", "_gzipped", "body", "fresh_until", "render_s")

    def __init__(self, body: bytes, fresh_until: float, render_s: float) -> None:
        self.body = body
        self.fresh_until = fresh_until
        self.render_s = render_s
        self._gzipped: bytes | None = None
        self._gzip_lock = threading.Lock()

    def gzipped(self) -> bytes:
        """The body gzip-compressed, computed once (zlib releases the GIL while it compresses)."""
        with self._gzip_lock:
            if self._gzipped is None:
                self._gzipped = gzip.compress(self.body, compresslevel=6)
            return self._gzipped


class MetricsPage:
    """The current page of ``registry`` (module doc). Thread-safe: every HTTP thread calls :meth:`get`.

    ``clock`` (monotonic seconds) and ``render`` are injected so that tests move time and count renders.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        cost_factor: float = 10.0,
        min_age_s: float = 0.0,
        max_age_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        render: Callable[[CollectorRegistry], bytes] = generate_latest,
    ) -> None:
        if cost_factor < 0 or min_age_s < 0 or max_age_s < min_age_s:
            raise ValueError("need cost_factor >= 0 and 0 <= min_age_s <= max_age_s")
        self.registry = registry
        self.cost_factor = cost_factor
        self.min_age_s = min_age_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._render = render
        self._page: Page | None = None
        self._rendering = threading.Lock()  # one render at a time; nothing else ever takes it

    def get(self) -> Page:
        """A fresh page, or the last one while another thread renders the next."""
        page = self._page
        if page is not None and self._clock() < page.fresh_until:
            return page
        if not self._rendering.acquire(blocking=page is None):
            assert page is not None  # only a scrape that has a page to serve does not wait
            return page
        try:
            page = self._page  # a render that ended while this scrape waited for the lock is fresh
            if page is None or self._clock() >= page.fresh_until:
                page = self._page = self._render_page()
            return page
        finally:
            self._rendering.release()

    def _render_page(self) -> Page:
        started = self._clock()
        body = self._render(self.registry)
        ended = self._clock()
        took = max(0.0, ended - started)
        lifetime = min(self.max_age_s, max(self.min_age_s, self.cost_factor * took))
        return Page(body, ended + lifetime, took)


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header asks for gzip (and does not refuse it with ``q=0``)."""
    for item in (accept_encoding or "").split(","):
        coding, *params = (part.strip().lower() for part in item.split(";"))
        if coding != "gzip":
            continue
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False
