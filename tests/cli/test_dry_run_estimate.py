"""The dry run's input estimate: with the character rule alone, and with the token
counting an earlier run recorded in the cache, against what an endpoint counting with a
real tokenizer (the mock judge with GPT-4's cl100k) counts for the same calls."""
from __future__ import annotations

import json
import math
import sqlite3

import pytest

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.judge.mock.server import MockConfig, start
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _split(tmp, target_ids):
    """Two report files of the bundled examples: the history with Chinese and English tasks,
    the target with the given ones."""
    rows = [json.loads(line) for line in (EXAMPLES / "reports.claude-3-7-sonnet.jsonl").read_text().splitlines()]
    history, target = tmp / "history.jsonl", tmp / "target.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in (1, 2, 51, 52, 53)))
    target.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in target_ids))
    return history, target


async def _run(url: str, reports, cache, *, dry: bool, out=None, method: str = "quality",
               tokenizer: str | None = None) -> dict:
    cfg = RunConfig(methods=[method], reports=[str(reports)], tasks=str(EXAMPLES / "tasks.jsonl"),
                    out=str(out) if out else None, dry_run=dry,
                    judge=JudgeConfig(url=url, model="gpt-4.1", cache_dir=str(cache), tokenizer=tokenizer))
    async with Run(cfg) as run:
        async for _ in run.rows():
            pass
    return run.summary["totals"]


@pytest.mark.parametrize("target_ids", [(54, 55), (3, 4, 5)], ids=["english", "chinese"])
async def test_a_dry_run_estimates_with_the_counting_an_earlier_run_recorded(tmp_path, target_ids):
    history, target = _split(tmp_path, target_ids)
    runner, port = await start(MockConfig(tokenizer="cl100k"), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        prior = await _run(url, target, tmp_path / "empty", dry=True)
        await _run(url, history, tmp_path / "cache", dry=False, out=tmp_path / "history-run")
        learned = await _run(url, target, tmp_path / "cache", dry=True)
        counted = (await _run(url, target, tmp_path / "fresh", dry=False, out=tmp_path / "target-run"))
    finally:
        await runner.cleanup()
    assert prior["planned_calls"] == learned["planned_calls"] == counted["calls"] == len(target_ids)
    real = counted["input_tokens"]  # the endpoint's own count of the same five prompts
    assert prior["planned_input_tokens_error"] == 0.3 and "character rule" in prior["planned_input_tokens_basis"]
    assert learned["planned_input_tokens_basis"] == "learned from 5 answered calls of gpt-4.1"
    assert learned["planned_input_tokens_error"] < 0.3
    assert abs(learned["planned_input_tokens"] / real - 1) <= 0.10
    # The character rule is off by more on one language (English over, Chinese under, by
    # about a fifth or a quarter with cl100k): what the recorded counting corrects.
    assert abs(prior["planned_input_tokens"] / real - 1) > 0.15


async def test_a_dry_run_plans_ace_items_as_long_as_the_judges_recorded_checklists(tmp_path):
    history, target = _split(tmp_path, (3, 4, 5, 54, 55))  # other tasks than the history's
    runner, port = await start(MockConfig(), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        published = await _run(url, target, tmp_path / "cache", dry=True, method="ace")
        await _run(url, history, tmp_path / "cache", dry=False, out=tmp_path / "history-run", method="ace")
        learned = await _run(url, target, tmp_path / "cache", dry=True, method="ace")
        counted = await _run(url, target, tmp_path / "fresh", dry=False, out=tmp_path / "target-run", method="ace")
    finally:
        await runner.cleanup()
    # Nothing recorded: the published protocol's 4 items a checklist, 5 checklists and 20 item calls
    follow = published["planned_follow_ups"]["ace_checklist"]
    assert follow["per_answer"] == 4 and published["planned_calls"] == 5 + 20
    assert (follow["error_low"], follow["error_high"]) == (-0.25, 0.5)
    # Recorded: the history's 5 checklists, counted here from the cache file itself
    with sqlite3.connect(tmp_path / "cache" / "judge.sqlite") as db:
        lengths = [len(json.loads(r[0])["items"]) for r in
                   db.execute("SELECT CAST(response AS BLOB) FROM responses WHERE template = 'ace_checklist'")]
    assert len(lengths) == 5
    mean = sum(min(n, 6) for n in lengths) / 5
    follow = learned["planned_follow_ups"]["ace_checklist"]
    assert follow["per_answer"] == pytest.approx(mean, abs=1e-3) and follow["basis"] == "learned from 5 answers of gpt-4.1"
    # one report a task: the item calls are the whole lengths handed out, round(5 x mean) in total
    assert learned["planned_calls"] == 5 + math.floor(5 * mean + 0.5) == 5 + follow["entries_planned"]
    # and the mock's own checklists for the target tasks came out within the stated error bar of that
    sent_items = counted["calls"] - 5
    assert follow["error_low"] <= sent_items / follow["entries_planned"] - 1 <= follow["error_high"]


async def test_each_template_is_planned_with_its_own_recorded_counting_and_the_total_states_its_bar(tmp_path):
    history, target = _split(tmp_path, (3, 4, 5, 54, 55))
    runner, port = await start(MockConfig(tokenizer="cl100k"), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        await _run(url, history, tmp_path / "cache", dry=False, out=tmp_path / "history-run", method="redundancy")
        learned = await _run(url, target, tmp_path / "cache", dry=True, method="redundancy")
        with sqlite3.connect(tmp_path / "cache" / "judge.sqlite") as db:  # the same cache, model-wide counting only
            recorded = dict(db.execute("SELECT template, COUNT(*) FROM responses GROUP BY template").fetchall())
            db.execute("DELETE FROM template_token_counts")
        model_wide = await _run(url, target, tmp_path / "cache", dry=True, method="redundancy")
        counted = await _run(url, target, tmp_path / "fresh", dry=False, out=tmp_path / "target-run",
                             method="redundancy")
    finally:
        await runner.cleanup()
    real = counted["input_tokens"]
    by = learned["planned_input_by_template"]
    assert set(by) == {"redundancy_pair", "redundancy_pair_zh"}
    for template, p in by.items():  # one record per template, as many calls as the history answered
        assert p["basis"] == f"learned from {recorded[template]} answered prompts of this template"
        assert 0 < p["error"] < learned["planned_input_tokens_error"]
    assert sum(p["tokens"] for p in by.values()) == learned["planned_input_tokens"]
    assert learned["planned_calls"] == counted["calls"]
    # The total is within the bar it states; with the model-wide ratios alone, the bar is one
    # call's (a template's calls may miss alike), wider, and the total within it too
    assert abs(learned["planned_input_tokens"] / real - 1) <= learned["planned_input_tokens_error_total"]
    assert abs(model_wide["planned_input_tokens"] / real - 1) <= model_wide["planned_input_tokens_error_total"]
    assert learned["planned_input_tokens_error_total"] < model_wide["planned_input_tokens_error_total"]
    assert all("no record of this template" in p["basis"] for p in model_wide["planned_input_by_template"].values())
    assert model_wide["planned_input_tokens_error_total"] == pytest.approx(
        2 * model_wide["planned_input_tokens_error"], abs=1e-3)


async def test_a_dry_run_counts_its_prompts_with_the_models_tokenizer_where_named(tmp_path):
    _, target = _split(tmp_path, (3, 4, 54, 55))  # Chinese and English
    runner, port = await start(MockConfig(tokenizer="cl100k"), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        planned = await _run(url, target, tmp_path / "a", dry=True, tokenizer="tiktoken:cl100k_base")
        counted = await _run(url, target, tmp_path / "b", dry=False, out=tmp_path / "run")
    finally:
        await runner.cleanup()
    assert planned["planned_calls"] == counted["calls"] == 4
    # The endpoint counts each message's text and 3 tokens a message; the dry run counted the
    # same texts with 3 a message and 3 for the reply: 3 more a call, and nothing else apart.
    assert planned["planned_input_tokens"] == counted["input_tokens"] + 3 * 4
    assert planned["planned_input_tokens_basis"].startswith("counted with tiktoken:cl100k_base")
    # the bar: the chat format's 12 tokens a prompt, over the prompts' mean size
    assert planned["planned_input_tokens_error"] == round(12 * 4 / planned["planned_input_tokens"], 4)
