"""Secrets in URLs are keys: a key-like query value and a ``user:pass@`` password are
masked in any text, and the values of a judge URL are registered like the API key."""
from __future__ import annotations

import base64

import pytest

from drscore.engine.runtime.calls.redact import (
    MASK, forget_secrets, redact, redact_url, register_url_secrets, url_secrets,
)


@pytest.fixture(autouse=True)
def clean_registry():
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize("url, shown", [
    ("https://gw.example/v1?key=k123&model=x", f"https://gw.example/v1?key={MASK}&model=x"),
    ("https://gw.example/v1?api-key=k123", f"https://gw.example/v1?api-key={MASK}"),
    ("https://gw.example/v1?a=1&Token=k123#frag", f"https://gw.example/v1?a=1&Token={MASK}#frag"),
    ("https://gw.example/v1?access_token=k123", f"https://gw.example/v1?access_token={MASK}"),
    ("http://user:pa55word@gw.example:8080/v1", f"http://user:{MASK}@gw.example:8080/v1"),
    ("https://gw.example/v1?monkey=banana&keys=3", "https://gw.example/v1?monkey=banana&keys=3"),
])
def test_url_secrets_are_masked_and_the_rest_kept(url, shown):
    assert redact_url(url) == shown
    assert redact_url(f"cannot reach {url}: refused") == f"cannot reach {shown}: refused"


def test_a_registered_judge_url_is_masked_in_any_message():
    url = "https://user:pa55word-9@gw.example/v1?key=k1234567890&model=x"
    register_url_secrets(url)
    assert redact(f"ClientConnectorError: Cannot connect to host {url}") == \
        f"ClientConnectorError: Cannot connect to host https://user:{MASK}@gw.example/v1?key={MASK}&model=x"


def test_urls_in_answers_are_left_alone_unless_registered():
    # a judge quoting a cited page's URL: its own parameters must reach the fetcher intact
    assert redact("see https://docs.example/sheet?key=1AbCdEfGhIj&gid=0") == \
        "see https://docs.example/sheet?key=1AbCdEfGhIj&gid=0"


def test_values_of_the_judge_url_are_registered_in_every_spelling():
    url = "https://user:p%40ss-word-1@gw.example/v1?key=abc/def+ghi-123&model=m"
    basic = base64.b64encode(b"user:p@ss-word-1").decode()  # the Authorization: Basic form an endpoint may echo
    assert url_secrets(url) == ["p@ss-word-1", basic, "abc/def ghi-123"]
    register_url_secrets(url)
    # an error body echoing the value alone (no "key=" before it) is masked too
    assert redact('{"error": "bad key abc/def ghi-123"}') == f'{{"error": "bad key {MASK}"}}'
    assert redact("password p@ss-word-1 refused") == f"password {MASK} refused"
