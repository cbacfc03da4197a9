"""RACE criteria: the shipped DeepResearch Bench file, bad files, weight arithmetic."""
from __future__ import annotations

import json

import pytest

from drscore.engine.methods.race.criteria import (
    DIMENSIONS,
    STATIC_CRITERIA,
    CriteriaError,
    Criterion,
    TaskCriteria,
    build_task_criteria,
    find_task_criteria,
    load_criteria,
    mean_dimension_weights,
    normalise,
    normalise_dimension_weights,
    parse_criteria_record,
    static_task_criteria,
    uniform_criterion_weights,
    uniform_dimension_weights,
)
from support.data import DRB as DATA, drb_report_ids

CRITERIA = DATA / "criteria.jsonl"


def _record(**over):
    rec = {
        "id": 7,
        "prompt": "p",
        "dimension_weight": {d: 0.25 for d in DIMENSIONS},
        "criterions": {d: [{"criterion": f"{d} c1", "explanation": "e", "weight": 1.0}] for d in DIMENSIONS},
    }
    rec.update(over)
    return rec


def test_shipped_criteria_parse():
    # The slice in tests/data keeps the criteria of the 21 tasks whose reports it keeps
    # (bench/full_data.py checks all 100).
    table = load_criteria(CRITERIA)
    assert set(table) == set(drb_report_ids()) and len(table) == 21
    counts = [tc.n_criteria for tc in table.values()]
    # METHODS.md: 21-31 criteria per task; the slice keeps task 45 (21) and task 26 (31).
    assert min(counts) == 21 and max(counts) == 31
    assert (table["45"].n_criteria, table["26"].n_criteria) == (21, 31)
    for tc in table.values():
        assert set(tc.criterions) == set(DIMENSIONS)
        assert abs(sum(tc.dimension_weight.values()) - 1.0) < 1e-9
        for cs in tc.criterions.values():
            assert cs and abs(sum(c.weight for c in cs) - 1.0) < 1e-6
            assert all(c.criterion.strip() and c.explanation for c in cs)
    # Task 1 as written in the file (line 1): weights are kept exactly.
    t1 = table["1"]
    assert t1.dimension_weight == {"comprehensiveness": 0.3, "insight": 0.36,
                                   "instruction_following": 0.2, "readability": 0.14}
    assert t1.criterions["comprehensiveness"][0].weight == 0.15
    # Prompts are the tasks' prompts.
    tasks = {str(json.loads(line)["id"]): json.loads(line)["prompt"] for line in open(DATA / "tasks.jsonl")}
    assert all(tasks[k] == tc.prompt for k, tc in table.items())


def test_shipped_records_with_extra_keys_are_accepted():
    # Some shipped tasks carry "comment", "aspect" or "rationale_for_weight" per criterion.
    raw = [json.loads(line) for line in open(CRITERIA)]
    extra = [r for r in raw if any(set(c) - {"criterion", "explanation", "weight"}
                                   for cs in r["criterions"].values() for c in cs)]
    assert extra, "the shipped file has criteria with extra keys"
    table = load_criteria(CRITERIA)
    for r in extra:
        tc = table[str(r["id"])]
        assert tc.n_criteria == sum(len(cs) for cs in r["criterions"].values())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps(_record(id=None)), "missing field 'id'"),
        (json.dumps(_record(dimension_weight={"insight": 1})), "dimension_weight lacks 'comprehensiveness'"),
        (json.dumps(_record(criterions={d: [] for d in DIMENSIONS})), "criterions.comprehensiveness must be"),
        (json.dumps(_record(dimension_weight={**{d: 0.25 for d in DIMENSIONS}, "insight": -1})),
         "dimension_weight.insight: weight must be a non-negative number"),
        (json.dumps(_record(criterions={d: [{"criterion": " ", "weight": 1}] for d in DIMENSIONS})),
         "criterions.comprehensiveness[0]: missing or empty 'criterion'"),
        (json.dumps(_record(criterions={d: [{"criterion": "x", "weight": "heavy"}] for d in DIMENSIONS})),
         "criterions.comprehensiveness[0]: weight must be"),
    ],
)
def test_bad_criteria_line_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "crit.jsonl"
    path.write_text(json.dumps(_record(id=1)) + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CriteriaError) as err:
        load_criteria(path)
    assert f"{path}:3" in str(err.value)
    assert message in str(err.value)


def test_duplicate_missing_and_empty_criteria_files(tmp_path):
    dup = tmp_path / "dup.jsonl"
    dup.write_text(json.dumps(_record(id=1)) + "\n" + json.dumps(_record(id="1")) + "\n", encoding="utf-8")
    with pytest.raises(CriteriaError, match=r"dup.jsonl:2: duplicate task id '1'"):
        load_criteria(dup)
    with pytest.raises(CriteriaError, match="criteria file not found"):
        load_criteria(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(CriteriaError, match="no criteria records"):
        load_criteria(empty)


def test_normalise():
    assert normalise([2, 1, 1]) == [0.5, 0.25, 0.25]
    # All zero -> uniform; negatives and NaN count as zero.
    assert normalise([0, 0]) == [0.5, 0.5]
    assert normalise([3, -1, float("nan"), 1]) == [0.75, 0.0, 0.0, 0.25]
    assert normalise([]) == []
    assert normalise_dimension_weights({"insight": 3, "readability": 1}) == {
        "comprehensiveness": 0.0, "insight": 0.75, "instruction_following": 0.0, "readability": 0.25}


def test_mean_dimension_weights_renormalises_each_sample_first():
    samples = [
        {"comprehensiveness": 0.4, "insight": 0.3, "instruction_following": 0.2, "readability": 0.1},
        {"comprehensiveness": 40, "insight": 30, "instruction_following": 20, "readability": 10},  # percent
        {"comprehensiveness": 0.1, "insight": 0.2, "instruction_following": 0.3, "readability": 0.4},
    ]
    got = mean_dimension_weights(samples)
    # (0.4+0.4+0.1)/3 = 0.3; (0.3+0.3+0.2)/3 = 0.26667; (0.2+0.2+0.3)/3 = 0.23333; (0.1+0.1+0.4)/3 = 0.2
    assert got == pytest.approx({"comprehensiveness": 0.3, "insight": 0.8 / 3,
                                 "instruction_following": 0.7 / 3, "readability": 0.2})
    with pytest.raises(ValueError):
        mean_dimension_weights([])


def test_build_task_criteria_renormalises_generated_weights():
    crits = {d: [Criterion(f"{d} a", "", 3.0), Criterion(f"{d} b", "", 1.0)] for d in DIMENSIONS}
    tc = build_task_criteria("9", "p", {"comprehensiveness": 2, "insight": 2, "instruction_following": 1,
                                        "readability": 0}, crits)
    assert tc.dimension_weight == {"comprehensiveness": 0.4, "insight": 0.4,
                                   "instruction_following": 0.2, "readability": 0.0}
    assert [c.weight for c in tc.criterions["insight"]] == [0.75, 0.25]
    assert tc.n_criteria == 8


def test_uniform_variants():
    tc = load_criteria(CRITERIA)["51"]
    flat_dims = uniform_dimension_weights(tc)
    assert flat_dims.dimension_weight == {d: 0.25 for d in DIMENSIONS}
    assert flat_dims.criterions == tc.criterions
    flat_crit = uniform_criterion_weights(tc)
    assert flat_crit.dimension_weight == tc.dimension_weight
    for d in DIMENSIONS:
        n = len(tc.criterions[d])
        assert [c.weight for c in flat_crit.criterions[d]] == [1.0 / n] * n
        assert [c.criterion for c in flat_crit.criterions[d]] == [c.criterion for c in tc.criterions[d]]


def test_static_criteria_are_well_formed():
    for d in DIMENSIONS:
        cs = STATIC_CRITERIA[d]
        assert len(cs) >= 4
        assert abs(sum(c.weight for c in cs) - 1.0) < 1e-9
        assert len({c.criterion.lower() for c in cs}) == len(cs)
    tc = static_task_criteria("3", "q", {d: 1 for d in DIMENSIONS})
    assert tc.dimension_weight == {d: 0.25 for d in DIMENSIONS}
    assert tc.n_criteria == sum(len(STATIC_CRITERIA[d]) for d in DIMENSIONS)


def test_find_task_criteria_by_id_then_prompt():
    table = {"1": parse_criteria_record(_record(id=1, prompt="first task")),
             "2": parse_criteria_record(_record(id=2, prompt="second task"))}
    assert find_task_criteria(table, "2", "whatever").task_id == "2"
    assert find_task_criteria(table, "x9", "  second task ").task_id == "2"
    assert find_task_criteria(table, "x9", "unknown") is None
    assert find_task_criteria(table, "x9", "") is None
    assert isinstance(table["1"], TaskCriteria)
