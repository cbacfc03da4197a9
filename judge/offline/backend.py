"""The offline judge backend: deterministic heuristics, no network, no key, no cost.

Its answers are computed from the template's structured inputs by the rule registered
for that template (``judge/offline/<module>.py``); a template without a rule gets a
schema-valid answer derived from the request hash, so every method still runs — such
rows are baselines, labelled ``"judge": "offline"`` everywhere. Offline answers are not
cached: they cost nothing, and caching would freeze them across heuristic changes.
"""
from __future__ import annotations

import hashlib
from typing import Any

import orjson

from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse, RateLimitInfo
from drscore.engine.runtime.calls.tokens import estimate_messages, estimate_tokens
from drscore.judge.offline import rule_for


class OfflineBackend:
    name = "offline"
    model = "offline"
    cacheable = False

    def identity(self) -> dict[str, Any]:
        return {"model": "offline"}

    def answer(self, request: ChatRequest) -> Any:
        rule = rule_for(request.template)
        if rule is not None:
            return rule(request.variables, request.schema)
        from drscore.judge.mock.schema_fill import fill  # only for templates without a heuristic

        seed = hashlib.sha256(orjson.dumps([[m.role, m.content] for m in request.messages])).digest()
        return fill(request.schema, seed)

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        text = orjson.dumps(self.answer(request)).decode()
        return ChatResponse(text=text, input_tokens=estimate_messages(list(request.messages)),
                            output_tokens=estimate_tokens(text), usage_estimated=True, model="offline"), None

    async def close(self) -> None:
        return None
