"""``drscore compare``: paired deltas on hand-built runs, and on two offline-judge runs
over real DeepResearch Bench reports."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from drscore.cli import main as drscore_main
from support.data import DATA


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def rows_for(scores: dict[tuple[str, str], float | None], method: str = "quality") -> list[dict]:
    return [{"task_id": t, "agent": a, "method": method, "score": s, "judge": "offline",
             "status": "ok" if s is not None else "failed"} for (t, a), s in scores.items()]


def compare_json(capsys, a: Path, b: Path, *extra: str) -> dict:
    assert drscore_main(["compare", str(a), str(b), "--json", "--resamples", "500", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_shift_is_significant_noise_and_no_change_are_not(tmp_path, capsys):
    tasks = [str(t) for t in range(1, 11)]
    base = {(t, "x"): float(t) for t in tasks} | {(t, "y"): float(int(t) % 3) for t in tasks}
    base |= {(t, "w"): 1.0 for t in tasks}
    moved = {(t, "x"): float(t) + 0.5 for t in tasks}  # +0.5 on every task
    moved |= {(t, "y"): float(int(t) % 3) for t in tasks}  # unchanged
    moved |= {(t, "w"): 1.0 + (0.3 if int(t) % 2 else -0.3) for t in tasks}  # +-0.3 noise
    moved |= {("1", "z"): 2.0}  # a new agent
    moved[("10", "x")] = None  # failed in B: task 10 is not shared for x
    write_jsonl(tmp_path / "a" / "scores.jsonl", rows_for(base))
    write_jsonl(tmp_path / "b" / "scores.jsonl", rows_for(moved))
    (tmp_path / "a" / "config.json").write_text(json.dumps({"judge": {"model": "m1", "api_key": "sk-1"}}))
    (tmp_path / "b" / "config.json").write_text(json.dumps({"judge": {"model": "m2", "api_key": "sk-2"}}))
    out = compare_json(capsys, tmp_path / "a", tmp_path / "b")
    d = {(r["method"], r["agent"]): r for r in out["deltas"]}
    x, y, w = d[("quality", "x")], d[("quality", "y")], d[("quality", "w")]
    # x: 9 shared tasks (10 failed in B), each +0.5 -> delta 0.5, CI [0.5, 0.5]
    assert (x["tasks"], x["only_a"]) == (9, 1)
    assert x["delta"] == pytest.approx(0.5) and x["ci"] == pytest.approx([0.5, 0.5])
    assert x["significant"] and x["mean_a"] == pytest.approx(5.0)  # mean of 1..9
    assert y["delta"] == 0.0 and not y["significant"] and y["p_value"] == 1.0
    # w: +0.3 on 5 odd tasks, -0.3 on 5 even ones -> delta 0, the CI straddles 0
    assert w["delta"] == pytest.approx(0.0) and w["ci"][0] < 0 < w["ci"][1]
    assert not w["significant"]
    assert out["only_in_b"] == [["quality", "z"]] and out["only_in_a"] == []
    assert out["config_changes"] == ["judge.model: m1 -> m2"]  # keys are redacted: equal
    # text form
    assert drscore_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                         "--resamples", "500"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"quality\s+x\s+9\s+5\.0000\s+5\.5000\s+\+0\.5000.*<0\.002\s+significant", text)
    assert re.search(r"quality\s+w\s+10 .*not significant", text)
    assert "only in B: quality/z" in text and "sk-1" not in text


def test_compare_errors(tmp_path, capsys):
    write_jsonl(tmp_path / "a" / "scores.jsonl", rows_for({("1", "x"): 1.0}))
    assert drscore_main(["compare", str(tmp_path / "a"), str(tmp_path / "missing")]) == 1  # an error, not usage
    assert "not a run directory" in capsys.readouterr().err
    assert drscore_main(["compare", str(tmp_path / "a"), str(tmp_path / "a"),
                         "--confidence", "95"]) == 2
    assert "--confidence must be between 0 and 1" in capsys.readouterr().err


# --------------------------------------------------------------------------- real runs


def keep_blocks(article: str, step: int) -> str:
    """A derived agent: keep every ``step``-th blank-line separated block (0, step, ...)."""
    blocks = [b for b in re.split(r"\n\s*\n", article) if b.strip()]
    return "\n\n".join(blocks[::step])


def test_compare_two_offline_runs_over_real_reports(tmp_path, capsys):
    """Two offline-judge runs (ReportEval quality and redundancy, RACE point-wise) over
    8 real tasks (2 Chinese, 6 English). Both score Claude 3.7 Sonnet's real reports
    and an agent named "claude-derived": in run A it keeps every other block of each
    report, in run B every third. Claude's scores are identical (deterministic judge):
    delta 0, not significant. The derived agent's deltas are recomputed from the two
    scores files over the tasks both runs scored."""
    ids = ["1", "2", "51", "52", "53", "54", "55", "56"]
    methods = ("quality", "redundancy", "race")
    pick = lambda name: [r for r in (json.loads(x) for x in  # noqa: E731
                                     (DATA / "drb" / name).read_text().splitlines() if x.strip())
                         if str(r["id"]) in ids]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", pick("tasks.jsonl"))
    claude = pick("reports.claude-3-7-sonnet.jsonl")
    full = write_jsonl(tmp_path / "reports.claude-3-7-sonnet.jsonl", claude)
    runs = {}
    for name, step in (("a", 2), ("b", 3)):
        derived = write_jsonl(tmp_path / name / "reports.claude-derived.jsonl",
                              [{**r, "article": keep_blocks(r["article"], step)} for r in claude])
        runs[name] = tmp_path / f"run-{name}"
        code = drscore_main(["run", "--methods", ",".join(methods), "--race-variant",
                             "pointwise", "--criteria", str(DATA / "drb" / "criteria.jsonl"),
                             "--tasks", str(tasks), "--reports", str(full), "--reports",
                             str(derived), "--cache", str(tmp_path / "cache"),
                             "--out", str(runs[name])])
        assert code in (0, 3)  # 3: short derived reports fail redundancy
    capsys.readouterr()
    out = compare_json(capsys, runs["a"], runs["b"])
    d = {(r["method"], r["agent"]): r for r in out["deltas"]}
    assert set(d) == {(m, a) for m in methods for a in ("claude-3-7-sonnet", "claude-derived")}

    def scores(run: Path, method: str, agent: str) -> dict[str, float]:
        rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
        return {r["task_id"]: r["score"] for r in rows
                if r["method"] == method and r["agent"] == agent and r["score"] is not None}

    for method in methods:
        same = d[(method, "claude-3-7-sonnet")]
        assert same["delta"] == 0.0 and same["ci"] == [0.0, 0.0] and not same["significant"]
        sa = scores(runs["a"], method, "claude-derived")
        sb = scores(runs["b"], method, "claude-derived")
        shared = set(sa) & set(sb)
        derived = d[(method, "claude-derived")]
        assert derived["tasks"] == len(shared) > 0, method
        assert (derived["only_a"], derived["only_b"]) == (len(set(sa) - shared), len(set(sb) - shared))
        assert derived["delta"] == pytest.approx(np.mean([sb[t] - sa[t] for t in shared]))
        assert derived["ci"][0] <= derived["delta"] <= derived["ci"][1]
        assert derived["significant"] == (derived["ci"][0] > 0 or derived["ci"][1] < 0)
    assert out["only_in_a"] == out["only_in_b"] == []
