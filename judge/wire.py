"""The OpenAI chat-completions request body shared by the HTTP and SDK transports.

Two things beyond the plain body live here:

* **Model families** (:func:`family_profile`): OpenAI's reasoning models (o1, o3, o4-mini,
  the gpt-5 family) refuse ``max_tokens`` ("use ``max_completion_tokens``") and any
  temperature but the default. Their bodies carry ``max_completion_tokens`` and no
  ``temperature``. Names are matched after an optional ``provider/`` prefix, so
  OpenRouter's ``openai/o3`` is covered too.
* **Thinking** (:mod:`drscore.engine.runtime.calls.thinking`): ``--reasoning-effort`` is spelled
  the way each family expects: ``reasoning_effort`` for OpenAI and Gemini's compatible
  endpoint, Gemini's ``extra_body.google.thinking_config.thinking_budget`` when a budget is
  given outright (``--protocol drb``), and Anthropic's ``thinking: {type: enabled,
  budget_tokens}`` (with the default temperature, which extended thinking requires). The
  output cap itself comes with the request: the pool sizes it (answer + reasoning room).
* **Learning once** (:class:`WireProfile`): an endpoint whose model is not in the table
  but answers 400 "unsupported parameter" for ``max_tokens`` or ``temperature`` is
  adapted to once, and the profile remembers it for the rest of the run. So is an
  endpoint that refuses OpenAI's ``response_format: {type: json_schema}`` with any status
  (llama-cpp-python's server answers HTTP 500, a pydantic validation error): the next
  body asks for the server's own JSON mode, ``{type: json_object, schema: ...}`` (llama.cpp's
  servers turn that schema into a grammar), and an endpoint refusing that too gets the
  schema in the prompt. And one that ignores ``max_completion_tokens`` (answers longer
  than the cap it was sent) is sent ``max_tokens`` from then on.

Neither changes the cache key: the key is built from the template's temperature and
output cap (:mod:`drscore.engine.runtime.calls.pool`), not from the body's spelling of them. User
``--judge-param KEY=VALUE`` pairs are merged into every body and are part of the
backend's identity (hence of the key) only when given, so keys of runs without them
stay what they were.
"""
from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson

from drscore.engine.runtime.calls.judging import ChatRequest
from drscore.engine.runtime.calls.quota_charge import on_host
from drscore.engine.runtime.calls.samples import request_seed
from drscore.engine.runtime.calls.thinking import CLAUDE_BUDGETS, family_of

SCHEMA_OPEN, SCHEMA_CLOSE = "<json-schema>", "</json-schema>"

# Families that take max_completion_tokens and only the default temperature.
# o1 / o1-mini / o1-preview, o3 / o3-mini / o3-pro, o4-mini, gpt-5 / gpt-5-mini / gpt-5-nano.
_REASONING = re.compile(r"^(?:o1|o3|o4)(?:$|[-_.])|^gpt-5(?:$|[-_.])", re.IGNORECASE)
# Body keys a user may not override with --judge-param: they carry the request itself.
RESERVED_PARAMS = frozenset({"model", "messages", "response_format"})
# How a verdict's schema is asked for, in the order tried: OpenAI's structured outputs, the
# JSON mode with a schema that llama.cpp's servers (and llama-cpp-python's) take, the
# schema in the system prompt.
STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
# An error body that refuses the *kind* of response_format we sent: llama-cpp-python's
# pydantic 500 says "response_format.type  Input should be 'text' or 'json_object'", others
# that json_schema / response_format is unsupported or unknown. Not a refusal of the schema
# itself (OpenAI's "Invalid schema for response_format ..."): that is our bug, and fails.
_STRUCTURED_REFUSED = re.compile(
    r"response_format\.type|'text' or 'json_object'|"
    r"(?:response_format|json_schema|json_object)\b[^\n]{0,80}?(?:not supported|unsupported|unrecognized|unknown|"
    r"not permitted|not allowed|invalid (?:type|value))|"
    r"(?:not supported|unsupported|unknown)[^\n]{0,40}?(?:response_format|json_schema)", re.IGNORECASE)
_SCHEMA_INVALID = re.compile(r"invalid schema", re.IGNORECASE)
# Hosts whose OpenAI-compatible endpoint documents ``response_format`` as ignored: the schema
# goes in the prompt from the first call (found at the preflight elsewhere, the calls sent
# beside it were answered in prose and asked again: 61 of the quality run's 161 requests
# against the mock's anthropic profile, whose minute bucket let them go).
IGNORES_RESPONSE_FORMAT = ("api.anthropic.com",)


def ignores_response_format(url: str | None) -> bool:
    """Whether the endpoint at ``url`` is one of :data:`IGNORES_RESPONSE_FORMAT` (or under one)."""
    return on_host(url, IGNORES_RESPONSE_FORMAT)


class WireProfile(msgspec.Struct, kw_only=True):
    """How bodies are spelled for one endpoint and model, for one run.

    ``completion_tokens``: send the output cap as ``max_completion_tokens``;
    ``omit_temperature``: leave ``temperature`` out; ``params``: extra body fields from
    ``--judge-param``; ``learned``: what was adapted from a 400 answer (for the logs)."""

    completion_tokens: bool = False
    omit_temperature: bool = False
    params: dict[str, Any] = {}
    learned: list[str] = []
    family: str | None = None  # thinking family (engine.runtime.thinking.family_of)
    effort: str | None = None  # --reasoning-effort low|medium|high
    thinking_budget: int | None = None  # an explicit thinking budget (a --protocol preset's)
    provider_temperature: bool = False  # leave temperature to the provider's default
    structured: str = "json_schema"  # how a schema is asked for (STRUCTURED_MODES); learned at run time

    def identity(self) -> dict[str, Any]:
        """The part of the backend identity that changes answers: the user's extra
        parameters and thinking settings, and nothing at all when there are none (old
        cache keys hold)."""
        out: dict[str, Any] = {"params": dict(sorted(self.params.items()))} if self.params else {}
        if self.effort is not None:
            out["reasoning_effort"] = self.effort
        if self.thinking_budget is not None:
            out["thinking_budget"] = self.thinking_budget
        if self.provider_temperature:
            out["temperature"] = "provider-default"
        return out

    def thinking_fields(self) -> dict[str, Any]:
        """The body fields that ask for an amount of thinking (empty: the provider's default)."""
        if self.family == "gemini" and self.thinking_budget is not None:
            # Gemini's compatible endpoint takes either reasoning_effort or a budget, not both.
            return {"extra_body": {"google": {"thinking_config": {"thinking_budget": self.thinking_budget}}}}
        if self.family == "claude":
            budget = self.thinking_budget or (CLAUDE_BUDGETS[self.effort] if self.effort else None)
            return {"thinking": {"type": "enabled", "budget_tokens": budget}} if budget else {}
        if self.family == "open":
            return {}  # vLLM/Ollama/llama.cpp: the cap is the only portable lever
        return {"reasoning_effort": self.effort} if self.effort is not None else {}

    def sends_temperature(self) -> bool:
        """Whether bodies carry ``temperature`` (not for families that refuse it, not with
        Claude's extended thinking, not when the provider's default is asked for)."""
        claude_thinking = self.family == "claude" and bool(self.thinking_fields())
        return not (self.omit_temperature or self.provider_temperature or claude_thinking)

    def spelling(self) -> tuple[bool, bool]:
        """How bodies are spelled now; a call remembers it to know, on a 400, whether a
        concurrent call has already adapted the profile."""
        return self.completion_tokens, self.omit_temperature

    def learn(self, status: int, raw: bytes, sent: tuple[bool, bool] | None = None) -> bool:
        """Adapt to a 400 answer that names ``max_tokens`` or ``temperature`` as
        unsupported. Returns True when the call should be sent again: something new was
        learned, or another call learned it while this one (spelled ``sent``) was in
        flight. False when the error is something else, or nothing is left to change
        (fail as before)."""
        if status != 400:
            return False
        param, message = _error_fields(raw)
        text = f"{param} {message}".lower()
        if "unsupported" not in text and "not supported" not in text and "only the default" not in text:
            return False
        changed = False
        if "max_tokens" in text.replace("max_completion_tokens", "") and not self.completion_tokens:
            self.completion_tokens = True
            self.learned.append("max_completion_tokens")
            changed = True
        if "temperature" in text and not self.omit_temperature:
            self.omit_temperature = True
            self.learned.append("omit temperature")
            changed = True
        return changed or (sent is not None and sent != self.spelling())

    def learn_structured(self, status: int, raw: bytes, sent: str) -> bool:
        """Adapt to an error answer (any status but 429 and auth) that refuses the
        ``response_format`` sent in mode ``sent``: the next mode of :data:`STRUCTURED_MODES`.
        True when the call should be sent again (adapted now, or by a concurrent call)."""
        if self.structured != sent:
            return True  # another call adapted while this one was in flight
        if status in (401, 403, 429) or sent == "prompt":
            return False
        param, message = _error_fields(raw)
        text = f"{param} {message}"
        if not _STRUCTURED_REFUSED.search(text) or _SCHEMA_INVALID.search(text):
            return False
        self.structured = STRUCTURED_MODES[STRUCTURED_MODES.index(sent) + 1]
        self.learned.append(f"response_format {self.structured}" if self.structured != "prompt"
                            else "schema in the prompt")
        return True

    def learn_cap_ignored(self, sent_completion_tokens: bool, cap: int, output_tokens: int) -> None:
        """An answer longer than the ``max_completion_tokens`` it was sent shows the server
        ignores that field (llama-cpp-python's does): send ``max_tokens`` from now on."""
        if sent_completion_tokens and self.completion_tokens and output_tokens > cap:
            self.completion_tokens = False
            self.learned.append("max_tokens (max_completion_tokens was ignored)")


def is_reasoning_model(model: str) -> bool:
    """True for OpenAI reasoning-model names (o1, o3, o4-mini, gpt-5 ...), with or
    without a ``provider/`` prefix."""
    return bool(_REASONING.match(model.rsplit("/", 1)[-1].strip()))


def family_profile(model: str, params: dict[str, Any] | None = None, *, effort: str | None = None,
                   thinking_budget: int | None = None, provider_temperature: bool = False) -> WireProfile:
    """The starting profile for ``model``: reasoning families get
    ``max_completion_tokens`` and no temperature; everything else the classic body.
    ``effort`` / ``thinking_budget`` ask for an amount of thinking (see the module doc);
    ``provider_temperature`` leaves temperature out of every body."""
    reasoning = is_reasoning_model(model)
    params = dict(params or {})
    bad = sorted(RESERVED_PARAMS & params.keys())
    if bad:
        raise ValueError(f"--judge-param cannot set {', '.join(bad)}: drscore builds those itself")
    return WireProfile(completion_tokens=reasoning, omit_temperature=reasoning, params=params,
                       family=family_of(model), effort=effort, thinking_budget=thinking_budget,
                       provider_temperature=provider_temperature)


def parse_judge_params(items: list[str] | None) -> dict[str, Any]:
    """``["reasoning_effort=high", "seed=7", 'extra_body={"a": 1}']`` -> a dict; each
    value is read as JSON when it parses (numbers, booleans, objects), else kept as text."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--judge-param {item!r}: expected KEY=VALUE")
        try:
            out[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            out[key] = value
    return out


def request_body(req: ChatRequest, model: str, profile: WireProfile | None = None) -> dict[str, Any]:
    """Body for ``POST /chat/completions``. With ``json_mode`` the verdict's schema goes out
    as ``response_format`` (spelled as ``profile.structured`` says); without it (endpoints
    that lack structured outputs, or refused both spellings) the schema is appended to the
    system prompt between ``<json-schema>`` markers. ``profile``
    (default: the model's family profile) decides how the output cap and temperature are
    spelled and adds the user's extra parameters."""
    profile = profile if profile is not None else family_profile(model)
    messages = [{"role": m.role, "content": m.content} for m in req.messages]
    body: dict[str, Any] = {"model": model, "messages": messages}
    if profile.sends_temperature():
        body["temperature"] = req.temperature
    body["max_completion_tokens" if profile.completion_tokens else "max_tokens"] = req.max_tokens
    body.update(profile.thinking_fields())
    seed = request_seed(req.sample, req.judge_sample)
    if seed:
        body["seed"] = seed  # distinct samples of one step (or of the judge, --samples) must not look identical
    if req.json_mode and profile.structured == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": req.schema_name, "schema": req.schema, "strict": True}}
    elif req.json_mode and profile.structured == "json_object":
        body["response_format"] = {"type": "json_object", "schema": req.schema}
    else:
        hint = ("\n\nAnswer with a single JSON object that validates against this JSON Schema, "
                f"and nothing else:\n{SCHEMA_OPEN}{orjson.dumps(req.schema).decode()}{SCHEMA_CLOSE}")
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + hint}
        else:
            messages.insert(0, {"role": "system", "content": hint.strip()})
    body.update(profile.params)  # the user's parameters win over ours (e.g. their own seed)
    return body


def _error_fields(raw: bytes) -> tuple[str, str]:
    """``(param, message)`` of an OpenAI-style error body; the raw text when not JSON."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "", raw[:500].decode("utf-8", "replace")
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):  # Gemini: [{"error": {...}}]
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, list) and err:  # some gateways wrap errors in a list
        err = err[0]
    if isinstance(err, dict):
        return str(err.get("param") or ""), str(err.get("message") or "")
    return "", str(obj)[:500]
