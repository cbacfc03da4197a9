"""`drscore report` and `drscore view` at scale.

A run of ``--rows`` reports (default 100,000; one method, quality, offline judge; the
workload of :mod:`bench.scale`) is scored into a run directory, then:

- ``drscore report`` on it in a fresh process: wall time, peak RSS, file sizes;
- ``drscore export`` to CSV and to Parquet, each in a fresh process (chunked writing), on
  synthetic score files of ``--rows`` and 5 x ``--rows`` rows: flat memory means the same peak;
- the view index: build time from scratch, size; first page (task order), the first page
  sorted by score over every row, a task-prefix filter, a row with its calls, one task's
  rows side by side, the tasks where two agents differ most, the chart data of a method
  and the paired decisions (first request, then cached); each through HTTP
  from a running ``drscore view`` server (median of ``--repeat``);
- with Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``): a ``--browser-rows`` run
  (default: the ``--rows`` run itself) served, and from navigation, the time to the first
  table page drawn (``window.firstPageMs``) and, opening a link to one task's side-by-side
  view, the time to that view drawn (``window.taskViewMs``), both ``performance.now()``,
  median of ``--repeat`` loads.

    .venv/bin/python -m bench.view_timing [--rows 100000] [--browser-rows N] [--repeat 5]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.machine import machine
from bench.scale import write_workload

ROOT = Path(__file__).resolve().parents[1]
# Peak RSS of a child from VmHWM (this process's memory only): ru_maxrss survives exec on
# Linux, so a child started by a large parent would report the parent's peak.
PEAK = ("def peak_mb():\n    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n            return round(int(line.split()[1]) / 1024, 1)\n")


def score_run(tmp: Path, n: int) -> Path:
    """Score ``n`` synthetic reports offline into ``tmp/run`` (as bench.scale does)."""
    from drscore.api import JudgeConfig, Run, RunConfig, run_async

    tasks, reports = write_workload(tmp, n)
    out = tmp / "run"
    cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(out),
                    judge=JudgeConfig(cache_dir=str(tmp / "cache")))

    async def go() -> None:
        async with Run(cfg) as run:
            async for _ in run.rows():
                pass
    run_async(go())
    return out


def time_report(run_dir: Path) -> dict[str, Any]:
    """`drscore report` in a fresh process (its own peak RSS)."""
    code = (PEAK + "import json, sys, time\nfrom drscore.cli import main\nt0 = time.monotonic()\n"
            f"rc = main(['report', {str(run_dir)!r}])\n"
            "print(json.dumps({'rc': rc, 'wall_s': round(time.monotonic() - t0, 2), "
            "'peak_rss_mb': peak_mb()}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("report.html", "viewer.html", "leaderboard.md"):
        out[f"{name}_kb"] = round((run_dir / name).stat().st_size / 1024, 1)
    return out


def time_export(run_dir: Path, fmt: str) -> dict[str, Any]:
    """`drscore export DIR --format FMT` in a fresh process: chunk by chunk, so its peak
    RSS should not follow the size of scores.jsonl."""
    out_file = run_dir / f"rows.{fmt}"
    code = (PEAK + "import json, time\nfrom drscore.cli import main\nt0 = time.monotonic()\n"
            f"rc = main(['export', {str(run_dir)!r}, '--format', {fmt!r}, '--out', {str(out_file)!r}])\n"
            "print(json.dumps({'rc': rc, 'wall_s': round(time.monotonic() - t0, 2), "
            "'peak_rss_mb': peak_mb()}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["file_mb"] = round(out_file.stat().st_size / 2**20, 1)
    return out


def synthetic_scores(run_dir: Path, n: int) -> Path:
    """A scores.jsonl of ``n`` quality-like rows (no judging), for the export check."""
    import msgspec

    from drscore.engine.runtime.models import ScoreRow

    run_dir.mkdir(parents=True, exist_ok=True)
    enc = msgspec.json.Encoder()
    with open(run_dir / "scores.jsonl", "wb") as f:
        for i in range(n):
            f.write(enc.encode(ScoreRow(
                task_id=f"t{i // 10}", agent=f"agent{i % 10}", method="quality", score=(i * 7919 % 1000) / 1000,
                subscores={"coherence": 2.0, "clarity": 3.0}, details={"note": "y" * 300})) + b"\n")
    return run_dir


async def time_view(run_dir: Path, repeat: int) -> dict[str, Any]:
    from drscore.engine.reporting.view_index import INDEX_NAME, ViewIndex
    from drscore.engine.reporting.view_server import ViewConfig, ViewServer

    index_file = run_dir / INDEX_NAME
    for leftover in run_dir.glob(INDEX_NAME + "*"):
        leftover.unlink()
    t0 = time.monotonic()
    index = await asyncio.to_thread(ViewIndex, run_dir)
    built = await asyncio.to_thread(index.refresh)
    build_s = time.monotonic() - t0
    index.close()
    out: dict[str, Any] = {"rows_indexed": built["scores"], "calls_indexed": built["verdicts"],
                           "index_build_s": round(build_s, 2),
                           "index_mb": round(index_file.stat().st_size / 2**20, 1)}
    async with ViewServer(ViewConfig(run_dir=str(run_dir), port=0)) as server, aiohttp.ClientSession() as s:
        async def timed(path: str) -> tuple[float, Any]:
            times, body = [], None
            for _ in range(repeat):
                t = time.monotonic()
                async with s.get(server.url + path) as resp:
                    body = await resp.json()
                times.append(time.monotonic() - t)
            return round(statistics.median(times) * 1000, 1), body

        out["first_page_ms"], _ = await timed("api/rows?limit=50")
        out["sort_by_score_desc_ms"], top = await timed("api/rows?sort=score&descending=1&limit=50")
        out["sort_by_judge_s_ms"], _ = await timed("api/rows?sort=judge_s&limit=50")
        out["task_prefix_filter_ms"], hits = await timed("api/rows?task_prefix=t99&limit=50")
        out["task_prefix_matches"] = hits["total"]
        out["row_with_calls_ms"], _ = await timed(f"api/row/{top['rows'][0]['id']}")
        out["sorted_rows_total"] = top["total"]
        task = top["rows"][0]["task"]
        out["side_by_side_task_ms"], side = await timed(f"api/task?task={task}")
        out["side_by_side_rows"] = len(side["rows"])
        t = time.monotonic()  # before the pair view, which needs them too
        async with s.get(server.url + "api/decisions") as resp:
            await resp.json()
        out["decisions_first_ms"] = round((time.monotonic() - t) * 1000, 1)
        out["decisions_cached_ms"], _ = await timed("api/decisions")
        out["pair_tasks_ms"], pair = await timed("api/pair?method=quality&a=agent0&b=agent1&limit=50")
        out["pair_shared_tasks"] = pair["n"]
        t = time.monotonic()  # the first request scans the method's rows; later ones are cached
        async with s.get(server.url + "api/scores?method=quality") as resp:
            await resp.json()
        out["chart_data_first_ms"] = round((time.monotonic() - t) * 1000, 1)
        out["chart_data_cached_ms"], _ = await timed("api/scores?method=quality")
    return out


async def time_browser(run_dir: Path, repeat: int) -> dict[str, Any]:
    from drscore.engine.reporting.view_server import ViewConfig, ViewServer

    sys.path.insert(0, str(ROOT / "tests"))
    from support.browser import CHROMIUM, Browser

    if not os.access(CHROMIUM, os.X_OK):
        return {"skipped": f"{CHROMIUM} missing (scripts/install-chromium)"}
    shown, side = [], []
    wait_for = ("new Promise(r => {{ const w = () => window.{0} !== undefined ? "
                "r(window.{0}) : setTimeout(w, 10); w(); }})")
    async with ViewServer(ViewConfig(run_dir=str(run_dir), port=0)) as server:
        with tempfile.TemporaryDirectory(prefix="drscore-bench-chromium-") as profile:
            async with Browser(CHROMIUM, Path(profile) / "p") as cdp:
                await cdp.navigate(server.url)  # a first load: the index is warm, as for a person
                await cdp.evaluate(wait_for.format("firstPageMs"))
                for _ in range(repeat):
                    await cdp.navigate("about:blank")
                    await cdp.navigate(server.url)
                    shown.append(await cdp.evaluate(wait_for.format("firstPageMs")))
                rows = await cdp.evaluate("document.querySelectorAll('#body tr').length")
                task = await cdp.evaluate("document.querySelector('#body tr td').textContent")
                for _ in range(repeat):
                    await cdp.navigate("about:blank")
                    await cdp.navigate(server.url + f"#view=task&st={task}")
                    side.append(await cdp.evaluate(wait_for.format("taskViewMs")))
                columns = await cdp.evaluate("document.querySelectorAll('#task-view .agent-col').length")
    return {"first_page_shown_ms_median": round(statistics.median(shown), 1),
            "first_page_shown_ms_all": [round(x, 1) for x in shown], "rows_drawn": rows,
            "side_by_side_shown_ms_median": round(statistics.median(side), 1),
            "side_by_side_shown_ms_all": [round(x, 1) for x in side], "side_by_side_columns": columns}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--browser-rows", type=int, default=None,
                    help="rows of the run opened in Chromium (default: the --rows run; 0 skips the browser)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-export", action="store_true", help="skip the export measurements (5 x --rows rows)")
    args = ap.parse_args()
    result: dict[str, Any] = {"benchmark": "view_timing", "rows": args.rows}
    with tempfile.TemporaryDirectory(prefix="drscore-view-") as tmp:
        t0 = time.monotonic()
        run_dir = score_run(Path(tmp), args.rows)
        result["scoring_s"] = round(time.monotonic() - t0, 1)
        result["scores_jsonl_mb"] = round((run_dir / "scores.jsonl").stat().st_size / 2**20, 1)
        result["report"] = time_report(run_dir)
        result["view"] = asyncio.run(time_view(run_dir, args.repeat))
        if args.browser_rows is None or args.browser_rows == args.rows:
            result["browser"] = {"rows": args.rows, **asyncio.run(time_browser(run_dir, args.repeat))}
    if not args.no_export:
        with tempfile.TemporaryDirectory(prefix="drscore-export-") as tmp:
            # export memory against size: the same rows at n and 5n (synthetic, no judging)
            for n in (args.rows, 5 * args.rows):
                export_dir = synthetic_scores(Path(tmp) / str(n), n)
                result[f"export_{n}_rows"] = {fmt: time_export(export_dir, fmt) for fmt in ("csv", "parquet")}
    if args.browser_rows and args.browser_rows != args.rows:
        with tempfile.TemporaryDirectory(prefix="drscore-view-") as tmp:
            run_dir = score_run(Path(tmp), args.browser_rows)
            result["browser"] = {"rows": args.browser_rows, **asyncio.run(time_browser(run_dir, args.repeat))}
            report = time_report(run_dir)
            result["browser"]["viewer_html_kb"] = report["viewer.html_kb"]
    result["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["machine"] = machine()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
