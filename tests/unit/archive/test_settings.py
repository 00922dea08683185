"""The archive's settings: off unless ``archive_dir`` is set, validated at load, and a directory the
daemon cannot write stops it at start-up."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.archive import TickArchive, open_archive
from autoscaler.metrics import MetricsReporter
from autoscaler.settings import ConfigError, Settings


def test_the_archive_is_off_by_default_and_set_from_yaml_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().archive_dir is None and open_archive(Settings(), MetricsReporter()) is None
    config = tmp_path / "c.yaml"
    config.write_text(
        f"archive_dir: {tmp_path / 'a'}\narchive-retention-days: 7\narchive_flush_interval: 5 min\n"
    )
    settings = Settings.load(config)
    assert (settings.archive_dir, settings.archive_retention_days) == (tmp_path / "a", 7)
    assert settings.archive_flush_interval == timedelta(minutes=5)
    monkeypatch.setenv("FLINK_AUTOSCALER_ARCHIVE_DIR", "")
    assert Settings.load(config).archive_dir is None  # empty disables it
    monkeypatch.setenv("FLINK_AUTOSCALER_ARCHIVE_DIR", str(tmp_path / "b"))
    monkeypatch.setenv("FLINK_AUTOSCALER_ARCHIVE_FLUSH_INTERVAL", "30 s")
    assert Settings.load(config).archive_dir == tmp_path / "b"
    assert Settings.load(config).archive_flush_interval == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("archive_flush_interval", "0 s", "between 1 s and 1 d"),
        ("archive_flush_interval", "2 d", "between 1 s and 1 d"),
        ("archive_retention_days", "-1", "archive_retention_days"),
        ("archive_dir", "FILE", "is a file"),
    ],
)
def test_a_bad_value_stops_the_load_naming_it(tmp_path: Path, key: str, value: str, says: str) -> None:
    (tmp_path / "f").write_text("")
    value = str(tmp_path / "f") if value == "FILE" else value
    config = tmp_path / "c.yaml"
    config.write_text(f"{key}: '{value}'\n")
    with pytest.raises(ConfigError, match=says):
        Settings.load(config)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_directory_the_daemon_cannot_write_stops_it_at_start(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match="cannot write there"):
        open_archive(Settings(archive_dir=locked / "archive"), MetricsReporter())


def test_an_archive_under_a_file_stops_it_at_start(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match=r"archive_dir .*cannot write there"):
        open_archive(Settings(archive_dir=tmp_path / "f" / "archive"), MetricsReporter())


async def test_a_writable_directory_opens_with_the_settings(tmp_path: Path) -> None:
    settings = Settings(archive_dir=tmp_path / "a", archive_retention_days=3, archive_flush_interval="1 min")
    archive = open_archive(settings, MetricsReporter())
    assert isinstance(archive, TickArchive)
    assert (archive.writer.root, archive.writer.retention_days) == (tmp_path / "a", 3)
    assert archive.writer.flush_interval_ms == 60_000 and list((tmp_path / "a").iterdir()) == []
    await archive.close(0)
