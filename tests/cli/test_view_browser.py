"""`drscore view` in a real browser: headless Chromium loads the page from the server and
the first page of rows is drawn (the DOM after the page's script ran, ``--dump-dom``).
A hostile agent name shows as text, never as markup."""
from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import msgspec

from drscore.engine.reporting.view_server import ViewConfig, ViewServer
from drscore.engine.runtime.models import ScoreRow
from support.browser import ensure_chromium

HOSTILE = '<img src=x onerror="document.title=1">'


async def test_first_page_of_rows_renders_in_chromium(tmp_path: Path) -> None:
    chromium = ensure_chromium()
    run = tmp_path / "run"
    run.mkdir()
    enc = msgspec.json.Encoder()
    rows = [ScoreRow(task_id=str(t), agent=agent, method="quality", score=t / 100)
            for t in range(1, 61) for agent in ("alpha", HOSTILE)]
    (run / "scores.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows))
    async with ViewServer(ViewConfig(run_dir=str(run), port=0)) as server:
        with tempfile.TemporaryDirectory(prefix="drscore-chromium-") as profile:
            proc = await asyncio.create_subprocess_exec(
                str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--dump-dom", "--virtual-time-budget=10000", server.url,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 120)
    dom = out.decode("utf-8", "replace")
    assert proc.returncode == 0, err.decode()[-2000:]
    assert 'data-ready="1"' in dom, dom[-3000:]
    body = dom[dom.index('<tbody id="body">'):dom.index("</tbody>")]
    drawn = re.findall(r'<tr data-id="\d+">', body)
    assert len(drawn) == 50  # the first page of 120 rows
    cells = re.findall(r"<td[^>]*>(.*?)</td>", body)
    assert cells[:3] == ["1", "alpha", "quality"]  # natural task order, agents in file order
    assert "&lt;img src=x onerror=" in body and "<img" not in body  # text, not markup
    assert "rows 1–50 of 120" in dom
