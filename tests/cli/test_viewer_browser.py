"""``viewer.html`` (written by ``drscore report``) in headless Chromium.

A run over the repository's example reports (offline judge; FACT with no page access, so
every cited page is unreachable) is rendered, and the viewer is driven like a person
would: filter, open a row, open a judge call. What the page shows is checked against
``scores.jsonl`` and ``verdicts.jsonl`` read directly. Console errors, exceptions and
any request that leaves the disk fail the test.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from drscore.cli import main as drscore_main
from support.browser import Browser, ensure_chromium, off_disk
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def js_set(field: str, value: str) -> str:
    """Set a filter like a user would (value, then the event the page listens to)."""
    event = "input" if field == "task" else "change"
    return (f"(() => {{ const f = document.getElementById('f-{field}'); f.value = {json.dumps(value)};"
            f" f.dispatchEvent(new Event('{event}')); return true; }})()")


VISIBLE = "[...document.querySelectorAll('#rows tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))"


def js_open(task: str, agent: str, method: str) -> str:
    """Click the table row of (task, agent, method); return the panel's headings."""
    return f"""(() => {{
      const tr = [...document.querySelectorAll('#rows tbody tr')].find(tr =>
        tr.cells[0].textContent === {json.dumps(task)} && tr.cells[1].textContent === {json.dumps(agent)} &&
        tr.cells[2].textContent === {json.dumps(method)});
      if (!tr) return null;
      tr.cells[0].click();
      const panel = document.getElementById('panel');
      return {{hidden: panel.hidden, headings: [...panel.querySelectorAll('h2, h3')].map(h => h.textContent),
               calls: [...panel.querySelectorAll('details.call')].map(d => d.dataset.template),
               text: panel.innerText}};
    }})()"""


OPEN_CALL = """(() => {
  const d = document.querySelectorAll('#panel details.call')[%d];
  d.open = true;
  return new Promise(r => setTimeout(() => r({text: d.innerText,
    tables: [...d.querySelectorAll('table')].map(t => [...t.querySelectorAll('th')].map(th => th.textContent))}), 50));
})()"""


@pytest.fixture(scope="module")
def session() -> Any:
    chromium = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="drscore-viewer-") as tmp_name:
        tmp = Path(tmp_name)
        run = tmp / "run"
        reports = EXAMPLES / "reports.claude-3-7-sonnet.jsonl"
        code = drscore_main(["run", "--methods", "quality,redundancy,fact", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                             "--reports", str(reports), "--limit", "4", "--offline-pages",
                             "--cache", str(tmp / "cache"), "--out", str(run)])
        assert code in (0, 3)
        assert drscore_main(["report", str(run), "--resamples", "50"]) == 0
        rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
        verdicts = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
        q = next(r for r in rows if r["method"] == "quality")
        red = next(r for r in rows if r["method"] == "redundancy" and r["status"] == "ok")
        fact = next(r for r in rows if r["method"] == "fact" and r["details"].get("statements"))

        async def drive() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with Browser(chromium, tmp / "profile") as cdp:
                await cdp.navigate((run / "viewer.html").as_uri())
                out["ready"] = await cdp.evaluate("typeof window.viewerReady === 'number'")
                out["all"] = await cdp.evaluate(VISIBLE)
                await cdp.evaluate(js_set("method", "quality"))
                out["quality"] = await cdp.evaluate(VISIBLE)
                await cdp.evaluate(js_set("task", rows[0]["task_id"]))
                out["quality_task"] = await cdp.evaluate(VISIBLE)
                await cdp.evaluate(js_set("task", ""))
                await cdp.evaluate(js_set("status", "nonexistent-status-is-ignored"))
                out["open_quality"] = await cdp.evaluate(js_open(q["task_id"], q["agent"], "quality"))
                out["quality_call"] = await cdp.evaluate(OPEN_CALL % 0)
                await cdp.evaluate(js_set("method", "redundancy"))
                out["open_redundancy"] = await cdp.evaluate(js_open(red["task_id"], red["agent"], "redundancy"))
                out["redundancy_call"] = await cdp.evaluate(OPEN_CALL % 0)
                await cdp.evaluate(js_set("method", "fact"))
                out["open_fact"] = await cdp.evaluate(js_open(fact["task_id"], fact["agent"], "fact"))
                # the report's leaderboard links in with a filter in the URL
                link = (run / "viewer.html").as_uri() + "#" + urllib.parse.urlencode(
                    {"method": "redundancy", "agent": red["agent"]}, quote_via=urllib.parse.quote)
                await cdp.navigate("about:blank")  # a fresh load (a new fragment alone does not reload)
                await cdp.navigate(link)
                out["linked"] = await cdp.evaluate(VISIBLE)
                await asyncio.sleep(0.2)  # late console messages
                out["errors"] = cdp.errors()
                out["requests"] = cdp.requests()
            return out

        result = asyncio.run(drive())
        yield {"run": run, "rows": rows, "verdicts": verdicts, "q": q, "red": red, "fact": fact,
               "report": (run / "report.html").read_text(encoding="utf-8"), **result}


def calls_of(verdicts: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in verdicts if (v["task_id"], v["agent"], v["method"]) ==
            (row["task_id"], row["agent"], row["method"])]


def test_every_row_is_listed_and_filters_narrow_it(session):
    rows = session["rows"]
    assert session["ready"] is True
    assert len(session["all"]) == len(rows) == 12  # 4 reports x 3 methods
    by_method = Counter(r["method"] for r in rows)
    assert len(session["quality"]) == by_method["quality"] and {c[2] for c in session["quality"]} == {"quality"}
    first_task = rows[0]["task_id"]
    assert [c[0] for c in session["quality_task"]] == [first_task]
    # a link from the report: method and agent filters come from the URL
    red = session["red"]
    assert len(session["linked"]) == by_method["redundancy"]
    assert {(c[1], c[2]) for c in session["linked"]} == {(red["agent"], "redundancy")}


def test_opening_a_row_shows_its_scores_and_every_judge_call(session):
    q = session["q"]
    panel = session["open_quality"]
    assert panel is not None and panel["hidden"] is False
    expected = calls_of(session["verdicts"], q)
    assert expected, "the quality row has judge calls in verdicts.jsonl"
    assert panel["calls"] == [v["template"] for v in expected]
    assert f"judge calls ({len(expected)})" in panel["headings"]
    assert "subscores" in panel["headings"]
    assert f"task {q['task_id']} · {q['agent']} · quality" in panel["headings"]
    for name in q["subscores"]:
        assert name in panel["text"]
    # the opened call shows its verdict: every field the judge answered
    call = session["quality_call"]
    verdict = expected[0]["verdict"]
    for key in verdict:
        assert any(key in header for header in call["tables"]), (key, call["tables"])
    assert "verdict" in call["text"] and "judged" in call["text"]
    # its time at the judge and time waiting, apart (not one mixed latency)
    assert f"at the judge {expected[0]['judge_s']:.2f}s · waiting {expected[0]['quota_wait_s']:.2f}s" in call["text"]


def test_redundancy_calls_show_the_pair_and_its_passages(session):
    red = session["red"]
    expected = calls_of(session["verdicts"], red)
    assert session["open_redundancy"]["calls"] == [c["template"] for c in expected]
    assert set(session["open_redundancy"]["calls"]) <= {"redundancy_pair", "redundancy_pair_zh"}
    call = session["redundancy_call"]
    first = expected[0]
    assert first["label"] in call["text"]  # "pair i-j"
    for name in ("passage_a", "passage_b"):
        assert first["inputs"][name].split("\n")[0][:60] in call["text"]


def test_fact_rows_show_statement_url_and_page_outcome(session):
    fact = session["fact"]
    panel = session["open_fact"]
    statements = fact["details"]["statements"]
    assert f"statements ({len(statements)})" in panel["headings"]
    first = statements[0]
    assert first["statement"][:60] in panel["text"] and first["url"] in panel["text"]
    assert first["outcome"] == "unreachable" and "unreachable" in panel["text"]


def test_no_console_errors_and_no_network(session):
    assert session["errors"] == []
    assert off_disk(session["requests"]) == []
    assert session["requests"], "the page load itself was seen (the probe works)"
    # the report links every method's rows into the viewer
    for method in ("quality", "redundancy", "fact"):
        assert f'href="viewer.html#method={method}' in session["report"]
