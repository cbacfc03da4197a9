"""FACT's fidelity options through ``drscore run``: the de-duplication rule and the page
text are flags, and a Chinese task's calls use the Chinese templates."""
from __future__ import annotations

import json

from drscore.cli import main
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _templates(out) -> set[str]:
    return {json.loads(line)["template"] for line in (out / "verdicts.jsonl").read_text().splitlines()}


def test_fact_flags_choose_the_dedup_template_and_chinese_tasks_get_chinese_ones(tmp_path, capsys):
    # Task 1 is Chinese; --offline-pages with an empty page store leaves every page
    # unreadable, so the run makes de-duplication calls only (offline judge).
    base = ["run", "--methods", "fact", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "1",
            "--offline-pages", "--cache", str(tmp_path / "cache")]
    assert main([*base, "--out", str(tmp_path / "exact")]) == 0
    assert _templates(tmp_path / "exact") == {"fact_dedup_zh"}
    assert main([*base, "--fact-dedup", "paraphrase", "--fact-page-text", "window",
                 "--out", str(tmp_path / "paraphrase")]) == 0
    assert _templates(tmp_path / "paraphrase") == {"fact_dedup_paraphrase_zh"}
    row = json.loads((tmp_path / "paraphrase" / "scores.jsonl").read_text().splitlines()[0])
    assert row["details"]["dedup_rule"] == "paraphrase" and row["details"]["page_text"] == "window"
    assert row["details"]["prompt_language"] == "zh"
    assert main([*base, "--prompt-language", "en", "--out", str(tmp_path / "en")]) == 0
    assert _templates(tmp_path / "en") == {"fact_dedup"}
