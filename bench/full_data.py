"""Checks over the full benchmark data that the test suite runs on its slice.

The tests read the small slice in ``tests/data`` (so a clone runs them); the figures
that only the whole published files have live here, read from ``../shared/data``:

* DeepResearch Bench reports (all 100): every ``[n] http...`` line is one parsed
  reference (1735 in all), every marker outside code resolves, every report has at
  least 3 citing sentences, the pair and marker totals stay in their bounds, only
  report 45 has uncited references ([12], [13]), and stripping citations leaves no
  marker or URL while keeping at least 85% of the body.
* RACE criteria (all 100 tasks): all parse, 21-31 criteria per task, weights sum to 1,
  prompts are the tasks' prompts.
* Rigorous Bench bundles (all 214): all parse, 2852 QSR items, the 8 label shapes,
  the 6 bundles whose QSR maximum is not 30, 35 bundles in domain 06; the 48 general
  rubric items total 73 points.

    .venv/bin/python -m bench.full_data

Prints one JSON object with each check's figures and ``ok``; exits 1 when a check
fails, 2 when the data is missing.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, RIGOROUS, require_data

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"
CRITERIA = DRB / "criteria.jsonl"
TASKS = DRB / "tasks.jsonl"
BUNDLES = RIGOROUS / "bundles.jsonl"
GENERAL = RIGOROUS / "general_rubrics.json"


def _jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def check_citations() -> dict:
    from drscore.engine.text.citations import cited_urls, parse_citations, strip_citations

    rows = _jsonl(REPORTS)
    bad: list[str] = []
    totals = Counter()
    uncited: dict[str, list[str]] = {}
    min_pairs = None
    for row in rows:
        text, rid = row["article"], str(row["id"])
        parse = parse_citations(text)
        # Independent count: every "[n] http..." line is a reference entry.
        ref_lines = re.findall(r"^\s*\[(\d+)\]\s*(https?://\S+)", text, re.M)
        if len(parse.references) != len(ref_lines) or not parse.parseable:
            bad.append(f"{rid}: references {len(parse.references)} vs {len(ref_lines)} lines")
        if set(cited_urls(parse)) != set(parse.references.values()):
            bad.append(f"{rid}: cited URLs differ from the reference list")
        min_pairs = len(parse.pairs) if min_pairs is None else min(min_pairs, len(parse.pairs))
        totals.update(pairs=len(parse.pairs), refs=len(parse.references), markers=parse.marker_count,
                      unresolved=parse.unresolved_count)
        if parse.uncited_references:
            uncited[rid] = parse.uncited_references
        plain = strip_citations(text)
        outside_code = re.sub(r"```.*?```", "", plain, flags=re.S)
        if re.search(r"\[\d{1,3}\]|https?://", outside_code):
            bad.append(f"{rid}: a marker or URL survives stripping")
        body = re.split(r"\n(?:参考文献：|#+ *References|References\n)", text)[0]
        if len(plain) < 0.85 * len(re.sub(r" ?\[\d{1,3}\]", "", body)):
            bad.append(f"{rid}: stripping removed more than 15% of the body")
    ok = (not bad and len(rows) == 100 and totals["refs"] == 1735 and totals["unresolved"] == 0
          and 3400 <= totals["markers"] <= 3700 and 3300 <= totals["pairs"] <= 3700
          and min_pairs == 3 and uncited == {"45": ["12", "13"]})
    return {"ok": ok, "reports": len(rows), **totals, "min_pairs": min_pairs, "uncited": uncited,
            "problems": bad[:20]}


def check_criteria() -> dict:
    from drscore.engine.methods.race.criteria import DIMENSIONS, load_criteria

    table = load_criteria(CRITERIA)
    prompts = {str(t["id"]): t["prompt"] for t in _jsonl(TASKS)}
    counts = [tc.n_criteria for tc in table.values()]
    bad = []
    for tid, tc in table.items():
        if set(tc.criterions) != set(DIMENSIONS) or abs(sum(tc.dimension_weight.values()) - 1) > 1e-9:
            bad.append(f"{tid}: dimensions or their weights")
        if any(not cs or abs(sum(c.weight for c in cs) - 1) > 1e-6 for cs in tc.criterions.values()):
            bad.append(f"{tid}: criterion weights")
        if prompts.get(tid) != tc.prompt:
            bad.append(f"{tid}: prompt differs from the task's")
    ok = not bad and set(table) == {str(i) for i in range(1, 101)} and (min(counts), max(counts)) == (21, 31)
    return {"ok": ok, "tasks": len(table), "criteria_min": min(counts), "criteria_max": max(counts),
            "criteria_total": sum(counts), "problems": bad[:20]}


def check_bundles() -> dict:
    from drscore.engine.methods.rigorous.rubrics import STANDARD_QSR_MAX, load_bundles, load_general_rubrics

    raw = _jsonl(BUNDLES)
    bs = load_bundles(BUNDLES)
    labels = sorted({label for b in bs.bundles.values() for item in b.qsr for label in item.labels})
    n_items = sum(len(b.qsr) for b in bs.bundles.values())
    domains = Counter(b.domain for b in bs.bundles.values())
    grr = load_general_rubrics(GENERAL)
    expected_nonstandard = {"09208": 31, "06356": 29, "10502": 22, "02701": 31, "05705": 29, "10707": 28}
    ok = (not bs.errors and len(bs.bundles) == 214 == len(raw)
          and n_items == 2852 == sum(len(r["qsr"]) for r in raw)
          and labels == sorted(["Yes", "No", "Partial", "Full", "Full detail", "Partial-1", "Partial-2", "Partial-3"])
          and bs.nonstandard() == expected_nonstandard
          and sum(b.qsr_max == STANDARD_QSR_MAX for b in bs.bundles.values()) == 208
          and domains["06"] == 35 and len(grr) == 48 and sum(i.max_points for i in grr) == 73)
    return {"ok": ok, "bundles": len(bs.bundles), "errors": [str(e) for e in bs.errors][:20],
            "qsr_items": n_items, "labels": labels, "nonstandard": bs.nonstandard(),
            "domains": dict(sorted(domains.items())), "general_items": len(grr),
            "general_points": sum(i.max_points for i in grr)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    require_data("full_data", REPORTS, CRITERIA, TASKS, BUNDLES, GENERAL)
    result: dict = {"bench": "full_data"}
    for name, check in (("citations", check_citations), ("criteria", check_criteria), ("bundles", check_bundles)):
        t0 = time.perf_counter()
        result[name] = check()
        result[name]["seconds"] = round(time.perf_counter() - t0, 3)
    result["ok"] = all(result[k]["ok"] for k in ("citations", "criteria", "bundles"))
    result["machine"] = machine()
    print(json.dumps(result, ensure_ascii=False))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
