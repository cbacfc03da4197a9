"""The offline judge's lexical rule for ``rubric-items``: a criterion is met when half its
key terms occur in the report, a penalty never; one call per item and several per call
decide alike, so the offline leaderboard is the same in both modes."""
from __future__ import annotations

import drscore
from drscore.judge.offline.rubric_items import decide, key_terms
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def test_key_terms_and_decisions_by_hand():
    assert key_terms("States that the Kuroshio current drives SST anomalies.") == {
        "states", "kuroshio", "current", "drives", "anomalies"} - {"states"}
    assert key_terms("给出中产人数") == {"给出", "出中", "中产", "产人", "人数"}
    report = "The Kuroshio current carries warm water; anomalies follow."
    met, reason = decide("States that the Kuroshio current drives SST anomalies.", report, penalty=False)
    assert met and reason == "offline judge: 3 of 4 key terms of the criterion occur in the report"
    assert decide("Mentions quotas and the NPFC commission.", report, penalty=False)[0] is False
    assert decide("States that the Kuroshio current drives SST anomalies.", report, penalty=True)[0] is False


async def _rows(per_call: int) -> dict[tuple[str, str], tuple[float | None, dict]]:
    config = drscore.RunConfig(
        methods=["rubric-items"], tasks=str(EXAMPLES / "rubric_tasks.jsonl"),
        reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), str(EXAMPLES / "rubric_reports.jsonl")],
        method_options={"rubric_items_per_call": per_call})
    async with drscore.Run(config) as run:
        return {(r.task_id, r.agent): (r.score, r.subscores) async for r in run.rows()}


async def test_per_item_and_batched_agree_offline():
    one, batched = await _rows(1), await _rows(7)
    assert len(one) == 30 and one == batched
    assert len({score for score, _ in one.values()}) > 10
