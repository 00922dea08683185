"""The one error a bad configuration raises, and how pydantic's validation errors become its message.

Both the options (``options``) and the daemon settings (``daemon_settings``) turn a
:class:`pydantic.ValidationError` into a :class:`ConfigError` whose message names each offending key as
the user spelled it; the wording lives here so the two read alike. A message quotes the offending value
only when it is a scalar, and never a header's: a whole cluster entry or list would carry its
credentials along, and a value is shown redacted (``autoscaler.safe_text``) and cut short.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from autoscaler.safe_text import clip, redact_text

__all__ = ["ConfigError", "describe_errors"]

SHOWN_VALUE = 80  # characters of an offending value a message quotes at most


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending key(s)."""


def describe_errors(exc: ValidationError, source: str, key_of: Any) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if not loc:
            lines.append(f"  {_message(err['msg'])}")
            continue
        first = str(err["loc"][0]) if err["loc"] else ""
        key = key_of(first) if first else loc
        if len(err["loc"]) > 1 and key != loc:
            key = f"{key}{loc[len(first) :]}"
        shown = _shown(err.get("input"), err["loc"])
        lines.append(f"  {key}: {_message(err['msg'])}{shown}")
    return f"invalid configuration in {source}:\n" + "\n".join(lines)


def _message(msg: str) -> str:
    return redact_text(msg.removeprefix("Value error, "))


def _shown(value: object, loc: tuple[int | str, ...]) -> str:
    """`` (got ...)`` for a scalar outside ``headers``, redacted and cut short; else nothing."""
    if any(str(part).lower() == "headers" for part in loc):
        return ""
    if isinstance(value, str):
        return f" (got {clip(redact_text(value), SHOWN_VALUE)!r})"
    if isinstance(value, bool | int | float):
        return f" (got {value!r})"
    return ""
