"""OpenAI-compatible chat completions over aiohttp (OpenAI, Azure, Gemini's compatible
endpoint, vLLM, Ollama, llama.cpp server, OpenRouter, the mock).

Every failure is classified (``JudgeError.kind``, see ``engine.runtime.calls.judging``) so the
pool can stop a run on an endpoint that cannot work and say why: :func:`classify_status`
for HTTP statuses and error bodies, :func:`classify_connection_error` for failures before
any status (refused, DNS, TLS, connect timeout). Error messages carry a redacted excerpt
of the body, never the key.
"""
from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from types import SimpleNamespace
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from drscore.engine.runtime.calls.judging import (
    ChatRequest, ChatResponse, FatalError, JudgeError, RateLimited, RateLimitInfo, TransientError, request_left,
)
from drscore.engine.runtime.calls.redact import redact, redact_url, register_secret, register_url_secrets
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.engine.runtime.calls.tokens import estimate_messages, estimate_tokens
from drscore.judge.counting import count_body, count_route
from drscore.judge.gguf_vocab import GgufVocabError, text_counter
from drscore.judge.local_tokenizer import LocalTokenizer
from drscore.judge.ollama import is_version, loaded_context, may_be_ollama, model_vocabulary, show_request
from drscore.judge.quota_refusal import (
    daily_quota_spent, fill_from_refusal, named_quotas, quota_replenished_in, refusal_fault,
)
from drscore.judge.ratelimit_headers import QuotaHeaders, retry_hint_from_text
from drscore.judge.sse import fold_events
from drscore.engine.runtime.calls.thinking import split_thinking
from drscore.judge.wire import WireProfile, family_profile, request_body

_RETRYABLE = {408, 409, 425, 500, 502, 503, 504, 520, 522, 524, 529}
_UNSUPPORTED = re.compile(
    r"unsupported (?:parameter|value|argument)|(?:unrecognized|unknown|unexpected) (?:request )?"
    r"(?:parameter|argument|field|key)|not supported|does not support|extra (?:inputs|fields) (?:are )?not permitted"
    r"|extra_forbidden|unknown name \"", re.IGNORECASE)
_MODEL_MISSING = re.compile(r"model\b.*\b(?:not found|does not exist|not exist|unknown|no such)|"
                            r"(?:unknown|invalid) model|model_not_found", re.IGNORECASE)
# A prompt over the model's window, in each provider's words: OpenAI's code
# context_length_exceeded and vLLM's "maximum context length is N tokens", Anthropic's
# "prompt is too long", Gemini's "exceeds the maximum number of tokens", llama.cpp's
# exceed_context_size_error.
_CONTEXT = re.compile(r"context[_ ]length|maximum context|context (?:window|size)|prompt is too long|"
                      r"exceeds the maximum number of tokens|too many (?:input )?tokens|exceed_context_size",
                      re.IGNORECASE)
# Azure's content filter (code content_filter, inner ResponsibleAIPolicyViolation) and
# OpenAI's flagged prompts (code invalid_prompt: "flagged as potentially violating").
_FILTERED = re.compile(r"content[_ ](?:management )?(?:filter|policy)|ResponsibleAIPolicyViolation|"
                       r"safety (?:settings|filter)|blocked by (?:the )?(?:safety|content)", re.IGNORECASE)
_NO_CREDIT = re.compile(rb'"(?:type|code)"\s*:\s*"insufficient_quota"')
# Tries a prompt-counting route gets to give its first count (count_prompt) before it is given up
COUNT_TRIES = 3
CONNECT_TIMEOUT_S = 10.0  # a TCP/TLS connection that takes longer is an unreachable host


def classify_status(status: int, body: bytes) -> tuple[str, str | None]:
    """``(kind, param)`` of an error status: 401/403 ``auth``; 404 ``model_not_found``
    (the body names a model) or ``not_found`` (the URL); 400/422 naming an unsupported
    parameter ``unsupported_parameter`` (with the parameter when the body says), one
    naming an unknown model ``model_not_found``; a prompt over the model's window
    ``context_length``, a content filter's refusal ``content_filter``, a flagged prompt
    ``invalid_request`` (these three belong to the one request: ``judging.REQUEST_FAULTS``);
    other 4xx ``bad_request``; 429 ``rate_limit`` (``no_credit`` for OpenAI's
    ``insufficient_quota``, as for any 402); 5xx ``server_error``."""
    if status == 429:
        # OpenAI's "You exceeded your current quota" (type insufficient_quota): the account's
        # credit or spending limit, not a rate; Gemini words its per-minute 429s alike, but
        # without that type
        return ("no_credit" if _NO_CREDIT.search(body[:8000]) else "rate_limit"), None
    if status == 402:  # Payment Required: DeepSeek's "Insufficient Balance", OpenRouter's credits
        return "no_credit", None
    if status in (401, 403):
        return "auth", None
    if status in _RETRYABLE or status >= 500:
        return "server_error", None
    message, code, param = _error_fields(body)
    if status == 404:
        return ("model_not_found" if _MODEL_MISSING.search(message) or code == "model_not_found"
                else "not_found"), None
    if status in (400, 413, 422):
        # The request's own content first: a long prompt's message may also name a parameter.
        if code in ("context_length_exceeded", "string_above_max_length") or _CONTEXT.search(message):
            return "context_length", param
        if code == "content_filter" or _FILTERED.search(message):
            return "content_filter", param
        if code == "invalid_prompt":
            return "invalid_request", param
        if code in ("unsupported_parameter", "unsupported_value") or _UNSUPPORTED.search(message):
            return "unsupported_parameter", param
        if code == "model_not_found" or _MODEL_MISSING.search(message):
            return "model_not_found", None
    return "bad_request", param


def _error_fields(body: bytes) -> tuple[str, str | None, str | None]:
    """(message, code, param) of an OpenAI-style error body; the raw text otherwise."""
    text = body[:4000].decode("utf-8", "replace")
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return text, None, None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):  # Gemini: [{"error": {...}}]
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        msg = err.get("message")
        code, param = err.get("code"), err.get("param")
        if not isinstance(code, str):  # Gemini: "code": 400, "status": "INVALID_ARGUMENT"
            code = err.get("status")
        return (msg if isinstance(msg, str) else text, code if isinstance(code, str) else None,
                param if isinstance(param, str) else None)
    if isinstance(err, str):  # {"error": "..."} (Ollama, llama.cpp)
        return err, None, None
    return text, None, None


def classify_connection_error(exc: BaseException) -> str:
    """The kind of a failure before any HTTP status: ``dns``, ``tls``,
    ``connection_refused``, ``connect_timeout`` or plain ``connection`` (reset,
    disconnected mid-answer: retried, and it may have been billed)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        name = type(e).__name__
        if isinstance(e, socket.gaierror) or name in ("ClientConnectorDNSError",):
            return "dns"
        if isinstance(e, (ssl.SSLError, ssl.CertificateError)) or name in (
                "ClientConnectorCertificateError", "ClientConnectorSSLError", "ClientSSLError"):
            return "tls"
        if isinstance(e, ConnectionRefusedError):
            return "connection_refused"
        if name in ("ConnectionTimeoutError", "ConnectTimeout"):
            return "connect_timeout"
        if isinstance(e, OSError) and e.errno is not None and e.errno in (111, 61, 10061):  # ECONNREFUSED
            return "connection_refused"
        e = e.__cause__ or e.__context__ or getattr(e, "os_error", None)
    return "connection"


def status_error(status: int, raw: bytes, where: str, info: RateLimitInfo | None) -> JudgeError:
    """The classified exception for an error status (message: a redacted body excerpt)."""
    kind, param = classify_status(status, raw)
    text = f"HTTP {status} from {where}: {excerpt(raw)}"
    replenished = quota_replenished_in(raw) if status == 403 else None
    if replenished is not None:
        # Azure API Management's quota over a period answers 403, not 429: a key that works,
        # with its quota spent until then (--max-rate-limit-wait decides whether to wait)
        kind = "rate_limit"
        text = f"{text} (a quota, not the key: it comes back in {replenished:g} s)"
        info = info if info is not None else RateLimitInfo()
        info.retry_after_s = info.retry_after_s if info.retry_after_s is not None else replenished
    gateway = info.gateway if info is not None else None
    if gateway is not None and gateway.spent and status != 429 and kind in ("server_error", "bad_request"):
        # An AI gateway's refusal in another status (APISIX's default is 503 with a bare error
        # page): its headers say a limit has nothing left, so it is a quota, not a failing server
        kind = "rate_limit"
        text = f"{text} (an AI gateway's token quota: its {gateway.headers} headers say nothing is left)"
    if kind == "rate_limit" and info is not None and gateway is not None:
        if info.retry_after_s is None and gateway.wait_s is not None:
            info.retry_after_s = gateway.wait_s  # Kong's X-AI-RateLimit-Retry-After, APISIX's Reset
        if gateway.headers != "litellm" and info.binding_named is None:
            info.binding_named = "tokens"  # these gateways' limits are of tokens
    if kind == "rate_limit":
        named = named_quotas(raw)
        fault = refusal_fault(named)
        if fault is not None:  # no wait passes this refusal: the call, or the endpoint, cannot work
            return FatalError(f"{fault[1]}; {text}", limits=info, kind=fault[0], status=status)
        if info is not None:
            fill_from_refusal(info, named)
            spent = daily_quota_spent(named)
            if spent is not None:
                info.spent_daily = spent[0]
                info.retry_after_s = max(info.retry_after_s or 0.0, spent[1])
        if info is not None and info.retry_after_s is None and not (info.reset_requests_s or info.reset_tokens_s):
            seconds, bad = retry_hint_from_text(_error_fields(raw)[0])
            if seconds is None and bad is None:
                seconds, bad = retry_hint_from_text(raw[:8000].decode("utf-8", "replace"))
            info.retry_after_s = seconds
            if seconds is not None:
                info.unusable_hint = None  # the body says when: an unusable header changes nothing
            elif bad is not None:
                info.unusable_hint = f"{info.unusable_hint}; {bad}" if info.unusable_hint else bad
        return RateLimited(text, limits=info, kind=kind, status=status)
    if kind == "server_error" or status in _RETRYABLE:
        return TransientError(text, limits=info, kind="server_error", status=status)
    return FatalError(text, limits=info, kind=kind, status=status, param=param)


def no_key_error(err: JudgeError, unset_key_env: str | None) -> JudgeError:
    """A 401/403 sent without a key because its variable is unset says so, by name."""
    if err.kind == "auth" and unset_key_env:
        err.kind = "auth_no_key"
        err.args = (f"{err.args[0]}; ${unset_key_env} is not set (--api-key-env names the variable)",)
    return err


def _server_root(base_url: str) -> str:
    """The server's root: the base URL without a trailing ``/v1`` (llama.cpp's own routes live there)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    return urlunsplit(parts._replace(path=path[:-3] if path.endswith("/v1") else path))


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` appended to the base URL's path, the query (a gateway's ``?key=``) kept."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


class HttpBackend:
    name = "http"
    cacheable = True

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 connections: int = 256, extra_headers: dict[str, str] | None = None,
                 api_key_header: str = "Authorization", params: dict[str, Any] | None = None,
                 profile: WireProfile | None = None, unset_key_env: str | None = None) -> None:
        register_url_secrets(base_url)
        # the variable that should have held the key but is empty: a 401 then names it
        self.unset_key_env = None if api_key else unset_key_env
        # Shown in messages and the cache's identity without the secrets a gateway URL may
        # carry (?key=...); the request goes to the real URL, its query kept after the path.
        self.base_url = redact_url(base_url.rstrip("/"))
        self.model = model
        # body spelling per model family (judge/wire.py); ``profile`` carries thinking settings
        self.wire = profile if profile is not None else family_profile(model, params)
        self._url = endpoint_url(base_url, "/chat/completions")
        self._base_url = base_url
        self.quota_headers = QuotaHeaders()  # each answer's quota headers, read against the ones before
        self._headers = {"Content-Type": "application/json", **(extra_headers or {})}
        if api_key:
            register_secret(api_key)  # from here on, no message can carry it
            # Most endpoints take "Authorization: Bearer KEY"; Azure OpenAI keys go in "api-key".
            self._headers[api_key_header] = f"Bearer {api_key}" if api_key_header.lower() == "authorization" \
                else api_key
        self.timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, CONNECT_TIMEOUT_S))
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self.streams = True  # False once the endpoint refused a streamed body (complete_streamed)
        self.counts_prompts: bool | None = None  # whether the server counts a prompt (count_prompt); None: not known
        self._count_route = count_route(base_url, endpoint_url(_server_root(base_url), "/tokenize"), model)
        self._count_headers = self._headers
        if self._count_route.google_key:  # Gemini's native API reads a bearer token as OAuth: its own header
            self._count_headers = {k: v for k, v in self._headers.items() if k.lower() != "authorization"}
            if api_key:
                self._count_headers["x-goog-api-key"] = api_key
        self._count_failures = 0
        self.vocabulary_note: str | None = None  # why the model's vocabulary counts no prompt (vocabulary_counter)
        # The quickest connection made to the endpoint (seconds), None before the first: the
        # pool hands it to the rate limiter, whose margins follow it (measured_connect).
        self.connect_s: float | None = None

    def identity(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, **self.wire.identity()}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300),
                timeout=self._timeout, json_serialize=lambda o: orjson.dumps(o).decode(),
                trace_configs=[self._tracer()])
        return self._session

    def _tracer(self) -> aiohttp.TraceConfig:
        """Times each new connection (DNS, TCP and TLS): the quickest is kept as ``connect_s``.
        Our event loop's own delays only lengthen a measure, so the minimum is the nearest to
        the round trip. Tells the pool when a request's headers have left (``REQUEST_LEFT``)."""
        trace = aiohttp.TraceConfig()

        async def left(_session: aiohttp.ClientSession, _context: SimpleNamespace, _params: Any) -> None:
            request_left()  # aiohttp runs its hooks in the request's task: the caller's context

        async def started(_session: aiohttp.ClientSession, context: SimpleNamespace, _params: Any) -> None:
            context.connect_started = time.monotonic()

        async def made(_session: aiohttp.ClientSession, context: SimpleNamespace, _params: Any) -> None:
            took = time.monotonic() - context.connect_started
            self.connect_s = took if self.connect_s is None else min(self.connect_s, took)

        trace.on_connection_create_start.append(started)
        trace.on_connection_create_end.append(made)
        trace.on_request_headers_sent.append(left)
        return trace

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        sent, structured = self.wire.spelling(), self.wire.structured
        status, headers, raw = await self._post(orjson.dumps(request_body(request, self.model, self.wire)))
        if self._adapted(request, status, raw, sent, structured):
            return await self.complete(request)  # adapted once (a parameter, response_format); remembered
        info = self.quota_headers.read(headers)
        return self._answer(request, status, raw, info, sent), info

    async def complete_streamed(self, request: ChatRequest, on_admitted: Callable[[RateLimitInfo | None], None],
                                ) -> tuple[ChatResponse, RateLimitInfo | None]:
        """One call, streamed: ``on_admitted`` gets the quota headers as soon as the server
        accepts the call (status 200, before the model runs), a whole answer sooner than
        :meth:`complete` has them. The pool streams its preflight this way. An endpoint that
        refuses streaming (a 4xx naming it, other than a bad key, an unknown model or a 429) is
        asked again unstreamed and not streamed to again; a parameter the wire profile adapts
        is adapted, still streamed; one that ignores ``stream`` answers in one body, read as
        usual."""
        if not self.streams:
            return await self.complete(request)
        sent, structured = self.wire.spelling(), self.wire.structured
        body = request_body(request, self.model, self.wire)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}  # the usage comes as a last chunk

        def admitted(headers: Any) -> None:
            on_admitted(self.quota_headers.read(headers))

        status, headers, raw = await self._post(orjson.dumps(body), admitted)
        if self._adapted(request, status, raw, sent, structured):
            return await self.complete_streamed(request, on_admitted)
        if 400 <= status < 500 and status not in (401, 404, 429) and b"stream" in raw.lower():
            # stream_options unknown (Azure's older API versions: a 400), streaming not allowed
            # (a 403 on some deployments); any other refusal is the call's own and named as usual
            self.streams = False
            return await self.complete(request)
        info = self.quota_headers.read(headers)
        return self._answer(request, status, raw, info, sent), info

    def _adapted(self, request: ChatRequest, status: int, raw: bytes, sent: tuple[bool, bool],
                 structured: str) -> bool:
        """The refusal in ``raw`` taught the wire profile another spelling (a parameter, the
        way a schema is asked for): ask again with it."""
        if status == 400 and self.wire.learn(status, raw, sent):
            return True
        return status >= 400 and request.json_mode and self.wire.learn_structured(status, raw, structured)

    def _answer(self, request: ChatRequest, status: int, raw: bytes, info: RateLimitInfo | None,
                sent: tuple[bool, bool]) -> ChatResponse:
        """The answer in ``raw``; a refusal raises, classified."""
        if status >= 400:
            raise no_key_error(status_error(status, raw, self.base_url, info), self.unset_key_env)
        response = parse_completion(raw, request)
        if not response.usage_estimated:
            self.wire.learn_cap_ignored(sent[0], request.max_tokens, response.output_tokens)
        return response

    async def _post(self, body: bytes, admitted: Callable[[Any], None] | None = None) -> tuple[int, Any, bytes]:
        """Status, headers and body of one POST of ``body``. With ``admitted``, a response of
        server-sent events has its headers handed over as they arrive and its events folded
        into one completion body (judge.sse)."""
        try:
            async with self._get_session().post(self._url, data=body, headers=self._headers) as resp:
                if admitted is not None and resp.status == 200 and resp.content_type == "text/event-stream":
                    admitted(resp.headers)
                    raw = await fold_events(resp.content.iter_any())
                else:
                    raw = await resp.read()
                return resp.status, resp.headers, raw
        except aiohttp.ConnectionTimeoutError:
            raise TransientError(f"could not connect to {self.base_url} within "
                                 f"{min(self.timeout_s, CONNECT_TIMEOUT_S):g} s", kind="connect_timeout") from None
        except asyncio.TimeoutError:
            raise TransientError(f"no answer from {self.base_url} within {self.timeout_s:g} s (--timeout)",
                                 kind="timeout") from None
        except aiohttp.ClientError as e:
            raise TransientError(redact(f"cannot reach {self.base_url}: {type(e).__name__}: {e}"),
                                 kind=classify_connection_error(e)) from None

    async def server_facts(self) -> ServerFacts:
        """What the server says about itself before the run, from its model list (and
        llama.cpp's ``/props``): nothing when it says nothing or cannot be asked. The
        preflight call, sent right after, finds any real fault."""
        try:
            models, headers = await self._get_json(endpoint_url(self._base_url, "/models"))
        except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, ValueError):
            return ServerFacts()
        return await self._facts_from(models, headers)

    async def _facts_from(self, models: Any, headers: Any) -> ServerFacts:
        entries = models.get("data") if isinstance(models, dict) else None
        if not isinstance(entries, list) or not entries:
            return ServerFacts()
        entry = next((m for m in entries if isinstance(m, dict) and m.get("id") == self.model), entries[0])
        if not isinstance(entry, dict):
            return ServerFacts()
        owner = entry.get("owned_by")
        if owner == "llamacpp":
            # llama.cpp's llama-server: meta.n_ctx is the window of one slot, /props (beside
            # /v1) the number of slots; it stops a request whose client went away.
            meta = entry.get("meta")
            n_ctx = meta.get("n_ctx") if isinstance(meta, dict) else None
            window = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
            slots = None
            try:
                props, _ = await self._get_json(endpoint_url(_server_root(self._base_url), "/props"))
                total = props.get("total_slots") if isinstance(props, dict) else None
                slots = total if isinstance(total, int) and total > 0 else None
            except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, ValueError):
                pass
            return ServerFacts(server="llama.cpp", window=window, slots=slots, cancels=True)
        if may_be_ollama(owner, self._base_url):
            # Ollama: its window is the loaded model's, stated once it is loaded (loaded_window)
            try:
                version, _ = await self._get_json(endpoint_url(_server_root(self._base_url), "/api/version"))
            except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, ValueError):
                version = None
            if is_version(version):
                return ServerFacts(server="ollama")
        if owner == "me" and "openai-processing-ms" in headers:
            # llama-cpp-python's server: one lock around the model (one request at a time), and a
            # request whose client went away is finished anyway.
            return ServerFacts(server="llama-cpp-python", slots=1, cancels=False)
        return ServerFacts()

    async def loaded_window(self) -> int | None:
        """The context Ollama runs the model with (``GET /api/ps``, :mod:`drscore.judge.ollama`);
        None while it is not loaded, or where it does not say."""
        try:
            body, _ = await self._get_json(endpoint_url(_server_root(self._base_url), "/api/ps"))
        except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, ValueError):
            return None
        return loaded_context(body, self.model)

    async def load_model(self) -> bool:
        """Have Ollama load the model now (``POST /api/generate`` with no prompt), so that
        ``/api/ps`` states the context it loaded it with before the first prompt is sent;
        whether it said the model is loaded."""
        url = endpoint_url(_server_root(self._base_url), "/api/generate")
        try:
            async with self._get_session().post(url, data=orjson.dumps({"model": self.model}), headers=self._headers,
                                                timeout=self._timeout) as resp:
                status, raw = resp.status, await resp.read()
            body = orjson.loads(raw) if status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError):
            return False
        return isinstance(body, dict) and body.get("done") is True

    async def vocabulary_counter(self) -> LocalTokenizer | None:
        """A prompt counter with the model's own vocabulary, where the server gives it (Ollama's
        ``POST /api/show``, :mod:`drscore.judge.ollama`); None where it gives none or one not
        counted here (:attr:`vocabulary_note` then says why). Read and built on a worker
        thread: a vocabulary is megabytes of JSON, and Llama 3's 280,000 merges load in a quarter
        of a second."""
        url = endpoint_url(_server_root(self._base_url), "/api/show")
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, 60.0))
        try:
            async with self._get_session().post(url, data=orjson.dumps(show_request(self.model)),
                                                headers=self._headers, timeout=timeout) as resp:
                status, raw = resp.status, await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            self.vocabulary_note = "POST /api/show did not answer"
            return None
        if status != 200:
            self.vocabulary_note = f"POST /api/show answered HTTP {status}"
            return None

        def build() -> LocalTokenizer | None:
            try:
                vocab = model_vocabulary(orjson.loads(raw))
            except orjson.JSONDecodeError:
                vocab = None
            if vocab is None:
                self.vocabulary_note = ("POST /api/show gave no tokenizer: an Ollama without verbose show, "
                                        "or a model imported from safetensors")
                return None
            try:
                count = text_counter(vocab)
            except GgufVocabError as e:
                self.vocabulary_note = f"the model's vocabulary is not counted here: {e}"
                return None
            exact = "" if vocab.exact else f", pre-tokenizer {vocab.pre!r} split as Llama 3's"
            return LocalTokenizer(f"ollama:{self.model} (its {vocab.kind} vocabulary{exact})", count)
        return await asyncio.to_thread(build)

    async def count_prompt(self, request: ChatRequest) -> int | None:
        """The server's own count of ``request``'s prompt (:mod:`drscore.judge.counting`: vLLM's
        ``POST /tokenize``, Gemini's ``countTokens``). None where the server has no such route
        (:attr:`counts_prompts` then turns False, and it is not asked again) or could not
        answer now."""
        if self.counts_prompts is False:
            return None
        route = self._count_route
        body = count_body(route, self.model, request_body(request, self.model, self.wire)["messages"])
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, CONNECT_TIMEOUT_S))
        try:
            async with self._get_session().post(route.url, data=orjson.dumps(body),
                                                headers=self._count_headers,
                                                timeout=timeout) as resp:
                status, raw = resp.status, await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            self._count_failed()
            return None
        if status == 429 or status >= 500:  # busy now; the estimate serves this call
            self._count_failed()
            return None
        count = None
        if status == 200:
            try:
                answer = orjson.loads(raw)
            except orjson.JSONDecodeError:
                answer = None
            count = answer.get(route.field) if isinstance(answer, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            # no such route (404, 405), or one of another shape (llama.cpp's /tokenize takes a
            # "content" string): the server does not count chat prompts this way
            self.counts_prompts = False
            return None
        self.counts_prompts = True
        return count

    def _count_failed(self) -> None:
        """A count not given this time; a route that never once gave one is given up after
        COUNT_TRIES (a server that fails every such request must not be asked every call)."""
        self._count_failures += 1
        if self.counts_prompts is None and self._count_failures >= COUNT_TRIES:
            self.counts_prompts = False

    async def _get_json(self, url: str) -> tuple[Any, Any]:
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, CONNECT_TIMEOUT_S))
        async with self._get_session().get(url, headers=self._headers, timeout=timeout) as resp:
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status}")
            return orjson.loads(await resp.read()), resp.headers

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def parse_completion(raw: bytes, request: ChatRequest) -> ChatResponse:
    """Content and usage of a chat-completion body; missing usage is estimated (and flagged).

    A thinking model's thought never becomes the answer: ``<think>`` blocks are cut out
    of the content and ``reasoning_content`` (vLLM, DeepSeek; ``reasoning`` on some
    gateways) is only counted. Reasoning tokens come from
    ``usage.completion_tokens_details.reasoning_tokens`` and are part of ``output_tokens``
    (billed as output); when the usage gives no count, the visible thought is estimated."""
    try:
        obj = orjson.loads(raw)
        choice = obj["choices"][0]
        message = choice["message"]
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        raise TransientError(f"unexpected response body: {excerpt(raw)}", kind="bad_response") from None
    text, thought = split_thinking(content)
    field = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(field, str) and field:
        thought = field + thought
    usage = obj.get("usage") or {}
    raw_in, raw_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    pin: int
    pout: int
    if isinstance(raw_in, int) and isinstance(raw_out, int):
        pin, pout, estimated = raw_in, raw_out, False
    else:
        pin, pout, estimated = (estimate_messages(list(request.messages)),
                                estimate_tokens(text) + estimate_tokens(thought), True)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = min(cached, pin) if isinstance(cached, int) and cached > 0 and not estimated else 0
    reasoning, pout = reasoning_usage(usage, pout, pin)
    if not reasoning and thought:
        # No count in the usage (vLLM, Ollama): the thought's share of the billed output,
        # split by our estimate of both parts.
        t_thought, t_answer = estimate_tokens(thought), estimate_tokens(text)
        reasoning = round(pout * t_thought / max(1, t_thought + t_answer))
    return ChatResponse(text=text, input_tokens=pin, output_tokens=pout, usage_estimated=estimated,
                        finish_reason=choice.get("finish_reason"), model=obj.get("model"),
                        cached_input_tokens=cached, reasoning_tokens=reasoning, thought_visible=bool(thought),
                        thought=thought)


def reasoning_usage(usage: dict[str, Any], completion: int, prompt: int) -> tuple[int, int]:
    """``(reasoning_tokens, output_tokens)`` from a usage object.

    OpenAI counts reasoning inside ``completion_tokens`` (its details give the part). Some
    Gemini bridges report the thoughts beside it instead; their ``total_tokens`` then equals
    prompt + completion + reasoning, and the billed output is completion + reasoning. Both
    are read so the thought is billed once, never twice, never not at all."""
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if not isinstance(reasoning, int) or reasoning <= 0:
        return 0, completion
    total = usage.get("total_tokens")
    if isinstance(total, int) and total == prompt + completion + reasoning and total != prompt + completion:
        return reasoning, completion + reasoning
    return min(reasoning, completion), completion


def excerpt(raw: bytes, n: int = 300) -> str:
    """The start of a body for an error message, on one line, redacted."""
    return redact(raw[:2000].decode("utf-8", "replace").replace("\n", " "))[:n]
