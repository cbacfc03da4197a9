"""The mock judge names what it was sent (judge.mock.echo): criterion names from a JSON list
in the prompt, statement numbers from numbered lines, item keys from schema enums. So RACE
and FACT rehearsed against ``drscore mock-judge`` give rows with coverage > 0 and a ranking
(before: coverage 0, nobody ranked)."""
from __future__ import annotations

import csv
import json

import orjson
import pytest

from drscore.engine.methods.fact.method import FactDedup, FactSupport
from drscore.engine.methods.race.method import RacePairScores
from drscore.engine.runtime.calls.verdicts import decode_verdict, schema_of
from drscore.judge.mock.completions import prepare
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT
from support.serve import serve

EXAMPLES = ROOT / "examples"


def _ask(schema: dict, prompt: str, seed: str = "x") -> dict:
    payload = {"model": "m", "messages": [{"role": "system", "content": seed}, {"role": "user", "content": prompt}],
               "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}}}
    return json.loads(prepare(payload).answer)


def test_criterion_names_listed_in_the_prompt_come_back_in_order():
    criteria = {"comprehensiveness": [{"criterion": "Covers costs", "explanation": "."},
                                      {"criterion": "Covers risks", "explanation": "."}],
                "insight": [{"criterion": "Explains why", "explanation": "."}],
                "instruction_following": [{"criterion": "Answers the question", "explanation": "."}],
                "readability": [{"criterion": "Clear structure", "explanation": "."},
                                {"criterion": "Plain words", "explanation": "."}, {"criterion": "Tables", "explanation": "."}]}
    prompt = f"<report_1>Some text [1].</report_1>\n<criteria>\n{json.dumps(criteria, indent=2)}\n</criteria>\nScore."
    for seed in ("a", "b", "c"):
        answer = _ask(schema_of(RacePairScores), prompt, seed)
        decode_verdict(json.dumps(answer), RacePairScores)  # still valid against the schema
        for dim, listed in criteria.items():
            assert [item["criterion"] for item in answer[dim]] == [c["criterion"] for c in listed]


def test_statement_numbers_come_from_the_numbered_block_not_the_page():
    # The page quotes its own reference list ([1] ... [7]); the statements block is the list to judge.
    page = "Intro text.\n[1] Some source\n[2] Another\nMore text [7]."
    statements = "\n".join(f"[{i}] Statement number {i}." for i in range(1, 5))
    prompt = f'<page url="http://x">\n{page}\n</page>\n<statements>\n{statements}\n</statements>\nJudge each.'
    support = _ask(schema_of(FactSupport), prompt)
    assert [j["statement"] for j in support["judgments"]] == [1, 2, 3, 4]
    assert {j["verdict"] for j in support["judgments"]} <= {"supported", "partially", "unsupported", "unknown"}
    keep = _ask(schema_of(FactDedup), prompt)
    assert keep["keep"] == [1, 2, 3, 4]


def test_an_enum_of_item_keys_in_the_schema_is_covered():
    schema = {"type": "object", "required": ["items", "by_key"], "properties": {
        "items": {"type": "array", "items": {"type": "object", "required": ["item", "met"], "properties": {
            "item": {"enum": ["k1", "k2", "k3"]}, "met": {"type": "boolean"}}}},
        "by_key": {"type": "object", "propertyNames": {"enum": ["a", "b"]},
                   "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 4}}}}
    answer = _ask(schema, "Judge the items.")
    assert [i["item"] for i in answer["items"]] == ["k1", "k2", "k3"]
    assert all(isinstance(i["met"], bool) for i in answer["items"])
    assert sorted(answer["by_key"]) == ["a", "b"] and all(0 <= v <= 4 for v in answer["by_key"].values())


def test_a_label_enum_is_still_picked_not_covered():
    schema = {"type": "object", "required": ["verdicts"], "properties": {"verdicts": {"type": "array", "items": {
        "type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["yes", "no", "maybe"]}}},
        "minItems": 1, "maxItems": 1}}}
    assert len(_ask(schema, "Judge.")["verdicts"]) == 1


def test_race_against_the_mock_judge_covers_every_criterion_and_ranks(tmp_path):
    from drscore.cli import main

    out = tmp_path / "run"
    with MockServerProcess(MockConfig(seed=5)) as mock:
        code = main(["run", "--methods", "race", "--race-variant", "pointwise", "--tasks",
                     str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--judge-url", mock.url,
                     "--judge-model", "mock", "--no-cache", "--out", str(out)])
    assert code == 0
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and all(r["status"] == "ok" and r["coverage"] == 1.0 for r in rows)
    assert all(r["judged"] == r["expected"] > 0 for r in rows)
    assert main(["report", str(out)]) == 0
    with open(out / "leaderboard.csv", newline="", encoding="utf-8") as f:
        board = [r for r in csv.DictReader(f) if r["method"] == "race" and r["kind"] == "agent"]
    assert sorted(r["rank"] for r in board) == ["1", "2"] and not any(r["unranked_reason"] for r in board)


PAGES = {
    "/a": ("Fish prices", ["Chub mackerel prices in Tokyo rose 12% in 2023 as landings fell.",
                           "Exports of frozen mackerel to Africa doubled between 2015 and 2020."]),
    "/b": ("Catch report", ["Japan landed 300,000 tons of chub mackerel in 2020, officials said.",
                            "The species spawns in the East China Sea in late winter."]),
}


def _report(base: str, agent: str) -> str:
    claims = ["Chub mackerel prices in Tokyo rose 12% in 2023 [1].", "Exports to Africa doubled by 2020 [1].",
              "Japan landed 300,000 tons in 2020 [2].", "The species spawns in the East China Sea [2]."]
    if agent == "brief":
        claims = claims[::2]
    return " ".join(claims) + f"\n\nReferences\n[1] {base}/a - Prices\n[2] {base}/b - Catch\n"


async def test_fact_against_the_mock_judge_judges_statements_and_ranks(tmp_path):
    from aiohttp import web

    from drscore.api import JudgeConfig, Run, RunConfig

    async def page(request):
        title, paragraphs = PAGES[request.path]
        body = "".join(f"<p>{p} {' '.join(['Context sentence about fisheries.'] * 12)}</p>" for p in paragraphs)
        return web.Response(text=f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}"
                                 "</article></body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner, base = await serve(app)
    tasks, reports = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl"
    tids = ["t1", "t2", "t3"]
    tasks.write_bytes(b"".join(orjson.dumps({"task_id": t, "prompt": f"Question {t} on mackerel?"}) + b"\n"
                               for t in tids))
    reports.write_bytes(b"".join(orjson.dumps({"task_id": t, "agent": a, "report": _report(base, a)}) + b"\n"
                                 for t in tids for a in ("thorough", "brief")))
    try:
        with MockServerProcess(MockConfig(seed=3)) as mock:
            cfg = RunConfig(methods=["fact"], reports=[str(reports)], tasks=str(tasks), out=str(tmp_path / "run"),
                            judge=JudgeConfig(url=mock.url, model="mock", no_cache=True), allow_private_fetch=True)
            async with Run(cfg) as run:
                rows = [row async for row in run.rows()]
    finally:
        await runner.cleanup()
    from drscore.engine.stats.rankable import agent_reason

    assert len(rows) == 6
    for row in rows:
        counts = row.details["counts"]
        judged = sum(counts[k] for k in ("supported", "partially", "unsupported", "unknown"))
        assert counts["failed"] == 0 and judged == (4 if row.agent == "thorough" else 2)
        assert row.coverage is not None and row.coverage > 0 and row.score is not None
    # The mock's labels are drawn from a hash of the request, which holds the page server's
    # port: a row whose every pair it labelled "unknown" has nothing judgeable (partial, by the
    # benchmark's rule valid_rate 0), and an agent all of whose rows are so is not ranked, and
    # says why. Any other agent is ranked.
    for agent in ("thorough", "brief"):
        mine = [r for r in rows if r.agent == agent]
        judgeable = [r for r in mine if r.details["counts"]["unknown"] < (4 if agent == "thorough" else 2)]
        assert all(r.status == "ok" for r in judgeable) and all(r.status == "partial" for r in mine
                                                                if r not in judgeable)
        if len(judgeable) == len(mine):
            assert agent_reason(mine) is None
        else:
            assert agent_reason(mine) == f"{len(mine) - len(judgeable)} of {len(mine)} scored rows partial"


@pytest.fixture(autouse=True)
def _no_ci_colour(monkeypatch):
    monkeypatch.setenv("CI", "1")
