"""A CLI command whose reader stops reading (``check-config X | head -1``) ends quietly: no
``BrokenPipeError`` traceback, the exit status a shell reports for a command ended by SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import autoscaler

SIGPIPE_STATUS = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`'s yes
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "example.yaml"
CODE = str(Path(autoscaler.__file__).resolve().parents[1])  # the checkout under test, for the child too


def test_check_config_into_a_closed_pipe_ends_quietly() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as `head -1` is after it: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "autoscaler", "check-config", str(EXAMPLE)],
            stdout=write,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": CODE},
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr.decode() == ""
    assert done.returncode == SIGPIPE_STATUS


def test_check_config_into_head_prints_its_first_line_and_nothing_else() -> None:
    done = subprocess.run(
        f"{sys.executable} -m autoscaler check-config {EXAMPLE} | head -1",
        shell=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": CODE},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.stdout.decode().splitlines() == [f"{EXAMPLE}: OK (1 cluster(s))"]
    assert done.stderr.decode() == ""
