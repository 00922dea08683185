"""What a person reads never holds a secret or a terminal control: the one redaction and escaping path.

Everything the daemon and the CLI show (configuration errors, log lines, ``check-config``, ``status``,
``explain``, events) goes through here, so a secret is hidden the same way wherever it turns up:

- a URL keeps its scheme, user, host and path; its password and every query value become ``***``
  (``?token=...`` is as much a credential as ``user:password@``);
- a header mapping keeps its names; every value becomes ``***`` (not only ``Authorization``: an API key
  may travel in any header);
- free text has the URLs inside it redacted, ``Bearer``/``Basic`` credentials, ``password=``-like pairs
  and quoted ``"token": "..."`` pairs hidden, and every secret the configuration holds
  (:func:`remember_secrets`, filled while the clusters are validated) replaced wherever it appears, as
  a library's error may quote a header value in its own words.

Terminal controls: a job or vertex name comes from Flink, that is from whoever submitted the job; a
newline in it could fake a row of ``status`` or a log line, an ESC sequence recolour or rewrite the
terminal, a bidi override (U+202E) show text reversed. :func:`escape_controls` writes every C0/C1
control, DEL and bidi control as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "clip",
    "escape_controls",
    "for_terminal",
    "is_headers",
    "redact",
    "redact_headers",
    "redact_text",
    "redact_url",
    "remember_secrets",
]

REDACTED = "***"

MIN_REMEMBERED = 8
"""Secrets shorter than this are not replaced in free text: a short password such as ``flink`` would turn
every ``flink`` of every message into ``***`` (and so tell what it is). They are still hidden wherever
they stand as a URL's password, a query value or a header value."""

_remembered: set[str] = set()
_remembered_lock = threading.Lock()
_remembered_order: tuple[str, ...] = ()  # longest first, so a secret that holds another goes whole


def remember_secrets(values: Iterable[object]) -> None:
    """Hide these values wherever they appear in free text from now on (process-wide: logs are too)."""
    global _remembered_order
    new = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_REMEMBERED}
    with _remembered_lock:
        if new <= _remembered:
            return
        _remembered.update(new)
        _remembered_order = tuple(sorted(_remembered, key=len, reverse=True))


_ROUGH_USERINFO = re.compile(r"^([^:/?#]*://)[^/?#]*@")
_ROUGH_QUERY = re.compile(r"\?.*$", re.DOTALL)


def redact_url(url: str) -> str:
    """``url`` with its password and every query value replaced by ``***``.

    One with nothing to hide comes back unchanged; one that does not parse (``http://u:pw@[bad``) loses
    its whole user info and query, as where they end cannot be told.
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return _ROUGH_QUERY.sub(f"?{REDACTED}", _ROUGH_USERINFO.sub(rf"\1{REDACTED}@", url))
    if password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:{REDACTED}@{host}")
    if parts.query:
        pairs = (p.partition("=") for p in parts.query.split("&"))
        parts = parts._replace(query="&".join(f"{k}={REDACTED}" if sep else k for k, sep, _ in pairs))
    return urlunsplit(parts) if password is not None or parts.query else url


def redact_headers(headers: Mapping[Any, Any]) -> dict[str, str]:
    """The header names with every value hidden."""
    return {str(name): REDACTED for name in headers}


# Up to a space, control, quote, parenthesis, brace or backslash: a URL in parentheses or a repr ends
# where they do (square brackets stay: an IPv6 host is written in them).
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\x00-\x1f\x7f'\"<>`\\(){}]+")
# "Bearer <anything>"; "Basic <base64>" unless the word after it is a plain word, so prose such as "a
# Basic Authorization header" stays readable while "Basic dXNlcjpwYXNz" does not.
_BEARER = re.compile(r"\b(Bearer\s+)[^\s'\",;)}\]]+")
_BASE64_SCHEME = re.compile(r"\b((?:Basic|Negotiate|NTLM)\s+)([A-Za-z0-9+/]{6,}={0,2})")
_PLAIN_WORD = re.compile(r"[A-Z]?[a-z]+")
_SECRET_WORD = re.compile(
    r"(?i)password|passwd|pwd|secret|token|api[-_]?key|apikey|access[-_]?key|credential|signature"
    r"|authorization|cookie"
)
# key=value in running text (password=..., a query's token=...); the key is judged by _SECRET_WORD.
_PAIR = re.compile(r"\b([\w.\-]+=)([^\s\"'&,;)}\]]+)")
# "token": "...", 'Authorization': '...' (a mapping's repr or JSON): both sides quoted, so unambiguous.
_QUOTED_PAIR = re.compile(r"([\"'])([\w.\-]+)\1(\s*:\s*)([\"'])(.*?)\4")


def _base64_credential(match: re.Match[str]) -> str:
    return match.group(0) if _PLAIN_WORD.fullmatch(match.group(2)) else match.group(1) + REDACTED


def _pair(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if _SECRET_WORD.search(match.group(1)) else match.group(0)


def _quoted_pair(match: re.Match[str]) -> str:
    quote, key, colon, value_quote = match.group(1, 2, 3, 4)
    if not _SECRET_WORD.search(key):
        return match.group(0)
    return f"{quote}{key}{quote}{colon}{value_quote}{REDACTED}{value_quote}"


def redact_text(text: str) -> str:
    """``text`` with the secrets it may embed hidden: URLs, credentials, secret pairs, known secrets.

    Each pattern runs only when a cheap test says it could match: every log line's every value comes
    through here.
    """
    for secret in _remembered_order:  # a substring test is far cheaper than a regex of them all
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if ":" in text and ("'" in text or '"' in text):
        text = _QUOTED_PAIR.sub(_quoted_pair, text)
    if "=" in text:
        text = _PAIR.sub(_pair, text)
    if "Bearer" in text:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if "Basic" in text or "Negotiate" in text or "NTLM" in text:
        text = _BASE64_SCHEME.sub(_base64_credential, text)
    return text


_SCALARS = (bool, int, float)
_SEQUENCES = (list, tuple, set, frozenset)


def redact(value: Any) -> Any:
    """A value to log or print, with its secrets hidden; mappings and sequences are walked.

    A mapping under a key naming headers has every value hidden. A value is returned as the very same
    object when it holds nothing to hide, so types (enums, numbers) and identity survive.
    """
    # Type checks with tuples, the commonest first: this runs for every value of every log line, and
    # an isinstance against a union or an ABC costs several times as much.
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, str):
        hidden = redact_text(value)
        return value if hidden == value else hidden
    if isinstance(value, (dict, Mapping)):
        out = {k: redact_headers(v) if is_headers(k, v) else redact(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, _SEQUENCES):
        items = [redact(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    shown = repr(value)  # what a renderer would print for it
    hidden = redact_text(shown)
    return value if hidden == shown else hidden


def is_headers(key: object, value: object) -> bool:
    """A mapping under a key naming headers (``headers``, ``extra_headers``): its values are secrets."""
    return isinstance(key, str) and key.lower().endswith("headers") and isinstance(value, Mapping)


# C0 controls, DEL, C1 controls, and the bidi marks, embeddings, overrides and isolates; U+2028/U+2029
# break lines in some terminals and editors.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every control character written as a visible escape.

    ``keep_lines`` keeps newlines and tabs, for a text of several lines whose breaks are its own (a
    traceback, a multi-line error); a carriage return is escaped even then, as it would let a line
    overwrite itself.
    """
    return (_CONTROLS_BUT_LINES if keep_lines else _CONTROLS).sub(_escape, text)


def for_terminal(text: str, *, keep_lines: bool = False) -> str:
    """Redacted, then escaped: the form of any text printed for a person."""
    return escape_controls(redact_text(text), keep_lines=keep_lines)


def clip(text: str, width: int) -> str:
    """At most ``width`` characters: a longer text is cut and ends in ``...``."""
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."
