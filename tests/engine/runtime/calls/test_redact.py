"""The redaction step: the configured key in every spelling, bearer-token shapes, logs
and uncaught tracebacks."""
from __future__ import annotations

import json
import logging
import urllib.parse

import pytest

from drscore.engine.runtime.calls.redact import (
    MASK, RedactingFilter, forget_secrets, redact, redact_any, register_secret,
)

KEY = "plain-key/with+odd=chars\"and-quote"


@pytest.fixture(autouse=True)
def clean_registry():
    forget_secrets()
    yield
    forget_secrets()


def test_the_registered_key_is_removed_raw_json_escaped_and_url_encoded():
    register_secret(KEY)
    for spelling in (KEY, json.dumps(KEY)[1:-1], urllib.parse.quote(KEY, safe=""), urllib.parse.quote_plus(KEY)):
        out = redact(f"error: got {spelling} in the header")
        assert out == f"error: got {MASK} in the header"


def test_token_shapes_are_removed_even_when_not_registered():
    text = "Authorization: Bearer abc.DEF-123_xyz and key sk-proj-AbCdEf0123456789xyz rest"
    assert redact(text) == f"Authorization: {MASK} and key {MASK} rest"
    # ordinary prose that mentions the words is left alone
    assert redact("bearer of bad news; a task-level step") == "bearer of bad news; a task-level step"


def test_short_values_are_not_treated_as_secrets():
    register_secret("abc")  # a provider never issues a 3-character key; masking it would mangle text
    assert redact("abcdef abc") == "abcdef abc"


def test_nested_values_and_log_records_are_redacted():
    register_secret("key-0123456789")
    assert redact_any({"a": ["x key-0123456789", 3], "key-0123456789": None}) == {
        "a": [f"x {MASK}", 3], MASK: None}
    record = logging.LogRecord("drscore.x", logging.WARNING, __file__, 1, "failed with %s", ("key-0123456789",),
                               None)
    RedactingFilter().filter(record)
    assert record.getMessage() == f"failed with {MASK}"
