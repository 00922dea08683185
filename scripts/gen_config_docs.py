"""Write ``docs/configuration.md`` from the settings model, so the documentation cannot drift from it.

Keys, deprecated spellings, defaults, types and descriptions are read from ``autoscaler/settings/``;
the ranges that custom validators enforce are listed in ``CHECKED_RANGES`` below, and
``tests/unit/settings/test_config_docs.py`` probes every one of them against the model. That test also fails
when the committed file differs from this script's output.

Usage (from the repository root):

    .venv/bin/python scripts/gen_config_docs.py           # rewrite docs/configuration.md
    .venv/bin/python scripts/gen_config_docs.py --check   # exit 1 if it is stale
    .venv/bin/python scripts/gen_config_docs.py --stdout  # print instead of writing
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from autoscaler.durations import format_duration  # noqa: E402
from autoscaler.settings import (  # noqa: E402
    KEY_PREFIX,
    LEGACY_KEY_PREFIX,
    AutoscalerOptions,
    ClusterSettings,
    Settings,
)

OUTPUT = ROOT / "docs" / "configuration.md"
COMMAND = ".venv/bin/python scripts/gen_config_docs.py"
ENV_PREFIX = str(Settings.model_config.get("env_prefix", ""))
ENV_NESTED = str(Settings.model_config.get("env_nested_delimiter", "__"))

# Ranges enforced by validators rather than by Field(ge=...). Format: "[lo, hi]" or ">= lo", optionally
# followed by " when <key>" for a range the reference checks only while that feature is enabled.
# tests/unit/settings/test_config_docs.py probes each bound (and just outside it) against the model.
CHECKED_RANGES: dict[str, str] = {
    "utilization_target": "[0, 1]",
    "target_utilization_boundary": ">= 0",
    "utilization_max": "[utilization.target, 1]",
    "utilization_min": "[0, utilization.target]",
    "memory_gc_pressure_threshold": "[0, 1]",
    "memory_heap_usage_threshold": "[0, 1]",
    "observed_scalability_coefficient_min": "[0.01, 1] when observed-scalability.enabled",
    "scaling_effectiveness_threshold": "[0, 1] when scaling.effectiveness.detection.enabled",
    "memory_tuning_overhead": "[0, 1] when memory.tuning.enabled",
}
# Allowed values of string options checked by a validator (not an Enum).
CHECKED_VALUES: dict[str, str] = {
    "parallelism_alignment_mode": "`BALANCED`, `EVENLY_SPREAD`, `OFF`; "
    "any other name: `BALANCED` and a warning",
    "key_group_partitions_adjust_mode": "`EVENLY_SPREAD`, `MAXIMIZE_UTILISATION`",
    "excluded_periods": "list (`;`-separated) of Quartz cron / `HH:mm:ss-HH:mm:ss` / both joined by `&&`",
    "custom_executors": "list (`;`-separated) of instance names, each with a `.class`",
    "custom_executor_settings": "`.class`: an installed plugin's name or class path; `.<param>`: text",
    "forecast_periods": "list (`;`-separated) of durations, each a whole number of `forecast.bucket` and "
    "longer than `forecast.horizon`",
}
# Where our default differs from the reference's declared one, and why.
DEFAULT_NOTES: dict[str, str] = {
    "key_group_partitions_adjust_mode": "the reference declares `EVENLY_SPREAD` for this deprecated key; "
    "here it is accepted and validated, and `scaling.parallelism-alignment.mode` decides the alignment",
}
# Reference keys with no field here: accepted (a job's config may hold them) and ignored.
IGNORED_REFERENCE_KEYS: dict[str, str] = {
    "scaling.parallelism-alignment.mode.<name>.class": "custom alignment modes are Java classes; "
    "`scaling.parallelism-alignment.mode` naming one aligns BALANCED and warns, as the reference does "
    "when it cannot find the class",
    "scaling.parallelism-alignment.mode.<name>.<param>": "as above",
}


def render() -> str:
    parts = [
        _HEADER.format(command=COMMAND),
        _daemon_section(),
        _options_section(),
        _PROSE.rstrip() + "\n",
        _gates_section(),
    ]
    return "\n".join(parts).rstrip() + "\n"


# --------------------------------------------------------------------------------------------- daemon
def _daemon_section() -> str:
    rows = []
    for name, field in Settings.model_fields.items():
        inner = _model_type(field.annotation)
        if inner is not None and not _is_list(field.annotation):
            for sub, subfield in inner.model_fields.items():
                env = f"`{ENV_PREFIX}{name.upper()}{ENV_NESTED}{sub.upper()}`"
                rows.append((f"`{name}.{sub}`", env, _default_text(subfield), _desc(subfield)))
            continue
        env = f"`{ENV_PREFIX}{name.upper()}`"
        if _is_list(field.annotation) or _is_dict(field.annotation):
            env += " (JSON)"
        rows.append((f"`{name}`", env, _default_text(field), _desc(field)))
    cluster_rows = [
        (f"`{name}`", _default_text(field), _desc(field))
        for name, field in ClusterSettings.model_fields.items()
    ]
    return "\n".join(
        [
            "## Daemon settings",
            "",
            "The YAML file's top-level fields; each can also come from the environment variable shown,",
            f"which wins over the file (nested fields join with `{ENV_NESTED}`; lists and mappings are",
            "JSON).",
            "",
            _table(("YAML field", "environment variable", "default", "description"), rows),
            "",
            "### `clusters[]` entries",
            "",
            f"Set in the YAML file, or all at once as JSON in `{ENV_PREFIX}CLUSTERS`.",
            "",
            _table(("field", "default", "description"), cluster_rows),
            "",
        ]
    )


# --------------------------------------------------------------------------------------------- options
def option_rows() -> list[tuple[str, ...]]:
    """One row per ``job.autoscaler.*`` option: key, deprecated keys, default, allowed, origin, text."""
    rows = []
    for name, field in AutoscalerOptions.model_fields.items():
        alias = field.validation_alias
        assert isinstance(alias, AliasChoices)
        canonical, *deprecated = (str(c) for c in alias.choices)
        key = f"{KEY_PREFIX}{canonical}"
        if _is_dict(field.annotation):  # dynamic keys: <prefix>.<name>.<param>
            key = f"{key}.<name>.class`<br>`{key}.<name>.<param>"
        default = _default_text(field)
        if name in DEFAULT_NOTES:
            default += f" ({DEFAULT_NOTES[name]})"
        rows.append(
            (
                f"`{key}`",
                "<br>".join(f"`{KEY_PREFIX}{d}`" for d in deprecated),
                default,
                allowed_values(name, field),
                origin(field),
                _desc(field),
            )
        )
    return rows


def origin(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    return str(extra.get("origin", "reference")) if isinstance(extra, dict) else "reference"


def allowed_values(name: str, field: FieldInfo) -> str:
    if name in CHECKED_RANGES:
        return CHECKED_RANGES[name]
    if name in CHECKED_VALUES:
        return CHECKED_VALUES[name]
    base = _unwrap(field.annotation)
    if base is bool:
        return "`true`, `false`"
    if isinstance(base, type) and issubclass(base, Enum):
        return ", ".join(f"`{m.value}`" for m in base)
    if base is timedelta:
        return "duration (`30 s`, `5 min`, `1 h`, `PT5M`)"
    if name == "quota_memory":
        return "memory size (`16 gb`, `512 mb`, bytes) >= 0"
    if name == "rest_client_max_answer_size":
        return "memory size (`64 mb`, `512 kb`, bytes) >= 1 kb"
    bounds = [f">= {m.ge:g}" for m in field.metadata if isinstance(m, annotated_types.Ge)]
    bounds += [f"<= {m.le:g}" for m in field.metadata if isinstance(m, annotated_types.Le)]
    if base is int:
        return "integer " + " ".join(bounds) if bounds else "integer"
    if base is float:
        return "number " + " ".join(bounds) if bounds else "number"
    if _is_list(field.annotation):
        return "list (`;`-separated)"
    return "text"


def _options_section() -> str:
    return "\n".join(
        [
            "## `job.autoscaler.*` options",
            "",
            "The reference autoscaler's keys and defaults. Every key is also accepted with the legacy",
            f"prefix `{LEGACY_KEY_PREFIX}`; on overlap the `{KEY_PREFIX}` prefix wins, and a canonical",
            "key wins over its deprecated spelling. Set them in the daemon's `autoscaler:` section, a",
            "cluster's `autoscaler:` section, or the job's own Flink configuration (lowest to highest",
            "precedence), as flat dotted keys or nested YAML. The job's own configuration is what",
            "`/jobs/:id/jobmanager/config` shows (an application cluster's configuration), overridden by the",
            "`job.autoscaler.*` keys among its global job parameters (`/jobs/:id/config`): a session cluster",
            "shows only its own configuration there, so a job in one carries its options as",
            "`-Dpipeline.global-job-parameters=job.autoscaler.scaling.slot-priority:10,...` (or",
            "`setGlobalJobParameters`). Lists are YAML lists or `;`-separated strings",
            "(`,` also separates when there is no `;`, except in `excluded.periods`, whose crons use `,`).",
            "A job whose effective options are invalid is skipped with an `AutoScaler Options Validation`",
            "Warning event naming the key; the other jobs carry on. An invalid value in the daemon's own",
            "file stops the daemon at start-up. *origin*: `reference` keys mean what they mean in the",
            "reference autoscaler; `ours` are this daemon's additions.",
            "",
            _table(
                ("key", "deprecated spellings", "default", "allowed values", "origin", "description"),
                option_rows(),
            ),
            "",
            "### Reference keys without an option here",
            "",
            "Accepted in a job's configuration (nothing fails) and ignored:",
            "",
            _table(
                ("key", "why"),
                [(f"`{KEY_PREFIX}{k}`", why) for k, why in IGNORED_REFERENCE_KEYS.items()],
            ),
            "",
        ]
    )


# --------------------------------------------------------------------------------------------- helpers
def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "doc_default" in extra:  # a default that depends on the machine
        return str(extra["doc_default"])
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, timedelta):
        return f"`{format_duration(value)}`"
    if isinstance(value, tuple | list):
        return f"`{';'.join(map(str, value))}`" if value else "`[]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    return f"`{value}`"


def _desc(field: FieldInfo) -> str:
    if not field.description:
        raise SystemExit(f"a settings field has no description: {field!r}; add description=... to it")
    return field.description.replace("|", "\\|")


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` to ``X``."""
    while True:
        origin_ = typing.get_origin(annotation)
        if origin_ is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin_ in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(_unwrap(annotation)) in (list, tuple)


def _is_dict(annotation: Any) -> bool:
    return typing.get_origin(_unwrap(annotation)) is dict


def _model_type(annotation: Any) -> type[BaseModel] | None:
    base = _unwrap(annotation)
    if typing.get_origin(base) in (list, tuple):
        base = typing.get_args(base)[0]
    return base if isinstance(base, type) and issubclass(base, BaseModel) else None


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


_HEADER = """\
# Configuration

<!-- Generated from autoscaler/settings/ by scripts/gen_config_docs.py: do not edit by hand.
     Regenerate with: {command} -->

Settings come from a YAML file (`--config`), then from environment variables, which win. The
`job.autoscaler.*` options are the reference autoscaler's keys and defaults; they can be set for every
job, per cluster, and per job in the job's own Flink configuration.
"""

_PROSE = """\
## Excluded periods

`job.autoscaler.excluded.periods` lists periods in which a scaling is evaluated and reported (a
`ScalingReport` headed "Scaling execution disabled by config") but never executed; the decision's
outcome is `ExcludedPeriod`. Each entry is one of:

- a Quartz cron expression of 6 or 7 fields: `second minute hour day-of-month month day-of-week [year]`.
  Supported: `*`, `?`, lists `,`, ranges `-` (also wrapping, `22-2`, `FRI-MON`), steps `/`, month names
  `JAN`-`DEC`, weekday names `SUN`-`SAT` (Quartz numbers weekdays 1 = SUN to 7 = SAT), and the special
  days `L`, `L-n`, `LW`, `nW` (day-of-month) and `L`, `nL`, `n#k` (day-of-week), each alone in its
  field. As in Quartz, exactly one of day-of-month and day-of-week must be `?`.
- a daily range `HH:mm:ss-HH:mm:ss` (or `HH:mm-HH:mm`), both ends included; it wraps midnight when the
  start is later than the end (`22:00:00-06:00:00`).
- several of these joined by `&&`: the period holds when all of them hold.

A cron expression stands for the set of seconds it matches, as in the reference: `now` is excluded
when the current second matches. So `* * 9-17 ? * MON-FRI` excludes working hours on weekdays, while
`0 0 9 ? * MON` excludes one second a week and in practice never blocks a tick: put `*` in the
second and minute fields, or combine a daily range with a cron for the days
(`09:00-17:30 && * * * ? * MON-FRI`). Separate several periods with `;` (a cron's own lists use `,`).

Times are evaluated in **UTC** (the reference uses the JVM's default time zone). An expression that
does not parse is rejected when the options are validated, with a message naming
`job.autoscaler.excluded.periods` and what is wrong.

## Resource quotas

`job.autoscaler.quota.cpu` (cores) and `job.autoscaler.quota.memory` (a memory size) cap the TaskManager
resources a job may need after a scaling. The slots it needs are, per slot-sharing group, the highest
parallelism among the group's vertices, summed over the groups; the TaskManagers it needs are
`ceil(slots / slots per TaskManager)`. When that count grows and `TaskManagers x cores per TaskManager`
exceeds `quota.cpu`, or `TaskManagers x memory per TaskManager` exceeds `quota.memory`, the scaling is
blocked with outcome `ResourceQuotaReached` (a Warning event). A scaling that keeps or lowers the
TaskManager count is never blocked, even above the quota.

The per-TaskManager resources come from Flink's `GET /taskmanagers`: `totalResource.cpuCores`
(`taskmanager.cpu.cores`, which defaults to the slot count) and `memoryConfiguration.totalProcessMemory`.
The reference's standalone autoscaler never knows the TaskManager CPU, so its CPU quota never triggers;
this one does. Resources that are unknown (no TaskManager registered, the endpoint failing, a value
missing) never block. Differences from the reference, each towards a correct count: every vertex counts
(the reference looks only at the changed ones), TaskManagers are rounded up (the reference divides
integers), and a vertex without a known slot-sharing group shares Flink's default group.

## Memory tuning: advice

TaskManager memory cannot be changed over Flink's REST API, so the daemon advises instead: every
rescale it asks for comes with a `Configuration recommendation` Normal event (key `MemoryTuning`, at
most once per `scaling.event.interval`), which `explain` shows among the job's events. It is the
reference's memory tuning (`autoscaler/memory_advice.py`): from each TaskManager's current process size,
the pools kept as they are (framework and task off-heap, JVM overhead), network memory for every channel
of every vertex at its new parallelism (2 buffers per channel and 8 floating per gate of 32 KiB, per
slot), metaspace and heap at the TaskManagers' usage averaged over the cluster's `metrics.window` (max
over TaskManagers) plus `memory.tuning.overhead`, then managed memory: none if the job uses none, all
that is left with `memory.tuning.maximize-managed-memory`, else as it is; with
`memory.tuning.scale-down-compensation.enabled` the heap grows by how many times fewer TaskManagers the
job needs. The advice never exceeds the current process size. It lists the `taskmanager.memory.*` keys
to set (process size, managed and JVM-overhead fractions, network min/max, metaspace, framework heap 0)
and those to remove; whoever deploys the TaskManagers applies it. Unlike the reference, the spec is what
Flink reports it runs with (`GET /taskmanagers`, `memoryConfiguration`), and the TaskManagers a job
needs count its slot-sharing groups. `memory.tuning.enabled` changes nothing (its overhead range is
validated only when it is true, as in the reference).

"""

GATES: list[tuple[str, str]] = [
    ("a previous rescale is not running yet", "`RescaleInFlight`"),
    (
        "the job is stabilizing, the metric window is not full, or its newest interval may start a load"
        " change (`metrics.load-change.threshold`)",
        "`Stabilizing`, `WindowNotFull`, `LoadChanging`",
    ),
    (
        "the rates of the vertices that matter are NaN or missing: a source's target data rate, or every"
        " vertex outside `vertex.exclude.ids`",
        "`MetricsUnknown`",
    ),
    (
        "GC pressure or heap usage above `memory.gc-pressure.threshold` / `memory.heap-usage.threshold`"
        " (NaN never blocks; a threshold of 1.0 never does either, even on a reading above 1)",
        "`MemoryPressure`",
    ),
    (
        "vertices in `vertex.exclude.ids` are skipped; scale-downs wait for `scale-down.interval`",
        "`ScaleDownDelayed`",
    ),
    ("no vertex that would change is outside its utilization band", "`InBand`"),
    (
        "`cost.enabled`: changing now costs more than waiting over `cost.horizon` (a restart, its pause "
        "and the lag it builds, against the slots it saves or the lag it prevents)",
        "`NotWorthIt`",
    ),
    ("`scaling.enabled` is false (advisor mode)", "`AdvisorMode`"),
    ("now is in `excluded.periods`", "`ExcludedPeriod`"),
    (
        "the new parallelism needs more TaskManagers than `quota.cpu` / `quota.memory` allow",
        "`ResourceQuotaReached`",
    ),
]


def _gates_section() -> str:
    rows = [(str(i), gate, outcome) for i, (gate, outcome) in enumerate(GATES, 1)]
    return "\n".join(
        [
            "## When a scaling is not executed",
            "",
            "The decision stage runs its gates in this order; the first that holds gives the outcome:",
            "",
            _table(("order", "gate", "outcome"), rows),
            "",
            "Then the executor plugins (`scaling.custom-executors`) may approve, modify or veto.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is stale")
    mode.add_argument("--stdout", action="store_true", help="print instead of writing the file")
    args = parser.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale; regenerate it with: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
