"""``drscore run`` against a server that cuts a long prompt to its context and answers anyway
(Ollama's default past its ``num_ctx``): every cut answer is caught, not scored and not
cached, the prompts clearly longer are not sent, and once the server's context is raised the
same command sends only those items again.

The mock's ``ollama`` profile keeps the end of a prompt over ``--context-window`` and reports
the tokens it kept as the usage, as Ollama does; its ``/api/version`` and ``/api/ps`` answer as
Ollama's do (docs/providers.md, "A server that cuts long prompts")."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import DRB


def _run(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """quality + redundancy over the 21 reports of the test slice: prompts of a whole report,
    1,800-8,200 tokens as the mock counts them (8 over 5,000), and paragraph pairs of a few hundred."""
    cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
           "--tasks", str(DRB / "tasks.jsonl"), "--reports", str(DRB / "reports.claude-3-7-sonnet.jsonl"),
           "--judge-url", url, "--judge-model", "llama3.1:8b", "--cache", str(tmp / "cache"), "--out", str(tmp / "run"),
           *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _totals(tmp: Path) -> dict:
    return json.loads((tmp / "run" / "summary.json").read_text())["totals"]


def test_cut_prompts_fail_their_items_and_a_raised_context_sends_only_them_again(tmp_path):
    with MockServerProcess(MockConfig(profile="ollama", context_window=5000)) as mock:
        first = _run(mock.url, tmp_path)
        served, port = mock.stats(), mock.port
    assert first.returncode == 3, first.stderr  # finished, some items failed
    t = _totals(tmp_path)
    failed = t["items_failed"]
    # the mock counting by its words rule has no vocabulary to give at /api/show: estimated, and said so
    assert t["judge_server"] == {"server": "ollama", "vocabulary_not_used": "POST /api/show gave no tokenizer: an "
                                 "Ollama without verbose show, or a model imported from safetensors"}
    assert "note: Ollama's vocabulary counted no prompt (POST /api/show gave no tokenizer" in first.stdout
    # The 8 prompts over the context either were not sent, estimated clearly longer than the
    # 5,000 tokens /api/ps stated, or were sent, cut, and caught, each read to those 5,000
    # tokens (which of the two depends on the estimates the first answers taught; the mock's
    # words rule, which reads a run of Chinese as one token, has an estimate learned on the
    # Chinese reports refuse a few English ones of 4,200-4,600 tokens too): none was scored.
    cut = served["truncated_prompts"]
    assert t["failure_reasons"] == {"context_length": failed} and failed >= 8
    assert cut + t["refused_over_window"] == failed
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    failed_rows = [r for r in rows if r["status"] == "failed"]
    assert all(r["method"] == "quality" and r["score"] is None for r in failed_rows)
    scored = [r for r in rows if r["method"] == "quality" and r["status"] == "ok"]
    assert len(scored) + failed == 21 and all(r["input_tokens"] < 5000 for r in scored)  # each read whole
    assert sum("read 5,000 tokens of a prompt of" in r["errors"][0] for r in failed_rows) == cut
    assert sum("context window of llama3.1:8b (as Ollama loaded it" in r["errors"][0]
               for r in failed_rows) == t["refused_over_window"]
    if cut:
        assert t["prompts_cut"] == {"prompts": cut, "read_to": 5000, "scored_before_known": 0}
        assert f"cut {cut} prompt(s) to 5,000 tokens" in first.stdout and "OLLAMA_CONTEXT_LENGTH=32768" in first.stdout

    # The user raises the server's context and runs the same command: only the failed items
    # are sent (the scored ones come from the cache, the cut ones were never put in it).
    with MockServerProcess(MockConfig(profile="ollama", context_window=32768), port=port) as mock:
        second = _run(mock.url, tmp_path)
        again = mock.stats()
    assert second.returncode == 0, second.stderr
    assert again["requests"] == failed and again["truncated_prompts"] == 0
    t = _totals(tmp_path)
    assert t["items"] == 42 and t["items_failed"] == 0 and "prompts_cut" not in t
    assert t["calls"] == served["requests"] + failed  # the run's ledger: both invocations


def test_a_server_cutting_below_the_context_it_states_is_caught_by_the_count_it_cuts_to(tmp_path):
    # An Ollama version that cut at half the context /api/ps stated: prompts a little over
    # the cut are not read short enough to tell one by one; the count they all read is.
    # One call at a time (Ollama's default of one request per model): the calls end in one order.
    with MockServerProcess(MockConfig(profile="ollama", context_window=2500, ollama_ps_context=5000)) as mock:
        proc = _run(mock.url, tmp_path, "--concurrency", "1")
        served = mock.stats()
    # most whole reports are over 2,500 tokens: the run finishes with them failed, or stops once
    # the first ten quality calls to end all failed ("every prompt so far is longer than...")
    assert proc.returncode in (1, 3), proc.stderr
    totals = _totals(tmp_path)
    # (once in a full suite, no cut was caught: what the run said and counted, to tell why next time)
    assert "prompts_cut" in totals, (proc.stdout[-3000:], proc.stderr[-2000:], served,
                                     {k: totals.get(k) for k in ("calls", "items", "items_failed", "failure_reasons",
                                                                 "refused_over_window", "judge_server", "windows")})
    cut = totals["prompts_cut"]
    assert cut["read_to"] == 2500 and cut["prompts"] >= 1
    # every cut answer failed, or was scored before the count showed and is named as suspect
    assert cut["prompts"] + cut["scored_before_known"] == served["truncated_prompts"]
    if cut["scored_before_known"]:
        assert f"{cut['scored_before_known']} answer(s) scored before that count showed" in proc.stdout
