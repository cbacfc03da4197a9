"""``drscore run`` against Ollama, which counts no prompt but gives the model's vocabulary at
``POST /api/show`` (verbose): every prompt is counted here as the server will read it, and one
over the context Ollama loaded the model with is failed before it is sent, never cut.

The mock's ``ollama`` profile counts with the vocabulary of a GGUF file (``--tokenizer
gguf:PATH``, here Llama 3's, from llama.cpp's own vocabulary files) and gives that file's
metadata at ``/api/show``, as Ollama does; it keeps the end of a prompt over its context and
reports what it kept (docs/providers.md, "A server that cuts long prompts")."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drscore.judge.local_llama import LlamaServerMissing, find_llama_vocab
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import DRB

CONTEXT = 8192


def _run(url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
           "--tasks", str(DRB / "tasks.jsonl"), "--reports", str(DRB / "reports.claude-3-7-sonnet.jsonl"),
           "--judge-url", url, "--judge-model", "llama3.1:8b", "--cache", str(tmp / "cache"), "--out", str(tmp / "run")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _rows(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "run" / "scores.jsonl").read_text().splitlines()]


def test_prompts_counted_with_ollamas_vocabulary_are_never_cut_and_the_longer_ones_are_sent_once_raised(tmp_path):
    try:
        vocab = find_llama_vocab("llama-bpe")
    except LlamaServerMissing as e:
        pytest.fail(str(e), pytrace=False)
    cfg = MockConfig(profile="ollama", context_window=CONTEXT, tokenizer=f"gguf:{vocab}")
    with MockServerProcess(cfg) as mock:
        first = _run(mock.url, tmp_path)
        served, port = mock.stats(), mock.port
    assert first.returncode == 3, first.stderr  # finished, some items failed
    t = json.loads((tmp_path / "run" / "summary.json").read_text())["totals"]
    # every prompt counted with the model's vocabulary; the usage is the count less the 3 tokens
    # this client adds for the reply's opening, which the mock's chat format does not have: exact
    assert t["prompts_counted"]["by"] == "ollama:llama3.1:8b (its byte-level BPE vocabulary)"
    assert t["prompts_counted"]["usage_less_count"] == -3.0
    assert t["judge_server"] == {"server": "ollama"}  # nothing to say: the vocabulary was read
    # the model was loaded and its context read before the first prompt: nothing was cut
    assert served["truncated_prompts"] == 0 and "prompts_cut" not in t
    failed = t["items_failed"]
    assert failed >= 1 and t["refused_over_window"] == failed and t["failure_reasons"] == {"context_length": failed}
    first_rows = _rows(tmp_path)
    refused = {r["task_id"] for r in first_rows if r["status"] == "failed"}
    assert all("tokens (ollama:llama3.1:8b (its byte-level BPE vocabulary)) exceeds the 8192-token context window"
               in r["errors"][0] for r in first_rows if r["status"] == "failed")
    assert all(r["input_tokens"] <= CONTEXT for r in first_rows if r["method"] == "quality" and r["status"] == "ok")

    # The context raised, the same command sends exactly the refused items, and each of them
    # reads more than the old context: none was refused that the server would have read whole.
    with MockServerProcess(MockConfig(profile="ollama", context_window=32768, tokenizer=f"gguf:{vocab}"),
                           port=port) as mock:
        second = _run(mock.url, tmp_path)
        again = mock.stats()
    assert second.returncode == 0, second.stderr
    assert again["requests"] == failed
    sent = [r for r in _rows(tmp_path) if r["task_id"] in refused and r["method"] == "quality"]
    assert len(sent) == failed and all(r["status"] == "ok" and r["input_tokens"] > CONTEXT for r in sent)
