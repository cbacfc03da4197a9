"""``drscore report`` checked in a real browser.

A run is made with the offline judge over a slice of the real DeepResearch Bench data
(``tests/data/drb``): Claude 3.7 Sonnet's reports and a second "agent" derived from
them deterministically (every other blank-line block of each report is dropped, see
:func:`every_other_block`). ``drscore report`` renders it and headless Chromium
(Debian's ``chromium``; installed by ``scripts/install-chromium`` when missing) opens
``report.html`` from disk. Through the DevTools protocol (``support.browser``, a small
client over aiohttp's websocket, 127.0.0.1 only) the test collects console errors, exceptions and network
requests, and checks every chart container: an ``<svg>`` with a non-zero box, shapes
that drew, embedded rasters that decode, and pixels that are not blank.
"""
from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from drscore.cli import main as drscore_main
from support.browser import Browser, DevTools, ensure_chromium
from support.browser import console_errors as _console_errors
from support.data import DATA

TASK_IDS = ("1", "2", "51", "52", "53", "54", "55", "56")


# --------------------------------------------------------------------------- the run


def every_other_block(article: str) -> str:
    """The derived agent: keep blocks 0, 2, 4, ... of the blank-line separated blocks."""
    blocks = [b for b in re.split(r"\n\s*\n", article) if b.strip()]
    return "\n\n".join(blocks[::2])


def write_slice(tmp: Path) -> tuple[Path, list[Path]]:
    """Tasks and two agents' reports for TASK_IDS, in DeepResearch Bench's format."""
    def pick(path: Path) -> list[dict[str, Any]]:
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [r for r in rows if str(r["id"]) in TASK_IDS]

    tasks = tmp / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                             for r in pick(DATA / "drb" / "tasks.jsonl")), encoding="utf-8")
    claude = pick(DATA / "drb" / "reports.claude-3-7-sonnet.jsonl")
    full = tmp / "reports.claude-3-7-sonnet.jsonl"
    derived = tmp / "reports.claude-every-other.jsonl"
    full.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in claude),
                    encoding="utf-8")
    derived.write_text("".join(
        json.dumps({**r, "article": every_other_block(r["article"])}, ensure_ascii=False) + "\n"
        for r in claude), encoding="utf-8")
    return tasks, [full, derived]


METHODS = ("quality", "redundancy", "race", "fact")


def make_run(tmp: Path) -> Path:
    """``drscore run`` with the offline judge: ReportEval quality and redundancy, RACE
    point-wise with the benchmark's criteria, and FACT with no page access (every cited
    page is unreachable, which the citation chart must show)."""
    tasks, reports = write_slice(tmp)
    out = tmp / "run"
    argv = ["run", "--methods", ",".join(METHODS), "--tasks", str(tasks),
            "--race-variant", "pointwise", "--criteria", str(DATA / "drb" / "criteria.jsonl"),
            "--offline-pages", "--cache", str(tmp / "cache"), "--out", str(out)]
    for r in reports:
        argv += ["--reports", str(r)]
    code = drscore_main(argv)
    # 3 = finished with failed items: the derived agent's shortest reports keep too few
    # paragraphs for redundancy, which is what the heatmap's grey cells show
    assert code in (0, 3), f"drscore run exited {code}"
    return out


# --------------------------------------------------------------------------- the browser


# Runs in the page: one record per chart container.
CHART_PROBE = """
(async () => {
  const charts = [];
  for (const box of document.querySelectorAll('[data-chart]')) {
    const svg = box.querySelector('svg');
    const rec = {id: box.dataset.chart, svg: !!svg};
    if (svg) {
      const r = svg.getBoundingClientRect();
      Object.assign(rec, {x: r.left + window.scrollX, y: r.top + window.scrollY,
                          width: r.width, height: r.height});
      const shapes = [...svg.querySelectorAll('path, rect, image, use, polygon, polyline, line')];
      rec.shapes = shapes.length;
      rec.drawn = shapes.filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length;
      rec.paths = [...svg.querySelectorAll('path')].filter(p => p.getTotalLength() > 0).length;
      const images = [...svg.querySelectorAll('image')];
      rec.images = images.length;
      rec.images_decoded = 0;
      for (const im of images) {
        const img = new Image();
        img.src = im.getAttribute('xlink:href') || im.getAttribute('href');
        try { await img.decode(); if (img.naturalWidth > 0) rec.images_decoded++; } catch (e) {}
      }
    }
    charts.push(rec);
  }
  return {title: document.title, charts,
          height: document.documentElement.scrollHeight,
          nodata: [...document.querySelectorAll('.nodata')].map(e => e.closest('section').id)};
})()
"""


# Runs in the page: where legends, axes and bars landed, what the tick labels read, the
# bars' colours, and how the time-and-money table's agent cells lay out.
LAYOUT_PROBE = """
(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const charts = {};
  for (const fig of document.querySelectorAll('[data-chart]')) {
    const svg = fig.querySelector('svg');
    if (!svg) continue;
    const axes = [...svg.querySelectorAll('g[id*="-axes_"]')].filter(g => /-axes_\\d+$/.test(g.id));
    charts[fig.dataset.chart] = {
      legends: [...svg.querySelectorAll('g[id$="-legend_1"]')].map(box),
      axes: axes.map(g => box(g.querySelector(':scope > g[id*="-patch_"]') || g)),
      bars: axes.flatMap(g => [...g.querySelectorAll(':scope > g[id*="-patch_"]')].slice(1))
                .map(g => [box(g), getComputedStyle(g.querySelector('path') || g).fill])
                .filter(([, fill]) => fill !== 'none'),  // spines and frames are not bars
      ylabels: axes.map(g => [...g.querySelectorAll('g[id*="-text_"] text')].map(t => t.textContent).pop() || ''),
      texts: [...svg.querySelectorAll('text')].map(t => t.textContent),
    };
  }
  const line = parseFloat(getComputedStyle(document.body).lineHeight) || 20;
  const money = [...document.querySelectorAll('#time-money tbody tr')].map(tr =>
    [tr.cells[1].textContent, tr.cells[1].getBoundingClientRect().height, getComputedStyle(tr.cells[1]).whiteSpace]);
  return {charts, money, line};
})()
"""


async def inspect_page(chromium: Path, page: Path, profile: Path) -> dict[str, Any]:
    """Open ``page`` in headless Chromium; return the probe, per-chart ink shares,
    console errors and every requested URL."""
    async with Browser(chromium, profile) as cdp:
        mark = len(cdp.events)
        await cdp.call("Page.navigate", url=page.as_uri())
        await cdp.wait_for("Page.loadEventFired", mark)
        probe = await _evaluate(cdp, "document.documentElement.scrollHeight")
        # A viewport as tall as the page: every chart is on screen at once.
        await cdp.call("Emulation.setDeviceMetricsOverride", width=1200,
                       height=int(probe), deviceScaleFactor=1, mobile=False)
        result = await _evaluate(cdp, CHART_PROBE)
        result["layout"] = await _evaluate(cdp, LAYOUT_PROBE)
        for chart in result["charts"]:
            if chart.get("svg") and chart["width"] > 0 and chart["height"] > 0:
                chart["ink"] = await _ink(cdp, chart)
        await asyncio.sleep(0.2)  # let late console messages arrive
        result["errors"] = _console_errors(cdp.events)
        result["requests"] = [e["params"]["request"]["url"] for e in cdp.events
                              if e["method"] == "Network.requestWillBeSent"]
        return result


async def _evaluate(cdp: DevTools, expression: str) -> Any:
    reply = await cdp.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
    if "exceptionDetails" in reply:
        raise AssertionError(f"probe failed: {reply['exceptionDetails']}")
    return reply["result"]["value"]


async def _ink(cdp: DevTools, chart: dict[str, Any]) -> float:
    """Share of the chart's screenshot pixels that are not (near) white."""
    shot = await cdp.call("Page.captureScreenshot", format="png", clip={
        "x": chart["x"], "y": chart["y"], "width": chart["width"], "height": chart["height"],
        "scale": 1})
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB"))
    return float(np.mean(pixels.astype(int).sum(axis=2) < 720))


def chart_problems(result: dict[str, Any]) -> list[str]:
    """Everything wrong with a page, as readable lines (empty = all charts drew)."""
    problems = list(result["errors"])
    problems += [f"network request: {u}" for u in result["requests"]
                 if not u.startswith(("file:", "data:", "about:"))]
    for c in result["charts"]:
        name = c["id"]
        if not c["svg"]:
            problems.append(f"{name}: no <svg>")
            continue
        if c["width"] < 50 or c["height"] < 50:
            problems.append(f"{name}: box {c['width']}x{c['height']}")
        if c["drawn"] == 0 or c["paths"] == 0:
            problems.append(f"{name}: nothing drawn ({c['drawn']} shapes, {c['paths']} paths)")
        if c["images"] != c["images_decoded"]:
            problems.append(f"{name}: {c['images'] - c['images_decoded']} raster(s) did not decode")
        if c.get("ink", 0.0) < 0.01:
            problems.append(f"{name}: blank on screen (ink {c.get('ink', 0.0):.4f})")
    return problems


# --------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def rendered() -> Any:
    chromium = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="drscore-browser-") as tmp_name:
        tmp = Path(tmp_name)
        run = make_run(tmp)
        assert drscore_main(["report", str(run), "--resamples", "200"]) == 0
        html_path = run / "report.html"
        # A doctored copy: one empty chart and one console error, which the checks
        # below must catch (proof that they can fail).
        broken = tmp / "broken.html"
        broken.write_text(html_path.read_text(encoding="utf-8").replace(
            "</body>", '<figure class="chart" data-chart="empty"><svg width="200" '
            'height="100"></svg></figure><script>console.error("planted")</script></body>'),
            encoding="utf-8")
        good = asyncio.run(inspect_page(chromium, html_path, tmp / "profile-a"))
        bad = asyncio.run(inspect_page(chromium, broken, tmp / "profile-b"))
        yield {"run": run, "html": html_path.read_text(encoding="utf-8"), "good": good,
               "bad": bad, "methods": sorted({json.loads(x)["method"] for x in
                                              (run / "scores.jsonl").read_text().splitlines()})}


def test_every_chart_draws_without_errors_or_network(rendered):
    good = rendered["good"]
    assert chart_problems(good) == []
    # The browser saw every chart the file declares, and the expected ones exist.
    declared = re.findall(r'data-chart="([^"]+)"', rendered["html"])
    assert [c["id"] for c in good["charts"]] == declared
    ids = set(declared)
    assert rendered["methods"] == sorted(METHODS)
    for method in METHODS:
        assert f"leaderboard-{method}" in ids and f"heatmap-{method}" in ids
    assert {"dimensions-race", "dimensions-quality", "citations-fact", "cost-method",
            "cost-task"} <= ids
    assert len([i for i in ids if i.startswith("redundancy-redundancy-")]) == 1
    assert good["nodata"] == []  # every section had data
    assert good["title"].startswith("drscore report")
    # The heatmaps carry their rasters (cells and colour bar) inline and they decode.
    heat = [c for c in good["charts"] if c["id"].startswith("heatmap-")]
    assert heat and all(c["images"] >= 1 and c["images"] == c["images_decoded"] for c in heat)


def test_the_checks_catch_a_blank_chart_and_a_console_error(rendered):
    problems = chart_problems(rendered["bad"])
    assert any(p.startswith("empty: nothing drawn") for p in problems)
    assert any(p.startswith("empty: blank on screen") for p in problems)
    assert any("planted" in p for p in problems)
    # ...and only those: the real charts are still fine in the doctored copy.
    assert all(p.startswith("empty:") or "planted" in p for p in problems)


def test_html_is_self_contained(rendered):
    html = rendered["html"]
    assert "<script" not in html
    # Only XML namespace declarations mention http; nothing is fetched from anywhere.
    # The one other link is to the viewer page written beside the report.
    for attr in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert attr.startswith(("#", "data:", "viewer.html#")), attr


def _overlap(a: list[float], b: list[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})"


def test_legends_labels_and_agent_colours(rendered):
    from drscore.engine.reporting.colours import agent_colours

    layout = rendered["good"]["layout"]
    charts = layout["charts"]
    agents = sorted({json.loads(x)["agent"] for x in (rendered["run"] / "scores.jsonl").read_text().splitlines()})
    colour = {a: _rgb(c) for a, c in agent_colours(agents).items()}
    # each agent keeps its colour: the leaderboard bars and the dimension bars use only the agents' colours
    for name, chart in charts.items():
        if name.startswith(("leaderboard-", "dimensions-")):
            fills = {fill for _, fill in chart["bars"]}
            assert fills and fills <= set(colour.values()), (name, fills)
    assert {fill for _, fill in charts["dimensions-quality"]["bars"]} == set(colour.values())
    # no legend lies over a bar, and the dimension names are whole (wrapped, not cut)
    for name, chart in charts.items():
        for legend in chart["legends"]:
            assert all(_overlap(legend, bar) == 0 for bar, _ in chart["bars"]), name
    race_ticks = " ".join(charts["dimensions-race"]["texts"])
    assert "instruction" in race_ticks and "following" in race_ticks and "…" not in race_ticks
    # agent names do not wrap in the time-and-money table
    assert layout["money"] and all(ws == "nowrap" and h < 2 * layout["line"] for _, h, ws in layout["money"])
