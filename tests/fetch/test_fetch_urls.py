"""URL normalisation: the page-cache key and the URL actually fetched."""
from __future__ import annotations

import json
import re

import pytest

from drscore.fetch.urls import InvalidURL, normalize_url, parse_ipv4_host
from support.data import DATA


@pytest.mark.parametrize("raw, expected", [
    # scheme and host lower-cased, default port dropped, fragment dropped
    ("HTTP://Example.COM:80/Path#section", "http://example.com/Path"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    # dot segments resolved (RFC 3986 5.2.4), trailing slash kept as written
    ("http://a.com/x/./y/../z/", "http://a.com/x/z/"),
    ("http://a.com/../../etc", "http://a.com/etc"),
    ("http://a.com/a/%2E%2E/b", "http://a.com/b"),
    # escapes: upper-cased, unreserved ones decoded, reserved ones kept
    ("http://a.com/%7euser/%2f%3a?q=%e6%9c%89", "http://a.com/~user/%2F%3A?q=%E6%9C%89"),
    # non-ASCII path encoded as UTF-8, spaces encoded, a stray % escaped
    ("https://zh.wikipedia.org/wiki/有机 化学", "https://zh.wikipedia.org/wiki/%E6%9C%89%E6%9C%BA%20%E5%8C%96%E5%AD%A6"),
    ("http://a.com/100%", "http://a.com/100%25"),
    # tracking parameters dropped, other parameters kept in order
    ("https://a.com/p?utm_source=openai&b=2&a=1&fbclid=XYZ&UTM_Medium=x", "https://a.com/p?b=2&a=1"),
    ("https://a.com/p?utm_source=chatgpt.com", "https://a.com/p"),
    ("https://a.com/p?", "https://a.com/p"),
    # IDNA host, trailing dot, user-info stripped
    ("https://Bücher.example/", "https://xn--bcher-kva.example/"),
    ("https://example.com./x", "https://example.com/x"),
    ("https://user:secret@example.com/x", "https://example.com/x"),
    # numeric IPv4 spellings become the dotted quad a browser would connect to
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://10.1/", "http://10.0.0.1/"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/"),
    # scheme-less citations
    ("//cdn.example.org/a", "https://cdn.example.org/a"),
    ("www.who.int/news-room", "https://www.who.int/news-room"),
    # whitespace and a backslash (browsers read it as "/")
    ("  https://a.com/x\n", "https://a.com/x"),
    ("http://evil.com\\@127.0.0.1/", "http://evil.com/@127.0.0.1/"),
])
def test_normalize_url(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected


@pytest.mark.parametrize("raw, message", [
    ("ftp://example.com/file", "unsupported scheme"),
    ("javascript:alert(1)", r"not an http\(s\) URL"),
    ("file:///etc/passwd", "unsupported scheme"),
    ("", "empty URL"),
    ("http://", "no host"),
    ("http://1.2.3.4.5/", "invalid IPv4"),
    ("http://256.0.0.1/", "invalid IPv4"),
    ("http://a..b/", "invalid host"),
    ("http://exa mple.com/", "invalid host"),
    ("http://example.com:99999/", "malformed URL"),
    ("http://[fe80::1%25eth0]/", "zone"),
])
def test_normalize_url_rejects(raw: str, message: str) -> None:
    with pytest.raises(InvalidURL, match=message):
        normalize_url(raw)


def test_normalisation_is_idempotent_on_real_report_urls() -> None:
    # every URL cited by 10 real DeepResearch Bench reports: normalising twice changes
    # nothing, and already-encoded CJK paths come through byte-identical
    urls = []
    with open(DATA / "drb" / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        for _, line in zip(range(10), f):
            urls += re.findall(r"https?://[^\s)\]>\"]+", json.loads(line)["article"])
    assert len(urls) > 50
    for url in urls:
        once = normalize_url(url)
        assert normalize_url(once) == once
    cjk = "https://zh.wikipedia.org/zh/%E4%B8%AD%E6%80%A7%E7%B2%92%E7%BB%86%E8%83%9E"
    assert normalize_url(cjk) == cjk
    assert normalize_url("https://caai.cn/index.php?s=%2Fhome%2Farticle") == \
        "https://caai.cn/index.php?s=%2Fhome%2Farticle"


def test_parse_ipv4_host_forms() -> None:
    # 127.1 -> last part fills the remaining 3 bytes: 127<<24 | 1 = 127.0.0.1
    assert str(parse_ipv4_host("127.1")) == "127.0.0.1"
    # 192.168.257: last part 257 = 0x0101 fills 2 bytes -> 192.168.1.1
    assert str(parse_ipv4_host("192.168.257")) == "192.168.1.1"
    assert parse_ipv4_host("example.com") is None
    assert parse_ipv4_host("1.example") is None
    with pytest.raises(InvalidURL):
        parse_ipv4_host("1.2.3.256")  # last part may only fill one byte here
