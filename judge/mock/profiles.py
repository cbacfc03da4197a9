"""Provider profiles of the mock judge (``drscore mock-judge --profile NAME``).

Each profile makes the mock answer the way one provider's OpenAI-compatible endpoint
does in the respects that change what a client must do. They are faithful stand-ins
built from the providers' documentation and their users' reports, not the live services:

* **openai**: errors ``{"error": {message, type, param, code}}`` (``context_length_exceeded``,
  ``invalid_prompt`` for flagged prompts); ``x-ratelimit-limit/remaining/reset-*`` headers
  plus ``retry-after`` / ``retry-after-ms`` on a 429; usage with
  ``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.reasoning_tokens``;
  ``response_format`` json_schema honoured.
* **azure**: the OpenAI body, served at ``/openai/deployments/{name}/chat/completions`` and
  only with an ``api-version`` query (404 without it); quota headers give what *remains*
  (``x-ratelimit-remaining-*``), not the limit, so a client cannot pace from them; the
  content filter answers 400 with code ``content_filter`` (inner code
  ``ResponsibleAIPolicyViolation``).
* **gemini** (``/v1beta/openai``): errors wrapped in a list, ``[{"error": {code, message,
  status}}]`` with ``INVALID_ARGUMENT`` / ``RESOURCE_EXHAUSTED`` / ``UNAVAILABLE``; no quota
  headers, and a 429 says when to come back only in the body (``RetryInfo.retryDelay``);
  a context overflow is "The input token count (N) exceeds the maximum number of tokens
  allowed (W)" (input tokens only); the native API's ``POST /v1beta/models/NAME:countTokens``
  counts a ``generateContentRequest``'s texts (``{"totalTokens"}``), without the few tokens
  each message adds to the usage (Google's own example counts a prompt one below its usage),
  and answers 401 ``UNAUTHENTICATED`` to a bearer token, which that API reads as OAuth (its
  users' reports: the key goes as ``x-goog-api-key``); safety blocks end with ``finish_reason``
  ``content_filter``; hidden thinking counted in ``completion_tokens_details``.
* **anthropic** (the OpenAI SDK compatibility layer): ``response_format`` is ignored (the
  answer is prose unless the prompt itself carries the schema); errors
  ``{"type": "error", "error": {type, message}}``, "prompt is too long: N tokens > W
  maximum"; overload is HTTP 529; quota headers are Anthropic's own
  (``anthropic-ratelimit-requests-limit`` ...) plus ``retry-after``; thinking is billed but
  neither shown nor counted in the usage. With an output quota (``otpm`` > 0: *split mode*)
  its quotas are the real API's three: requests, input tokens (the ``tokens`` bucket, best
  with ``tpm_charge="input"``) and output tokens (each call's cap reserved at admission, the
  unused part given back with the answer); every answer then states all three and their sum
  (``anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining,reset}``:
  token remainings to the nearest thousand, resets as RFC 3339 seconds), and a 429 names the
  quota that refused it ("... rate limit of 16,000 output tokens per minute ...").
* **vllm**: no quota of its own (a gateway in front sends only ``Retry-After``); errors
  ``{"object": "error", "message", "type": "BadRequestError", "code": 400}``; "maximum
  context length is W tokens. However, you requested N tokens (X in the messages, Y in the
  completion)"; the thought in ``message.reasoning_content``, no reasoning count; no
  ``prompt_tokens_details``; ``POST /tokenize`` (beside ``/v1``) with ``messages`` answers
  ``{"count", "max_model_len", "tokens"}``, the count the completion's usage will give.
* **ollama**: no quota, no content filter; a prompt over the context (``num_ctx``) is
  truncated silently, never refused; the thought as ``<think>`` in the content.
* **llamacpp** (llama.cpp's ``llama-server``) and **llamacpp-python** (llama-cpp-python's
  server): *recorded from the real servers*, not written from documentation
  (:mod:`drscore.judge.mock.llamacpp` and its ``recordings/``): their error bodies,
  statuses, headers, model list, which response formats they take, whether they honour
  ``max_completion_tokens``, and what a cap larger than the window leaves does.
"""
from __future__ import annotations

import math
import re
import time
from datetime import datetime, timezone
from typing import Any, Mapping

import msgspec
import orjson

from drscore.judge.mock.quota import Figures, Refusal, figure, format_duration

PROFILES = ("openai", "azure", "gemini", "anthropic", "vllm", "ollama", "llamacpp", "llamacpp-python")


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    quota_headers: str  # openai | azure (remaining only) | anthropic | none
    retry_after_header: bool = True  # a 429 carries Retry-After (gemini: only in the body)
    reasoning_style: str = "hidden"  # the thinking mock's style (judge.mock.thinking.STYLES)
    reasoning_details: bool = True  # usage.completion_tokens_details.reasoning_tokens is given
    cached_tokens: bool = True  # usage.prompt_tokens_details.cached_tokens is given
    structured_output: bool = True  # response_format json_schema is honoured
    overflow: str = "error"  # error | truncate (a prompt over the window)
    window_counts_output: bool = True  # the window error counts the output cap with the prompt
    filter: str = "none"  # how --filter-word shows: error | finish | none
    overload_status: int = 503  # what a poisoned body is answered with
    tokenize: bool = False  # POST /tokenize counts a chat prompt as the completion would (vLLM's route)
    count_tokens: bool = False  # Gemini's native models.countTokens beside /v1beta/openai


_ALL: dict[str, Profile] = {
    "openai": Profile(name="openai", quota_headers="openai", filter="error"),
    "azure": Profile(name="azure", quota_headers="azure", filter="error"),
    "gemini": Profile(name="gemini", quota_headers="none", retry_after_header=False, cached_tokens=False,
                      window_counts_output=False, filter="finish", count_tokens=True),
    "anthropic": Profile(name="anthropic", quota_headers="anthropic", reasoning_details=False, cached_tokens=False,
                         structured_output=False, window_counts_output=False, filter="finish",
                         overload_status=529),
    "vllm": Profile(name="vllm", quota_headers="none", reasoning_style="field", reasoning_details=False,
                    cached_tokens=False, tokenize=True),
    "ollama": Profile(name="ollama", quota_headers="none", reasoning_style="think", reasoning_details=False,
                      cached_tokens=False, overflow="truncate"),
    # No quota and no filter; a window counting the prompt alone (a cap too large is clamped:
    # judge/mock/server.py); the rest comes from the recordings (judge/mock/llamacpp.py).
    "llamacpp": Profile(name="llamacpp", quota_headers="none", reasoning_style="field", reasoning_details=False,
                        window_counts_output=False),
    "llamacpp-python": Profile(name="llamacpp-python", quota_headers="none", reasoning_style="think",
                               reasoning_details=False, cached_tokens=False, window_counts_output=False,
                               overload_status=500),
}


def profile(name: str) -> Profile:
    try:
        return _ALL[name]
    except KeyError:
        raise ValueError(f"mock judge: profile must be one of {', '.join(PROFILES)}, got {name!r}") from None


_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE"}
_ANTHROPIC_TYPE = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error",
                   500: "api_error", 529: "overloaded_error"}


def error_body(p: Profile, status: int, message: str, *, type_: str = "invalid_request_error",
               code: str | None = None, param: str | None = None, extra: dict[str, Any] | None = None) -> bytes:
    """An error body in the profile's shape."""
    if p.name == "gemini":
        err: dict[str, Any] = {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}
        if extra:
            err.update(extra)
        return orjson.dumps([{"error": err}])
    if p.name == "anthropic":
        return orjson.dumps({"type": "error", "error": {"type": _ANTHROPIC_TYPE.get(status, "api_error"),
                                                        "message": message}})
    if p.name == "vllm":
        return orjson.dumps({"object": "error", "message": message, "type": "BadRequestError" if status < 500
                             else "InternalServerError", "param": param, "code": status})
    err = {"message": message, "type": type_, "param": param, "code": code}
    if extra:
        err.update(extra)
    return orjson.dumps({"error": err})


def context_error(p: Profile, prompt_tokens: int, cap: int, window: int) -> bytes:
    """The profile's 400 for a prompt over the window."""
    from drscore.judge.mock.llamacpp import recorded

    rec = recorded(p.name)
    if rec is not None:
        return rec.error("over_window", window=window, prompt=prompt_tokens, cap=cap, total=prompt_tokens + cap)[1]
    if p.name == "gemini":
        return error_body(p, 400, f"The input token count ({prompt_tokens}) exceeds the maximum number of tokens "
                                  f"allowed ({window}).")
    if p.name == "anthropic":
        return error_body(p, 400, f"prompt is too long: {prompt_tokens} tokens > {window} maximum")
    message = (f"This model's maximum context length is {window} tokens. However, you requested "
               f"{prompt_tokens + cap} tokens ({prompt_tokens} in the messages, {cap} in the completion). "
               "Please reduce the length of the messages or completion.")
    return error_body(p, 400, message, code="context_length_exceeded", param="messages")


def over_window(p: Profile, prompt_tokens: int, cap: int, window: int) -> bool:
    if window <= 0:
        return False
    if p.name in ("llamacpp", "llamacpp-python"):  # the prompt must leave one token to generate
        return prompt_tokens >= window
    if p.overflow == "truncate":
        # Ollama cuts a prompt only when the prompt alone is over its context ("truncating input
        # prompt limit=4096 prompt=7268 ... new=4096"); the answer then shifts the context along
        return prompt_tokens > window
    return prompt_tokens + (cap if p.window_counts_output else 0) > window


def filter_error(p: Profile) -> bytes:
    """The 400 of a content filter (the ``error`` filter style)."""
    if p.name == "azure":
        return error_body(p, 400, "The response was filtered due to the prompt triggering Azure OpenAI's content "
                                  "management policy. Please modify your prompt and retry.",
                          type_="invalid_request_error", code="content_filter", param="prompt",
                          extra={"status": 400, "innererror": {"code": "ResponsibleAIPolicyViolation",
                                                               "content_filter_result": {
                                                                   "violence": {"filtered": True,
                                                                                "severity": "medium"}}}})
    return error_body(p, 400, "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
                      code="invalid_prompt")


def overload_body(p: Profile) -> bytes:
    if p.name == "anthropic":
        return error_body(p, 529, "Overloaded")
    if p.name == "gemini":
        return error_body(p, 503, "The model is overloaded. Please try again later.")
    return error_body(p, p.overload_status, "The server is currently overloaded with other requests. Please retry.",
                      type_="server_error", code="service_unavailable")


def rate_limit_response(p: Profile, wait_s: float, quota_headers: dict[str, str], model: str,
                        refusal: Refusal | None = None, input_only: bool = False,
                        split: Mapping[str, Figures] | None = None) -> tuple[dict[str, str], bytes]:
    """Headers and body of a 429 (``quota_headers``: the OpenAI-style set the quota computed;
    ``split``: the buckets' figures where Anthropic's quotas are split, whose own header set is
    sent instead). Where the provider's body names the quota that refused the call
    (``refusal``), it does so in the provider's words (as its users' bug reports quote them:
    judge.quota_refusal)."""
    seconds = max(1, -(-int(wait_s * 1000) // 1000))
    split = split if p.quota_headers == "anthropic" else None
    headers = split_quota_headers(split) if split is not None else quota_rate_headers(p, quota_headers)
    if p.retry_after_header:
        headers["Retry-After"] = str(seconds)
        if p.quota_headers in ("openai", "azure"):
            headers["retry-after-ms"] = str(max(1, int(wait_s * 1000)))
    if p.name == "gemini":
        details: list[dict[str, Any]] = []
        if refusal is not None:
            what = "GenerateRequests" if refusal.dimension == "requests" else \
                "GenerateContentInputTokens" if input_only else "GenerateContentTokens"
            details.append({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_paid_tier_"
                               + ("requests" if refusal.dimension == "requests" else
                                  "input_token_count" if input_only else "token_count"),
                "quotaId": f"{what}PerModelPerMinute-PaidTier",
                "quotaDimensions": {"location": "global", "model": model}, "quotaValue": figure(refusal.limit)}]})
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"})
        body = error_body(p, 429, "You exceeded your current quota, please check your plan and billing details.",
                          extra={"details": details})
    elif p.name == "anthropic" and split is not None and refusal is not None:
        body = error_body(p, 429, anthropic_refusal(model, refusal))
    elif p.name == "anthropic":
        body = error_body(p, 429, "This request would exceed the rate limit for your organization. Please "
                                  "retry after some time.")
    elif refusal is not None and p.name == "azure":  # the quota named, not its figure
        kind = "call" if refusal.dimension == "requests" else "token"
        body = error_body(p, 429, f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
                                  f"2024-10-21 have exceeded {kind} rate limit of your current OpenAI S0 pricing tier. "
                                  f"Please retry after {seconds} seconds.", type_="", code="429")
    elif refusal is not None and p.name == "openai":
        kind, abbr = ("requests", "RPM") if refusal.dimension == "requests" else ("tokens", "TPM")
        body = error_body(p, 429, f"Rate limit reached for {model} in organization org-mock on {kind} per min "
                                  f"({abbr}): Limit {figure(refusal.limit)}, Used {figure(refusal.limit - refusal.left)}, "
                                  f"Requested {figure(refusal.requested)}. Please try again in {format_duration(wait_s)}.",
                          type_=kind, code="rate_limit_exceeded")
    else:
        body = error_body(p, 429, f"Rate limit reached for {model}. Please try again later.",
                          type_="requests", code="rate_limit_exceeded")
    return headers, body


def too_large_response(p: Profile, quota_headers: dict[str, str], model: str, limit: float,
                       requested: float) -> tuple[dict[str, str], bytes]:
    """OpenAI's 429 for a call larger than the whole minute's token quota, which no wait passes."""
    body = error_body(p, 429, f"Request too large for {model} in organization org-mock on tokens per min (TPM): "
                              f"Limit {figure(limit)}, Requested {figure(requested)}. The input or output tokens must be "
                              "reduced in order to run successfully.", type_="tokens", code="rate_limit_exceeded")
    return quota_rate_headers(p, quota_headers), body


def hostile_hints(headers: dict[str, str], body: bytes, hint: str) -> tuple[dict[str, str], bytes]:
    """A 429's headers and body with every delay hint saying ``hint`` verbatim (``inf``,
    ``nan``, ``-5``, an HTTP date, 5,000 digits): ``Retry-After`` and the
    ``x-ratelimit-reset-*`` headers it carries, a Gemini ``retryDelay`` and an OpenAI
    "try again in" phrase in the body. ``retry-after-ms`` is dropped (a header the hint
    should not hide behind)."""
    out = {k: v for k, v in headers.items() if k.lower() != "retry-after-ms"}
    for name in list(out):
        if name.lower() == "retry-after" or name.lower().startswith("x-ratelimit-reset-"):
            out[name] = hint
    if not any(k.lower() == "retry-after" for k in out) and b"retryDelay" not in body:
        out["Retry-After"] = hint  # a profile without the header (Gemini) says it in the body below
    text = body.decode("utf-8")
    text = re.sub(r'"retryDelay": ?"[^"]*"', lambda _: f'"retryDelay": "{hint}s"', text)
    text = re.sub(r"try again in [0-9hms.]+", lambda _: f"try again in {hint}", text)
    return out, text.encode("utf-8")


def quota_rate_headers(p: Profile, openai_style: dict[str, str]) -> dict[str, str]:
    """The quota headers the profile sends, from the OpenAI-style set."""
    if p.quota_headers == "openai":
        return dict(openai_style)
    if p.quota_headers == "azure":
        return {k: v for k, v in openai_style.items() if k.startswith("x-ratelimit-remaining-")}
    if p.quota_headers == "anthropic":
        out = {}
        for kind in ("requests", "tokens"):
            if f"x-ratelimit-limit-{kind}" in openai_style:
                out[f"anthropic-ratelimit-{kind}-limit"] = openai_style[f"x-ratelimit-limit-{kind}"]
                out[f"anthropic-ratelimit-{kind}-remaining"] = openai_style[f"x-ratelimit-remaining-{kind}"]
        return out
    return {}


# How Anthropic's 429 names each of its split quotas
_ANTHROPIC_QUOTA = {"requests": "requests", "tokens": "input tokens", "output_tokens": "output tokens"}


def anthropic_refusal(model: str, refusal: Refusal) -> str:
    """Anthropic's 429 message naming the split quota that refused, in its words (quoted in its
    users' bug reports), the figure with thousands separators."""
    limit = f"{int(refusal.limit):,}" if float(refusal.limit).is_integer() else f"{refusal.limit:,}"
    return (f"This request would exceed your organization's rate limit of {limit} "
            f"{_ANTHROPIC_QUOTA.get(refusal.dimension, 'tokens')} per minute (org: mock-org, model: {model}). "
            "For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers "
            "for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.")


def split_quota_headers(figures: Mapping[str, Figures], now: float | None = None) -> dict[str, str]:
    """Anthropic's headers where its token quota is split (``figures``: the quota's, by dimension):
    requests, input tokens (the ``tokens`` bucket), output tokens, and tokens as the sum of the
    two. ``now``: the wall clock the resets count from (the present by default)."""
    wall = time.time() if now is None else now
    out: dict[str, str] = {}
    requests = figures.get("requests")
    if requests is not None:  # exact, as the real API gives it (999, not 1000)
        out.update(_anthropic_set("requests", figure(requests.limit), requests.remaining, wall + requests.reset_s))
    parts = [(kind, figures[dim]) for kind, dim in (("input-tokens", "tokens"), ("output-tokens", "output_tokens"))
             if dim in figures]
    for kind, f in parts:
        out.update(_anthropic_set(kind, figure(f.limit), _thousands(f), wall + f.reset_s))
    if parts:
        out.update(_anthropic_set("tokens", figure(sum(f.limit for _, f in parts)),
                                  sum(_thousands(f) for _, f in parts), wall + max(f.reset_s for _, f in parts)))
    return out


def _anthropic_set(kind: str, limit: str, remaining: int, full_at: float) -> dict[str, str]:
    return {f"anthropic-ratelimit-{kind}-limit": limit, f"anthropic-ratelimit-{kind}-remaining": str(remaining),
            f"anthropic-ratelimit-{kind}-reset": rfc3339_second(full_at)}


def _thousands(f: Figures) -> int:
    """A token remaining as Anthropic states it: to the nearest thousand (half up), never above the limit."""
    return min(math.floor(f.limit), math.floor(f.remaining / 1000 + 0.5) * 1000)


def rfc3339_second(epoch: float) -> str:
    """``2025-08-21T12:40:59Z``: the UTC second at or after ``epoch`` (a reset rounded up, so
    that waiting until then suffices); the inner round() keeps float noise from adding a second."""
    return datetime.fromtimestamp(math.ceil(round(epoch, 6)), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def shape_usage(p: Profile, body: dict[str, Any], cached: int) -> dict[str, Any]:
    """Usage fields as the provider reports them."""
    usage = body["usage"]
    if p.cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    else:
        usage.pop("prompt_tokens_details", None)
    if not p.reasoning_details:
        usage.pop("completion_tokens_details", None)
    return body


PROSE = ("The report covers the question well, with sound structure and mostly supported claims; "
         "I would rate it favourably overall.")
