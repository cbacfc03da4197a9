"""User methods in ``viewer.html`` (headless Chromium), clicked like a person would: a
``rubric-items`` row opens on its items — every criterion with its points, tags, met and
the judge's reason — and a method-file row on the file's subscores and its justification."""
from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from drscore.cli import main as drscore_main
from support.browser import Browser, ensure_chromium, off_disk
from support.data import ROOT

EXAMPLES = ROOT / "examples"

FILTER = ("(() => {{ const f = document.getElementById('f-method'); f.value = {method};"
          " f.dispatchEvent(new Event('change')); return true; }})()")
OPEN = """(() => {{
  const tr = [...document.querySelectorAll('#rows tbody tr')].find(tr =>
    tr.cells[0].textContent === {task} && tr.cells[1].textContent === {agent} && tr.cells[2].textContent === {method});
  if (!tr) return null;
  tr.cells[0].click();
  const panel = document.getElementById('panel');
  return {{headings: [...panel.querySelectorAll('h2, h3')].map(h => h.textContent),
           tables: [...panel.querySelectorAll('table')].map(t => ({{
             head: [...t.querySelectorAll('th')].map(th => th.textContent),
             rows: [...t.tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent))}})),
           text: panel.innerText}};
}})()"""


def _open(row: dict[str, Any]) -> str:
    return OPEN.format(task=json.dumps(row["task_id"]), agent=json.dumps(row["agent"]),
                       method=json.dumps(row["method"]))


@pytest.fixture(scope="module")
def session() -> Any:
    chromium = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="drscore-custom-viewer-") as tmp_name:
        tmp = Path(tmp_name)
        run = tmp / "run"
        code = drscore_main(["run", "--method-file", str(EXAMPLES / "clarity_rubric.toml"),
                             "--methods", "rubric-items,clarity-rubric", "--tasks", str(EXAMPLES / "rubric_tasks.jsonl"),
                             "--reports", str(EXAMPLES / "rubric_reports.jsonl"), "--limit", "3",
                             "--out", str(run)])
        assert code == 0
        assert drscore_main(["report", str(run), "--resamples", "50"]) == 0
        rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
        items_row = next(r for r in rows if r["method"] == "rubric-items")
        file_row = next(r for r in rows if r["method"] == "clarity-rubric")

        async def drive() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with Browser(chromium, tmp / "profile") as cdp:
                await cdp.navigate((run / "viewer.html").as_uri())
                await cdp.evaluate(FILTER.format(method=json.dumps("rubric-items")))
                out["items"] = await cdp.evaluate(_open(items_row))
                await cdp.evaluate(FILTER.format(method=json.dumps("clarity-rubric")))
                out["file"] = await cdp.evaluate(_open(file_row))
                await asyncio.sleep(0.2)
                out["errors"], out["requests"] = cdp.errors(), cdp.requests()
            return out

        yield {"items_row": items_row, "file_row": file_row, **asyncio.run(drive())}


def test_a_rubric_items_row_shows_every_item_with_its_decision(session):
    row, panel = session["items_row"], session["items"]
    items = row["details"]["items"]
    assert panel is not None and f"items ({len(items)})" in panel["headings"]
    table = next(t for t in panel["tables"] if "criterion" in t["head"])
    assert table["head"][:5] == ["criterion", "points", "tags", "met", "reason"]
    assert [r[0] for r in table["rows"]] == [i["criterion"] for i in items]
    assert [r[3] for r in table["rows"]] == [str(i["met"]).lower() for i in items]
    assert all(r[4].startswith("offline judge:") for r in table["rows"])
    for tag in row["subscores"]:  # the per-tag subscores are listed too
        assert tag in panel["text"]


def test_a_method_file_row_shows_its_subscores_and_justification(session):
    row, panel = session["file_row"], session["file"]
    assert panel is not None and "subscores" in panel["headings"]
    for name in ("clarity", "sourcing", "actionability", "answers_request"):
        assert name in panel["text"]
    assert row["details"]["justification"][:40] in panel["text"] and row["details"]["verdict"] in panel["text"]


def test_no_console_errors_and_no_network(session):
    assert session["errors"] == [] and off_disk(session["requests"]) == []
