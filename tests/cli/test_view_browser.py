"""`drscore view` used the way a person uses it, in headless Chromium (Debian's chromium,
driven over the DevTools protocol by ``support.browser``).

The run (``support.view_run``): real DeepResearch Bench reports of three agents, scored
with quality, redundancy, RACE and FACT by the mock judge over HTTP, so the judge cache
holds every prompt and answer. The test clicks every row, opens every judge call,
unfolds every long text and reads the screen: each call's prompt and answer must be the
full text the judge cache holds, each failed call its reason and every attempt. Then it
uses each filter and sort, reloads from the copied URL, opens the side-by-side view, the
decisions, a pair from the matrix and the charts, and checks the figures shown against
figures computed here from scores.jsonl. A hostile agent name shows as text.
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.reporting.colours import agent_colours
from drscore.engine.reporting.view_server import ViewConfig, ViewServer
from drscore.engine.runtime.models import ScoreRow
from support.browser import Browser, DevTools, ensure_chromium
from support.view_run import AGENTS, make_view_run

HOSTILE = '<img src=x onerror="document.title=1">'


async def wait(cdp: DevTools, condition: str, what: str, timeout: float = 20.0) -> Any:
    """Poll ``condition`` in the page until it is truthy; its value."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await cdp.evaluate(condition)
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            seen = await cdp.evaluate("JSON.stringify({hash: location.hash, ready: document.body.dataset.ready, "
                                      "panel: (document.querySelector('#panel h3') || {}).textContent})")
            raise AssertionError(f"timed out waiting for {what} ({condition}); the page: {seen}")
        await asyncio.sleep(0.05)


def js(code: str) -> str:
    return f"(() => {{ {code} }})()"


def set_filter(field: str, value: str) -> str:
    """Choose a filter value as a person does: set it, then the event the page listens to."""
    event = "input" if field == "task" else "change"
    return js(f"const f = document.getElementById('f-{field}'); f.value = {json.dumps(value)};"
              f" f.dispatchEvent(new Event('{event}')); return true;")


SHOWN_ROWS = "[...document.querySelectorAll('#body tr')].map(tr => [...tr.cells].map(c => c.textContent))"

# Open every call of the open row, unfold every long text, and read each call back: the
# messages (without the labels of the marked variables), the answer, the failure and
# its attempts, and whether anything is still folded.
OPEN_CALLS = js("""
  const calls = document.querySelectorAll('#panel details.call');
  for (const d of calls) d.open = true;
  return calls.length;
""")
ALL_DRAWN = js("""
  const calls = [...document.querySelectorAll('#panel details.call')];
  return calls.every(d => d.querySelector('.call-body'));
""")
UNFOLD = js("for (const b of document.querySelectorAll('#panel button.unfold')) b.click(); return true;")
READ_CALLS = js("""
  const panel = document.getElementById('panel');
  const text = (box) => [...box.childNodes].filter(n => !(n.classList && n.classList.contains('var-label')))
                                           .map(n => n.textContent).join('');
  return [...panel.querySelectorAll('details.call')].map(d => ({
    index: Number(d.dataset.index), template: d.dataset.template, status: d.dataset.status,
    messages: [...d.querySelectorAll('.transcript > .msg[data-role]')]
      .filter(m => ['system', 'user'].includes(m.dataset.role))
      .map(m => [m.dataset.role, text(m.querySelector('.msg-text'))]),
    reasoning: [...d.querySelectorAll('.msg[data-role=reasoning] .msg-text')].map(t => t.textContent),
    answer: [...d.querySelectorAll('.turn .msg[data-role=assistant] .msg-text')].map(t => t.textContent),
    verdict_tables: d.querySelectorAll('.verdict table').length,
    failure: (d.querySelector('.failure .error') || {}).textContent || null,
    attempts: d.querySelectorAll('.failure table[data-kind=attempts] tbody tr').length,
    marks: [...d.querySelectorAll('mark.var')].map(m => [m.dataset.var, m.textContent]),
    folded: d.querySelectorAll('.folded').length,
    facts: (d.querySelector('.call-body > .facts') || {}).textContent || '',
  }));
""")


def read_run(run: Path, cache: Path) -> tuple[list[dict[str, Any]], dict[tuple[str, str, str], list[dict]], dict]:
    rows = {}
    for line in (run / "scores.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows[(r["task_id"], r["agent"], r["method"])] = r  # the last line of a row wins
    calls: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for line in (run / "verdicts.jsonl").read_text().splitlines():
        v = json.loads(line)
        calls[(v["task_id"], v["agent"], v["method"])].append(v)
    db = sqlite3.connect(cache / "judge.sqlite")
    cached = {key: (json.loads(comp)["messages"], bytes(answer).decode())
              for key, comp, answer in db.execute("SELECT key, components, CAST(response AS BLOB) FROM responses")}
    db.close()
    return list(rows.values()), calls, cached


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


async def test_a_person_reads_the_run_by_clicking(tmp_path: Path) -> None:
    chromium = ensure_chromium()
    made = await asyncio.to_thread(make_view_run, tmp_path)  # drscore run has its own event loop
    rows, calls, cached = read_run(made.run, made.cache)
    assert len(rows) == 36 and {r["status"] for r in rows} >= {"ok", "partial", "failed", "skipped"}
    score = {(r["task_id"], r["agent"], r["method"]): r["score"] for r in rows}
    colours = agent_colours(AGENTS)

    async with ViewServer(ViewConfig(run_dir=str(made.run), port=0, cache_dir=str(made.cache))) as server:
        origin = server.url.rstrip("/")
        async with Browser(chromium, tmp_path / "chromium") as cdp:
            await cdp.navigate(server.url)
            await wait(cdp, "document.body.dataset.ready === '1' && document.querySelectorAll('#f-agent option')"
                            ".length === 4", "the first page and the filter menus")
            assert await cdp.evaluate("document.getElementById('count').textContent") == "rows 1–36 of 36"

            # ---- every row, every call: the full prompt and answer on screen
            opened_calls = failed_calls = marked_pages = reasoned = 0
            kinds_seen: set[tuple[str, str]] = set()
            for i in range(36):
                key = tuple(await cdp.evaluate(
                    f"(() => {{ const c = document.querySelectorAll('#body tr')[{i}].cells;"
                    f" return [c[0].textContent, c[1].textContent, c[2].textContent]; }})()"))
                row = next(r for r in rows if (r["task_id"], r["agent"], r["method"]) == key)
                await cdp.evaluate(f"document.querySelectorAll('#body tr')[{i}].click()")
                heading = await wait(cdp, js(
                    "const p = document.getElementById('panel'); const h = p.querySelector('h3');"
                    f" return !p.hidden && h && h.textContent.startsWith({json.dumps(key[0] + ' · ')})"
                    f" && h.textContent.includes({json.dumps(' · ' + key[2] + ':')})"
                    f" && h.textContent.includes({json.dumps(key[1])}) && h.textContent;"), f"the panel of {key}")
                assert f"({row['status']})" in heading
                kinds_seen.add((row["method"], row["status"]))
                await cdp.evaluate(OPEN_CALLS)  # a click on each call's summary line
                await wait(cdp, ALL_DRAWN, f"the calls of {key}")
                await cdp.evaluate(UNFOLD)
                shown = await cdp.evaluate(READ_CALLS)
                expected = calls.get(key, [])
                assert [c["template"] for c in shown] == [v["template"] for v in expected], key
                for call, v in zip(shown, expected):
                    opened_calls += 1
                    assert call["folded"] == 0, (key, call["index"])  # every long text unfolded
                    if v["status"] == "ok":
                        messages, answer = cached[v["key"]]
                        assert call["messages"] == [[role, content] for role, content in messages], (key, v["template"])
                        assert call["answer"] == [answer]
                        assert call["verdict_tables"] >= 1
                        assert call["reasoning"] == ([v["reasoning"]] if v["reasoning"] else [])
                        reasoned += bool(v["reasoning"])
                        assert "at the judge" in call["facts"] and "waiting" in call["facts"]
                        if v["template"] == "fact_support":  # the cited page the judge saw, marked
                            page = dict(call["marks"])["page"]
                            assert page == v["inputs"]["page"] and page.startswith("Cited page http")
                            assert dict(call["marks"])["statements"].startswith("[1] ")
                            marked_pages += 1
                        if v["template"] == "quality":  # the report, marked, in full
                            report = next(json.loads(x)["article"] for x in made.reports[key[1]].read_text()
                                          .splitlines() if str(json.loads(x)["id"]) == key[0])
                            assert dict(call["marks"])["report"].strip() == report.strip()
                    else:
                        failed_calls += 1
                        assert call["failure"] == f"failed: {v['error']}"
                        assert call["attempts"] == len(v["attempts"]) >= 2  # the first try and its retry
                # details as tables, not JSON
                tables = await cdp.evaluate(js(
                    "return Object.fromEntries([...document.querySelectorAll('#panel .details table[data-kind]')]"
                    ".map(t => [t.dataset.kind, t.tBodies[0].rows.length]));"))
                details = row["details"]
                if row["method"] == "redundancy" and details.get("pairs"):
                    assert tables["pairs"] == len(details["pairs"]) and tables["units"] == len(details["unit_lines"])
                if row["method"] == "race" and details.get("criteria"):
                    assert tables["criteria"] == len(details["criteria"]) and tables["dimensions"] == 4
                if row["method"] == "fact" and details.get("statements"):
                    assert tables["statements"] == len(details["statements"])
                assert "{" not in await cdp.evaluate(
                    "document.querySelector('#panel .details').innerText")  # no JSON dump
            assert opened_calls == sum(len(v) for v in calls.values())
            assert failed_calls >= 1 and marked_pages >= 10 and reasoned >= opened_calls // 2
            assert {m for m, _ in kinds_seen} == {"quality", "redundancy", "race", "fact"}
            assert {s for _, s in kinds_seen} >= {"ok", "partial", "failed", "skipped"}

            # ---- filters
            await cdp.evaluate(set_filter("agent", "claude-every-other"))
            await wait(cdp, "document.getElementById('count').textContent === 'rows 1–12 of 12' && document.body.dataset.ready === '1'", "agent filter")
            assert {r[1] for r in await cdp.evaluate(SHOWN_ROWS)} == {"claude-every-other"}
            await cdp.evaluate(set_filter("agent", ""))
            await cdp.evaluate(set_filter("status", "skipped"))
            skipped = sum(r["status"] == "skipped" for r in rows)
            await wait(cdp, f"document.getElementById('count').textContent === 'rows 1–{skipped} of {skipped}'"
                       " && document.body.dataset.ready === '1'",
                       "status filter")
            await cdp.evaluate(set_filter("status", ""))
            await cdp.evaluate(set_filter("task", "52"))
            await wait(cdp, "document.getElementById('count').textContent === 'rows 1–12 of 12' && document.body.dataset.ready === '1'", "task filter")
            await cdp.evaluate(set_filter("task-mode", "prefix"))
            await cdp.evaluate(set_filter("task", "5"))
            await wait(cdp, "document.getElementById('count').textContent === 'rows 1–36 of 36' && document.body.dataset.ready === '1'", "task prefix")
            await cdp.evaluate(set_filter("task", ""))
            await cdp.evaluate(set_filter("method", "quality"))
            await wait(cdp, "document.getElementById('count').textContent === 'rows 1–9 of 9' && document.body.dataset.ready === '1'", "method filter")

            # ---- sort: by score, highest first, then lowest first
            await cdp.evaluate("document.querySelector('#head th[data-sort=score]').click()")
            await wait(cdp, "document.querySelector('#head th[data-sort=score]').textContent === 'score ▼' && document.body.dataset.ready === '1'", "sort")
            # a failed row has no score ("–"): last, whichever way the scores go
            quality = [s for (t, a, m), s in score.items() if m == "quality"]
            scored = sorted((round(s, 3) for s in quality if s is not None), reverse=True)
            unscored = [None] * sum(s is None for s in quality)
            assert unscored, "the poisoned paragraph fails one quality row"

            def shown(rows: list) -> list[float | None]:
                return [None if r[4] == "–" else float(r[4]) for r in rows]

            assert shown(await cdp.evaluate(SHOWN_ROWS)) == scored + unscored
            await cdp.evaluate("document.querySelector('#head th[data-sort=score]').click()")
            await wait(cdp, "document.querySelector('#head th[data-sort=score]').textContent === 'score ▲' && document.body.dataset.ready === '1'", "sort up")
            assert shown(await cdp.evaluate(SHOWN_ROWS)) == scored[::-1] + unscored

            # ---- the view is in the URL: a copied link gives the same view
            row_id = await cdp.evaluate("document.querySelectorAll('#body tr')[2].dataset.id")
            await cdp.evaluate("document.querySelectorAll('#body tr')[2].click()")
            heading = await wait(cdp, f"document.getElementById('panel').dataset.id === {json.dumps(row_id)} && "
                                      "document.querySelector('#panel h3').textContent", "the open row")
            await cdp.evaluate("document.querySelector('#panel details.call').open = true")
            await wait(cdp, "location.hash.includes('call=0')", "the open call in the URL")
            link = await cdp.evaluate("location.href")
            assert "method=quality" in link and "sort=score" in link and "ot=" in link
            await cdp.navigate("about:blank")
            await cdp.navigate(link)
            await wait(cdp, "document.querySelector('#panel h3') && document.querySelector('#panel h3')"
                            f".textContent === {json.dumps(heading)}", "the same row after a reload")
            assert await cdp.evaluate("document.getElementById('f-method').value") == "quality"
            assert await cdp.evaluate("document.querySelector('#head th[data-sort=score]').textContent") == "score ▲"
            assert await cdp.evaluate("document.querySelector('#panel details.call').open") is True
            assert shown(await cdp.evaluate(SHOWN_ROWS)) == scored[::-1] + unscored

            # ---- side by side: every agent on the open row's task, with the paired differences
            task = heading.split(" · ")[0]
            await cdp.evaluate("document.querySelector('#panel button.side').click()")
            await wait(cdp, "document.getElementById('task-view').dataset.ready === '1' && "
                            "!document.getElementById('task-view').hidden", "side by side")
            cols = await cdp.evaluate(js(
                "const s = document.querySelector('#task-view section[data-method=quality]');"
                "return [...s.querySelectorAll('.agent-col')].map(c => c.dataset.agent);"))
            assert cols == sorted(AGENTS)
            # a pair both of whose rows on this task have a score (the mock's answers decide which)
            paired = [ag for ag in sorted(AGENTS) if score.get((task, ag, "quality")) is not None]
            assert len(paired) >= 2, (task, paired)
            a, b = paired[0], paired[-1]
            shown_delta = await cdp.evaluate(js(
                "const tr = [...document.querySelectorAll('#task-view section[data-method=quality] table.pairs tbody tr')]"
                f".find(r => r.dataset.a === {json.dumps(a)} && r.dataset.b === {json.dumps(b)});"
                "return tr.querySelector('td.delta').textContent;"))
            delta = score[(task, a, "quality")] - score[(task, b, "quality")]
            assert shown_delta == ("+" if delta >= 0 else "−") + f"{abs(delta):.4f}"
            border = await cdp.evaluate(js(
                f"const c = document.querySelector('#task-view .agent-col[data-agent={json.dumps(a)}]');"
                "return getComputedStyle(c).borderTopColor;"))
            hexed = colours[a].lstrip("#")
            assert border == f"rgb({int(hexed[0:2], 16)}, {int(hexed[2:4], 16)}, {int(hexed[4:6], 16)})"

            # ---- decisions: the paired difference of a known pair, then its pair view
            await cdp.evaluate("document.querySelector('#tabs button[data-view=decisions]').click()")
            await wait(cdp, "document.getElementById('decisions-view').dataset.ready === '1'", "decisions")
            # the rank rule (engine.stats.rankable): rows with a score and some coverage
            by_task: dict[str, dict[str, float]] = defaultdict(dict)
            for r in rows:
                if r["method"] == "redundancy" and r["score"] is not None and (r["coverage"] is None
                                                                                or r["coverage"] > 0):
                    by_task[r["task_id"]][r["agent"]] = r["score"]
            # the pairs shown are those of the agents the rank rule ranks (which ones, the mock's
            # poisoned bodies decide): the first cell on screen is the pair a person would read
            shown_pairs = await cdp.evaluate(js(
                "return [...document.querySelectorAll('#decisions-view section[data-method=redundancy] td.cell[data-a][data-b]')]"
                ".map(td => [td.dataset.a, td.dataset.b]);"))
            assert shown_pairs, "no paired difference shown"
            ranked_agents = {agent for pair in shown_pairs for agent in pair}
            assert ranked_agents <= set(AGENTS) and len(ranked_agents) >= 2
            x, y = shown_pairs[0]
            diffs = [v[x] - v[y] for v in by_task.values() if x in v and y in v]
            cell = await cdp.evaluate(js(
                "const td = document.querySelector('#decisions-view section[data-method=redundancy] "
                f"td.cell[data-a={json.dumps(x)}][data-b={json.dumps(y)}]');"
                "return [td.querySelector('.delta').textContent, td.querySelector('small').textContent];"))
            want = mean(diffs)
            assert cell[0] == ("+" if want >= 0 else "−") + f"{abs(want):.3f}"
            assert cell[1].endswith(f"n {len(diffs)}")
            first = await cdp.evaluate(js(
                "return [...document.querySelectorAll('#decisions-view section[data-method=redundancy] "
                "table[data-kind=p-first] tbody tr')].map(tr => tr.cells[0].textContent);"))
            assert sorted(first) == sorted(ranked_agents)
            await cdp.evaluate(
                "document.querySelector('#decisions-view section[data-method=redundancy] "
                f"td.cell[data-a={json.dumps(x)}][data-b={json.dumps(y)}]').click()")
            await wait(cdp, "document.getElementById('pair-view').dataset.ready === '1' && "
                            "!document.getElementById('pair-view').hidden", "the pair view")
            listed = await cdp.evaluate(js(
                "return [...document.querySelectorAll('#pair-tasks tbody tr')].map(tr => "
                "[tr.dataset.task, tr.querySelector('td.delta').textContent]);"))
            ranked = sorted(((t, v[x] - v[y]) for t, v in by_task.items() if x in v and y in v),
                            key=lambda kv: -abs(kv[1]))
            assert [t for t, _ in listed] == [t for t, _ in ranked]
            assert listed[0][1] == ("+" if ranked[0][1] >= 0 else "−") + f"{abs(ranked[0][1]):.4f}"
            assert "pm=redundancy" in await cdp.evaluate("location.hash")
            # each task is openable: side by side, and each agent's row
            await cdp.evaluate("document.querySelector('#pair-tasks tbody tr button.open-b').click()")
            await wait(cdp, "!document.getElementById('rows-view').hidden && document.querySelector('#panel h3') "
                            f"&& document.querySelector('#panel h3').textContent.startsWith({json.dumps(ranked[0][0])})"
                            f" && document.querySelector('#panel h3').textContent.includes({json.dumps(y)})",
                       "the row opened from the pair view")
            await cdp.evaluate("history.back()")
            await wait(cdp, "!document.getElementById('pair-view').hidden && "
                            "document.querySelectorAll('#pair-tasks tbody tr').length > 0", "back to the pair view")
            await cdp.evaluate("document.querySelector('#pair-tasks tbody tr button.side').click()")
            await wait(cdp, "document.getElementById('task-view').dataset.ready === '1' && "
                            "document.querySelectorAll('#task-view section.method').length === 1", "side by side")

            # ---- charts: every scored row a dot, in its agent's colour
            await cdp.evaluate("document.querySelector('#tabs button[data-view=charts]').click()")
            await wait(cdp, "document.getElementById('charts-view').dataset.ready === '1'", "charts")
            await cdp.evaluate(js("const s = document.getElementById('c-method'); s.value = 'quality';"
                                  " s.dispatchEvent(new Event('change')); return true;"))
            await wait(cdp, "document.getElementById('c-method') && document.getElementById('c-method').value "
                            "=== 'quality' && document.getElementById('charts-view').dataset.ready === '1' && "
                            "document.querySelectorAll('#charts-view svg.pertask circle').length > 0", "quality charts")
            dots = await cdp.evaluate("[...document.querySelectorAll('#charts-view svg.pertask circle')]"
                                      ".map(c => c.getAttribute('fill'))")
            scored = [ag for (t, ag, m), s in score.items() if m == "quality" and s is not None]
            assert sorted(dots) == sorted(colours[ag] for ag in scored)
            bars = await cdp.evaluate("[...document.querySelectorAll('#charts-view svg.hist rect')]"
                                      ".map(r => r.getAttribute('fill'))")
            assert set(bars) == {colours[ag] for ag in AGENTS}

            assert cdp.errors() == []
            assert all(u.startswith(origin) or u.startswith(("about:", "data:")) for u in cdp.requests())


async def test_first_page_of_rows_renders_in_chromium(tmp_path: Path) -> None:
    chromium = ensure_chromium()
    run = tmp_path / "run"
    run.mkdir()
    enc = msgspec.json.Encoder()
    rows = [ScoreRow(task_id=str(t), agent=agent, method="quality", score=t / 100)
            for t in range(1, 61) for agent in ("alpha", HOSTILE)]
    (run / "scores.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows))
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server:
        async with Browser(chromium, tmp_path / "chromium") as cdp:
            await cdp.navigate(server.url)
            await wait(cdp, "document.body.dataset.ready === '1'", "the first page")
            shown = await cdp.evaluate(SHOWN_ROWS)
            body = await cdp.evaluate("document.getElementById('body').innerHTML")
            count = await cdp.evaluate("document.getElementById('count').textContent")
            title = await cdp.evaluate("document.title")
    assert len(shown) == 50  # the first page of 120 rows
    assert shown[0][:3] == ["1", "alpha", "quality"]  # natural task order, agents in file order
    assert shown[1][1] == HOSTILE  # the name as text
    assert "&lt;img src=x onerror=" in body and "<img" not in body  # text, not markup
    assert count == "rows 1–50 of 120" and title != "1"
