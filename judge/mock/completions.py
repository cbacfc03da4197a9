"""What the mock judge answers: request parsing, token counting and answer content.

Shared by the synchronous handler (:mod:`judge.mock.server`) and the Batch API
(:mod:`judge.mock.batches`), so a request gets the same answer and the same usage
whichever way it arrives. Answers are JSON valid against the request's response schema
(:mod:`judge.mock.schema_fill`), seeded by the SHA-256 of the canonical request, with the
criterion names, statement numbers and item keys the request listed (:mod:`judge.mock.echo`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from typing import Any

import msgspec
import orjson

from drscore.judge.mock.echo import echo
from drscore.judge.mock.schema_fill import Filler, SchemaFillError, compile_schema

_TOKEN = re.compile(r"\w+|[^\w\s]")
TOKENS_PER_MESSAGE = 3
_SCHEMA_IN_PROMPT = re.compile(r"<json-schema>(.*?)</json-schema>", re.DOTALL)
_EMPTY_FILLER = compile_schema({"type": "object", "properties": {}, "additionalProperties": False})


def count_tokens(text: str) -> int:
    """The mock's token count: one per run of word characters or per punctuation mark."""
    return len(_TOKEN.findall(text))


class BadRequest(Exception):
    pass


def _message_text(content: Any, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise BadRequest(f"messages[{i}].content must be a string or a list of parts")


def prompt_texts(payload: Any) -> list[str]:
    if not isinstance(payload, dict):
        raise BadRequest("request body must be a JSON object")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is required and must be a non-empty list")
    texts = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
        texts.append(_message_text(m.get("content"), i))
    if not isinstance(payload.get("stream", False), bool):
        raise BadRequest("'stream' must be a boolean")
    if payload.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported by the mock judge")
    return texts


@functools.lru_cache(maxsize=512)
def _filler_for(schema_json: bytes) -> Filler:
    """Compiled schema, cached by its JSON text: requests of one step share one schema."""
    try:
        schema = orjson.loads(schema_json)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"embedded <json-schema> is not valid JSON: {e}") from None
    try:
        return compile_schema(schema)
    except SchemaFillError as e:
        raise BadRequest(f"unsupported response schema: {e}") from None


def filler(payload: dict[str, Any], texts: list[str]) -> Filler:
    return response_schema(payload, texts)[0]


def response_schema(payload: dict[str, Any], texts: list[str]) -> tuple[Filler, bytes | None]:
    """The compiled schema the answer must satisfy, and its JSON text (None: no schema)."""
    fmt = payload.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema must be an object")
        schema_json = orjson.dumps(schema)
        return _filler_for(schema_json), schema_json
    if isinstance(fmt, dict) and fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict):
        # llama.cpp's servers (and llama-cpp-python's): the JSON mode with a schema
        schema_json = orjson.dumps(fmt["schema"])
        return _filler_for(schema_json), schema_json
    for text in texts:
        if "<json-schema>" in text:
            m = _SCHEMA_IN_PROMPT.search(text)
            if m:
                schema_json = m.group(1).strip().encode()
                return _filler_for(schema_json), schema_json
    return _EMPTY_FILLER, None


def recoverable(content: str) -> str:
    """Valid JSON wrapped in prose and a fence: a tolerant client can extract it."""
    return f"Here is my assessment.\n\n```json\n{content}\n```\n\nLet me know if you need more detail."


def truncated(content: str) -> str:
    """Cut-off JSON: never decodable (a bare scalar's prefix could be, so wrap it open)."""
    head = content[: len(content) // 2]
    return head if head[:1] in ("{", "[", '"') else '{"value": ' + head


def error_body(message: str, type_: str, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


class Prepared(msgspec.Struct, kw_only=True):
    """A parsed request: its hash, the schema-valid answer and the mock's token counts."""

    key: str  # SHA-256 of the canonical request body
    answer: str
    prompt_tokens: int
    completion_tokens: int
    roles: list[str]
    texts: list[str]


_NOT_ASKED = frozenset({"stream", "stream_options", "max_tokens", "max_completion_tokens"})


def prepare(payload: Any) -> Prepared:
    """Parse and answer one chat-completion body (raises :class:`BadRequest`)."""
    texts = prompt_texts(payload)
    try:
        fill, schema_json = response_schema(payload, texts)
        # How the answer is delivered is not part of the question: a streamed call is answered
        # alike, and so is one with another output cap (a model never sees it; it only stops there).
        asked = {k: v for k, v in payload.items() if k not in _NOT_ASKED}
        digest = hashlib.sha256(orjson.dumps(asked, option=orjson.OPT_SORT_KEYS)).digest()
        value = fill(digest)
        if schema_json is not None:  # name the criteria, statements and keys the request listed
            value = echo(value, schema_json, texts)
        answer = json.dumps(value)
    except SchemaFillError as e:
        raise BadRequest(str(e)) from None
    return Prepared(key=digest.hex(), answer=answer,
                    prompt_tokens=sum(map(count_tokens, texts)) + TOKENS_PER_MESSAGE * len(texts),
                    completion_tokens=count_tokens(answer), roles=[m["role"] for m in payload["messages"]],
                    texts=texts)


def prompt_token_list(prep: Prepared) -> list[str]:
    """The prompt as the mock's tokens in order, a role marker before each message (what
    the prefix cache compares)."""
    out: list[str] = []
    for role, text in zip(prep.roles, prep.texts):
        out.append(f"<|{role}|>")
        out.extend(_TOKEN.findall(text))
    return out


def stream_events(body: dict[str, Any], include_usage: bool, piece: int = 48) -> list[bytes]:
    """A chat-completion body as OpenAI streams it (server-sent events): a role delta, the
    thought and the answer in pieces, the finish reason, then (``stream_options.include_usage``)
    a last chunk with no choices and the usage, and ``[DONE]``."""
    choice = body["choices"][0]
    message = choice["message"]
    head: dict[str, Any] = {k: body[k] for k in ("id", "created", "model", "system_fingerprint") if k in body}
    head["object"] = "chat.completion.chunk"

    def sse(chunk: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps({**head, **chunk}) + b"\n\n"

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    events = [event({"role": "assistant", "content": ""})]
    for field in ("reasoning_content", "content"):
        text = message.get(field) or ""
        events += [event({field: text[i:i + piece]}) for i in range(0, len(text), piece)]
    events.append(event({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        events.append(sse({"choices": [], "usage": body["usage"]}))
    events.append(b"data: [DONE]\n\n")
    return events


def completion_body(prep: Prepared, payload: dict[str, Any], content: str, completion_tokens: int,
                    cached_tokens: int | None, default_model: str) -> dict[str, Any]:
    """An OpenAI chat-completion object; with a prefix cache (``cached_tokens`` not
    None) usage reports the cached part of the prompt."""
    usage: dict[str, Any] = {
        "prompt_tokens": prep.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prep.prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "id": f"chatcmpl-{prep.key[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": payload.get("model") or default_model,
        "system_fingerprint": "drscore-mock",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": usage,
    }
