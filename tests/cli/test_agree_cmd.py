"""``drscore agree``: hand-computed figures through the CLI, bad input lines, the
dimension switch, error messages, and a run made with the offline judge over real
DeepResearch Bench reports."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from drscore.cli import main as drscore_main
from support.data import DATA

KEYS = ("par", "opc", "fap", "fas", "spearman", "pearson", "kendall", "mad", "exact_match",
        "tasks_kept", "human_par")


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def score_row(task: str, agent: str, score: float | None, method: str = "quality",
              **extra) -> dict:
    return {"task_id": task, "agent": agent, "method": method, "score": score,
            "status": "ok" if score is not None else "failed", "judge": "offline", **extra}


@pytest.fixture
def hand_case(tmp_path: Path) -> tuple[Path, Path]:
    """Two tasks x three agents x two raters (figures worked out in the test)."""
    method = {("1", "a"): 3, ("1", "b"): 2, ("1", "c"): 1,
              ("2", "a"): 1, ("2", "b"): 2, ("2", "c"): 4}
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "scores.jsonl",
                [score_row(t, a, s, subscores={"clarity": 5 - s}) for (t, a), s in method.items()]
                + [score_row("1", "a", 9.0, method="redundancy")])
    ratings = {("1", "a"): (4, 2), ("1", "b"): (2, 2), ("1", "c"): (1, 1),
               ("2", "a"): (3, 3), ("2", "b"): (1, 2), ("2", "c"): (2, 1)}
    human = [{"task_id": int(t), "agent": a, "rater": f"r{i + 1}", "score": s}
             for (t, a), pair in ratings.items() for i, s in enumerate(pair)]
    # clarity dimension: humans rate exactly the method's clarity subscore (5 - score)
    human += [{"task_id": t, "agent": a, "rater": "r1", "score": 5 - s, "dimension": "clarity"}
              for (t, a), s in method.items()]
    return run, write_jsonl(tmp_path / "human.jsonl", human)


def agree_json(capsys, *argv: str) -> dict:
    assert drscore_main(["agree", *argv, "--json", "--resamples", "200"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_figures_on_the_hand_case(hand_case, capsys):
    run, human = hand_case
    out = agree_json(capsys, "--human", str(human), "--run", str(run), "--method", "quality")
    for key in KEYS:
        assert key in out and f"{key}_ci" in out
        assert out[f"{key}_ci"] is None or len(out[f"{key}_ci"]) == 2
    # Task 1 agrees on 3/3 pairs, task 2 on 0/3 (see tests/engine/test_agreement.py)
    assert out["par"] == pytest.approx(0.5)
    assert out["human_par"] == pytest.approx(4 / 6)
    assert out["exact_match"] == pytest.approx(0.5)
    assert out["mad"] == pytest.approx(5 / 6)  # |1-3| + |2-1.5| + |4-1.5| over 6 items
    assert out["tasks_kept"] == 2  # ICCs 0.5 and 0.636
    assert out["opc"] == pytest.approx(-0.720577, abs=1e-6)
    assert out["fap"] == pytest.approx((1 - 2 / 7**0.5) / 2)
    assert out["n_items"] == 6 and out["bad_lines"] == 0 and out["method"] == "quality"
    # seeded: the same command prints the same object
    assert agree_json(capsys, "--human", str(human), "--run", str(run),
                      "--method", "quality") == out


def test_dimension_uses_the_subscore_and_matching_human_rows(hand_case, capsys):
    run, human = hand_case
    out = agree_json(capsys, "--human", str(human), "--run", str(run), "--method", "quality",
                     "--dimension", "clarity")
    # humans gave exactly the clarity subscore: perfect agreement, zero error
    assert out["par"] == 1.0 and out["mad"] == 0.0 and out["exact_match"] == 1.0
    assert out["spearman"] == pytest.approx(1.0) and out["kendall"] == pytest.approx(1.0)
    assert out["human_par"] is None  # one rater per item: no rater pairs
    assert out["dimension"] == "clarity"


def test_bad_lines_are_named_skipped_and_counted(hand_case, capsys):
    run, human = hand_case
    lines = human.read_text().splitlines()
    lines[2:2] = ['{"task_id": 1, "agent": "a", "score": 3}',  # line 3: no rater
                  "{not json",  # line 4
                  '{"task_id": 1, "agent": "a", "rater": "r9", "score": "high"}']  # line 5
    human.write_text("\n".join(lines) + "\n")
    assert drscore_main(["agree", "--human", str(human), "--run", str(run), "--method",
                         "quality", "--json", "--resamples", "50"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    # the three bad lines are skipped; the 12 good overall ratings give the same figures
    assert out["bad_lines"] == 3 and out["par"] == pytest.approx(0.5)
    err = captured.err.splitlines()
    assert f"warning: {human}:3: missing field `rater` (line skipped)" in err
    assert any(line.startswith(f"warning: {human}:4: not valid JSON") for line in err)
    assert any(line.startswith(f"warning: {human}:5: field `score` must be a finite number")
               for line in err)


def test_text_output_lists_every_figure(hand_case, capsys):
    run, human = hand_case
    code = drscore_main(["agree", "--human", str(human), "--run", str(run), "--method",
                         "quality", "--resamples", "100", "--per-task"])
    assert code == 0
    text = capsys.readouterr().out
    assert re.search(r"PAR \(pairwise agreement, method vs mean human\)\s+0\.5000\s+\[", text)
    assert "human PAR (rater vs rater)" in text and "exact-match rate" in text
    assert re.search(r"^2\s+3\s+2\s+0\.000\s+0\.636\s+yes", text, re.M)  # per-task row


@pytest.mark.parametrize("argv, message, status", [
    (["--method", "nope"], "method 'nope' is not in", 1),
    ([], "several methods (quality, redundancy)", 1),
    (["--method", "quality", "--dimension", "depth"], "no human rows for depth", 1),
    (["--method", "redundancy", "--dimension", "clarity"],
     "method 'redundancy' has no subscore 'clarity'", 1),
    (["--method", "quality", "--scale-human", "0"], "must be positive", 2),  # usage: a bad option value
])
def test_errors_exit_with_a_clear_message(hand_case, capsys, argv, message, status):
    run, human = hand_case
    assert drscore_main(["agree", "--human", str(human), "--run", str(run), *argv]) == status
    assert message in capsys.readouterr().err


def test_no_common_items_says_what_the_ids_look_like(hand_case, tmp_path, capsys):
    run, _ = hand_case
    human = write_jsonl(tmp_path / "other.jsonl", [
        {"task_id": "task-1", "agent": "a", "rater": "r1", "score": 1}])
    assert drscore_main(["agree", "--human", str(human), "--run", str(run),
                         "--method", "quality"]) == 1
    err = capsys.readouterr().err
    assert "no (task_id, agent) item has both" in err
    assert "('1', 'a')" in err and "('task-1', 'a')" in err


def test_missing_inputs_are_reported(tmp_path, hand_case, capsys):
    run, human = hand_case
    # missing files are errors (1), not usage errors (2)
    assert drscore_main(["agree", "--human", str(tmp_path / "none.jsonl"), "--run", str(run)]) == 1
    assert "human scores file not found" in capsys.readouterr().err
    assert drscore_main(["agree", "--human", str(human), "--run", str(tmp_path / "nope")]) == 1
    assert "not a run directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- real run


def every_other_block(article: str) -> str:
    """The derived agent: keep blocks 0, 2, 4, ... of the blank-line separated blocks."""
    blocks = [b for b in re.split(r"\n\s*\n", article) if b.strip()]
    return "\n\n".join(blocks[::2])


def test_agree_on_an_offline_run_over_real_reports(tmp_path, capsys):
    """An offline-judge run of ReportEval quality and redundancy and RACE (point-wise,
    the benchmark's criteria) on 10 real English tasks, for Claude 3.7 Sonnet and a
    derived agent (every other block dropped). The "human" file is stand-in data built
    from the benchmark's published RACE scores (Gemini 2.5 Pro judge): Claude gets its
    published overall score, the derived agent 0.05 less, so the humans prefer Claude
    on every task. Expected figures are recomputed here from scores.jsonl."""
    ids = [str(i) for i in range(51, 61)]
    pick = lambda name: [json.loads(x) for x in (DATA / "drb" / name).read_text().splitlines()  # noqa: E731
                         if x.strip() and str(json.loads(x)["id"]) in ids]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", pick("tasks.jsonl"))
    claude = pick("reports.claude-3-7-sonnet.jsonl")
    full = write_jsonl(tmp_path / "reports.claude-3-7-sonnet.jsonl", claude)
    derived = write_jsonl(tmp_path / "reports.claude-every-other.jsonl",
                          [{**r, "article": every_other_block(r["article"])} for r in claude])
    run = tmp_path / "run"
    code = drscore_main(["run", "--methods", "quality,redundancy,race", "--race-variant",
                         "pointwise", "--criteria", str(DATA / "drb" / "criteria.jsonl"),
                         "--tasks", str(tasks), "--reports", str(full), "--reports", str(derived),
                         "--cache", str(tmp_path / "cache"), "--out", str(run)])
    assert code in (0, 3)  # 3: some derived reports are too short for redundancy
    published = {str(r["id"]): r["overall_score"] for r in pick("race-results.claude-3-7-sonnet.jsonl")}
    agents = (("claude-3-7-sonnet", 0.0), ("claude-every-other", 0.05))
    human = write_jsonl(tmp_path / "human.jsonl", [
        {"task_id": t, "agent": agent, "rater": "published-race", "score": s - shift}
        for t, s in published.items() for agent, shift in agents])
    rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    capsys.readouterr()

    # method on a 0-100 scale, "humans" on 0-1: --scale-human 100; quality is 0-4.
    for method, scale in (("race", "100"), ("quality", "4"), ("redundancy", "4")):
        out = agree_json(capsys, "--human", str(human), "--run", str(run), "--method", method,
                         "--scale-human", scale)
        score = {(r["task_id"], r["agent"]): r["score"] for r in rows
                 if r["method"] == method and r["score"] is not None}
        both = [t for t in ids if (t, agents[0][0]) in score and (t, agents[1][0]) in score]
        # one pair per task with both agents scored: the method agrees when it ranks
        # Claude strictly higher (a tie disagrees: the humans never tie)
        wins = sum(score[(t, agents[0][0])] > score[(t, agents[1][0])] for t in both)
        assert out["n_items"] == len(score), method
        assert out["par"] == pytest.approx(wins / len(both)), method
        assert out["exact_match"] == pytest.approx(wins / len(both)), method
        mad = np.mean([abs(v - float(scale) * (published[t] - dict(agents)[a]))
                       for (t, a), v in score.items()])
        assert out["mad"] == pytest.approx(mad), method
        assert out["tasks_kept"] == out["n_tasks"]  # one rater: ICC undefined, all kept
        assert any("ICC undefined" in n for n in out["notes"])
        assert out["human_par"] is None
