"""`drscore view`'s server over HTTP: paging, sorting, filters, a row's judge calls
with the full prompt from the judge cache, security headers, and no API key anywhere."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from drscore.cli import main
from drscore.engine.reporting.colours import agent_colours
from drscore.engine.reporting.view_index import ViewIndex
from drscore.engine.reporting.view_server import NotARun, ViewConfig, ViewServer, is_loopback
from drscore.engine.runtime.calls.cache import JudgeCache, request_key
from drscore.engine.runtime.models import ScoreRow, VerdictRecord

SECRET = "sk-test-NEVER-SHOWN-1234567890"
# scores of (task, agent): 12 tasks x 2 agents; agent b scores higher, task "7" of a fails
SCORES = {(str(t), a): None if (t, a) == (7, "a") else round(t / 10 + (0.05 if a == "b" else 0.0), 3)
          for t in range(1, 13) for a in ("a", "b")}


def _components(task: str, agent: str) -> dict[str, Any]:
    # as the pool keys them: messages as [role, content] pairs
    return {"model": "judge-x", "base_url": f"https://api.example/v1?key={SECRET}", "messages": [
        ["system", "You grade reports."],
        ["user", f"Grade the report of <b>{agent}</b> for task {task} & say why."]]}


async def _run_dir(tmp: Path) -> Path:
    run = tmp / "run"
    run.mkdir()
    cache_dir = tmp / "cache"
    cache_dir.mkdir()
    (run / "config.json").write_text(json.dumps({"judge": {"cache_dir": str(cache_dir), "api_key_present": True}}))
    cache = await JudgeCache.open(cache_dir / "judge.sqlite")
    scores, verdicts = [], []
    for (task, agent), score in SCORES.items():
        status = "failed" if score is None else "ok"
        scores.append(ScoreRow(task_id=task, agent=agent, method="quality", score=score, status=status,
                               errors=["timeout: judge did not answer"] if score is None else [],
                               calls=1, input_tokens=100 + int(task), output_tokens=20, reasoning_tokens=7,
                               cached_input_tokens=64, judge="judge-x"))
        key = request_key(_components(task, agent))
        await cache.put(key, f'{{"overall": 3, "why": "task {task} answer"}}'.encode(), _components(task, agent))
        verdicts.append(VerdictRecord(task_id=task, agent=agent, method="quality", template="quality", key=key,
                                      cached=False, status="ok", verdict={"overall": 3}, reasoning_tokens=7,
                                      cached_input_tokens=64, inputs={"question": f"question {task}"}))
    await cache.close()
    enc = msgspec.json.Encoder()
    (run / "scores.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in scores))
    (run / "verdicts.jsonl").write_bytes(b"".join(enc.encode(v) + b"\n" for v in verdicts))
    return run


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[Any, aiohttp.ClientResponse, str]:
    async with session.get(url) as resp:
        text = await resp.text()
        return (json.loads(text) if resp.content_type == "application/json" else text), resp, text


async def test_pages_sorts_filters_and_opens_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    run = await _run_dir(tmp_path)
    everything = ""
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server, aiohttp.ClientSession() as s:
        assert server.url.startswith("http://127.0.0.1:") and server.built == {"scores": 24, "verdicts": 24}
        page, resp, text = await _get(s, server.url)
        everything += text
        csp = resp.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert '<script type="module" src="static/view.mjs"></script>' in page
        assert "http" not in page.split("<body>")[1]

        meta, _, text = await _get(s, server.url + "api/meta")
        everything += text
        assert (meta["rows"], meta["calls"], meta["agents"], meta["statuss"]) == (24, 24, ["a", "b"], ["failed", "ok"])

        # default: natural task order ("2" before "10"), 5 a page
        first, resp, text = await _get(s, server.url + "api/rows?limit=5")
        assert resp.headers["Content-Security-Policy"] == csp
        assert first["total"] == 24 and [(r["task"], r["agent"]) for r in first["rows"]] == [
            ("1", "a"), ("1", "b"), ("2", "a"), ("2", "b"), ("3", "a")]
        second, _, _ = await _get(s, server.url + "api/rows?limit=5&offset=5")
        assert [(r["task"], r["agent"]) for r in second["rows"]][:2] == [("3", "b"), ("4", "a")]

        # by score, highest first: 12/b = 1.25, 12/a = 1.2, 11/b = 1.15; no score last
        top, _, _ = await _get(s, server.url + "api/rows?sort=score&descending=1&limit=3")
        assert [(r["task"], r["agent"], r["score"]) for r in top["rows"]] == [
            ("12", "b", 1.25), ("12", "a", 1.2), ("11", "b", 1.15)]
        low, _, _ = await _get(s, server.url + "api/rows?sort=score&limit=24")
        assert low["rows"][0]["score"] == 0.1 and low["rows"][-1]["task"] == "7" and low["rows"][-1]["score"] is None

        # filters: agent, status, task exactly and by prefix ("1", "10", "11", "12")
        only_b, _, _ = await _get(s, server.url + "api/rows?agent=b&limit=50")
        assert only_b["total"] == 12 and {r["agent"] for r in only_b["rows"]} == {"b"}
        failed, _, _ = await _get(s, server.url + "api/rows?status=failed")
        assert [(r["task"], r["agent"], r["errors"]) for r in failed["rows"]] == [("7", "a", 1)]
        exact, _, _ = await _get(s, server.url + "api/rows?task=1&agent=a")
        assert [r["task"] for r in exact["rows"]] == ["1"]
        prefix, _, _ = await _get(s, server.url + "api/rows?task_prefix=1&agent=a")
        assert [r["task"] for r in prefix["rows"]] == ["1", "10", "11", "12"]
        bad, resp, _ = await _get(s, server.url + "api/rows?sort=body")
        assert resp.status == 400 and "unknown sort column" in bad["error"]

        # one row: its call with the full prompt and answer from the judge cache
        row_id = prefix["rows"][1]["id"]
        detail, _, text = await _get(s, server.url + f"api/row/{row_id}")
        everything += text
        assert detail["row"]["task_id"] == "10" and detail["row"]["reasoning_tokens"] == 7
        (call,) = detail["calls"]
        assert (call["reasoning_tokens"], call["cached_input_tokens"]) == (7, 64)
        assert [(m["role"], m["content"]) for m in call["prompt"]["messages"]] == [
            ("system", "You grade reports."), ("user", "Grade the report of <b>a</b> for task 10 & say why.")]
        assert call["prompt"]["answer"] == '{"overall": 3, "why": "task 10 answer"}'
        assert "base_url" not in call["prompt"]
        missing, resp, _ = await _get(s, server.url + "api/row/999")
        assert resp.status == 404

        # a request naming another host (DNS rebinding) is refused
        async with s.get(server.url + "api/meta", headers={"Host": "evil.example:80"}) as resp:
            assert resp.status == 421
        for path in ("static/view.mjs", "static/viewlib.mjs", "static/view.css"):
            _, resp, text = await _get(s, server.url + path)
            everything += text
            assert resp.status == 200 and "Content-Security-Policy" in resp.headers
        _, resp, _ = await _get(s, server.url + "static/..%2Fview_page.py")
        assert resp.status == 404
    assert SECRET not in everything
    assert (run / "view.sqlite").is_file()


def test_index_follows_a_run_that_is_still_writing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    enc = msgspec.json.Encoder()

    def row(task: str, score: float) -> bytes:
        return enc.encode(ScoreRow(task_id=task, agent="a", method="m", score=score)) + b"\n"

    (run / "scores.jsonl").write_bytes(row("1", 0.5) + row("2", 0.25) + row("3", 1.0)[:20])  # last line half written
    index = ViewIndex(run)
    assert index.refresh()["scores"] == 2
    stamp, facets = index.stamp(), index.facets()
    with open(run / "scores.jsonl", "ab") as f:
        f.write(row("3", 1.0)[20:] + row("1", 0.75))  # finishes line 3; task 1 again: the last line wins
    assert index.refresh()["scores"] == 2 and index.stamp() != stamp  # what is cached by the stamp is redone
    assert facets["rows"] == 2 and index.facets()["rows"] == 3
    stamp = index.stamp()
    assert index.refresh()["scores"] == 0 and index.stamp() == stamp
    page = index.page(msgspec.structs.replace(_query(), sort="task"))
    assert [(r["task"], r["score"]) for r in page["rows"]] == [("1", 0.75), ("2", 0.25), ("3", 1.0)]
    # a finished run rewrites scores.jsonl (new inode, input order): indexed again from the start
    (run / "scores.tmp").write_bytes(row("2", 0.25) + row("3", 1.0))
    (run / "scores.tmp").replace(run / "scores.jsonl")
    index.refresh()
    assert [r["task"] for r in index.page(_query())["rows"]] == ["2", "3"]
    index.close()
    again = ViewIndex(run)  # kept beside the run: nothing new to read
    assert again.refresh() == {"scores": 0, "verdicts": 0} and again.page(_query())["total"] == 2
    again.close()


def _query() -> Any:
    from drscore.engine.reporting.view_index import RowQuery
    return RowQuery()


def test_loopback_names() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


BAD = [  # (request, the field its error names)
    ("api/rows?offset=9223372036854775808", "offset"), ("api/rows?offset=-1", "offset"),
    ("api/rows?offset=1e3", "offset"), ("api/rows?limit=0", "limit"), ("api/rows?limit=99999999999999999999", "limit"),
    ("api/rows?descending=maybe", "descending"), ("api/rows?sort=body", "sort"),
    ("api/row/9223372036854775808", "id"), ("api/row/0", "id"), ("api/row/-3", "id"), ("api/row/x", "id"),
    ("api/row?task=1&agent=a", "method"), ("api/task", "task"), ("api/pair?method=quality&a=a", "b"),
    ("api/pair?method=quality&a=a&b=b&limit=9223372036854775808", "limit"), ("api/scores", "method"),
]


async def test_bad_parameters_are_400_naming_the_field(tmp_path: Path) -> None:
    run = await _run_dir(tmp_path)
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server, aiohttp.ClientSession() as s:
        for path, field in BAD:
            body, resp, _ = await _get(s, server.url + path)
            assert resp.status == 400, (path, resp.status)
            assert field in body["error"], (path, body)
            assert "Content-Security-Policy" in resp.headers
        ok, resp, _ = await _get(s, server.url + "api/rows?offset=9223372036854775807")
        assert resp.status == 200 and ok["rows"] == []


async def test_side_by_side_pair_and_decisions(tmp_path: Path) -> None:
    run = await _run_dir(tmp_path)
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server, aiohttp.ClientSession() as s:
        task, _, _ = await _get(s, server.url + "api/task?task=3")
        assert [(r["row"]["agent"], r["row"]["score"]) for r in task["rows"]] == [("a", 0.3), ("b", 0.35)]
        (pair,) = task["pairs"]
        assert (pair["a"], pair["b"], round(pair["delta"], 6)) == ("a", "b", -0.05)
        (call,) = task["rows"][0]["calls"]
        assert call["prompt"]["answer"].startswith('{"overall": 3') and "messages" not in call["prompt"]
        # every shared task differs by 0.05: 11 of them (task 7 of a failed)
        pairs, _, _ = await _get(s, server.url + "api/pair?method=quality&a=b&b=a&limit=3")
        assert pairs["n"] == 11 and len(pairs["tasks"]) == 3
        assert all(round(t["delta"], 6) == 0.05 for t in pairs["tasks"])
        decisions, _, _ = await _get(s, server.url + "api/decisions")
        (d,) = decisions["quality"]["pairs"]
        assert (d["a"], d["b"], d["n"], round(d["delta"], 6)) == ("b", "a", 11, 0.05)
        assert pairs["decision"]["delta"] == d["delta"]
        assert set(decisions["quality"]["p_first"]) == {"a", "b"}
        charts, _, _ = await _get(s, server.url + "api/scores?method=quality")
        assert sum(charts["counts"]["a"]) == 11 and sum(charts["counts"]["b"]) == 12
        assert charts["range"] == [0.1, 1.25] and charts["tasks"]["7"] == {"b": 0.75} and charts["tasks_total"] == 12
        meta, _, _ = await _get(s, server.url + "api/meta")
        assert meta["colours"] == agent_colours(["a", "b"]) and meta["prompt_caches"]["opened"]


async def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "scores.jsonl").write_text('{"name": "bleu", "value": 0.3}\n{"name": "rouge", "value": 0.4}\n')
    with pytest.raises(NotARun, match=r"scores.jsonl:1: not a drscore score row"):
        async with ViewServer(ViewConfig(run_dir=str(other), port=0)):
            pass
    assert not (other / "view.sqlite").exists()
    (other / "scores.jsonl").write_text("")
    with pytest.raises(NotARun, match="empty and there is no config.json"):
        async with ViewServer(ViewConfig(run_dir=str(other), port=0)):
            pass
    (other / "config.json").write_text("{}")  # a run that has just started: served, with no rows yet
    async with ViewServer(ViewConfig(run_dir=str(other), port=0)) as server, aiohttp.ClientSession() as s:
        meta, _, _ = await _get(s, server.url + "api/meta")
        assert meta["rows"] == 0


async def test_the_cache_option_and_its_variable_mean_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = await _run_dir(tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["judge"]["cache_dir"] = str(tmp_path / "moved")  # the run's recorded cache is gone
    (run / "config.json").write_text(json.dumps(config))
    seen: list[ViewConfig] = []

    async def capture(cfg: ViewConfig) -> None:
        seen.append(cfg)
    monkeypatch.setattr("drscore.engine.reporting.view_server.serve", capture)
    # DRSCORE_CACHE names a cache *directory*, as for `drscore run`: searched after the run's own
    monkeypatch.setenv("DRSCORE_CACHE", str(tmp_path / "cache"))
    assert await asyncio.to_thread(main, ["view", str(run), "--port", "0"]) == 0 and seen[-1].cache_dir is None
    async with ViewServer(seen[-1]) as server, aiohttp.ClientSession() as s:
        assert server.prompt_note and str(tmp_path / "cache" / "judge.sqlite") in server.prompt_note
        row, _, _ = await _get(s, server.url + "api/row/1")
        assert row["calls"][0]["prompt"]["messages"][0]["content"] == "You grade reports."
    monkeypatch.delenv("DRSCORE_CACHE")
    assert await asyncio.to_thread(main, ["view", str(run), "--port", "0", "--cache", str(tmp_path / "cache")]) == 0
    assert seen[-1].cache_dir == str(tmp_path / "cache")
    async with ViewServer(seen[-1]) as server, aiohttp.ClientSession() as s:
        row, _, _ = await _get(s, server.url + "api/row/1")
        assert row["calls"][0]["prompt"]["answer"].startswith('{"overall": 3')
    # without it, the page says where it looked instead of silently showing no prompts
    async with ViewServer(ViewConfig(run_dir=str(run), port=0, cache_dir=str(tmp_path / "nowhere"))) as server:
        assert server.prompt_note and "no judge cache found" in server.prompt_note
    # a file is not what --cache means
    assert await asyncio.to_thread(main, ["view", str(run), "--port", "0", "--cache", str(tmp_path / "cache" / "judge.sqlite")]) == 2
    assert "--cache is the cache directory" in capsys.readouterr().err
