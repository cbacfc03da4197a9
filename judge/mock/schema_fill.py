"""Generate a JSON value that satisfies a JSON Schema, deterministically from a seed.

The mock judge server answers every request with such a value, so a client that sends
a verdict Struct's schema gets back something its decoder accepts. The supported subset
is what ``msgspec.json.schema()`` emits (plus a few common extras): ``$ref``/``$defs``,
objects (``properties``, ``required``, ``additionalProperties``, ``propertyNames``,
``min/maxProperties``), ``anyOf``/``oneOf``/``allOf``, ``enum``, ``const``, type lists,
integers and numbers with inclusive/exclusive bounds and ``multipleOf``, strings with
``minLength``/``maxLength``/``format``/``pattern``/``contentEncoding``, arrays with
``items``/``prefixItems``/``min/maxItems``/``uniqueItems``, booleans and null.

A schema is compiled once into a tree of small generator closures
(:func:`compile_schema`); generating a value then costs only the random draws, which is
what lets the mock server answer thousands of requests a second.

Kept as one module of ~590 lines on purpose: the schema compiler and the scalar
generators are one recursive algorithm sharing one private state type and the ``$ref``
bookkeeping; split apart, each half would have to expose those internals to the other.
"""
from __future__ import annotations

import base64
import math
import random
import re
import uuid
from typing import Any, Callable

import orjson

__all__ = ["Filler", "SchemaFillError", "compile_schema", "fill"]

# Short, plausible words for generated strings: answers should look like prose, not noise.
_WORDS = (
    "evidence", "claim", "source", "report", "analysis", "finding", "method", "result",
    "context", "support", "detail", "summary", "coverage", "insight", "reason", "data",
    "trend", "impact", "policy", "market", "study", "review", "scope", "risk",
    "growth", "model", "signal", "factor", "outcome", "survey", "metric", "sample",
    "clear", "partial", "strong", "weak", "recent", "broad", "narrow", "relevant",
    "accurate", "missing", "cited", "verified", "consistent", "novel", "specific", "general",
)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"

# How many times one $ref may be open on the current path before generation turns
# "lean" (minimum items, no optional fields, null where allowed), so recursive schemas
# such as trees stay small and always terminate.
_MAX_REF_REPEATS = 2
# Hard stop for schemas that cannot terminate at all (a required, non-nullable self-reference).
_MAX_DEPTH = 64
# Default sizes when the schema gives no bounds.
_DEFAULT_ITEMS = (1, 4)
_DEFAULT_PROPERTIES = (1, 3)
_DEFAULT_INT = 100
_DEFAULT_FLOAT = (0.0, 1.0)
_TRIES = 32

_TYPE_KEYS = {
    "object": ("properties", "additionalProperties", "required", "propertyNames",
               "minProperties", "maxProperties"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems"),
    "string": ("minLength", "maxLength", "pattern", "format", "contentEncoding"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


class SchemaFillError(ValueError):
    """The schema is malformed, unsupported, or cannot be satisfied."""


class _State:
    """Per-value generation state: the random source and the $refs open on the path."""

    __slots__ = ("rng", "open_refs", "lean", "depth")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.open_refs: dict[str, int] = {}
        self.lean = 0  # > 0 while inside a ref opened more than _MAX_REF_REPEATS times
        self.depth = 0


_Gen = Callable[[_State], Any]


class Filler:
    """A compiled schema: call it with a seed to get a valid value."""

    __slots__ = ("_gen",)

    def __init__(self, gen: _Gen) -> None:
        self._gen = gen

    def __call__(self, seed: bytes | str | int) -> Any:
        """Return a value valid against the schema; equal seeds give equal values."""
        return self._gen(_State(random.Random(seed)))


def compile_schema(schema: dict[str, Any] | bool) -> Filler:
    """Compile ``schema`` once; raises :class:`SchemaFillError` on malformed input."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaFillError(f"a JSON Schema must be an object or a boolean, got {type(schema).__name__}")
    return Filler(_Compiler(schema).compile(schema, "#"))


def fill(schema: dict[str, Any] | bool, seed: bytes | str | int) -> Any:
    """Return a JSON value valid against ``schema``, chosen deterministically from ``seed``.

    The same (schema, seed) always gives the same value; different seeds vary the
    choices (enum members, numbers, lengths, optional fields, union branches).
    """
    return compile_schema(schema)(seed)


class _Compiler:
    """Turns schema nodes into generator closures; ``$ref`` targets are compiled once and
    looked up lazily so recursive definitions do not recurse at compile time."""

    def __init__(self, root: dict[str, Any] | bool) -> None:
        self.root = root
        self.refs: dict[str, _Gen] = {}

    # -- dispatch ---------------------------------------------------------------------

    def compile(self, node: Any, where: str) -> _Gen:
        if node is True or node == {}:
            return _gen_any
        if node is False:
            raise SchemaFillError(f"{where}: schema `false` admits no value")
        if not isinstance(node, dict):
            raise SchemaFillError(f"{where}: expected a schema object, got {type(node).__name__}")
        if "const" in node:
            value = node["const"]
            return lambda st: value
        if "enum" in node:
            return self._enum(node, where)
        if "$ref" in node:
            return self._ref(node["$ref"], where)
        if "allOf" in node:
            return self.compile(_merge_all_of(node, where), where)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self._union(node[key], f"{where}/{key}")
        types = node.get("type")
        if types is None:
            types = _infer_type(node)
        if isinstance(types, list):
            if not types:
                raise SchemaFillError(f"{where}: empty type list")
            branches = [self._typed(node, t, where) for t in types]
            terminal = [b for t, b in zip(types, branches) if t not in ("object", "array")]
            return _choose(branches, terminal)
        return self._typed(node, types, where)

    def _typed(self, node: dict[str, Any], type_: str, where: str) -> _Gen:
        if type_ == "object":
            return self._object(node, where)
        if type_ == "array":
            return self._array(node, where)
        if type_ == "string":
            return _string(node, where)
        if type_ == "integer":
            return _integer(node, where)
        if type_ == "number":
            return _number(node, where)
        if type_ == "boolean":
            return lambda st: st.rng.random() < 0.5
        if type_ == "null":
            return lambda st: None
        if type_ == "any":
            return _gen_any
        raise SchemaFillError(f"{where}: unsupported type {type_!r}")

    # -- composite keywords -----------------------------------------------------------

    def _enum(self, node: dict[str, Any], where: str) -> _Gen:
        values = node["enum"]
        if not isinstance(values, list) or not values:
            raise SchemaFillError(f"{where}/enum: must be a non-empty list")
        values = list(values)
        if len(values) == 1:
            only = values[0]
            return lambda st: only
        return lambda st: st.rng.choice(values)

    def _ref(self, ref: Any, where: str) -> _Gen:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaFillError(f"{where}/$ref: only local references (#/...) are supported, got {ref!r}")
        target = _resolve_pointer(self.root, ref, where)
        if ref not in self.refs:
            self.refs[ref] = _unresolved  # placeholder breaks compile-time cycles
            self.refs[ref] = self.compile(target, ref)
        refs = self.refs

        def gen(st: _State) -> Any:
            count = st.open_refs.get(ref, 0) + 1
            st.open_refs[ref] = count
            lean = count > _MAX_REF_REPEATS
            st.lean += lean
            st.depth += 1
            try:
                if st.depth > _MAX_DEPTH:
                    raise SchemaFillError(f"{ref}: schema recursion never terminates")
                return refs[ref](st)
            finally:
                st.depth -= 1
                st.lean -= lean
                st.open_refs[ref] = count - 1

        return gen

    def _union(self, options: Any, where: str) -> _Gen:
        if not isinstance(options, list) or not options:
            raise SchemaFillError(f"{where}: must be a non-empty list of schemas")
        branches = [self.compile(o, f"{where}/{i}") for i, o in enumerate(options)]
        # In lean mode prefer branches that cannot recurse (null, scalars, enums).
        terminal = [b for o, b in zip(options, branches) if _is_terminal(o)]
        return _choose(branches, terminal)

    def _object(self, node: dict[str, Any], where: str) -> _Gen:
        props = node.get("properties") or {}
        if not isinstance(props, dict):
            raise SchemaFillError(f"{where}/properties: must be an object")
        required = node.get("required") or []
        fields = [
            (name, self.compile(sub, f"{where}/properties/{name}"), name in required)
            for name, sub in props.items()
        ]
        extra = node.get("additionalProperties", True)
        extra_gen = None if extra is False else self.compile(extra, f"{where}/additionalProperties")
        undescribed = [r for r in required if r not in props]
        if undescribed and extra_gen is None:
            raise SchemaFillError(
                f"{where}: required {undescribed} not in properties and additionalProperties is false")
        names = frozenset(props) | frozenset(undescribed)
        names_schema = node.get("propertyNames", True)
        names_schema = {} if names_schema is True else names_schema
        if not isinstance(names_schema, dict):
            raise SchemaFillError(f"{where}/propertyNames: must be a schema object")
        key_gen = self.compile({"type": "string", **names_schema}, f"{where}/propertyNames")
        # How many extra keys to add. A dict-like schema (no named properties) gets a few
        # by default; an object with named properties only what minProperties demands.
        lo = int(node.get("minProperties", 0))
        hi = node.get("maxProperties")
        if not props and extra_gen is not None:
            want_lo = lo if (lo or hi is not None) else _DEFAULT_PROPERTIES[0]
            want_hi = int(hi) if hi is not None else max(want_lo, _DEFAULT_PROPERTIES[1])
        else:
            want_lo = want_hi = lo
        if want_lo > want_hi:
            raise SchemaFillError(f"{where}: minProperties {want_lo} > maxProperties {want_hi}")

        def gen(st: _State) -> dict[str, Any]:
            rng = st.rng
            out: dict[str, Any] = {}
            for name, sub, req in fields:
                if req or (not st.lean and rng.random() < 0.5):
                    out[name] = sub(st)
            if extra_gen is not None:  # always, when something is undescribed (checked above)
                for name in undescribed:
                    out[name] = extra_gen(st)
            want = lo if st.lean else rng.randint(want_lo, want_hi)
            if len(out) < want and extra_gen is not None:
                for _ in range(_TRIES * want):
                    key = key_gen(st)
                    if key not in out and key not in names:
                        out[key] = extra_gen(st)
                        if len(out) >= want:
                            break
            if len(out) < lo:
                raise SchemaFillError(f"{where}: cannot produce {lo} distinct properties")
            return out

        return gen

    def _array(self, node: dict[str, Any], where: str) -> _Gen:
        prefix = [self.compile(s, f"{where}/prefixItems/{i}") for i, s in enumerate(node.get("prefixItems") or [])]
        items = node.get("items", True)
        if isinstance(items, list):  # draft-4 tuple form
            prefix = [self.compile(s, f"{where}/items/{i}") for i, s in enumerate(items)]
            items = node.get("additionalItems", True)
        item_gen = None if items is False else self.compile(items, f"{where}/items")
        min_items, max_items = node.get("minItems"), node.get("maxItems")
        if prefix:
            # A tuple: every position by default, extra items only when asked for.
            lo = int(min_items) if min_items is not None else len(prefix)
            hi = int(max_items) if max_items is not None else max(lo, len(prefix))
        elif min_items is None and max_items is None:
            lo, hi = _DEFAULT_ITEMS
        else:
            lo = int(min_items or 0)
            hi = int(max_items) if max_items is not None else max(lo, _DEFAULT_ITEMS[1])
        if item_gen is None:
            hi = min(hi, len(prefix))
        if lo > hi:
            raise SchemaFillError(f"{where}: cannot have between {lo} and {hi} items")
        # Lean mode (deep recursion) uses only what the schema itself demands.
        lean_n = int(min_items) if min_items is not None else min(lo, len(prefix))
        unique = bool(node.get("uniqueItems"))

        def gen(st: _State) -> list[Any]:
            n = lean_n if st.lean else st.rng.randint(lo, hi)
            out = [p(st) for p in prefix[:n]]
            if item_gen is None or len(out) >= n:
                return out
            if not unique:
                out.extend(item_gen(st) for _ in range(n - len(out)))
                return out
            seen = {_canonical(v) for v in out}
            for _ in range(_TRIES * n):
                v = item_gen(st)
                key = _canonical(v)
                if key not in seen:
                    seen.add(key)
                    out.append(v)
                    if len(out) >= n:
                        return out
            if len(out) < (lean_n if st.lean else lo):
                raise SchemaFillError(f"{where}: cannot produce {n} unique items")
            return out

        return gen


# -- scalar generators ------------------------------------------------------------------


def _gen_any(st: _State) -> Any:
    return st.rng.choice(_WORDS)


def _unresolved(st: _State) -> Any:  # pragma: no cover - replaced before any call
    raise SchemaFillError("reference used before it was compiled")


def _choose(branches: list[_Gen], terminal: list[_Gen]) -> _Gen:
    if len(branches) == 1:
        return branches[0]
    lean_pick = (terminal or branches)[0]

    def gen(st: _State) -> Any:
        if st.lean:
            return lean_pick(st)
        return st.rng.choice(branches)(st)

    return gen


def _bounds(node: dict[str, Any], where: str) -> tuple[float | None, bool, float | None, bool]:
    """(low, low_exclusive, high, high_exclusive) from both draft-4 and draft-6+ forms."""
    lo, lo_ex, hi, hi_ex = node.get("minimum"), False, node.get("maximum"), False
    emin, emax = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if emin is True:
        lo_ex = True
    elif isinstance(emin, (int, float)) and not isinstance(emin, bool):
        if lo is None or emin >= lo:
            lo, lo_ex = emin, True
    if emax is True:
        hi_ex = True
    elif isinstance(emax, (int, float)) and not isinstance(emax, bool):
        if hi is None or emax <= hi:
            hi, hi_ex = emax, True
    for name, v in (("minimum", lo), ("maximum", hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise SchemaFillError(f"{where}/{name}: must be a number, got {v!r}")
    return lo, lo_ex, hi, hi_ex


def _integer(node: dict[str, Any], where: str) -> _Gen:
    lo_f, lo_ex, hi_f, hi_ex = _bounds(node, where)
    lo = None if lo_f is None else (math.floor(lo_f) + 1 if lo_ex else math.ceil(lo_f))
    hi = None if hi_f is None else (math.ceil(hi_f) - 1 if hi_ex else math.floor(hi_f))
    if lo is None:
        lo, hi = (0, _DEFAULT_INT) if hi is None else (hi - _DEFAULT_INT, hi)
    elif hi is None:
        hi = lo + _DEFAULT_INT
    step = node.get("multipleOf")
    if step is not None:
        if not isinstance(step, (int, float)) or isinstance(step, bool) or step <= 0:
            raise SchemaFillError(f"{where}/multipleOf: must be a positive number")
        if step != int(step):
            raise SchemaFillError(f"{where}/multipleOf: fractional step {step} for an integer")
        step = int(step)
        k_lo, k_hi = -(-lo // step), hi // step
        if k_lo > k_hi:
            raise SchemaFillError(f"{where}: no multiple of {step} in [{lo}, {hi}]")
        return lambda st: st.rng.randint(k_lo, k_hi) * step
    if lo > hi:
        raise SchemaFillError(f"{where}: empty integer range [{lo}, {hi}]")
    return lambda st: st.rng.randint(lo, hi)


def _number(node: dict[str, Any], where: str) -> _Gen:
    lo, lo_ex, hi, hi_ex = _bounds(node, where)
    width = (_DEFAULT_FLOAT[1] - _DEFAULT_FLOAT[0]) * 10
    if lo is None:
        lo, hi = _DEFAULT_FLOAT if hi is None else (hi - width, hi)
    elif hi is None:
        hi = lo + width
    lo, hi = float(lo), float(hi)
    if lo > hi or (lo == hi and (lo_ex or hi_ex)):
        raise SchemaFillError(f"{where}: empty number range")

    def inside(v: float) -> bool:
        return (v > lo if lo_ex else v >= lo) and (v < hi if hi_ex else v <= hi)

    step = node.get("multipleOf")
    if step is not None:
        if not isinstance(step, (int, float)) or isinstance(step, bool) or step <= 0:
            raise SchemaFillError(f"{where}/multipleOf: must be a positive number")
        k_lo, k_hi = math.ceil(lo / step), math.floor(hi / step)
        if k_lo > k_hi:
            raise SchemaFillError(f"{where}: no multiple of {step} in [{lo}, {hi}]")

        def gen_step(st: _State) -> float:
            # Float remainders are inexact (0.3 is not a float multiple of 0.1), so try
            # a few multiples and keep one whose remainder is exactly zero.
            for _ in range(_TRIES):
                v = st.rng.randint(k_lo, k_hi) * step
                if inside(v) and math.fmod(v, step) == 0:
                    return v
            for k in range(k_lo, min(k_hi, k_lo + 1000) + 1):
                v = k * step
                if inside(v) and math.fmod(v, step) == 0:
                    return v
            raise SchemaFillError(f"{where}: no exact float multiple of {step} found in range")

        return gen_step

    mid = (lo + hi) / 2

    def gen(st: _State) -> float:
        raw = st.rng.uniform(lo, hi)
        v = round(raw, 3)  # three decimals read like a judge's number, not noise
        if inside(v):
            return v
        return raw if inside(raw) else mid

    return gen


def _string(node: dict[str, Any], where: str) -> _Gen:
    lo = int(node.get("minLength", 0))
    hi = node.get("maxLength")
    hi = int(hi) if hi is not None else None
    if hi is not None and lo > hi:
        raise SchemaFillError(f"{where}: minLength {lo} > maxLength {hi}")
    base = _format_gen(node.get("format"), node.get("contentEncoding"))
    if base is None:
        base = _words_gen(lo, hi)
    pattern = node.get("pattern")
    if pattern is None:
        return base
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise SchemaFillError(f"{where}/pattern: invalid regular expression {pattern!r}: {e}") from None
    fallbacks = [s for s in _PATTERN_FALLBACKS if lo <= len(s) <= (hi if hi is not None else len(s))]

    def gen(st: _State) -> str:
        for _ in range(_TRIES):
            s = base(st)
            if rx.search(s):
                return s
        for s in fallbacks:
            if rx.search(s):
                return s
        raise SchemaFillError(f"{where}: cannot generate a string matching pattern {pattern!r}")

    return gen


# Tried when random words do not match a pattern: digits, letters, mixed case, codes.
_PATTERN_FALLBACKS = ("a", "abc", "A", "Abc", "ABC", "0", "1", "42", "a1", "A1", "abc-1", "abc_1",
                      "x@example.org", "https://example.org/a", "2024-01-01", "")


def _words_gen(lo: int, hi: int | None) -> Callable[[_State], str]:
    def gen(st: _State) -> str:
        rng = st.rng
        n_words = rng.randint(1, 3)
        words = [rng.choice(_WORDS) for _ in range(n_words)]
        s = " ".join(words)
        while len(s) < lo:
            s += " " + rng.choice(_WORDS)
        if hi is not None and len(s) > hi:
            s = s[:hi].rstrip()
        while len(s) < lo:  # rstrip may have cut below the minimum
            s += rng.choice(_LETTERS)
        return s

    return gen


def _format_gen(fmt: Any, encoding: Any) -> Callable[[_State], str] | None:
    if encoding == "base64":
        return lambda st: base64.b64encode(st.rng.randbytes(st.rng.randint(3, 12))).decode()
    if fmt is None:
        return None
    if fmt == "date":
        return lambda st: _date(st.rng)
    if fmt == "date-time":
        return lambda st: f"{_date(st.rng)}T{_time(st.rng)}Z"
    if fmt == "time":
        return lambda st: _time(st.rng)
    if fmt == "duration":
        return lambda st: f"PT{st.rng.randint(1, 59)}M"
    if fmt == "uuid":
        return lambda st: str(uuid.UUID(int=st.rng.getrandbits(128), version=4))
    if fmt == "email":
        return lambda st: f"{st.rng.choice(_WORDS)}@example.org"
    if fmt in ("uri", "url", "iri", "uri-reference"):
        return lambda st: f"https://example.org/{st.rng.choice(_WORDS)}"
    if fmt in ("hostname", "idn-hostname"):
        return lambda st: f"{st.rng.choice(_WORDS)}.example.org"
    if fmt == "ipv4":
        return lambda st: f"192.0.2.{st.rng.randint(1, 254)}"
    if fmt == "ipv6":
        return lambda st: f"2001:db8::{st.rng.randint(1, 0xFFFF):x}"
    if fmt == "decimal":
        return lambda st: f"{st.rng.randint(0, 999)}.{st.rng.randint(0, 99):02d}"
    return None  # unknown formats are annotations only: plain words are valid


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2015, 2025):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"


# -- helpers ----------------------------------------------------------------------------


def _infer_type(node: dict[str, Any]) -> str:
    for type_, keys in _TYPE_KEYS.items():
        if any(k in node for k in keys):
            return type_
    return "any"


def _is_terminal(option: Any) -> bool:
    """True for a branch that cannot lead back into a recursive reference."""
    if not isinstance(option, dict):
        return option is True
    if "$ref" in option or "anyOf" in option or "oneOf" in option or "allOf" in option:
        return False
    t = option.get("type") or _infer_type(option)
    return t not in ("object", "array") and not (isinstance(t, list) and {"object", "array"} & set(t))


def _merge_all_of(node: dict[str, Any], where: str) -> dict[str, Any]:
    """Shallow merge of ``allOf`` parts (enough for the 'extend a base object' idiom)."""
    parts = node["allOf"]
    if not isinstance(parts, list):
        raise SchemaFillError(f"{where}/allOf: must be a list")
    merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
    for part in parts:
        if not isinstance(part, dict):
            raise SchemaFillError(f"{where}/allOf: parts must be schema objects")
        if "$ref" in part:
            raise SchemaFillError(f"{where}/allOf: $ref inside allOf is not supported")
        for k, v in part.items():
            if k == "properties":
                merged["properties"] = {**merged.get("properties", {}), **v}
            elif k == "required":
                merged["required"] = [*merged.get("required", []), *v]
            else:
                merged.setdefault(k, v)
    return merged


def _resolve_pointer(root: Any, ref: str, where: str) -> Any:
    node = root
    if ref in ("#", "#/"):
        return node
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaFillError(f"{where}/$ref: cannot resolve {ref!r}")
    return node


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
