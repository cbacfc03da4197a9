"""URL normalisation: one canonical spelling per cited page.

The normalised URL is both the page-cache key and the exact URL that is fetched, so the
SSRF guard checks the same host the request goes to (no parser disagreement between the
check and the fetch). Rules, in order:

- surrounding whitespace, tabs and newlines are removed; ``\\`` counts as ``/`` (browsers do);
- ``//host/...`` and bare ``www.example.org/...``-style citations get ``https://``;
- only ``http`` and ``https`` are accepted, scheme and host are lower-cased;
- user-info (``user:pass@``) is dropped: it is never sent, stored or logged;
- host: trailing dots dropped, IDNA-encoded; numeric IPv4 spellings (``2130706433``,
  ``0x7f.1``, ``127.1``) are rewritten as the dotted quad they denote, IPv6 literals are
  compressed, so the guard sees what a browser would connect to;
- default ports (80 for http, 443 for https) are dropped;
- path: dot segments removed, empty path becomes ``/``, percent-escapes upper-cased,
  escapes of unreserved characters decoded, other characters (e.g. CJK) UTF-8 encoded;
- query: kept in order (order can matter to servers) except tracking parameters
  (``utm_*``, ``fbclid``, ``gclid``...), which never change the page;
- the fragment is dropped (it never reaches the server).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import unquote_plus, urlsplit

MAX_URL_LENGTH = 8192

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Reserved characters that are legal as-is in each component (RFC 3986, section 3.3/3.4).
_PATH_SAFE = _UNRESERVED | frozenset("/:@!$&'()*+,;=")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_HEX = frozenset("0123456789abcdefABCDEF")
_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$")
# A scheme-less citation that starts like a host name ("www.who.int/...").
_BARE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2,}(:\d+)?([/?#]|$)")
_TRACKING_PARAM = re.compile(
    r"^(utm_[a-z0-9_]*|fbclid|gclid|dclid|gbraid|wbraid|msclkid|yclid|igshid|mc_cid|mc_eid"
    r"|_hsenc|_hsmi|ref_src)$"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """The string cannot be fetched as an http(s) URL; the message says why."""


def normalize_url(url: str) -> str:
    """Return the canonical form of ``url`` (see the module docstring).

    Raises :class:`InvalidURL` for anything that is not a fetchable http(s) URL.
    """
    s = re.sub(r"[\t\r\n]", "", url.strip()).replace("\\", "/")
    if not s:
        raise InvalidURL("empty URL")
    if len(s) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL longer than {MAX_URL_LENGTH} characters")
    if s.startswith("//"):
        s = "https:" + s
    elif "://" not in s:
        if not _BARE_HOST.match(s):
            raise InvalidURL(f"not an http(s) URL: {s[:80]!r}")
        s = "https://" + s
    try:
        parts = urlsplit(s)
        port = parts.port
    except ValueError as exc:  # bad port, bad IPv6 brackets
        raise InvalidURL(f"malformed URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"unsupported scheme {scheme!r} (only http and https are fetched)")
    host = normalize_host(parts.hostname or "")
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _remove_dot_segments(_normalize_escapes(parts.path, _PATH_SAFE)) or "/"
    if not path.startswith("/"):
        path = "/" + path
    query = _normalize_query(parts.query)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def normalize_host(host: str) -> str:
    """Canonical host: lower-case IDNA name, dotted-quad IPv4 or ``[compressed IPv6]``."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        try:
            ip6 = ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidURL(f"invalid IPv6 address {host!r}") from None
        if ip6.scope_id:
            raise InvalidURL("IPv6 zone identifiers are not allowed in URLs")
        return f"[{ip6.compressed}]"
    host = host.rstrip(".")
    if not host:
        raise InvalidURL("URL has no host")
    ip4 = parse_ipv4_host(host)
    if ip4 is not None:
        return str(ip4)
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidURL(f"invalid host name {host!r}") from None
    ascii_host = ascii_host.lower()
    if not all(_HOST_LABEL.match(label) for label in ascii_host.split(".")):
        raise InvalidURL(f"invalid host name {host!r}")
    return ascii_host


def parse_ipv4_host(host: str) -> ipaddress.IPv4Address | None:
    """Parse a host the way browsers do when its last label is numeric (WHATWG URL).

    ``127.1``, ``2130706433``, ``0x7f.0.0.1`` and ``0177.0.0.1`` all mean 127.0.0.1.
    Returns None for ordinary host names; raises :class:`InvalidURL` for numeric-looking
    hosts that do not denote an address (e.g. ``1.2.3.4.5``, ``256.0.0.1``).
    """
    labels = host.split(".")
    if not _numeric_label(labels[-1]):
        return None
    if len(labels) > 4:
        raise InvalidURL(f"invalid IPv4 address {host!r}")
    try:
        numbers = [_ipv4_number(label) for label in labels]
    except ValueError:
        raise InvalidURL(f"invalid IPv4 address {host!r}") from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise InvalidURL(f"invalid IPv4 address {host!r}")
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _numeric_label(label: str) -> bool:
    if label.isascii() and label.isdigit():
        return True
    return label[:2] in ("0x", "0X") and all(c in _HEX for c in label[2:])


def _ipv4_number(label: str) -> int:
    if not label:
        raise ValueError("empty label")
    if label[:2] in ("0x", "0X"):
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label[0] == "0":
        return int(label[1:], 8)
    if not (label.isascii() and label.isdigit()):
        raise ValueError(label)
    return int(label)


def _normalize_escapes(component: str, safe: frozenset[str]) -> str:
    """Upper-case escapes, decode escaped unreserved characters, encode everything unsafe."""
    out: list[str] = []
    i, n = 0, len(component)
    while i < n:
        c = component[i]
        if c == "%":
            pair = component[i + 1:i + 3]
            if len(pair) == 2 and pair[0] in _HEX and pair[1] in _HEX:
                decoded = chr(int(pair, 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + pair.upper())
                i += 3
                continue
            out.append("%25")  # a stray "%" is data, not an escape
        elif c in safe:
            out.append(c)
        else:
            try:
                encoded = c.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidURL("URL contains an unencodable character") from None
            out.extend(f"%{b:02X}" for b in encoded)
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on a segment list."""
    segments = path.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def _normalize_query(query: str) -> str:
    kept = []
    for param in query.split("&"):
        if not param:
            continue
        key = unquote_plus(param.split("=", 1)[0]).lower()
        if _TRACKING_PARAM.match(key):
            continue
        kept.append(_normalize_escapes(param, _QUERY_SAFE))
    return "&".join(kept)


def normalized_set(urls: Iterable[str]) -> set[str]:
    """The distinct normalised forms of ``urls`` (those that are not valid URLs left out)."""
    out: set[str] = set()
    for url in urls:
        try:
            out.add(normalize_url(url))
        except InvalidURL:
            continue
    return out
