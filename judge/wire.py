"""The OpenAI chat-completions request body shared by the HTTP and SDK transports."""
from __future__ import annotations

from typing import Any

import orjson

from drscore.engine.runtime.judging import ChatRequest

SCHEMA_OPEN, SCHEMA_CLOSE = "<json-schema>", "</json-schema>"


def request_body(req: ChatRequest, model: str) -> dict[str, Any]:
    """Body for ``POST /chat/completions``. With ``json_mode`` the verdict's schema goes out
    as ``response_format``; without it (endpoints that lack structured outputs) the schema
    is appended to the system prompt between ``<json-schema>`` markers."""
    messages = [{"role": m.role, "content": m.content} for m in req.messages]
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": req.temperature,
                            "max_tokens": req.max_tokens}
    if req.sample:
        body["seed"] = req.sample  # distinct samples of one step must not look identical
    if req.json_mode:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": req.schema_name, "schema": req.schema, "strict": True}}
    else:
        hint = ("\n\nAnswer with a single JSON object that validates against this JSON Schema, "
                f"and nothing else:\n{SCHEMA_OPEN}{orjson.dumps(req.schema).decode()}{SCHEMA_CLOSE}")
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + hint}
        else:
            messages.insert(0, {"role": "system", "content": hint.strip()})
    return body
