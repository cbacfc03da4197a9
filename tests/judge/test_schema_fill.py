"""judge.schema_fill: generated values decode into the Structs whose schema produced them."""
from __future__ import annotations

import enum
import json
import re
from typing import Annotated, Literal, Union

import msgspec
import pytest

from drscore.judge.mock.schema_fill import SchemaFillError, compile_schema, fill
from support.data import DATA

SEEDS = [i.to_bytes(4, "big") for i in range(300)]


class PairVerdict(msgspec.Struct, forbid_unknown_fields=True):
    redundant: bool
    overlap: Annotated[int, msgspec.Meta(ge=0, le=4)]
    confidence: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    label: Literal["same", "overlap", "distinct"]
    reason: Annotated[str, msgspec.Meta(min_length=5, max_length=40)]


class Claim(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    support: Literal["supported", "partial", "unsupported"]
    citations: Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=30)]], msgspec.Meta(max_length=3)]


class ClaimList(msgspec.Struct, forbid_unknown_fields=True):
    claims: Annotated[list[Claim], msgspec.Meta(min_length=1, max_length=6)]
    best: Claim | None
    note: str | None
    ratio: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)]


class Mood(enum.Enum):
    GOOD = "good"
    BAD = "bad"


class A(msgspec.Struct, tag=True):
    x: Annotated[int, msgspec.Meta(ge=-3, le=-1)]


class B(msgspec.Struct, tag="bee"):
    y: Annotated[str, msgspec.Meta(max_length=4)]


class Node(msgspec.Struct):
    value: int
    children: list["Node"]
    next: Union["Node", None]


class Everything(msgspec.Struct, forbid_unknown_fields=True):
    tagged: Union[A, B]
    mood: Mood
    pair: tuple[int, str]
    tags: set[Literal["a", "b", "c"]]
    scores: Annotated[dict[Annotated[str, msgspec.Meta(min_length=2)], int], msgspec.Meta(min_length=1, max_length=2)]
    step: Annotated[int, msgspec.Meta(multiple_of=5, ge=1, le=30)]
    half: Annotated[float, msgspec.Meta(multiple_of=0.5, ge=0, le=3)]
    tree: Node
    either: int | str | None
    many: Annotated[list[int], msgspec.Meta(min_length=5)]
    when: __import__("datetime").date
    ident: __import__("uuid").UUID
    blob: bytes
    lower: Annotated[str, msgspec.Meta(pattern="^[a-z]+$")]
    optional_with_default: int = 3


@pytest.mark.parametrize("struct", [PairVerdict, Claim, ClaimList, Everything])
def test_values_decode_into_their_struct(struct: type) -> None:
    filler = compile_schema(msgspec.json.schema(struct))
    for seed in SEEDS:
        value = filler(seed)
        # msgspec enforces every Meta bound, Literal, tag, tuple length and unknown field.
        msgspec.json.decode(json.dumps(value), type=struct)


def test_same_seed_same_value_and_seeds_vary() -> None:
    schema = msgspec.json.schema(ClaimList)
    assert fill(schema, b"seed-1") == fill(schema, b"seed-1")
    values = {json.dumps(fill(schema, seed)) for seed in SEEDS[:50]}
    assert len(values) == 50
    labels = {fill(msgspec.json.schema(PairVerdict), seed)["label"] for seed in SEEDS[:50]}
    assert labels == {"same", "overlap", "distinct"}


def test_optional_branches_both_taken() -> None:
    schema = msgspec.json.schema(ClaimList)
    best = [fill(schema, seed)["best"] for seed in SEEDS[:60]]
    assert any(b is None for b in best) and any(b is not None for b in best)


def test_exclusive_integer_bounds_hand_computed() -> None:
    # (0, 3) exclusive on both ends leaves exactly the integers 1 and 2.
    schema = {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}
    assert {fill(schema, seed) for seed in SEEDS[:100]} == {1, 2}
    # Fractional bounds: [0.5, 2.5] holds 1 and 2; exclusive 1.0 then leaves only 2.
    schema = {"type": "integer", "minimum": 0.5, "maximum": 2.5, "exclusiveMinimum": 1.0}
    assert {fill(schema, seed) for seed in SEEDS[:50]} == {2}


def test_exclusive_number_bounds_never_touched() -> None:
    schema = {"type": "number", "exclusiveMinimum": 0.999, "exclusiveMaximum": 1.001}
    for seed in SEEDS:
        v = fill(schema, seed)
        assert 0.999 < v < 1.001


def test_default_array_has_one_to_four_items() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    lengths = {len(fill(schema, seed)) for seed in SEEDS[:100]}
    assert lengths == {1, 2, 3, 4}


def test_string_lengths_respected() -> None:
    for lo, hi in [(0, 0), (1, 1), (3, 5), (30, 31), (12, None)]:
        schema = {"type": "string", "minLength": lo} | ({"maxLength": hi} if hi is not None else {})
        for seed in SEEDS[:50]:
            s = fill(schema, seed)
            assert lo <= len(s) and (hi is None or len(s) <= hi), (lo, hi, s)


def test_words_look_like_prose() -> None:
    s = fill({"type": "string"}, b"x")
    assert re.fullmatch(r"[a-z]+( [a-z]+){0,2}", s)


def test_type_lists_const_enum_and_root_ref() -> None:
    schema = {
        "$ref": "#/$defs/Root",
        "$defs": {"Root": {
            "type": "object",
            "properties": {
                "kind": {"const": "verdict"},
                "grade": {"enum": [0, 1, 2]},
                "maybe": {"type": ["integer", "null"], "minimum": 7, "maximum": 7},
                "extra": {"type": "string"},
            },
            "required": ["kind", "grade", "maybe"],
            "additionalProperties": False,
        }},
    }
    values = [fill(schema, seed) for seed in SEEDS[:80]]
    assert all(v["kind"] == "verdict" and v["grade"] in (0, 1, 2) for v in values)
    assert {v["maybe"] for v in values} == {7, None}
    # Optional "extra" appears in some values but not all; nothing else ever appears.
    assert 0 < sum("extra" in v for v in values) < len(values)
    assert all(set(v) <= {"kind", "grade", "maybe", "extra"} for v in values)


def test_one_of_picks_a_single_branch() -> None:
    schema = {"oneOf": [{"type": "boolean"}, {"type": "string", "maxLength": 3}]}
    values = {type(fill(schema, seed)) for seed in SEEDS[:40]}
    assert values == {bool, str}


def test_recursive_schema_terminates() -> None:
    schema = msgspec.json.schema(Node)
    for seed in SEEDS[:50]:
        tree = msgspec.json.decode(json.dumps(fill(schema, seed)), type=Node)
        depth, stack = 0, [(tree, 1)]
        while stack:
            node, d = stack.pop()
            depth = max(depth, d)
            stack.extend((c, d + 1) for c in node.children)
            if node.next is not None:
                stack.append((node.next, d + 1))
        # Each $ref may be open twice on a path before generation goes lean, so a
        # tree is at most 3 levels deep (root, child, grandchild with no kids).
        assert depth <= 3


def test_impossible_recursion_is_a_clear_error() -> None:
    schema = {"$ref": "#/$defs/Loop", "$defs": {"Loop": {
        "type": "object", "properties": {"again": {"$ref": "#/$defs/Loop"}}, "required": ["again"]}}}
    with pytest.raises(SchemaFillError, match="never terminates"):
        fill(schema, b"s")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$ref": "#/$defs/Missing", "$defs": {}}, "cannot resolve '#/\\$defs/Missing'"),
        ({"$ref": "https://example.org/s.json"}, "only local references"),
        ({"type": "array", "minItems": 3, "maxItems": 2}, "between 3 and 2 items"),
        ({"type": "string", "minLength": 4, "maxLength": 2}, "minLength 4 > maxLength 2"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "empty integer range"),
        ({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5}, "no multiple of 5"),
        ({"enum": []}, "non-empty list"),
        ({"type": "tuple"}, "unsupported type 'tuple'"),
        ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "properties/a"),
        ([1, 2], "must be an object or a boolean"),
    ],
)
def test_bad_schemas_are_named_errors(schema: object, message: str) -> None:
    with pytest.raises(SchemaFillError, match=message):
        compile_schema(schema)(b"s")  # type: ignore[arg-type]


def test_unique_items_exhaust_small_enum() -> None:
    schema = {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2, "maxItems": 2, "uniqueItems": True}
    assert {tuple(sorted(fill(schema, seed))) for seed in SEEDS[:20]} == {("x", "y")}
    schema["minItems"] = schema["maxItems"] = 3  # only two distinct values exist
    with pytest.raises(SchemaFillError, match="unique items"):
        fill(schema, b"s")


def test_real_race_criteria_schema() -> None:
    """A per-criterion scoring schema built from the DeepResearch Bench criteria file."""
    with open(DATA / "drb" / "criteria.jsonl", encoding="utf-8") as f:
        record = json.loads(f.readline())
    criteria = [c["criterion"] for c in record["criterions"]["comprehensiveness"]]
    assert len(criteria) >= 3
    schema = {
        "type": "object",
        "properties": {
            "scores": {
                "type": "array",
                "minItems": len(criteria),
                "maxItems": len(criteria),
                "prefixItems": [
                    {"type": "object",
                     "properties": {"criterion": {"const": c},
                                    "score": {"type": "integer", "minimum": 0, "maximum": 10}},
                     "required": ["criterion", "score"], "additionalProperties": False}
                    for c in criteria
                ],
                "items": False,
            },
        },
        "required": ["scores"],
        "additionalProperties": False,
    }
    for seed in SEEDS[:20]:
        value = fill(schema, seed)
        assert [s["criterion"] for s in value["scores"]] == criteria
        assert all(0 <= s["score"] <= 10 for s in value["scores"])
