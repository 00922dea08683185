"""Regenerate the README's screenshots: the decision timeline (``explain --html``) and a backtest
(``backtest --html``), each page's first screen photographed in headless Chromium (Debian's
``chromium``), as a reader of the README would first see it.

    .venv/bin/python scripts/screenshots.py        # about 3 min: the demo, a small backtest, two page loads

The timeline: run the demo and draw its job with the command the demo prints. The backtest: a small
synthetic archive (``bench/history_gen.py``: 4 jobs of 4 vertices, 3 hours at 10 s) replayed through the
reference defaults (A) and a candidate with more headroom that scales down only after an hour (B), as in
docs/backtest.md's worked example, on Spark ``local[2]``. Writes ``docs/images/explain-timeline.png`` and
``docs/images/backtest.png``; both are real runs, not mock-ups. ``--only explain`` or ``--only backtest``
redraws one.
"""

from __future__ import annotations

import argparse
import io
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
_WINDOW = (1200, 1100)  # the page's header, the three charts' first two and the start of the table
_BACKTEST_WINDOW = (1200, 1250)  # the totals, then the first job's table and its two charts
_CANDIDATE = {"job.autoscaler.utilization.target": "0.6", "job.autoscaler.scale-down.interval": "1 h"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=Path, default=IMAGES, help="where the PNGs go (default docs/images)")
    ap.add_argument("--only", choices=("explain", "backtest"), help="redraw only this one")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no Chromium installed (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
    args.images.mkdir(parents=True, exist_ok=True)
    for name, draw in (("explain", _explain), ("backtest", _backtest)):
        if args.only in (None, name):
            done = draw(chromium, args.images)
            if done != 0:
                return done
    return 0


def _explain(chromium: str, images: Path) -> int:
    from autoscaler.demo import run_demo

    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        work = Path(tmp)
        said = io.StringIO()
        if run_demo(out=said, keep_dir=work / "demo", log_level="ERROR") != 0:
            print(said.getvalue(), file=sys.stderr)
            return 1
        line = next(x for x in said.getvalue().splitlines() if x.startswith("its timeline: "))
        command = shlex.split(line.removeprefix("its timeline: "))
        page = work / "timeline.html"
        command[command.index("--html") + 1] = str(page)
        exe = Path(sys.executable).with_name(command[0])
        subprocess.run([str(exe), *command[1:]], check=True, cwd=work)
        _photograph(chromium, page, images / "explain-timeline.png", _WINDOW)
    return 0


def _backtest(chromium: str, images: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        work = Path(tmp)
        history = work / "history"
        made = [sys.executable, str(ROOT / "bench" / "history_gen.py"), "--out", str(history)]
        made += ["--jobs", "4", "--vertices", "4", "--hours", "3", "--workers", "1"]
        subprocess.run(made, check=True, capture_output=True)
        a = _config(work / "a.yaml", {})
        b = _config(work / "b.yaml", _CANDIDATE)
        page = work / "backtest.html"
        exe = Path(sys.executable).with_name("flink-autoscaler")
        command = [str(exe), "backtest", "--history", str(history), "--config", str(a), "--against", str(b)]
        ran = subprocess.run(
            [*command, "--html", str(page), "--top", "3"], cwd=work, capture_output=True, text=True
        )
        if ran.returncode != 0:
            print(ran.stdout, ran.stderr, sep="\n", file=sys.stderr)
            return 1
        _photograph(chromium, page, images / "backtest.png", _BACKTEST_WINDOW)
    return 0


def _config(path: Path, options: dict[str, str]) -> Path:
    """A daemon config for history_gen's one cluster (``bench-0``): the reference defaults and ``options``."""
    import yaml

    config = {
        "clusters": [{"name": "bench-0", "rest_url": "http://jobmanager-0:8081"}],
        "autoscaler": {"job.autoscaler.enabled": "true", **options},
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _photograph(chromium: str, page: Path, out: Path, window: tuple[int, int]) -> None:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # as root (CI, containers)
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={window[0]},{window[1]}",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
    )
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    raise SystemExit(main())
