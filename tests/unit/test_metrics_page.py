"""The ``/metrics`` page cache (autoscaler.metrics_page) and how the HTTP endpoint serves it: a page is
rendered at most once per lifetime (a multiple of its render time), one render at a time, the others served
the last page meanwhile; gzip once per page; the probes never wait behind a render."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from autoscaler.health import LISTEN_BACKLOG, Health, HttpEndpoint, serve_http
from autoscaler.metrics_page import MetricsPage, accepts_gzip


class FakeRender:
    """A render that takes ``takes_s`` of the fake clock and says which rendering it is; ``gate``, when
    set, holds it until the test opens it."""

    def __init__(self, now: list[float], takes_s: float = 0.1) -> None:
        self.now, self.takes_s, self.calls = now, takes_s, 0
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def __call__(self, registry: CollectorRegistry) -> bytes:
        self.calls += 1
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10), "the test never let the render finish"
        self.now[0] += self.takes_s
        return f"page {self.calls}\n".encode()


def _page(render: FakeRender, **kwargs: float) -> MetricsPage:
    return MetricsPage(CollectorRegistry(), clock=lambda: render.now[0], render=render, **kwargs)


def test_a_page_is_served_for_ten_times_its_render_time_then_rendered_again() -> None:
    render = FakeRender([100.0], takes_s=0.1)
    page = _page(render)

    assert page.get().body == b"page 1\n"
    render.now[0] += 0.9  # 0.9 s after the render ended: within 10 x 0.1 s
    assert page.get().body == b"page 1\n" and render.calls == 1
    render.now[0] += 0.2
    assert page.get().body == b"page 2\n" and render.calls == 2


@pytest.mark.parametrize(
    ("takes_s", "kwargs", "lifetime_s"),
    [
        (0.001, {}, 0.01),  # a small page is nearly always fresh
        (0.001, {"min_age_s": 0.5}, 0.5),
        (5.0, {}, 15.0),  # a huge page is reused at most max_age_s
        (0.2, {"cost_factor": 0.0}, 0.0),  # no reuse at all
    ],
)
def test_the_lifetime_is_bounded_by_min_and_max_age(
    takes_s: float, kwargs: dict[str, float], lifetime_s: float
) -> None:
    render = FakeRender([0.0], takes_s=takes_s)
    page = _page(render, **kwargs)
    first = page.get()
    assert first.render_s == pytest.approx(takes_s)
    assert first.fresh_until == pytest.approx(render.now[0] + lifetime_s)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_age_s"):
        MetricsPage(CollectorRegistry(), min_age_s=2.0, max_age_s=1.0)


def test_while_one_scrape_renders_the_others_get_the_last_page_at_once() -> None:
    render = FakeRender([0.0], takes_s=0.1)
    page = _page(render)
    assert page.get().body == b"page 1\n"
    render.now[0] += 5.0  # stale
    render.gate, render.started = threading.Event(), threading.Event()

    rendering = threading.Thread(target=page.get)
    rendering.start()
    assert render.started.wait(10)
    others = [page.get() for _ in range(20)]  # the render is held: these must not wait for it
    assert {p.body for p in others} == {b"page 1\n"} and render.calls == 2
    render.gate.set()
    rendering.join(10)
    assert page.get().body == b"page 2\n" and render.calls == 2


def test_the_first_scrapes_wait_for_the_first_page_and_share_it() -> None:
    render = FakeRender([0.0], takes_s=0.1)
    render.gate = threading.Event()
    page = _page(render)
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(page.get().body)) for _ in range(10)]
    for t in threads:
        t.start()
    assert render.started.wait(10)
    render.gate.set()
    for t in threads:
        t.join(10)
    assert bodies == [b"page 1\n"] * 10 and render.calls == 1


def test_gzip_is_compressed_once_per_page() -> None:
    page = MetricsPage(CollectorRegistry()).get()
    assert page.gzipped() is page.gzipped()
    assert gzip.decompress(page.gzipped()) == page.body


@pytest.mark.parametrize(
    ("header", "wanted"),
    [
        ("gzip", True),
        ("GZip, deflate", True),
        ("deflate, gzip;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("gzip;q=nonsense", False),
        ("identity", False),
        ("x-gzip", False),
        ("", False),
        (None, False),
    ],
)
def test_accept_encoding(header: str | None, wanted: bool) -> None:
    assert accepts_gzip(header) is wanted


# ------------------------------------------------------------------------------ the endpoint
@pytest.fixture
def held_render() -> Iterator[tuple[HttpEndpoint, FakeRender, Counter]]:
    """An endpoint whose page renders for real (0.1 s on its fake clock), held by a gate the test opens."""
    registry = CollectorRegistry()
    counter = Counter("scraped_things", "things", registry=registry)
    now = [0.0]

    class RealRender(FakeRender):
        def __call__(self, registry: CollectorRegistry) -> bytes:
            super().__call__(registry)
            return generate_latest(registry)

    render = RealRender(now)
    page = MetricsPage(registry, clock=lambda: now[0], render=render)
    with serve_http("127.0.0.1:0", registry, Health(10.0), page=page) as endpoint:
        yield endpoint, render, counter


def test_metrics_is_served_plain_or_gzipped_from_the_same_page(held_render) -> None:
    endpoint, render, counter = held_render
    counter.inc(3)
    plain = httpx.get(f"{endpoint.url}/metrics", headers={"Accept-Encoding": "identity"}, timeout=5)
    zipped = httpx.get(f"{endpoint.url}/metrics", headers={"Accept-Encoding": "gzip"}, timeout=5)

    assert plain.status_code == zipped.status_code == 200
    assert "content-encoding" not in plain.headers and zipped.headers["content-encoding"] == "gzip"
    assert plain.headers["vary"] == zipped.headers["vary"] == "Accept-Encoding"
    assert plain.text == zipped.text  # httpx decompressed it
    assert "scraped_things_total 3.0" in plain.text and render.calls == 1


def test_the_probes_answer_while_a_render_is_held(held_render) -> None:
    endpoint, render, _ = held_render
    render.gate = threading.Event()
    try:
        scrape = threading.Thread(target=lambda: httpx.get(f"{endpoint.url}/metrics", timeout=10))
        scrape.start()
        assert render.started.wait(10)
        assert httpx.get(f"{endpoint.url}/healthz", timeout=2).status_code == 200
        assert httpx.get(f"{endpoint.url}/readyz", timeout=2).status_code == 503  # no tick yet
    finally:
        render.gate.set()
    scrape.join(10)


def test_the_listen_backlog_is_far_above_the_standard_librarys_five(held_render) -> None:
    endpoint, _, _ = held_render
    assert endpoint._server.request_queue_size == LISTEN_BACKLOG >= 128
