"""drscore against two real OpenAI-compatible servers nobody here wrote (issue 26):
llama.cpp's own ``llama-server`` and llama-cpp-python's server, both built from source by
scripts/install-llama-servers and serving a tiny random-weight GGUF made by the fixtures.

A recording proxy (tests/support/recording_proxy.py) stands between drscore and the server
and writes down every exchange, so each test can hold drscore's own figures to what the
server said: the tokens in the summary are the sum of the ``usage`` the server answered,
a refused body costs the calls it costs, the server never had more requests at once than
it can serve. The answers of a random-weight model mean nothing; what is tested is that
every row is either scored or failed with the reason the server's behaviour gives.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aiohttp import web

from drscore.cli import main
from support.llama import ALIAS, EXAMPLES, SERVER_CONTEXT, SERVER_SLOTS
from support.recording_proxy import RecordingProxy
from support.serve import ThreadedServer

pytestmark = pytest.mark.timeout(900)
README = Path(__file__).resolve().parents[2] / "README.md"
# A failed row may carry only the reasons that belong to one request and that this
# server's behaviour can give: a prompt over its window, an answer cut off by a full window.
REQUEST_REASONS = {"context_length", "truncated", "invalid_request"}


def _run(capsys, out: Path, *args: str) -> tuple[int, dict, list[dict], str]:
    code = main(["run", *args] if "--out" in args else ["run", *args, "--out", str(out)])
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    return code, summary, rows, err


def _reason(error: str) -> str:
    """The failure kind of a row's error: ``reason: detail``, or ``step: reason: detail``."""
    head, _, rest = error.partition(": ")
    second = rest.partition(": ")[0]
    return second if head not in REQUEST_REASONS and second in REQUEST_REASONS else head


def _reasons(rows: list[dict]) -> set[str]:
    return {_reason(e) for r in rows if r["status"] == "failed" for e in r["errors"]}


def _scored_or_request_fault(row: dict) -> bool:
    """Scored (``partial``: RACE criteria the random model did not name), or failed with a
    reason that belongs to the one request."""
    return row["status"] in ("ok", "partial") or (row["status"] == "failed" and _reasons([row]) <= REQUEST_REASONS)


def _documented_command() -> list[str]:
    """README's 'Scoring a run' command, as written, for the judge URL and model."""
    text = README.read_text(encoding="utf-8")
    block = text.split("## Scoring a run", 1)[1].split("```", 2)[1]
    words = block.replace("\\\n", " ").split()
    assert words[:2] == ["drscore", "run"]
    return words[2:]


def _with(args: list[str], **values: str) -> list[str]:
    out = list(args)
    for flag, value in values.items():
        name = "--" + flag.replace("_", "-")
        if name in out:
            out[out.index(name) + 1] = value
        else:
            out += [name, value]
    return out


# --- llama.cpp's llama-server ------------------------------------------------------------


@pytest.fixture
def proxy(request):
    server = request.getfixturevalue(request.param)
    with RecordingProxy(server.root) as p:
        yield p


@pytest.mark.parametrize("proxy", ["llama_server"], indirect=True)
def test_quality_and_redundancy_against_llama_server_score_or_name_the_request_fault(proxy, tmp_path, capsys):
    code, summary, rows, err = _run(
        capsys, tmp_path / "run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
        "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", proxy.url + "/v1",
        "--judge-model", ALIAS, "--cache", str(tmp_path / "cache"))
    t = summary["totals"]
    assert code in (0, 3) and len(rows) == 20
    assert all(_scored_or_request_fault(r) for r in rows), rows
    assert sum(r["status"] == "ok" for r in rows) >= 12  # the reports that fit are scored
    # What the server said about itself, used: its window per slot and its slots.
    assert t["judge_server"] == {"server": "llama.cpp", "window": SERVER_CONTEXT // SERVER_SLOTS,
                                 "slots": SERVER_SLOTS, "cancels": True}
    assert proxy.max_in_flight <= SERVER_SLOTS + 1  # its slots, plus the start-up GETs
    # Structured output is honoured: no fallback, no refusal.
    assert "judge_adapted" not in t and not any(e.status == 500 for e in proxy.completions())
    # Tokens recorded = the server's usage, failed items included.
    assert (t["input_tokens"], t["output_tokens"]) == proxy.usage_totals()
    per_method = summary["per_method"]
    assert sum(m["input_tokens"] for m in per_method.values()) == t["input_tokens"]
    assert sum(r["input_tokens"] for r in rows) == t["input_tokens"]
    # Its price is unknown: cost "unknown" with the warning, never $0.
    assert t["price_unknown"] == ALIAS and t["cost_usd"] is None and "price" in err.lower()
    # Prompts over the window: those clearly over it (by the estimate, against the window the
    # server stated up front) were not sent; those that might have fitted were sent, and the
    # server's 400 failed their row with context_length. Nothing else was refused.
    over = [e for e in proxy.completions() if e.status == 400]
    assert all(e.answer["error"]["type"] == "exceed_context_size_error" for e in over)
    assert t["refused_over_window"] > 0
    assert t["refused_over_window"] + len(over) == sum("context_length" in " ".join(r["errors"]) for r in rows)
    assert len(over) + len([e for e in proxy.completions() if e.status == 200]) == len(proxy.completions())


@pytest.mark.parametrize("proxy", ["llama_server_wide"], indirect=True)
def test_race_against_llama_server_every_row_judged_or_failed_with_a_request_reason(proxy, tmp_path, capsys):
    code, summary, rows, _ = _run(
        capsys, tmp_path / "run", "--methods", "race", "--tasks", str(EXAMPLES / "tasks.jsonl"),
        "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", proxy.url + "/v1",
        "--judge-model", ALIAS, "--cache", str(tmp_path / "cache"), "--limit", "6",
        "--criteria", str(EXAMPLES / "criteria.jsonl"), "--race-variant", "pointwise")
    t = summary["totals"]
    assert code in (0, 3) and len(rows) == 6
    assert all(_scored_or_request_fault(r) for r in rows), rows
    assert sum(r["status"] in ("ok", "partial") for r in rows) >= 4  # scored: the prompts fit this window
    assert (t["input_tokens"], t["output_tokens"]) == proxy.usage_totals()


def _fact_reports(tmp_path: Path, pages: str) -> Path:
    """Two English example reports whose citations point at the local page server."""
    lines = []
    for line in (EXAMPLES / "reports.claude-3-7-sonnet.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] not in (51, 52):
            continue
        n = iter(range(10_000))
        rec["article"] = re.sub(r"https?://[^\s)\]>]+", lambda m: f"{pages}/page/{rec['id']}-{next(n)}",
                                rec["article"])
        lines.append(json.dumps(rec, ensure_ascii=False))
    path = tmp_path / "reports.local-cites.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _page_app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        text = (f"<html><head><title>Source {name}</title></head><body><article><h1>Source {name}</h1>"
                + "".join(f"<p>Paragraph {i} of source {name} reports figures and findings on the topic, "
                          "with the methods, the data and what the authors concluded.</p>" for i in range(12))
                + "</article></body></html>")
        return web.Response(text=text, content_type="text/html")
    app = web.Application()
    app.router.add_get("/page/{name}", page)
    return app


@pytest.mark.parametrize("proxy", ["llama_server"], indirect=True)
def test_fact_against_llama_server_with_local_pages(proxy, tmp_path, capsys):
    with ThreadedServer(_page_app) as pages:
        reports = _fact_reports(tmp_path, pages)
        code, summary, rows, _ = _run(
            capsys, tmp_path / "run", "--methods", "fact", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(reports), "--judge-url", proxy.url + "/v1", "--judge-model", ALIAS,
            "--cache", str(tmp_path / "cache"), "--allow-private-fetch")
    t = summary["totals"]
    assert code in (0, 3) and len(rows) == 2
    assert all(_scored_or_request_fault(r) for r in rows), rows
    assert all(r["judged"] > 0 for r in rows)  # statements were checked against the fetched pages
    assert (t["input_tokens"], t["output_tokens"]) == proxy.usage_totals()


# --- llama-cpp-python's server -----------------------------------------------------------


@pytest.mark.parametrize("proxy", ["llama_cpp_python"], indirect=True)
def test_the_documented_command_scores_every_row_against_llama_cpp_python(proxy, tmp_path, capsys):
    args = _with(_documented_command(), judge_url=proxy.url + "/v1", judge_model=ALIAS,
                 tasks=str(EXAMPLES / "tasks.jsonl"), reports=str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
                 out=str(tmp_path / "run"))
    args = _with(args, cache=str(tmp_path / "cache"), limit="4")  # 8 rows (bench/local_server.py: 16)
    code, summary, rows, err = _run(capsys, tmp_path / "run", *args)
    t = summary["totals"]
    assert code == 0, err[-3000:]
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows), [r["errors"] for r in rows]
    # The refused json_schema cost one call; every later body asked for the server's JSON mode.
    kinds = [(e.status, (e.sent.get("response_format") or {}).get("type")) for e in proxy.completions()]
    assert kinds[0] == (500, "json_schema") and kinds[1] == (200, "json_object")
    assert all(k == (200, "json_object") for k in kinds[1:])
    assert t["judge_adapted"] == ["response_format json_object"]
    # One request at a time, found out before the run: never more than one at the server.
    assert t["judge_server"] == {"server": "llama-cpp-python", "slots": 1, "cancels": False}
    assert proxy.max_in_flight == 1
    assert t.get("timeouts_not_resent", 0) == 0 and t["retries"] == 0
    assert (t["input_tokens"], t["output_tokens"]) == proxy.usage_totals()
