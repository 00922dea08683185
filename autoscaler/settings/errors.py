"""The one error a bad configuration raises, and how pydantic's validation errors become its message.

Both the options (``options``) and the daemon settings (``daemon_settings``) turn a
:class:`pydantic.ValidationError` into a :class:`ConfigError` whose message names each offending key as
the user spelled it; the wording lives here so the two read alike.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from autoscaler.settings.values import redact_url

__all__ = ["ConfigError", "describe_errors"]


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending key(s)."""


def describe_errors(exc: ValidationError, source: str, key_of: Any) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if not loc:
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
            continue
        first = str(err["loc"][0]) if err["loc"] else ""
        key = key_of(first) if first else loc
        if len(err["loc"]) > 1 and key != loc:
            key = f"{key}{loc[len(first) :]}"
        value = err.get("input")
        if isinstance(value, str):  # a URL's password never reaches a message
            value = redact_url(value)
        shown = f" (got {value!r})" if value is not None and not isinstance(value, dict) else ""
        lines.append(f"  {key}: {err['msg'].removeprefix('Value error, ')}{shown}")
    return f"invalid configuration in {source}:\n" + "\n".join(lines)
