"""``drscore run --protocol``: a published judge set-up fills in defaults, explicit
flags win."""
from __future__ import annotations

import json

import pytest

from drscore.api import JudgeConfig, RunConfig, with_protocol
from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def test_a_protocol_fills_in_only_what_was_not_set():
    cfg = with_protocol(RunConfig(methods=["race"], reports=["r.jsonl"], protocol="drb"))
    assert cfg.judge.model == "gemini-2.5-pro" and cfg.judge.thinking_budget == 16_000
    assert cfg.judge.provider_temperature is True
    assert cfg.method_options == {"race_weight_samples": 5, "prompt_language": "auto"}
    mine = with_protocol(RunConfig(methods=["race"], reports=["r.jsonl"], protocol="drb",
                                   judge=JudgeConfig(model="o3", reasoning_effort="low"),
                                   method_options={"race_weight_samples": 1}))
    assert mine.judge.model == "o3" and mine.judge.thinking_budget is None  # the effort is the setting
    assert mine.method_options["race_weight_samples"] == 1
    # FACT's calls go through the same client as RACE's, with the same thinking budget.
    fact = with_protocol(RunConfig(methods=["fact"], reports=["r.jsonl"], protocol="drb-fact"))
    assert fact.judge.model == "gemini-2.5-flash" and fact.judge.thinking_budget == 16_000
    assert fact.judge.provider_temperature is True
    # Rigorous Bench states no temperature for its judge: the provider's default, as for the others.
    rigorous = with_protocol(RunConfig(methods=["rigorous"], reports=["r.jsonl"], protocol="rigorous"))
    assert rigorous.judge.model == "gpt-4o-2024-11-20" and rigorous.judge.provider_temperature is True
    plain = RunConfig(methods=["race"], reports=["r.jsonl"])
    assert with_protocol(plain) is plain
    with pytest.raises(ValueError, match="unknown --protocol 'drx'"):
        with_protocol(RunConfig(methods=["race"], reports=["r.jsonl"], protocol="drx"))


def test_drb_on_the_command_line_sends_its_thinking_budget(tmp_path):
    # A thinking mock that would think 20,000 tokens: the protocol's budget of 16,000 bounds it.
    with MockServerProcess(MockConfig(reasoning_tokens=20_000)) as mock:
        out = tmp_path / "run"
        code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "2",
                     "--judge-url", mock.url, "--protocol", "drb", "--no-cache", "--out", str(out)])
        assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["protocol"] == "drb" and config["judge"]["model"] == "gemini-2.5-pro"
    assert config["judge"]["thinking_budget"] == 16_000 and config["judge"]["provider_temperature"] is True
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(v["reasoning_tokens"] == 16_000 for v in verdicts if not v["cached"])
