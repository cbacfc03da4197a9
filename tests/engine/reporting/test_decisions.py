"""Decisions in the report and honest numbers in the tables: the not-ranked rule, the
matrix of pairs, the overview, the split time and the uncached cost."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from drscore.engine.reporting.decisions import overview_facts, section_decisions, section_time_money
from drscore.engine.reporting.html import render_html
from drscore.engine.reporting.tables import leaderboard, leaderboard_csv
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir_read import RunDir


def row(task, agent, score, **kw) -> ScoreRow:
    return ScoreRow(task_id=task, agent=agent, method="race", score=score, judge="gpt-x",
                    status=kw.pop("status", "ok"), **kw)


def rows() -> list[ScoreRow]:
    return [
        row("1", "A", 0.6, judge_s=1.0, quota_wait_s=9.0, cost_usd=0.25, cost_usd_uncached=0.5,
            cached_input_tokens=100, reasoning_tokens=7),
        row("2", "A", 0.7, judge_s=2.0, quota_wait_s=1.0, cost_usd=0.25, cost_usd_uncached=0.25),
        row("1", "B", 0.4, cost_usd=0.0, cost_usd_uncached=0.75),  # answers shared: paid nothing
        row("2", "B", 0.5, cost_usd=0.0, cost_usd_uncached=0.75),
        # C: both rows partial, one with coverage 0 -> shown, not ranked
        row("1", "C", 0.9, status="partial", coverage=0.0), row("2", "C", 0.95, status="partial", coverage=0.5),
    ]


def run_of(scores, summary=None, config=None) -> RunDir:
    return RunDir(path=Path("runs/x"), config=config or {}, summary=summary or {}, scores=scores, problems=[])


def test_mostly_partial_agent_is_shown_unranked_with_its_reason():
    board = leaderboard(rows(), resamples=50)["race"]
    assert [(e.agent, e.rank) for e in board] == [("A", 1), ("B", 2), ("C", None)]
    assert board[2].unranked_reason == "2 of 2 scored rows partial, 1 with coverage 0"
    assert board[2].score == 0.925  # still shown: (0.9 + 0.95) / 2


def test_leaderboard_markdown_says_why_an_agent_is_not_ranked():
    from drscore.engine.reporting.tables import leaderboard_markdown

    run = run_of(rows())
    md = leaderboard_markdown(run, leaderboard(run.scores, resamples=20), confidence=0.95, resamples=20, seed=0)
    assert "> not ranked: C (2 of 2 scored rows partial, 1 with coverage 0)" in md


def test_leaderboard_csv_has_the_honest_columns():
    table = list(csv.DictReader(io.StringIO(leaderboard_csv(leaderboard(rows(), resamples=50)))))
    a, b, c = table
    assert "latency_s" not in a
    assert (a["judge_s"], a["quota_wait_s"], a["cost_usd"], a["cost_usd_uncached"]) == ("3", "10", "0.5", "0.75")
    assert (a["cached_input_tokens"], a["reasoning_tokens"]) == ("100", "7")
    assert (b["cost_usd"], b["cost_usd_uncached"]) == ("0", "1.5")  # the fair figure of shared answers
    assert c["rank"] == "" and c["unranked_reason"].startswith("2 of 2")


def test_report_matrix_banner_and_overview():
    summary = {"totals": {"cost_usd": 0.5, "cost_usd_uncached": 2.25, "wall_time_s": 12.5},
               "overview": {"date": "2026-11-26T10:00:00Z", "drscore_version": "9.9", "judge_model": "gpt-x",
                            "endpoint_host": "api.example.com", "samples": 1}}
    config = {"judge": {"url": "https://user:secret@api.example.com/v1?key=sk-123", "model": "gpt-x"}}
    run = run_of(rows(), summary, config)
    board = leaderboard(run.scores, resamples=50)
    page = render_html(run, board, resamples=50)
    facts = dict(overview_facts(run))
    assert facts["total cost"] == "$0.5000 paid · $2.2500 without prompt cache or shared answers"
    assert facts["wall time"] == "12.5 s" and facts["endpoint"] == "api.example.com"
    assert "secret" not in str(facts) and "sk-123" not in str(facts)
    decisions = section_decisions(run, board, confidence=0.95, resamples=50, seed=0)
    assert 'id="not-ranked"' in decisions and "<b>C</b>" in decisions
    # A - B on tasks 1 and 2: differences 0.2 and 0.2 -> +0.200 [0.20, 0.20]
    assert "+0.200 [0.20, 0.20]" in decisions
    assert "not ranked: 2 of 2 scored rows partial, 1 with coverage 0" in page  # beside C in the leaderboard
    assert "2026-11-26T10:00:00Z" in page and 'id="decisions"' in page and 'id="time-money"' in page
    money = section_time_money(board)
    assert "<td class=\"n\">3.0</td><td class=\"n\">10.0</td>" in money


def test_overview_without_summary_reads_the_config_host_only():
    run = run_of(rows(), None, {"judge": {"url": "http://k:pw@10.0.0.5:8000/v1", "model": "m"},
                                "drscore_version": "1.2"})
    facts = dict(overview_facts(run))
    assert facts["endpoint"] == "10.0.0.5:8000" and facts["drscore version"] == "1.2"
    assert facts["wall time"].startswith("unknown")


def test_viewer_rows_split_time_and_carry_uncached_cost_and_samples():
    import json

    from drscore.engine.reporting.viewer import viewer_data

    r = row("1", "A", 0.5, judge_s=1.5, quota_wait_s=40.0, latency_s=42.0, cost_usd=0.0, cost_usd_uncached=0.02,
            cached_input_tokens=900, score_sd=0.1, sample_scores=[0.4, 0.6])
    data = viewer_data([r], [])
    assert data["rows"]["lat"] == [1.5] and data["rows"]["wait"] == [40.0]
    honest = json.loads(data["detail"][0])["honest"]
    assert honest == {"cached_input_tokens": 900, "cost_usd_uncached": 0.02, "latency_s": 42.0, "score_sd": 0.1,
                      "sample_scores": [0.4, 0.6]}


def test_leaderboard_files_carry_the_paired_differences_and_p_first():
    from drscore.engine.reporting.tables import leaderboard_markdown
    from drscore.engine.stats.paired import decide

    run = run_of(rows())
    decided = decide(run.scores, resamples=200)
    board = leaderboard(run.scores, resamples=200)
    md = leaderboard_markdown(run, board, confidence=0.95, resamples=200, seed=0, decisions=decided)
    # A - B is 0.2 on both tasks: every resample gives 0.2; C (not rankable) is not compared
    # p: no resample on the other side of 0, floored at 1/200; one pair, so Holm leaves it
    assert "| A | B | +0.200 | [+0.200, +0.200] | 0.005 | 2 | **yes** |" in md
    assert "| A | 1.000 |" in md and "| B | 0.000 |" in md
    assert "> not compared: C (2 of 2 scored rows partial, 1 with coverage 0)" in md
    table = list(csv.DictReader(io.StringIO(leaderboard_csv(board, decided))))
    agents = [r for r in table if r["kind"] == "agent"]
    (pair,) = [r for r in table if r["kind"] == "pair"]
    assert [(r["agent"], r["p_first"]) for r in agents] == [("A", "1"), ("B", "0"), ("C", "")]
    assert (pair["method"], pair["agent"], pair["vs"], pair["delta"], pair["pair_tasks"]) == ("race", "A", "B", "0.2", "2")
    assert (pair["delta_ci_low"], pair["delta_ci_high"], pair["significant"]) == ("0.2", "0.2", "1")
    assert pair["p_holm"] == "0.005" and pair["score"] == "" and pair["rank"] == ""
    # without decisions: the agents' rows only, as before
    assert {r["kind"] for r in csv.DictReader(io.StringIO(leaderboard_csv(board)))} == {"agent"}
