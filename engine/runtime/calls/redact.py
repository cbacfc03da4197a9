"""Secret redaction: the one step every string from an endpoint (or about one) passes
before it reaches a log, the terminal, an exception, the run directory or the cache.

Two things are removed: the secrets registered with :func:`register_secret` (the
configured API key, registered when a backend is built from the environment) in every
spelling they take in text (raw, JSON-escaped, URL-encoded), and anything shaped like a
bearer token even when it is not ours (``sk-...``, ``Bearer ...``): an endpoint that
echoes a request header may echo a proxy's token too. Secrets in URLs are keys too: a
key-like query parameter (``?key=``, ``api-key=``, ``token=``) and a ``user:pass@``
password are masked wherever the judge URL is written (:func:`redact_url`), and their
values are registered like the API key (:func:`register_url_secrets`), so no message
carries them however it quotes the URL. Each becomes ``[REDACTED]``.

The registry is process-wide on purpose: exception messages and log lines are built far
from the backend that knows the key, and they must be clean wherever they are built.
"""
from __future__ import annotations

import base64
import json
import logging
import re
import threading
import urllib.parse
from typing import Any

MASK = "[REDACTED]"
# Shorter values are not treated as secrets: masking "abc" everywhere would mangle text,
# and a key that short is not a key a provider issues.
MIN_SECRET_LEN = 8

_TOKEN_SHAPES = re.compile(
    r"(?:\bsk-[A-Za-z0-9_\-]{12,}"  # OpenAI-style secret keys (sk-..., sk-proj-...)
    r"|\b[Bb]earer\s+[A-Za-z0-9._~+/=\-]{8,})"  # any bearer token
)

# Secrets that ride in a URL: a query parameter some gateways take the key in
# (``?key=``, ``api-key=``, ``token=``...) and the password of ``user:pass@host``.
_SECRET_PARAM = r"(?:api[-_]?key|key|x-api-key|token|access[-_]?token|auth|secret|client[-_]?secret|password|" \
    r"passwd|pwd|sig|signature)"
_URL_SHAPES = re.compile(
    # ?key=VALUE; a value ends where text punctuation starts (the judge URL's own values
    # are registered whole, see register_url_secrets)
    rf"(?i)(?P<param>[?&;]{_SECRET_PARAM}=)[^&#\s\"'<>:,;)\]]+"
    r"|(?P<scheme>\b[a-z][a-z0-9+.\-]*://)(?P<user>[^/\s:@\"'<>]*):[^/\s@\"'<>]+@"  # scheme://user:pass@
)
_SECRET_NAME = re.compile(rf"(?i)^{_SECRET_PARAM}$")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_pattern: re.Pattern[str] | None = None


def _spellings(secret: str) -> set[str]:
    return {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""),
            urllib.parse.quote_plus(secret)}


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` (an API key) so :func:`redact` removes it from now on."""
    global _secrets, _pattern
    if not secret or len(secret) < MIN_SECRET_LEN:
        return
    with _lock:
        if secret in _secrets:
            return
        _secrets = (*_secrets, secret)
        spellings = sorted({s for x in _secrets for s in _spellings(x)}, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in spellings))


def url_secrets(url: str) -> list[str]:
    """The secret values carried by ``url``: its password and the values of query
    parameters named like a key or token."""
    try:
        parts = urllib.parse.urlsplit(url)
        found = [urllib.parse.unquote(parts.password)] if parts.password else []
        if parts.password:  # sent as HTTP basic auth: an endpoint echoing the header shows this form
            pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password)}"
            found.append(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
    except ValueError:
        return []
    found += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=False)
              if _SECRET_NAME.match(k)]
    return found


def register_url_secrets(url: str | None) -> None:
    """Register every secret ``url`` carries (:func:`url_secrets`), so no message,
    however it spells the value, can show it."""
    for secret in url_secrets(url or ""):
        register_secret(secret)


def redact_url(url: str) -> str:
    """``url`` as it may be shown or stored: key-like query values and the password
    replaced by ``[REDACTED]``, everything else (host, path, other parameters) kept."""
    return _URL_SHAPES.sub(_mask_url_part, url)


def endpoint_host(url: str | None) -> str | None:
    """Only the host (and port) of an endpoint URL, for overviews: never the path, query
    or user info, where keys hide (``https://k:s@api.x.com/v1?key=1`` -> ``api.x.com``)."""
    if not url:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    return f"{host}:{port}" if port else host


def _mask_url_part(m: re.Match[str]) -> str:
    if m.group("param"):
        return m.group("param") + MASK
    return f"{m.group('scheme')}{m.group('user')}:{MASK}@"


def forget_secrets() -> None:
    """Clear the registry (tests)."""
    global _secrets, _pattern
    with _lock:
        _secrets, _pattern = (), None


def redact(text: str) -> str:
    """``text`` without registered secrets and bearer-token-like strings."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    # Not the URL shapes: a judge's answer may quote a cited page's URL whose own
    # ?key=... must reach the page fetcher intact; the judge URL's values are registered.
    return _TOKEN_SHAPES.sub(MASK, text)


def redact_any(value: Any) -> Any:
    """:func:`redact` applied to every string inside ``value`` (dicts, lists, tuples)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_any(k): redact_any(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_any(v) for v in value)
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message and traceback text."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)  # formatters use exc_text when it is set
        return True


def install_log_filter() -> None:
    """Attach :class:`RedactingFilter` to every handler a drscore record can reach (the
    root logger's and Python's last-resort handler), once. Handler filters see records
    propagated from every child logger, unlike logger filters."""
    targets = [*logging.getLogger().handlers, logging.lastResort]
    for target in targets:
        if target is not None and not any(isinstance(f, RedactingFilter) for f in target.filters):
            target.addFilter(RedactingFilter())


def install_excepthook() -> None:
    """Redact uncaught tracebacks too (the last way a string reaches the terminal)."""
    import sys
    import traceback

    if getattr(sys.excepthook, "_drscore_redacting", False):
        return

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        sys.stderr.write(redact("".join(traceback.format_exception(exc_type, exc, tb))))

    hook._drscore_redacting = True  # type: ignore[attr-defined]
    sys.excepthook = hook
