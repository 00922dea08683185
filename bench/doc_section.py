"""Write one section of ``docs/performance.md``, leaving the others as they are: what every benchmark
that records its latest results there shares."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["write_section"]


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section that starts with ``heading`` (a ``## `` line) by ``section``, or add it at
    the end."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Performance\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
