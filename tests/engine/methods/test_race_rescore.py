"""RACE aggregation of stored judge outputs: hand-computed cases, the benchmark's
matching rules, and the ``drscore race rescore`` command."""
from __future__ import annotations

import io
import json

import pytest

from drscore.cli import main
from drscore.commands import race as race_cmd
from drscore.engine.methods.race.criteria import DIMENSIONS, Criterion, TaskCriteria, load_criteria
from drscore.engine.methods.race.rescore import (
    aggregate,
    benchmark_row,
    is_pointwise,
    match_weight,
    parse_judgement_line,
    suite_means,
)
from support.data import DRB as DATA

CRITERIA = DATA / "criteria.jsonl"


def _tc(dim_weights, crits) -> TaskCriteria:
    return TaskCriteria(
        task_id="t", prompt="p", dimension_weight=dim_weights,
        criterions={d: tuple(Criterion(c, "", w) for c, w in crits[d]) for d in DIMENSIONS},
    )


# Four dimensions, small criteria sets (used by several tests).
HAND = _tc(
    {"comprehensiveness": 0.4, "insight": 0.3, "instruction_following": 0.2, "readability": 0.1},
    {
        "comprehensiveness": [("A", 0.6), ("B", 0.4)],
        "insight": [("C", 1.0)],
        "instruction_following": [("D", 0.5), ("E", 0.5)],
        "readability": [("F", 1.0)],
    },
)


def _pair(c, t, r):
    return {"criterion": c, "analysis": "...", "article_1_score": t, "article_2_score": r}


HAND_JUDGEMENT = {
    "comprehensiveness": [_pair("A", 8, 6), _pair("B", 5, 5)],
    "insight": [_pair("C", 4, 8)],
    "instruction_following": [_pair("D", 10, 5), _pair("E", 6, 5)],
    "readability": [_pair("F", 7, 7)],
}


def test_relative_score_hand_computed():
    agg = aggregate(HAND_JUDGEMENT, HAND)
    # S_comp: t = 0.6*8 + 0.4*5 = 6.8, r = 0.6*6 + 0.4*5 = 5.6; S_ins: 4 vs 8;
    # S_inst: t = (10+6)/2 = 8, r = 5; S_read: 7 vs 7.
    assert agg.target_dims == pytest.approx({"comprehensiveness": 6.8, "insight": 4.0,
                                             "instruction_following": 8.0, "readability": 7.0})
    assert agg.reference_dims == pytest.approx({"comprehensiveness": 5.6, "insight": 8.0,
                                                "instruction_following": 5.0, "readability": 7.0})
    # T = 0.4*6.8 + 0.3*4 + 0.2*8 + 0.1*7 = 2.72 + 1.2 + 1.6 + 0.7 = 6.22
    # R = 0.4*5.6 + 0.3*8 + 0.2*5 + 0.1*7 = 2.24 + 2.4 + 1.0 + 0.7 = 6.34
    assert agg.target_total == pytest.approx(6.22)
    assert agg.reference_total == pytest.approx(6.34)
    assert agg.overall == pytest.approx(6.22 / 12.56)  # 0.495223
    assert agg.relative_dims == pytest.approx({"comprehensiveness": 6.8 / 12.4, "insight": 4 / 12,
                                               "instruction_following": 8 / 13, "readability": 0.5})
    assert (agg.judged, agg.matched, agg.expected) == (6, 6, 6)
    assert agg.matches == {"exact": 6, "casefold": 0, "substring": 0, "mean": 0}
    assert not agg.pointwise and not agg.warnings
    row = benchmark_row(3, "p", agg)
    assert list(row) == ["id", "prompt", *DIMENSIONS, "overall_score"]
    assert row["id"] == 3 and row["overall_score"] == pytest.approx(0.4952229)


def test_match_weight_order_exact_casefold_substring_mean():
    weights = {"Data coverage": 0.7, "Source quality": 0.2, "Timeliness of data": 0.1}
    assert match_weight("  Data coverage \n", weights) == (0.7, "exact", "Data coverage")
    assert match_weight("DATA COVERAGE", weights) == (0.7, "casefold", "Data coverage")
    # Substring either way, first criterion in file order wins: "data" is in two keys.
    assert match_weight("data", weights) == (0.7, "substring", "Data coverage")
    assert match_weight("Source quality and reliability", weights) == (0.2, "substring", "Source quality")
    # Unmatched: the dimension's mean weight, (0.7 + 0.2 + 0.1) / 3.
    assert match_weight("Readable tables", weights) == (pytest.approx(1 / 3), "mean", None)


def test_fuzzy_matches_and_skipped_criteria_change_the_denominator():
    tc = _tc({d: 0.25 for d in DIMENSIONS},
             {d: [("Data coverage", 0.7), ("Source quality", 0.3)] for d in DIMENSIONS})
    judgement = {d: [] for d in DIMENSIONS}
    judgement["comprehensiveness"] = [
        _pair("data COVERAGE", 10, 0),   # casefold -> 0.7
        _pair("quality", 5, 0),          # substring -> 0.3
        _pair("Timeliness", 2, 0),       # unmatched -> mean weight 0.5
    ]
    judgement["insight"] = [_pair("Data coverage", 8, 4)]  # "Source quality" skipped by the judge
    agg = aggregate(judgement, tc)
    # comp: (0.7*10 + 0.3*5 + 0.5*2) / (0.7 + 0.3 + 0.5) = 9.5 / 1.5
    assert agg.target_dims["comprehensiveness"] == pytest.approx(9.5 / 1.5)
    assert agg.relative_dims["comprehensiveness"] == pytest.approx(1.0)  # reference scored 0
    # insight: only the judged criterion counts: 0.7*8 / 0.7 = 8 vs 4.
    assert agg.target_dims["insight"] == pytest.approx(8.0)
    assert agg.relative_dims["insight"] == pytest.approx(8 / 12)
    # Empty lists: no weight -> 0 / 0 -> 0, as in the benchmark.
    assert agg.relative_dims["readability"] == 0.0
    assert agg.matches == {"exact": 1, "casefold": 1, "substring": 1, "mean": 1}
    # Four items used; three distinct criteria matched ("Timeliness" matched none).
    assert (agg.judged, agg.matched, agg.expected) == (4, 3, 8)
    assert any("unmatched, mean weight used" in w for w in agg.warnings)


def test_missing_dimension_bad_scores_and_unknown_keys():
    judgement = dict(HAND_JUDGEMENT)
    del judgement["readability"]
    judgement["instruction_following"] = [_pair("D", "10", 5), _pair("E", "high", 5),
                                          {"criterion": "E", "article_1_score": True, "article_2_score": 1}]
    judgement["notes"] = "free text the judge added"
    judgement["extra_dimension"] = [_pair("X", 1, 1)]
    agg = aggregate(judgement, HAND)
    # inst: only D counts ("10" is numeric text; "high" and a boolean are skipped): 10 vs 5.
    assert agg.target_dims["instruction_following"] == 10.0
    assert agg.relative_dims["readability"] == 0.0 and "readability" not in agg.target_dims
    # T = 0.4*6.8 + 0.3*4 + 0.2*10 = 5.92; R = 0.4*5.6 + 0.3*8 + 0.2*5 = 5.64
    assert agg.overall == pytest.approx(5.92 / 11.56)
    assert any("extra_dimension: unknown dimension" in w for w in agg.warnings)
    assert any("readability: not in judgement" in w for w in agg.warnings)
    assert sum("is not a number" in w for w in agg.warnings) == 2


def test_item_without_reference_score_counts_for_target_only():
    judgement = dict(HAND_JUDGEMENT)
    judgement["comprehensiveness"] = [_pair("A", 8, 6), {"criterion": "B", "article_1_score": 5}]
    agg = aggregate(judgement, HAND)
    # t = (0.6*8 + 0.4*5) / 1.0 = 6.8; r = 0.6*6 / 1.0 = 3.6 (B's weight stays in the denominator)
    assert agg.target_dims["comprehensiveness"] == pytest.approx(6.8)
    assert agg.reference_dims["comprehensiveness"] == pytest.approx(3.6)
    assert any("missing article_2_score" in w for w in agg.warnings)


def test_reverse_position_swaps_back():
    swapped = {d: [_pair(i["criterion"], i["article_2_score"], i["article_1_score"]) for i in items]
               for d, items in HAND_JUDGEMENT.items()}
    assert aggregate(swapped, HAND, reverse=True).overall == pytest.approx(aggregate(HAND_JUDGEMENT, HAND).overall)
    assert aggregate(swapped, HAND).overall == pytest.approx(6.34 / 12.56)


def test_pointwise_reports_absolute_scores():
    judgement = {d: [{"criterion": i["criterion"], "target_score": i["article_1_score"]} for i in items]
                 for d, items in HAND_JUDGEMENT.items()}
    assert is_pointwise(judgement) and not is_pointwise(HAND_JUDGEMENT)
    agg = aggregate(judgement, HAND)
    assert agg.pointwise and agg.reference_dims == {} and agg.reference_total == 0.0
    # S_int = 6.22 (see the hand-computed case); overall = 6.22 / (10 * 1.0)
    assert agg.overall == pytest.approx(0.622)
    assert agg.relative_dims == pytest.approx({"comprehensiveness": 0.68, "insight": 0.4,
                                               "instruction_following": 0.8, "readability": 0.7})


def _independent_benchmark_aggregate(judgement, record):
    """A line-by-line transcription of the benchmark's published rules, kept separate from
    the implementation: exact -> lower-case equality -> substring -> mean weight,
    weight-normalised dimension averages, raw dimension weights, t/(t+r)."""
    totals = {"t": 0.0, "r": 0.0}
    rel = {}
    for dim, items in judgement.items():
        wmap = {c["criterion"]: c["weight"] for c in record["criterions"][dim]}
        ts = rs = ws = 0.0
        for it in items:
            text = it["criterion"].strip()
            w = wmap.get(text)
            if w is None:
                w = next((v for k, v in wmap.items() if k.lower() == text.lower()), None)
            if w is None:
                w = next((v for k, v in wmap.items() if text.lower() in k.lower() or k.lower() in text.lower()), None)
            if w is None:
                w = sum(wmap.values()) / len(wmap)
            ts += it["article_1_score"] * w
            rs += it["article_2_score"] * w
            ws += w
        t, r = ts / ws, rs / ws
        rel[dim] = t / (t + r)
        totals["t"] += t * record["dimension_weight"][dim]
        totals["r"] += r * record["dimension_weight"][dim]
    return rel, totals["t"] / (totals["t"] + totals["r"])


def _synthetic_judgement(record, tid):
    """Judge output for a real criteria record: every criterion scored, with the texts
    perturbed the ways real judges do (case, whitespace, truncation, paraphrase)."""
    out = {}
    for dim in DIMENSIONS:
        rows = []
        for k, c in enumerate(record["criterions"][dim]):
            text = c["criterion"]
            if k % 4 == 1:
                text = f"  {text.upper()} "
            elif k % 4 == 2:
                text = text[: max(2, len(text) // 2)]
            elif k % 4 == 3 and k > 5:
                text = "an entirely different wording"
            rows.append(_pair(text, (tid * 7 + k * 3) % 11, (tid * 5 + k * 2) % 9 + 1))
        out[dim] = rows
    return out


def test_agrees_with_the_benchmark_rules_on_real_criteria():
    raw = {str(json.loads(line)["id"]): json.loads(line) for line in open(CRITERIA)}
    table = load_criteria(CRITERIA)
    for tid in ("1", "2", "26", "45", "51"):  # 26 and 45: the most (31) and fewest (21) criteria
        judgement = _synthetic_judgement(raw[tid], int(tid))
        rel, overall = _independent_benchmark_aggregate(judgement, raw[tid])
        agg = aggregate(judgement, table[tid])
        assert agg.overall == pytest.approx(overall, abs=1e-12)
        assert agg.relative_dims == pytest.approx(rel, abs=1e-12)
        assert agg.judged == agg.expected == table[tid].n_criteria
        # Paraphrased texts fall back to the mean weight and are not "matched".
        assert agg.matched == agg.expected - agg.matches["mean"]


def test_parse_judgement_line():
    line = parse_judgement_line(json.dumps({"id": 51, "judgement": HAND_JUDGEMENT}), "j.jsonl:4")
    assert line.task_id == 51 and line.judgement == HAND_JUDGEMENT
    as_text = parse_judgement_line(json.dumps({"id": "51", "judgement": json.dumps(HAND_JUDGEMENT)}), "x")
    assert as_text.judgement == HAND_JUDGEMENT
    for bad, msg in [("{", "malformed JSON"), ("[]", "expected a JSON object"),
                     ('{"judgement": {}}', "missing field 'id'"),
                     ('{"id": 1, "judgement": 3}', "must be a JSON object"),
                     ('{"id": 1, "judgement": "{oops"}', "is a string but not JSON"),
                     ('{"id": 1, "judgement": {"overall": 3}}', "has none of the dimensions")]:
        with pytest.raises(ValueError, match=msg) as err:
            parse_judgement_line(bad, "j.jsonl:4")
        assert str(err.value).startswith("j.jsonl:4: ")


def test_rescore_file_and_cli(tmp_path, capsys):
    raw = {str(json.loads(line)["id"]): json.loads(line) for line in open(CRITERIA)}
    lines = [json.dumps({"id": 51, "judgement": _synthetic_judgement(raw["51"], 51)}, ensure_ascii=False),
             "not json",
             json.dumps({"id": 1, "judgement": _synthetic_judgement(raw["1"], 1)}, ensure_ascii=False),
             json.dumps({"id": 999, "judgement": HAND_JUDGEMENT}),
             json.dumps({"id": "51", "judgement": HAND_JUDGEMENT})]
    judgements = tmp_path / "judgements.jsonl"
    judgements.write_text("\n".join(lines) + "\n", encoding="utf-8")

    buf = io.BytesIO()
    rows, errors = race_cmd.rescore_file(CRITERIA, judgements, buf)
    assert [r["id"] for r in rows] == [51, 1]
    assert errors[0].startswith(f"{judgements}:2: malformed JSON (")
    assert errors[1:] == [f"{judgements}:4: no criteria for task id 999 in {CRITERIA}",
                          f"{judgements}:5: duplicate task id '51'"]
    out = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert out == rows
    # The benchmark's raw_results.jsonl shape, key for key.
    bench_keys = set(json.loads(open(DATA / "race-results.claude-3-7-sonnet.jsonl").readline()))
    assert all(set(r) == bench_keys for r in out)
    rel, overall = _independent_benchmark_aggregate(_synthetic_judgement(raw["51"], 51), raw["51"])
    assert out[0]["overall_score"] == pytest.approx(overall)
    assert out[0]["prompt"] == raw["51"]["prompt"]

    # Through the command line, as `drscore race rescore` runs it.
    dest = tmp_path / "raw_results.jsonl"
    assert main(["race", "rescore", "--criteria", str(CRITERIA), "--judgements", str(judgements),
                 "--out", str(dest), "--details"]) == 1  # bad lines were reported
    err = capsys.readouterr().err
    assert f"{judgements}:2: malformed JSON" in err and "rescored 2 task(s), 3 bad line(s)" in err
    written = [json.loads(line) for line in dest.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in written] == [51, 1]
    assert written[0]["details"]["judged"] == written[0]["details"]["expected"] == 25
    assert written[0]["details"]["matched"] == 25 - written[0]["details"]["matches"]["mean"]
    means = suite_means(rows)
    assert means["overall_score"] == pytest.approx((rows[0]["overall_score"] + rows[1]["overall_score"]) / 2)

    # a missing file is an error (1), not a usage error (2)
    assert main(["race", "rescore", "--criteria", str(tmp_path / "missing.jsonl"),
                 "--judgements", str(judgements)]) == 1
    assert "criteria file not found" in capsys.readouterr().err
