"""A page looked at in a real browser: headless Chromium (Debian's ``chromium`` package) through its
own command line, no automation library: one run loads the page, takes a screenshot and dumps the DOM
after the load, with the page's console on stderr (``--enable-logging=stderr``, one ``CONSOLE`` line
per message).

Where each chart landed is measured by the browser itself: a copy of the page gets a probe script
that writes each ``figure.chart``'s ``<svg>`` box into a ``data-rect`` attribute at load, which the DOM
dump carries out. The page as shipped has no script; the probe logs nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

__all__ = ["CHROMIUM", "NO_CHROMIUM", "Looked", "blank_reason", "look_at"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = "no Chromium installed (Debian: apt-get install -y chromium; .ci/run installs it)"
WIDTH, HEIGHT = 1200, 4000

_PROBE = """<script>
window.addEventListener("load", () => {
  for (const f of document.querySelectorAll("figure.chart")) {
    const svg = f.querySelector("svg");
    const r = svg ? svg.getBoundingClientRect() : null;
    const box = r ? [r.left, r.top + window.scrollY, r.width, r.height] : null;
    f.dataset.rect = box ? box.map(Math.round).join(",") : "none";
  }
});
</script>"""


@dataclass(frozen=True)
class Looked:
    dom: str  # the DOM after the load, serialized
    screenshot: Path
    console: list[str]  # every console message the page logged
    charts: dict[str, tuple[int, int, int, int] | None]  # data-chart name -> left, top, width, height


def look_at(page: Path, out: Path) -> Looked:
    """Load ``page`` in headless Chromium; the screenshot goes to ``out``."""
    assert CHROMIUM is not None, NO_CHROMIUM
    probed = out.with_suffix(".probe.html")
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", f"{_PROBE}</body>"), encoding="utf-8"
    )
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",  # CI runs as root
                "--disable-gpu",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                f"--window-size={WIDTH},{HEIGHT}",
                f"--screenshot={out}",
                "--dump-dom",
                probed.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == 0 and out.is_file(), f"chromium failed ({run.returncode}): {run.stderr[-2000:]}"
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return Looked(run.stdout, out, console, _charts(run.stdout))


def _charts(dom: str) -> dict[str, tuple[int, int, int, int] | None]:
    """Each chart's box, keyed ``<n>:<name>`` (a cluster's page has a chart of each name per job)."""
    charts: dict[str, tuple[int, int, int, int] | None] = {}
    for n, (name, rect) in enumerate(re.findall(r'data-chart="([^"]*)"[^>]*data-rect="([^"]*)"', dom)):
        left, top, width, height = (int(v) for v in rect.split(",")) if rect != "none" else (0, 0, 0, 0)
        charts[f"{n}:{name}"] = (left, top, width, height) if rect != "none" else None
    return charts


def blank_reason(screenshot: Path, box: tuple[int, int, int, int] | None) -> str | None:
    """Why the chart in ``box`` of the screenshot is missing or blank, or None when it is drawn: it has
    a size, at least 3 % of its pixels are not white, in at least four colours (axes, and lines)."""
    if box is None:
        return "no <svg> in the figure"
    left, top, width, height = box
    if width < 200 or height < 100:
        return f"drawn {width}x{height} px"
    with Image.open(screenshot) as image:
        crop = image.convert("RGB").crop((left, top, left + width, top + height))
        raw = crop.tobytes()
    pixels = list(zip(raw[0::3], raw[1::3], raw[2::3], strict=True))
    inked = [p for p in pixels if p != (255, 255, 255)]
    if len(inked) < 0.03 * len(pixels):
        return f"only {len(inked)} of {len(pixels)} pixels drawn"
    colours = {p for p in inked if min(p) < 200}  # the dark and saturated ones: no antialiasing greys
    if len({(r // 32, g // 32, b // 32) for r, g, b in colours}) < 4:
        return "fewer than four colours: no lines on the axes"
    return None
