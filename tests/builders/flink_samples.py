"""Answers recorded from a real Flink 2.3 cluster (tests/fixtures/flink-2.3), for any test to load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent.parent / "fixtures" / "flink-2.3"


def load_fixture(name: str) -> Any:
    """A JSON answer recorded from a real Flink 2.3 cluster."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
