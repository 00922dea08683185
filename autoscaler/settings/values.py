"""How option values are written: Flink durations and memory sizes, lists, and the enum-valued options.

The parsers here are pydantic before-validators shared by the ``job.autoscaler.*`` options
(``option_groups``) and the daemon settings (``daemon_settings``); they accept Flink's text forms as well
as YAML's native values, so a key means the same whether it comes from a Flink configuration or YAML.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from autoscaler.durations import format_duration, parse_duration
from autoscaler.safe_text import redact_url  # re-exported: the one redaction path lives there

__all__ = [
    "AlignmentMode",
    "BusyTimeAggregator",
    "Duration",
    "alignment_mode_name",
    "csv_list",
    "opt_float",
    "parse_memory_size",
    "redact_url",
    "semicolon_list",
    "upper",
]

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]


class BusyTimeAggregator(StrEnum):
    MAX = "MAX"
    AVG = "AVG"
    MIN = "MIN"


class InsufficientSlots(StrEnum):
    """What a rescale that needs more slots than are free does (``scaling.insufficient-slots``)."""

    CAP = "CAP"  # ask for what fits in the free slots and the job's own
    WAIT = "WAIT"  # ask for nothing until the whole change fits
    IGNORE = "IGNORE"  # ask for it all: Flink runs what fits and takes more slots as they come


class AlignmentMode(StrEnum):
    BALANCED = "BALANCED"
    EVENLY_SPREAD = "EVENLY_SPREAD"
    OFF = "OFF"


def upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


def alignment_mode_name(value: object) -> object:
    """A built-in alignment mode in any case becomes its enum; any other name is kept as written.

    The reference accepts any name for ``scaling.parallelism-alignment.mode`` (custom modes are
    plugins) and falls back to BALANCED when it finds no such mode; the options model resolves the
    name the same way, so the name is kept for the warning that says so.
    """
    if value is None or isinstance(value, AlignmentMode):
        return value
    name = str(value).strip()
    try:
        return AlignmentMode(name.upper())
    except ValueError:
        return name


def csv_list(value: object) -> object:
    """Flink list options are ';'-separated strings (',' accepted too); YAML lists pass through."""
    if isinstance(value, str):
        sep = ";" if ";" in value else ","
        return [part.strip() for part in value.split(sep) if part.strip()]
    return value


_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kibibytes": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mebibytes": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gibibytes": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tebibytes": 1 << 40,
}


def parse_memory_size(value: object) -> object:
    """Flink ``MemorySize`` text ("16 gb", "512m", "1073741824") to bytes; units are powers of 1024."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = text[len(number) :].strip()
    if not number or unit not in _MEMORY_UNITS:
        raise ValueError(f"not a memory size: {value!r} (use e.g. '512 mb', '16 gb')")
    return round(float(number) * _MEMORY_UNITS[unit])


def semicolon_list(value: object) -> object:
    """``excluded.periods`` splits on ';' only: a cron expression holds ',' lists (``MON,WED``)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(";") if part.strip()]
    return value


def opt_float(value: object) -> object:
    return None if isinstance(value, str) and value.strip() == "" else value
