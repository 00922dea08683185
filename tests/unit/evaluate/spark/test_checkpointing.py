"""The window's background checkpoint (autoscaler/evaluate/spark/checkpointing.py), with stand-in frames: a
stopping evaluator gives a checkpoint under way its grace, and lets one that hangs go."""

from __future__ import annotations

import threading

from autoscaler.evaluate.spark.checkpointing import WindowFrames


class Frame:
    """Stands in for a DataFrame: its local checkpoint waits for ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.checkpointed = threading.Event()

    def localCheckpoint(self, eager: bool) -> Frame:  # PySpark's name
        self.release.wait()
        self.checkpointed.set()
        return self


def test_stopping_waits_for_a_checkpoint_that_ends_and_lets_a_hanging_one_go() -> None:
    frames = WindowFrames()
    ending = Frame()
    frames.advance(ending, None)  # type: ignore[arg-type]
    frames.checkpoint()
    ending.release.set()
    assert frames.abandon(grace_s=60.0) and ending.checkpointed.is_set()

    hanging = Frame()
    frames.advance(hanging, None)  # type: ignore[arg-type]
    frames.checkpoint()
    assert not frames.abandon(grace_s=0.01)  # still running: abandoned, the stop goes on
    assert frames.abandon(grace_s=0.0)  # nothing left to wait for
    hanging.release.set()
