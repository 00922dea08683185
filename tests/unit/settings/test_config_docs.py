"""docs/configuration.md is generated from the settings model and must match it, ranges included."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from autoscaler.settings import KEY_PREFIX, AutoscalerOptions, ConfigError

ROOT = Path(__file__).resolve().parents[3]


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen_config_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_config_docs", module)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()


def test_committed_docs_match_the_settings_model():
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == GEN.render(), (
        f"docs/configuration.md is stale: regenerate it with `{GEN.COMMAND}` and commit the result"
    )


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    target = tmp_path / "configuration.md"
    monkeypatch.setattr(GEN, "OUTPUT", target)
    monkeypatch.setattr(GEN, "ROOT", tmp_path)
    target.write_text("old\n", encoding="utf-8")
    assert GEN.main(["--check"]) == 1
    assert GEN.COMMAND in capsys.readouterr().err
    assert GEN.main([]) == 0
    assert GEN.main(["--check"]) == 0


def test_every_option_key_and_default_is_documented():
    doc = GEN.render()
    for name in AutoscalerOptions.model_fields:
        assert f"`{AutoscalerOptions.canonical_key(name)}" in doc, name
    for key in AutoscalerOptions.option_keys():
        assert f"`{KEY_PREFIX}{key}" in doc, key
    assert "`kubernetes.operator.job.autoscaler.`" in doc
    assert "| `job.autoscaler.metrics.window` |  | `15 min` |" in doc
    assert (
        "| `job.autoscaler.utilization.target` | `job.autoscaler.target.utilization` | `0.7` | [0, 1] |"
        in doc
    )


def test_daemon_settings_show_yaml_field_env_var_and_default():
    doc = GEN.render()
    assert "| `control_loop_interval` | `FLINK_AUTOSCALER_CONTROL_LOOP_INTERVAL` | `10 s` |" in doc
    assert "| `spark.master` | `FLINK_AUTOSCALER_SPARK__MASTER` | `local[*]` |" in doc
    assert "| `rest_url` | required |" in doc


def test_docs_say_memory_tuning_cannot_be_applied_over_rest_and_periods_are_utc():
    doc = GEN.render()
    assert "cannot be changed over Flink's REST API" in doc
    assert "evaluated in **UTC**" in doc


def test_origin_marks_our_own_keys():
    rows = {row[0]: row for row in GEN.option_rows()}
    assert rows["`job.autoscaler.metrics.prefer-counter-rates`"][4] == "ours"
    assert rows["`job.autoscaler.metrics.window`"][4] == "reference"


def test_doc_tables_name_only_existing_fields():
    fields = set(AutoscalerOptions.model_fields)
    for table in (GEN.CHECKED_RANGES, GEN.CHECKED_VALUES, GEN.DEFAULT_NOTES):
        assert set(table) <= fields


@pytest.mark.parametrize("key", list(GEN.IGNORED_REFERENCE_KEYS))
def test_reference_keys_without_an_option_are_accepted_and_ignored(key):
    concrete = key.replace("<name>", "mine").replace("<param>", "threshold")
    assert concrete not in AutoscalerOptions.option_keys()
    assert AutoscalerOptions.from_flink_conf({KEY_PREFIX + concrete: "x"}) == AutoscalerOptions()


# ------------------------------------------------------------------------------------------ range probes
_RANGE = re.compile(r"^(?:\[(?P<lo>[^,]+), (?P<hi>[^\]]+)\]|>= (?P<ge>\S+))(?: when (?P<when>\S+))?$")


def _documented_ranges() -> list[tuple[str, str]]:
    out = []
    for name, field in AutoscalerOptions.model_fields.items():
        text = GEN.allowed_values(name, field)
        text = re.sub(r"^(integer|number) ", "", text)
        if _RANGE.match(text):
            out.append((name, text))
    return out


def _number(text: str) -> float:
    if text == "utilization.target":
        return AutoscalerOptions().utilization_target
    return float(text)


def _valid(name: str, value: float, when: str | None) -> bool:
    conf = {AutoscalerOptions.canonical_key(name): value}
    if when:
        conf[KEY_PREFIX + when] = "true"
    try:
        AutoscalerOptions.from_flink_conf(conf)
    except ConfigError:
        return False
    return True


def test_every_validated_number_has_a_documented_range():
    probed = {name for name, _ in _documented_ranges()}
    assert set(GEN.CHECKED_RANGES) <= probed
    assert {"vertex_max_parallelism", "scale_down_max_factor", "quota_cpu"} <= probed


@pytest.mark.parametrize(("name", "text"), _documented_ranges())
def test_documented_range_is_what_validation_enforces(name, text):
    m = _RANGE.match(text)
    assert m is not None
    when = m["when"]
    eps = 0.001
    if m["ge"] is not None:
        lo = _number(m["ge"])
        assert _valid(name, lo, when) and _valid(name, lo + 10, when)
        assert not _valid(name, lo - (1 if lo.is_integer() else eps), when)
        return
    lo, hi = _number(m["lo"]), _number(m["hi"])
    assert _valid(name, lo, when) and _valid(name, hi, when)
    assert not _valid(name, lo - eps, when) and not _valid(name, hi + eps, when)
    if when:  # the reference checks these ranges only while the feature is enabled
        assert _valid(name, hi + eps, None)
