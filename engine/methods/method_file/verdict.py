"""The verdict type of a method file: a msgspec Struct built from its ``[verdict]`` fields,
so the response schema (with ranges and label lists) and the decoding are those of every
built-in method."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from drscore.engine.methods.method_file.spec import FieldSpec, MethodSpec


def _annotation(f: FieldSpec) -> Any:
    meta: dict[str, Any] = {"description": f.description} if f.description else {}
    if f.type == "int":
        return Annotated[int, msgspec.Meta(ge=int(f.low), le=int(f.high), **meta)]
    if f.type == "float":
        return Annotated[float, msgspec.Meta(ge=f.low, le=f.high, **meta)]
    if f.type in ("label", "labels"):
        one: Any = Literal.__getitem__(f.labels)  # Literal[labels...] of a list known at run time
        kind = one if f.type == "label" else list[one]
        return Annotated[kind, msgspec.Meta(**meta)] if meta else kind
    kind = bool if f.type == "bool" else str
    return Annotated[kind, msgspec.Meta(**meta)] if meta else kind


def struct_name(method: str) -> str:
    """``my-rubric`` -> ``MyRubricVerdict``: the schema's name (OpenAI allows [A-Za-z0-9_-])."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", method) if w]
    return "".join(w[:1].upper() + w[1:] for w in words) + "Verdict"


def verdict_type(spec: MethodSpec) -> type[msgspec.Struct]:
    """The Struct of ``spec``'s verdict: its fields in file order, every one required."""
    return msgspec.defstruct(struct_name(spec.name), [(f.name, _annotation(f)) for f in spec.fields],
                             forbid_unknown_fields=True)
