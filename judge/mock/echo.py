"""The mock judge's answers name what the request named: criterion names, statement
numbers and item keys.

A schema-valid random answer names criteria and statements the client never sent, so a
method that matches the answer back to its own list (RACE by criterion name, FACT by
statement number) finds nothing in it: every row has coverage 0 and nobody is ranked. This
module rewrites the generated answer so those fields repeat what the request listed; every
other field keeps its random value, so the scores still mean nothing
(docs/mock-judge.md):

* **A list in the prompt.** A JSON object in a tagged block of the prompt
  (``<criteria>{"insight": [{"criterion": "Depth", ...}]}</criteria>``) with the same
  property as an array of the answer whose items have a string field of the same name:
  one item per listed entry, that field copied, in order.
* **Numbered lines.** A tagged block whose lines are all numbered ``[1] ... [n]``
  (``<statements>``): an array of objects with an integer field gets one item per number;
  an array of integers (a ``keep`` list) gets every number.
* **Enums in the response schema.** An array whose items have a key-like field
  (:data:`KEY_FIELDS`) with an ``enum``: one item per member; an object whose
  ``propertyNames`` is an ``enum``: every member as a key.

The plan (which arrays of the answer to rewrite, and how) is worked out once per schema;
a schema with nothing to echo costs one cache lookup per request.
"""
from __future__ import annotations

import functools
import re
from typing import Any

import orjson

# Fields that name an item rather than judge it (an enum on "verdict" is a label to pick,
# not a list to cover).
KEY_FIELDS = frozenset({"criterion", "criteria", "name", "item", "key", "id", "statement", "question",
                        "rubric_item", "checklist_item", "dimension", "aspect", "topic"})

# A block is a tag alone on its line, up to its closing tag on a line of its own (how the
# templates lay out <criteria>, <statements>, <page ...>): found without scanning a whole
# report for every "<" it contains.
_OPEN = re.compile(r"^<([A-Za-z_][\w-]*)(?:\s[^>\n]*)?>[ \t]*$", re.MULTILINE)
_NUMBERED = re.compile(r"^\[(\d+)\]\s")


class _Step:
    """One array (or object) of the answer to rewrite: where it is (property path from the
    root) and how."""

    __slots__ = ("path", "how", "text_fields", "int_field", "enum_field", "members")

    def __init__(self, path: tuple[str, ...], how: str, *, text_fields: tuple[str, ...] = (),
                 int_field: str = "", enum_field: str = "", members: tuple[Any, ...] = ()) -> None:
        self.path, self.how = path, how
        self.text_fields, self.int_field = text_fields, int_field
        self.enum_field, self.members = enum_field, members


def echo(value: Any, schema_json: bytes, texts: list[str]) -> Any:
    """``value`` (an instance of the schema) with its name, number and key fields
    repeating what ``texts`` (the prompt) and the schema list."""
    steps = _plan(schema_json)
    if not steps or not isinstance(value, dict):
        return value
    blocks = _blocks(texts) if any(s.how in ("list", "numbers", "number_array") for s in steps) else []
    for step in steps:
        _apply(value, step, blocks)
    return value


# -- the plan, per schema ---------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _plan(schema_json: bytes) -> tuple[_Step, ...]:
    try:
        root = orjson.loads(schema_json)
    except orjson.JSONDecodeError:
        return ()
    if not isinstance(root, dict):
        return ()
    steps: list[_Step] = []
    _walk(root, root, (), steps, depth=0)
    return tuple(steps)


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    for _ in range(16):  # a chain of $refs, never a cycle
        if not isinstance(node, dict) or "$ref" not in node:
            return node
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        node = target
    return node


def _walk(node: Any, root: dict[str, Any], path: tuple[str, ...], steps: list[_Step], depth: int) -> None:
    node = _resolve(node, root)
    if depth > 8 or not isinstance(node, dict):
        return
    names = _resolve(node.get("propertyNames"), root)
    if isinstance(names, dict) and isinstance(names.get("enum"), list) and names["enum"]:
        steps.append(_Step(path, "enum_keys", members=tuple(names["enum"])))
    for prop, sub in (node.get("properties") or {}).items():
        sub = _resolve(sub, root)
        if not isinstance(sub, dict):
            continue
        here = (*path, prop)
        if sub.get("type") == "array":
            _array_step(sub, root, here, steps)
        _walk(sub, root, here, steps, depth + 1)


def _array_step(array: dict[str, Any], root: dict[str, Any], path: tuple[str, ...], steps: list[_Step]) -> None:
    items = _resolve(array.get("items"), root)
    if not isinstance(items, dict):
        return
    if items.get("type") == "integer":
        steps.append(_Step(path, "number_array"))
        return
    props = items.get("properties")
    if not isinstance(props, dict):
        return
    resolved = {name: _resolve(p, root) for name, p in props.items()}
    for name, p in resolved.items():
        if isinstance(p, dict) and isinstance(p.get("enum"), list) and name.lower() in KEY_FIELDS:
            steps.append(_Step(path, "enum", enum_field=name, members=tuple(p["enum"])))
            return
    text_fields = tuple(n for n, p in resolved.items() if isinstance(p, dict) and p.get("type") == "string"
                        and "enum" not in p and "const" not in p)
    if text_fields:
        steps.append(_Step(path, "list", text_fields=text_fields))
    ints = [n for n, p in resolved.items() if isinstance(p, dict) and p.get("type") == "integer"]
    if ints:
        key_like = [n for n in ints if n.lower() in KEY_FIELDS]
        steps.append(_Step(path, "numbers", int_field=(key_like or ints)[0]))


# -- the prompt -------------------------------------------------------------------------------

class _Block:
    __slots__ = ("json", "numbers")

    def __init__(self, parsed: Any, numbers: list[int]) -> None:
        self.json, self.numbers = parsed, numbers


def _blocks(texts: list[str]) -> list[_Block]:
    out: list[_Block] = []
    for text in texts:
        pos = 0
        while True:
            m = _OPEN.search(text, pos)
            if m is None:
                break
            close = text.find(f"\n</{m.group(1)}>", m.end())
            if close < 0:
                pos = m.end()
                continue
            body, pos = text[m.end():close].strip(), close
            parsed = None
            if body[:1] in ("{", "["):
                try:
                    parsed = orjson.loads(body)
                except orjson.JSONDecodeError:
                    parsed = None
            out.append(_Block(parsed, _numbered(body)))
    return out


def _numbered(body: str) -> list[int]:
    """``[1, 2, ..., n]`` when every non-empty line of ``body`` is numbered ``[k]`` in order."""
    numbers: list[int] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        m = _NUMBERED.match(line)
        if m is None or int(m.group(1)) != len(numbers) + 1:
            return []
        numbers.append(len(numbers) + 1)
    return numbers


def _listed(doc: Any, prop: str, fields: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """``(field, values)``: the first list under key ``prop`` in ``doc`` whose entries are
    objects with a string ``field`` (depth-first)."""
    if isinstance(doc, dict):
        entries = doc.get(prop)
        if isinstance(entries, list) and entries and all(isinstance(e, dict) for e in entries):
            for field in fields:
                if all(isinstance(e.get(field), str) for e in entries):
                    return field, [e[field] for e in entries]
        children = list(doc.values())
    elif isinstance(doc, list):
        children = doc
    else:
        return None
    for child in children:
        found = _listed(child, prop, fields)
        if found is not None:
            return found
    return None


# -- rewriting --------------------------------------------------------------------------------

def _apply(value: dict[str, Any], step: _Step, blocks: list[_Block]) -> None:
    parent: Any = value
    for part in step.path[:-1]:
        parent = parent.get(part) if isinstance(parent, dict) else None
    last = step.path[-1] if step.path else None
    target = parent.get(last) if isinstance(parent, dict) and last is not None else value
    if step.how == "enum_keys":
        if isinstance(target, dict) and target:
            template = list(target.values())
            filled = {k: template[i % len(template)] for i, k in enumerate(step.members)}
            target.clear()
            target.update(filled)
        return
    if not isinstance(target, list) or not isinstance(parent, dict) or last is None:
        return
    if step.how == "number_array":
        numbers = next((b.numbers for b in reversed(blocks) if b.numbers), None)
        if numbers:
            parent[last] = list(numbers)
        return
    examples = [t for t in target if isinstance(t, dict)]
    if not examples:
        return
    if step.how == "enum":
        keys: list[Any] = list(step.members)
        field = step.enum_field
    elif step.how == "numbers":
        found_numbers = next((b.numbers for b in reversed(blocks) if b.numbers), None)
        if not found_numbers:
            return
        keys, field = list(found_numbers), step.int_field
    else:
        found = next((hit for b in blocks if b.json is not None
                      for hit in [_listed(b.json, last, step.text_fields)] if hit is not None), None)
        if found is None:
            return
        field, keys = found
    parent[last] = [{**examples[i % len(examples)], field: key} for i, key in enumerate(keys)]
