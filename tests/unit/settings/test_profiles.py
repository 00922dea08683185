"""The named option profiles (``autoscaler/settings/profiles.py``) that the decision benchmark compares."""

from __future__ import annotations

from datetime import timedelta

from autoscaler.settings import AutoscalerOptions
from autoscaler.settings.profiles import PROFILES, REFERENCE


def test_reference_is_the_reference_defaults_with_our_additions_turned_off() -> None:
    assert AutoscalerOptions.from_flink_conf(dict(REFERENCE)) == AutoscalerOptions(
        prefer_counter_rates=False,
        load_change_threshold=0.0,
        scale_down_keep_last_peak=False,
        insufficient_slots="IGNORE",
        wait_for_idle_slots=False,
        slow_subtasks_enabled=False,
        observed_tpr_settle_time=timedelta(0),
    )


def test_every_addition_of_ours_with_a_default_is_decided_by_the_reference_profile() -> None:
    """A new ``ours`` key must say in REFERENCE what the reference does, or the benchmark's baseline
    silently picks up our behaviour. Keys unset by default (None) are off, as in the reference."""
    ours = [
        name
        for name, field in AutoscalerOptions.model_fields.items()
        if (field.json_schema_extra or {}).get("origin") == "ours" and field.default is not None
    ]
    assert ours
    assert [
        AutoscalerOptions.canonical_key(n)
        for n in ours
        if AutoscalerOptions.canonical_key(n) not in REFERENCE
    ] == []


def test_every_profile_is_a_valid_set_of_options() -> None:
    """What the benchmark runs is what a job's configuration would accept (RECOMMENDED is tuned freely)."""
    for name, profile in PROFILES.items():
        options = AutoscalerOptions.from_flink_conf(dict(profile), source=name)
        assert options.to_flink_conf().keys() >= set(profile)
