"""``drscore run --tokenizer`` against a server that counts no prompts and sends no quota
headers (the mock's ``ollama`` profile), counting as GPT-4's tokenizer does, with a told token
quota: each prompt is counted here with the same tokenizer before its call."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _run(mock_url: str, out, cache, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality",
           "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
           "--judge-url", mock_url, "--judge-model", "gpt-4", "--tpm", "300000",
           "--cache", str(cache), "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _run_against_cl100k(tmp_path, *extra: str) -> tuple[dict, dict]:
    """A finished run against a server counting with cl100k that counts no prompts and sends
    no quota headers (the ``ollama`` profile): its summary's totals and what the server saw.
    10 quality calls of about 5,000-27,000 tokens against 300,000 a minute: the quota binds."""
    with MockServerProcess(MockConfig(profile="ollama", tokenizer="cl100k", tpm=300_000, latency=0.2)) as mock:
        proc = _run(mock.url, tmp_path / "run", tmp_path / "cache", *extra)
        served = mock.stats()
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "run" / "summary.json").read_text())["totals"], served


def test_each_prompt_is_counted_here_with_the_named_tokenizer(tmp_path):
    totals, served = _run_against_cl100k(tmp_path, "--tokenizer", "tiktoken:cl100k_base")
    assert totals["items"] == 10 and totals["items_failed"] == 0 and totals["calls"] == 10
    assert served["ok"] == 10
    assert served["tokenize_requests"] == 0  # the server was never asked: it has no route
    # Every request's prompt counted here (one the quota refused is counted again when resent).
    # The server counts each message's text and 3 tokens a message; we count the same texts, 3
    # a message and 3 for the reply's opening, so its usage is ours less 3 on every call: a
    # tokenizer that counted the texts differently would move this.
    assert totals["prompts_counted"] == {"by": "tiktoken:cl100k_base", "prompts": served["requests"],
                                         "usage_less_count": -3.0}
    # The margins it paced with follow its connection to this loopback server: 8 ms past a full
    # bucket plus the quickest connection's time and 20 ms for the server's own count of each
    # prompt (these are counted), doubled by each episode of 429s (none where the server refused
    # nothing), and 10 ms plus twice it for a give-back's order
    margins = totals["quota_margins"]
    assert margins["connect_ms"] is not None and margins["connect_ms"] > 0
    assert margins["lag_widened"] == 1 or served["rate_limited"] > 0
    assert margins["counted_ms"] == 20.0
    assert margins["lag_ms"] == pytest.approx(
        min(50.0, (min(15.0, 8.0 + margins["connect_ms"]) + 20.0) * margins["lag_widened"]), abs=0.002)
    assert margins["ambiguous_ms"] == pytest.approx(min(50.0, 10.0 + 2 * margins["connect_ms"]), abs=0.003)


def test_an_open_weights_models_tokenizer_json_counts_each_prompt(tmp_path):
    # Ollama serving a model whose tokenizer.json the user has: the server counts with it (here a
    # tiny word-level one, each word or punctuation run a token), and so do we
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    spec = f"hf:{tmp_path / 'tokenizer.json'}"
    with MockServerProcess(MockConfig(profile="ollama", tokenizer=spec, tpm=300_000, latency=0.2)) as mock:
        proc = _run(mock.url, tmp_path / "run", tmp_path / "cache", "--judge-model", "qwen2.5:7b",
                    "--tokenizer", f"hf:{tmp_path}")
        served = mock.stats()
    assert proc.returncode == 0, proc.stderr
    totals = json.loads((tmp_path / "run" / "summary.json").read_text())["totals"]
    assert totals["items"] == 10 and totals["items_failed"] == 0
    assert served["ok"] == 10 and served["tokenize_requests"] == 0
    # each request's prompt counted here, its usage ours less 3
    assert totals["prompts_counted"] == {"by": f"hf:{tmp_path}", "prompts": served["requests"],
                                         "usage_less_count": -3.0}


def test_a_tokenizer_that_cannot_be_loaded_stops_the_run_before_any_call(tmp_path):
    with MockServerProcess(MockConfig(profile="ollama")) as mock:
        proc = _run(mock.url, tmp_path / "run", tmp_path / "cache", "--tokenizer", "tiktoken:o100k_typo")
        served = mock.stats()
    assert proc.returncode == 1, proc.stdout + proc.stderr  # as every setting out of its range
    assert "--tokenizer tiktoken:o100k_typo: could not be loaded (o100k_typo: unknown)" in proc.stderr
    assert "o200k_base" in proc.stderr  # the encodings it could have named
    assert served["requests"] == 0


def test_without_a_tokenizer_the_estimates_learn_on_a_proxy_tokenizers_counts(tmp_path):
    # No --tokenizer: each prompt is counted with cl100k_base, which the tokenizer extra ships, as
    # the features its estimate learns the server's counting on (here the same tokenizer's)
    totals, served = _run_against_cl100k(tmp_path, "--judge-model", "qwen2.5:7b")
    assert totals["items"] == 10 and totals["items_failed"] == 0 and served["tokenize_requests"] == 0
    assert "prompts_counted" not in totals  # nothing counted the model's tokens before the calls
    estimated = totals["prompts_estimated"]
    # each request's features counted once (a request the quota refused keeps its count)
    assert estimated["on"] == "tiktoken:cl100k_base counts" and estimated["prompts"] == served["ok"]
    # the estimates' error, learned from the usage: the mock counts as the proxy does, so its
    # misses are the chat format's few tokens and what remains of the prior 12% after 10 answers
    assert 0 <= estimated["relative_error"] < 0.12
    assert estimated["earlier_calls"] == 0  # a new cache: nothing learned before
    assert estimated["token_quota"] is True  # --tpm told: a token bucket paced them


def test_a_later_run_starts_its_estimates_from_what_the_earlier_one_learned(tmp_path):
    # The same cache, then other reports (new calls, not cached answers): the proxy's fit of the
    # first run's 10 answers is where the second run's estimates start
    with MockServerProcess(MockConfig(profile="ollama", tokenizer="cl100k", tpm=300_000, latency=0.2)) as mock:
        first = _run(mock.url, tmp_path / "first", tmp_path / "cache", "--judge-model", "qwen2.5:7b")
        later = _run(mock.url, tmp_path / "later", tmp_path / "cache", "--judge-model", "qwen2.5:7b",
                     "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"))
        served = mock.stats()
    assert first.returncode == 0 and later.returncode == 0, first.stderr + later.stderr
    totals = [json.loads((tmp_path / name / "summary.json").read_text())["totals"] for name in ("first", "later")]
    assert [t["calls"] for t in totals] == [10, 10] and served["ok"] == 20
    assert [t["prompts_estimated"]["earlier_calls"] for t in totals] == [0, 10]


def test_a_run_on_estimates_that_miss_says_so_and_how_to_count_instead(tmp_path):
    # The mock counts by its words rule (a line of Chinese one token), which cl100k's counts fit
    # only roughly: the run names what its estimates learned on, their learned error as its
    # summary keeps it, and the option that counts each prompt instead
    with MockServerProcess(MockConfig(profile="ollama", tpm=300_000, latency=0.2)) as mock:
        proc = _run(mock.url, tmp_path / "run", tmp_path / "cache", "--judge-model", "qwen2.5:7b")
    assert proc.returncode == 0, proc.stderr
    totals = json.loads((tmp_path / "run" / "summary.json").read_text())["totals"]
    error = totals["prompts_estimated"]["relative_error"]
    assert error >= 0.02 or totals["rate_limited_429"] > 0, totals["prompts_estimated"]
    note = next(line for line in proc.stdout.splitlines() if "the token quota's prompts were estimated" in line)
    refused = f"{totals['rate_limited_429']} 429(s); " if totals["rate_limited_429"] else ""
    assert note == (f"  note: {refused}the token quota's prompts were estimated on tiktoken:cl100k_base counts "
                    f"({error:.1%} off a call, learned), not counted: --tokenizer with the judge model's tokenizer "
                    f"counts each one here")
    # counted with the model's tokenizer, nothing is estimated and nothing to say
    with MockServerProcess(MockConfig(profile="ollama", tokenizer="cl100k", tpm=300_000, latency=0.2)) as mock:
        counted = _run(mock.url, tmp_path / "counted", tmp_path / "cache", "--tokenizer", "tiktoken:cl100k_base")
    assert counted.returncode == 0, counted.stderr
    assert "prompts were estimated" not in counted.stdout and "prompts_estimated" not in json.loads(
        (tmp_path / "counted" / "summary.json").read_text())["totals"]
