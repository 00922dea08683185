"""Regenerate the README's screenshot of the decision timeline (``explain --html``): run the demo, draw
its job's timeline with the command the demo prints, and photograph the page's first screen in
headless Chromium (Debian's ``chromium``), as a reader of the README would first see it.

    .venv/bin/python scripts/screenshots.py        # about 90 s: the demo, then one page load

Writes ``docs/images/explain-timeline.png``. The demo is real (Spark and the simulated cluster at 10x),
so the picture shows what a first run draws, not a mock-up.
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
OUT = ROOT / "docs" / "images" / "explain-timeline.png"
_WINDOW = (1200, 1100)  # the page's header, the three charts' first two and the start of the table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no Chromium installed (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
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
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # as root (CI, containers)
                "--disable-gpu",
                "--hide-scrollbars",
                f"--window-size={_WINDOW[0]},{_WINDOW[1]}",
                f"--screenshot={args.out}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
