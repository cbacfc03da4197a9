"""Judged pairs per report under ReportEval's redundancy protocols, on the 100 real
DeepResearch Bench reports (Claude 3.7 Sonnet), scored with the offline judge.

The published protocol (paragraph units, first and last excluded, at most 30 seeded
pairs) is the default; ``--segmentation sections`` is the authors' released script.
The paper reports 25-30 judged pairs per report (Qwen: 29.3 +- 3.2).

    .venv/bin/python -m bench.redundancy_pairs

Prints one JSON object: per segmentation, reports scored/skipped, judged pairs per
report (mean, sd, min, max) and units per report.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from bench.machine import machine
from drscore.api import JudgeConfig, Run, RunConfig

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "drb"


async def pairs_per_report(segmentation: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        cfg = RunConfig(methods=["redundancy"], reports=[str(DATA / "reports.claude-3-7-sonnet.jsonl")],
                        tasks=str(DATA / "tasks.jsonl"), judge=JudgeConfig(cache_dir=cache),
                        method_options={"segmentation": segmentation})
        async with Run(cfg) as run:
            rows = [r async for r in run.rows()]
    scored = [r for r in rows if r.status in ("ok", "partial")]
    judged = [r.subscores["pairs_judged"] for r in scored]
    units = [r.subscores["units"] for r in rows]
    return {
        "reports": len(rows), "scored": len(scored), "skipped": sum(r.status == "skipped" for r in rows),
        "pairs_per_scored_report": {"mean": round(statistics.mean(judged), 2),
                                    "sd": round(statistics.stdev(judged), 2), "min": min(judged),
                                    "max": max(judged)},
        "pairs_per_report_all": round(sum(judged) / len(rows), 2),
        "reports_at_cap_30": sum(1 for j in judged if j == 30),
        "units_per_report_mean": round(statistics.mean(units), 2),
    }


def main() -> None:
    out = {"bench": "redundancy_pairs", "data": "DRB reports.claude-3-7-sonnet.jsonl (100)",
           "paragraphs_published_default": asyncio.run(pairs_per_report("paragraphs")),
           "sections_released_script": asyncio.run(pairs_per_report("sections")),
           "machine": machine()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
