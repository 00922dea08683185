"""The one redaction and escaping path (``autoscaler.safe_text``): what it hides, what it keeps readable."""

from __future__ import annotations

import pytest

from autoscaler.reasons import Reason
from autoscaler.safe_text import (
    clip,
    escape_controls,
    for_terminal,
    redact,
    redact_headers,
    redact_text,
    redact_url,
    remember_secrets,
)


def test_a_url_keeps_where_it_points_and_loses_its_password_and_query_values():
    assert redact_url("postgresql://app:pw@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact_url("http://jm:8081/?token=abc&debug") == "http://jm:8081/?token=***&debug"
    assert redact_url("http://jm:8081/base") == "http://jm:8081/base"
    assert redact_url("http://[::1]:8081/x?a=1") == "http://[::1]:8081/x?a=***"
    assert redact_url("http://[bad") == "http://[bad"  # does not parse, nothing to hide
    assert redact_url("http://u:pw@[bad/x?token=t") == "http://***@[bad/x?***"  # does not parse: hidden


def test_every_header_value_is_hidden():
    assert redact_headers({"Authorization": "Bearer x", "X-Api-Key": "k"}) == {
        "Authorization": "***",
        "X-Api-Key": "***",
    }


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cluster (http://u:pw@jm:1/?token=abc) GET /x", "cluster (http://u:***@jm:1/?token=***) GET /x"),
        ("{'Authorization': 'Bearer a.b', 'k': 1}", "{'Authorization': '***', 'k': 1}"),
        ('{"api_key": "abc"}', '{"api_key": "***"}'),
        ("Authorization: Bearer abc.def-1", "Authorization: Bearer ***"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
        ("password=hunter2&x=1", "password=***&x=1"),
        # Prose and validation messages stay readable.
        ("a Basic Authorization header", "a Basic Authorization header"),
        ("clusters.0.headers.Authorization: Input should be a valid string", None),
        ("rest_url carries credentials (user:password@) and headers set Authorization", None),
    ],
)
def test_free_text_hides_the_credentials_it_embeds(text, shown):
    assert redact_text(text) == (text if shown is None else shown)


def test_a_remembered_secret_is_hidden_anywhere_and_a_short_one_only_where_it_stands():
    remember_secrets(["Kq7-remembered-secret", "flink"])
    assert redact_text("Illegal header value b'Kq7-remembered-secret'") == "Illegal header value b'***'"
    assert redact_text("flink-autoscaler") == "flink-autoscaler"  # too short to replace in prose


def test_redact_walks_structures_and_returns_untouched_values_as_they_are():
    headers = {"X-Api-Key": "k"}
    assert redact({"headers": headers, "url": "http://h/?token=t"}) == {
        "headers": {"X-Api-Key": "***"},
        "url": "http://h/?token=***",
    }
    value = {"reason": Reason.SCALING, "n": [1, "x"]}
    assert redact(value) is value and redact(Reason.SCALING) is Reason.SCALING
    assert redact(["http://u:p@h"]) == ["http://u:***@h"]


def test_controls_are_escaped_visibly():
    assert escape_controls("a\nb\r\tc\x1b[31m\x07\x7f\x85\u202e\u2066") == (
        "a\\nb\\r\\tc\\x1b[31m\\x07\\x7f\\x85\\u202e\\u2066"
    )
    assert escape_controls("a\nb\r\tc", keep_lines=True) == "a\nb\\r\tc"
    assert escape_controls("plain ünïcode ✓") == "plain ünïcode ✓"
    assert for_terminal("x\x1b http://u:pw@h") == "x\\x1b http://u:***@h"


def test_clip_cuts_with_an_ellipsis():
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefg", 6) == "abc..."


def test_stdlib_log_lines_take_the_same_path():
    """py4j and APScheduler log through stdlib logging: redacted and escaped, a traceback's lines kept."""
    import logging

    from autoscaler.logs import SafeFormatter

    record = logging.LogRecord("py4j", logging.WARNING, __file__, 1, "at %s\x1b[2J", ("http://u:pw@h",), None)
    assert SafeFormatter("%(name)s %(message)s").format(record) == "py4j at http://u:***@h\\x1b[2J"
