"""Judge verdicts: the JSON Schema sent as response format, and decoding the answer.

Decoding is strict first (msgspec, the fast path for endpoints that honour the schema),
then tolerant: code fences and prose around the JSON are stripped. What still does not
decode raises :class:`VerdictDecodeError`, which the pool answers with a bounded re-ask.
"""
from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class VerdictDecodeError(ValueError):
    pass


@functools.cache
def schema_of(verdict: type) -> dict[str, Any]:
    """JSON Schema of a verdict Struct with the root inlined (OpenAI requires an object root)."""
    schema = msgspec.json.schema(verdict)
    ref = schema.get("$ref")
    if ref:
        defs = dict(schema.get("$defs", {}))
        root = dict(defs.pop(ref.rsplit("/", 1)[-1]))
        if defs:
            root["$defs"] = defs
        schema = root
    return schema


_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {}


def _decoder(verdict: type[T]) -> msgspec.json.Decoder[T]:
    """One decoder per verdict type (building one compiles the type's schema)."""
    dec = _DECODERS.get(verdict)
    if dec is None:
        dec = _DECODERS[verdict] = msgspec.json.Decoder(verdict)
    return dec


def decode_verdict(text: str, verdict: type[T]) -> T:
    """Decode ``text`` into ``verdict``; tolerant of fences and surrounding prose."""
    dec = _decoder(verdict)
    try:
        return dec.decode(text)
    except msgspec.ValidationError as e:
        raise VerdictDecodeError(f"answer does not match the schema: {e}") from None
    except msgspec.DecodeError:
        pass
    for candidate in _candidates(text):
        try:
            return dec.decode(candidate)
        except msgspec.ValidationError as e:
            raise VerdictDecodeError(f"answer does not match the schema: {e}") from None
        except msgspec.DecodeError:
            continue
    raise VerdictDecodeError("answer is not valid JSON")


def _candidates(text: str) -> list[str]:
    out = [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        out.append(text[start : end + 1])
    return out
