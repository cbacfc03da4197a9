"""Leaderboard tables and the HTML report: hand-built score rows, real published
DeepResearch Bench scores, and the properties the page must keep (self-contained,
unique ids, no secrets, deterministic)."""
from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter

import pytest

from drscore.engine.reporting import charts
from drscore.engine.runtime.models import InputError, ScoreRow
from drscore.engine.reporting.html import (
    citation_counts,
    cost_by,
    dimension_names,
    leaderboard,
    leaderboard_csv,
    leaderboard_markdown,
    pick_redundancy_row,
    redact,
    render_html,
)
from drscore.engine.runtime.rundir_read import RunDir, read_run_dir
from support.data import DATA


def row(task: str, agent: str, score: float | None, method: str = "m", **kw) -> ScoreRow:
    return ScoreRow(task_id=task, agent=agent, method=method, score=score,
                    status=kw.pop("status", "ok" if score is not None else "failed"),
                    judge=kw.pop("judge", "offline"), **kw)


def small_rows() -> list[ScoreRow]:
    return [
        row("1", "A", 1.0), row("2", "A", 2.0), row("3", "A", 3.0),  # mean 2
        row("1", "B", 3.0), row("2", "B", 3.0), row("3", "B", 3.0),  # mean 3
        row("1", "C", 2.0), row("2", "C", 2.0), row("3", "C", None, errors=["judge down"]),
        row("1", "D", None), row("2", "D", None),
    ]


def test_leaderboard_means_ranks_and_intervals():
    same_tasks = [r for r in small_rows() if r.agent != "C"] + [
        row("1", "C", 1.0), row("2", "C", 2.0), row("3", "C", 3.0)]  # mean 2, like A
    board = leaderboard(same_tasks, resamples=300, seed=0)["m"]
    assert [e.agent for e in board] == ["B", "A", "C", "D"]
    # competition ranking: A and C tie on 2.0 and share rank 2; D has no score
    assert [e.rank for e in board] == [1, 2, 2, None]
    b, a, c, d = board
    assert (b.score, b.ci_low, b.ci_high) == (3.0, 3.0, 3.0)  # constant: zero-width CI
    assert a.score == pytest.approx(2.0) and 1.0 <= a.ci_low < 2.0 < a.ci_high <= 3.0
    assert d.score is None and d.ci_low is None and d.tasks_scored == 0
    # every scored agent has the same tasks: no shared-task columns
    assert all(e.shared_tasks is None for e in board)
    # same seed, same table
    assert leaderboard(same_tasks, resamples=300, seed=0)["m"] == board


def test_agents_are_ranked_on_the_tasks_they_share():
    # C has no score for task 3. Over its own tasks C's mean is 2.0 (= A's 2.0 over 3
    # tasks), but on the shared tasks 1 and 2, A scores (1+2)/2 = 1.5 and C (2+2)/2 = 2.
    board = leaderboard(small_rows(), resamples=300, seed=0)["m"]
    assert [e.agent for e in board] == ["B", "C", "A", "D"]
    assert [e.rank for e in board] == [1, 2, 3, None]
    b, c, a, d = board
    assert (a.score, a.shared_score) == (pytest.approx(2.0), pytest.approx(1.5))
    assert (c.score, c.shared_score) == (pytest.approx(2.0), pytest.approx(2.0))
    assert b.shared_score == 3.0 and (b.shared_ci_low, b.shared_ci_high) == (3.0, 3.0)
    assert all(e.shared_tasks == 2 for e in board) and d.shared_score is None
    assert (c.tasks_scored, c.tasks_total, c.failed) == (2, 3, 1)
    from drscore.engine.reporting.tables import comparison_note
    note = comparison_note(board)
    assert "different tasks" in note and "2 task(s) all of them scored" in note and "A 3" in note


def test_dimension_names_skip_counts_and_off_scale_subscores():
    rows = [row("1", "A", 2.0, subscores={"comprehensiveness": 2.5, "pairs_total": 28.0,
                                          "supported": 3.0, "acc": 0.5, "big": 50.0}),
            row("1", "B", 3.0, subscores={"comprehensiveness": 3.5, "clarity": None})]
    entries = leaderboard(rows, resamples=10)["m"]
    # bound = 2 x max(mean score 3, 1) = 6: "big" (50) is off scale; pairs_total and
    # supported are counts by name. Order: first seen in rank order (B, then A).
    assert dimension_names(entries) == ["comprehensiveness", "clarity", "acc"]


def test_redundancy_pick_citations_and_costs():
    rows = [
        row("1", "A", 3.0, method="redundancy", details={"pairs": [[0, 1, 4, "screened"]]}),
        row("2", "A", 2.5, method="redundancy",
            details={"pairs": [[0, 1, 2, "judged"], [0, 2, 4, "screened"], "junk"]}),
        row("1", "B", 0.5, method="fact", cost_usd=0.25, latency_s=2.0, calls=3,
            details={"counts": {"supported": 4, "unsupported": 1, "unreachable": 2, "refused": 0}}),
        row("2", "B", 0.7, method="fact", cost_usd=0.5, latency_s=1.0, calls=2,
            details={"supported": 3, "unsupported": 3, "refused": 1}),
    ]
    assert pick_redundancy_row(rows).task_id == "2"  # 2 valid pairs beat 1
    assert pick_redundancy_row(rows, task_id="1").task_id == "1"
    assert pick_redundancy_row(rows, agent="B") is None
    # supported 4+3, unsupported 1+3, unreachable 2+0, refused 0+1
    assert citation_counts(rows) == {"fact": {"B": {
        "supported": 7.0, "unsupported": 4.0, "unreachable": 2.0, "refused": 1.0, "failed": 0.0}}}
    by_task = dict(cost_by(rows, "task_id"))
    assert by_task["1"]["cost_usd"] == pytest.approx(0.25) and by_task["1"]["reports"] == 2
    by_method = dict(cost_by(rows, "method"))
    assert by_method["fact"]["cost_usd"] == pytest.approx(0.75)  # 0.25 + 0.5
    assert by_method["fact"]["latency_s"] == pytest.approx(3.0)
    assert by_method["fact"]["calls"] == 5


def test_redact_hides_secrets_only():
    config = {"judge": {"api_key": "sk-live-123", "max_tokens": 800, "model": "x",
                        "headers": {"Authorization": "Bearer abc"}}, "token": "t0k"}
    red = redact(config)
    assert red["judge"]["api_key"] == "***" and red["token"] == "***"
    assert red["judge"]["headers"]["Authorization"] == "***"
    assert red["judge"]["max_tokens"] == 800 and red["judge"]["model"] == "x"


def run_of(rows: list[ScoreRow], **kw) -> RunDir:
    return RunDir(path="/runs/x", config=kw.get("config", {}), summary=kw.get("summary", {}),
                  scores=rows, problems=kw.get("problems", []))


def test_markdown_and_csv_tables():
    run = run_of(small_rows())
    board = leaderboard(run.scores, resamples=200, seed=0)
    md = leaderboard_markdown(run, board, confidence=0.95, resamples=200, seed=0)
    assert "## m" in md and "offline judge" in md
    # C lacks task 3, so the table carries the shared-task mean and says why
    assert "| 1 | B | 3.000 | [3.000, 3.000] | 3.000 | [3.000, 3.000] | 3/3 | – | 0 | 0.0000 |" in md
    assert "| – | D | – | – | – | – | 0/2 | – | 2 | 0.0000 |" in md
    assert "> Agents were scored on different tasks" in md
    table = list(csv.DictReader(io.StringIO(leaderboard_csv(board))))
    assert [r["agent"] for r in table] == ["B", "C", "A", "D"]
    assert table[0]["score"] == "3" and table[2]["rank"] == "3" and table[3]["score"] == ""
    assert table[2]["shared_score"] == "1.5" and table[2]["shared_tasks"] == "2"


def test_markdown_carries_suite_figures_and_notes_from_the_summary():
    summary = {"per_agent_method": [{"agent": "B", "method": "m", "suite": {
        "benchmark": {"reports": 3, "valid_rate": 0.625}}}],
        "notes": {"m": ["scores are NOT comparable with the published ones"]}}
    run = run_of(small_rows(), summary=summary)
    md = leaderboard_markdown(run, leaderboard(run.scores, resamples=10, seed=0), confidence=0.95,
                              resamples=10, seed=0)
    assert "B · benchmark: reports 3, valid_rate 0.625" in md
    assert "> **Note:** scores are NOT comparable with the published ones" in md


def test_html_sections_no_data_ids_and_secrets():
    rows = small_rows() + [
        row("1", "A", 3.0, method="redundancy", subscores={"pairs_total": 3.0},
            details={"pairs": [[0, 1, 4, "screened"], [0, 2, 1, "judged"], [1, 2, 3, "judged"]],
                     "units": ["first para", "second para", "third para"]}),
        row("1", "A", 0.5, method="quality", subscores={"clarity": 2.0, "coherence": 3.0}),
    ]
    run = run_of(rows, config={"judge": {"api_key": "sk-live-123"}},
                 problems=[InputError("scores.jsonl:7", "not valid JSON")])
    board = leaderboard(run.scores, resamples=50)
    page = render_html(run, board, redundancy_row=pick_redundancy_row(rows), resamples=50)
    assert page == render_html(run, board, redundancy_row=pick_redundancy_row(rows),
                               resamples=50)  # deterministic
    assert "sk-live-123" not in page
    assert "<script" not in page
    charts_found = re.findall(r'data-chart="([^"]+)"', page)
    assert set(charts_found) == {"leaderboard-m", "leaderboard-redundancy", "leaderboard-quality",
                                 "dimensions-quality", "heatmap-m", "heatmap-redundancy",
                                 "heatmap-quality", "redundancy-redundancy-1-A",
                                 "cost-method", "cost-task"}
    # the citation section says there is nothing to show
    citations = page[page.index('id="citations"'):page.index('id="cost"')]
    assert "No data" in citations
    # every element id in the page is unique across all inline SVGs
    ids = Counter(re.findall(r'\bid="([^"]+)"', page))
    assert [i for i, n in ids.items() if n > 1] == []
    assert "scores.jsonl:7: not valid JSON" in page
    assert "first para" in page  # paragraph texts of the most repetitive pair (0 x 2)


def test_empty_run_renders_no_data_everywhere():
    page = render_html(run_of([]), {}, resamples=10)
    for section in ("leaderboard", "dimensions", "redundancy", "citations", "cost"):
        part = page[page.index(f'id="{section}"'):]
        assert "No data" in part.split("</section>")[0], section
    assert "data-chart" not in page


def test_chart_svgs_are_deterministic_and_prefixed():
    one = charts.heatmap_chart("h1", "t", ["1", "2"], ["a"], [[1.0, None]])
    assert one == charts.heatmap_chart("h1", "t", ["1", "2"], ["a"], [[1.0, None]])
    two = charts.heatmap_chart("h2", "t", ["1", "2"], ["a"], [[1.0, None]])
    ids_one = set(re.findall(r'\bid="([^"]+)"', one))
    ids_two = set(re.findall(r'\bid="([^"]+)"', two))
    assert ids_one and not ids_one & ids_two
    assert all(i.startswith("h1-") for i in ids_one)
    # every internal reference points at an id of the same chart
    refs = re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', one)
    assert all((a or b) in ids_one for a, b in refs)
    assert one.startswith("<svg") and "<?xml" not in one and "<style" not in one


def test_real_published_race_scores_reproduce_the_suite_mean(tmp_path):
    """The benchmark's own RACE results for Claude 3.7 Sonnet (Gemini 2.5 Pro judge),
    written as a run directory: the report's leaderboard shows the published suite
    mean 0.4218 (x100 = 42.18) and its per-dimension means."""
    source = DATA / "drb" / "race-results.claude-3-7-sonnet.jsonl"
    published = [json.loads(x) for x in source.read_text().splitlines() if x.strip()]
    dims = ["comprehensiveness", "insight", "instruction_following", "readability"]
    with open(tmp_path / "scores.jsonl", "w") as f:
        for r in published:
            f.write(json.dumps({"task_id": str(r["id"]), "agent": "claude-3-7-sonnet",
                                "method": "race", "score": 100 * r["overall_score"],
                                "subscores": {d: 100 * r[d] for d in dims},
                                "judge": "gemini-2.5-pro (published)"}) + "\n")
        f.write("not json\n")
    run = read_run_dir(tmp_path)
    assert len(run.scores) == 100 and [p.origin for p in run.problems] == [
        f"{tmp_path / 'scores.jsonl'}:101"]
    entry = leaderboard(run.scores, resamples=500)["race"][0]
    assert entry.score == pytest.approx(42.18, abs=0.005)
    assert entry.ci_low < 42.18 < entry.ci_high
    for d in dims:
        assert entry.subscores[d] == pytest.approx(100 * sum(r[d] for r in published) / 100)
    page = render_html(run, {"race": [entry]}, resamples=500)
    assert "42.184" in page and 'data-chart="dimensions-race"' in page
    assert "offline judge" not in page  # not labelled as the offline baseline


def test_fact_rates_and_per_report_counts_get_axes_of_their_own():
    from drscore.engine.reporting.tables import dimension_groups

    rows = [row(t, a, v, method="fact", subscores={"valid_rate": v, "acc_paper": v / 2, "citations": n,
                                                   "valid_citations": n * v})
            for t, a, v, n in (("1", "A", 0.5, 1.0), ("2", "A", 0.75, 2.0), ("1", "B", 0.25, 1.0), ("2", "B", 0.5, 1.0))]
    board = leaderboard(rows, resamples=20, seed=0)
    assert dimension_groups(board["fact"]) == (["valid_rate", "acc_paper"], ["citations", "valid_citations"])
    page = render_html(run_of(rows), board, resamples=20)
    svg = page[page.index('data-chart="dimensions-fact"'):]
    svg = svg[:svg.index("</figure>")]
    assert 'id="dimensions-fact-axes_1"' in svg and 'id="dimensions-fact-axes_2"' in svg
    assert "mean per report (count)" in svg and "mean subscore" in svg
    # quality-like dimensions (no rate among them) stay on one axis
    quality = leaderboard([row("1", "A", 3.0, subscores={"clarity": 3.0, "insight": 2.0})], resamples=5)["m"]
    assert dimension_groups(quality) == (["clarity", "insight"], [])


def test_the_shared_tasks_note_says_so_when_no_agent_is_ranked():
    from drscore.engine.reporting.tables import comparison_note

    rows = [row("1", "A", 0.5, status="partial", coverage=0.0), row("2", "A", 0.5, status="partial"),
            row("2", "B", 0.7, status="partial", coverage=0.0), row("3", "B", 0.1, status="partial")]
    entries = leaderboard(rows, resamples=10, seed=0)["m"]
    assert all(e.rank is None for e in entries)
    note = comparison_note(entries)
    assert note is not None and "none is ranked" in note and "ranked by the mean" not in note
