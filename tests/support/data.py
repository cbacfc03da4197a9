"""Where the tests find benchmark data: the slice of the real data committed under
``tests/data/`` (cut by ``scripts/make-test-data``; provenance in its README). Nothing
here reads outside the repository, so a plain clone runs the suite."""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DRB = DATA / "drb"
RIGOROUS = DATA / "rigorous"
DRB_REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"
SHARED = ROOT.parent / "shared"
"""The full benchmark data beside this checkout: benches may read it, tests never do."""


@cache
def _drb_reports() -> dict[str, dict]:
    with open(DRB_REPORTS, encoding="utf-8") as f:
        return {str(row["id"]): row for row in map(json.loads, f)}


def drb_report(task_id: int | str) -> dict:
    """One DeepResearch Bench report record ``{id, prompt, article}`` of the slice, by task id."""
    return _drb_reports()[str(task_id)]


def drb_report_ids() -> list[str]:
    """The task ids of the reports in the slice, in file order."""
    return list(_drb_reports())
