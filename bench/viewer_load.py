"""Load time of the per-report viewer (``viewer.html``) at 1,000 reports x 8 methods.

A synthetic run directory is written with a fixed seed: 500 tasks x 2 agents x 8
methods = 8,000 score rows, each with method-shaped details (FACT statements with URL
and outcome, redundancy pairs, KAE key points, factuality claims, RACE-like
subscores) and ``--calls`` judge calls per row on average in ``verdicts.jsonl`` (a
verdict with per-criterion scores and reasons, and recorded inputs: a statement, a
URL or two passages). ``drscore report`` code renders the viewer; headless Chromium
opens it from disk.

Figures: render time in Python, file size, and in the browser the time from
navigation to the page's script having drawn the first table page (``viewerReady``,
``performance.now()``), to the load event, to apply a filter, and to open one row
(its details and calls decoded and drawn), each the median of ``--repeat`` loads.

    .venv/bin/python -m bench.viewer_load [--tasks 500] [--agents 2] [--calls 8] [--repeat 3]

Prints one JSON object. Needs /usr/bin/chromium (or $CHROMIUM).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.machine import machine
from drscore.engine.reporting.viewer import render_viewer
from drscore.engine.runtime.models import ScoreRow, VerdictRecord
from drscore.engine.runtime.rundir_read import iter_verdicts, read_run_dir

ROOT = Path(__file__).resolve().parents[1]
# The browser harness of the test suite (one CDP client for tests and benches).
sys.path.insert(0, str(ROOT / "tests"))
from support.browser import Browser, ensure_chromium  # noqa: E402

METHODS = ("quality", "redundancy", "race", "fact", "factuality", "kae", "ace", "rigorous")
WORDS = ("market growth policy energy battery storage grid demand solar wind cost price model survey "
         "result trend analysis region forecast capacity data source report claim evidence").split()


def sentence(rng: random.Random, n: int = 18) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def details_for(method: str, rng: random.Random) -> tuple[dict[str, Any], dict[str, float | None]]:
    if method == "fact":
        st = [{"url": f"https://example.org/{rng.randrange(50)}", "statement": sentence(rng),
               "outcome": rng.choice(["supported", "unsupported", "unreachable"])} for _ in range(20)]
        return {"statements": st, "pages": {"ok": 5, "unreachable": 2, "refused": 0}}, {
            "acc_published": rng.random(), "supported": 10.0, "pairs": 20.0}
    if method == "factuality":
        cl = [{"url": f"https://example.org/{rng.randrange(50)}", "claim": sentence(rng),
               "outcome": "judged", "score": rng.choice([-1, 0, 1])} for _ in range(15)]
        return {"claims": cl}, {"average_support": rng.random(), "pairs": 15.0}
    if method == "kae":
        uek = [{"point": sentence(rng, 10), "url": f"https://example.org/{rng.randrange(50)}",
                "label": rng.choice(["supports", "omits", "contradicts"])} for _ in range(12)]
        return {"uek": uek}, {"ksr": rng.random(), "kor": rng.random()}
    if method == "redundancy":
        pairs = [[i, j, rng.randint(0, 4), rng.choice(["judged", "screened"])]
                 for i in range(1, 12) for j in range(i + 1, 12)][:50]
        return {"pairs": pairs, "units": 12}, {"pairs_total": 55.0, "pairs_judged": 10.0}
    dims = {d: rng.uniform(0, 10) for d in ("comprehensiveness", "depth", "instruction", "readability")}
    return {"weights": {d: 0.25 for d in dims}}, dims


def verdict_for(method: str, rng: random.Random) -> tuple[Any, dict[str, str], str]:
    if method == "redundancy":
        return ({"score": rng.randint(0, 4), "reason": sentence(rng, 25)},
                {"passage_a": " ".join(sentence(rng) for _ in range(5)),
                 "passage_b": " ".join(sentence(rng) for _ in range(5))}, f"pair {rng.randrange(12)}-{rng.randrange(12)}")
    if method in ("fact", "factuality", "kae"):
        url = f"https://example.org/{rng.randrange(50)}"
        return ({"judgments": [{"statement": k, "verdict": rng.choice(["supported", "not_supported"])}
                               for k in range(1, 6)]},
                {"url": url, "statements": "\n".join(f"{k}. {sentence(rng)}" for k in range(1, 6)),
                 "page": "[24,000 chars]"}, f"{url} | window 1/2")
    return ({"scores": [{"criterion": sentence(rng, 6), "score": rng.randint(1, 10), "justification": sentence(rng, 30)}
                        for _ in range(5)]}, {"task": sentence(rng), "report": "[30,000 chars]"}, "score")


def write_run(root: Path, tasks: int, agents: int, calls: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    enc = msgspec.json.Encoder()
    root.mkdir(parents=True, exist_ok=True)
    n_rows = n_calls = 0
    with open(root / "scores.jsonl", "wb") as scores, open(root / "verdicts.jsonl", "wb") as verdicts:
        for t in range(1, tasks + 1):
            for a in range(agents):
                agent = f"agent-{a}"
                for method in METHODS:
                    details, subs = details_for(method, rng)
                    k = max(1, int(rng.expovariate(1 / calls)))
                    status = rng.choices(["ok", "partial", "failed"], [90, 7, 3])[0]
                    scores.write(enc.encode(ScoreRow(
                        task_id=str(t), agent=agent, method=method, score=None if status == "failed" else rng.random(),
                        subscores=subs, status=status, errors=["judge timeout"] if status != "ok" else [],
                        judge="gpt-4.1", calls=k, input_tokens=k * 3000, output_tokens=k * 200,
                        cost_usd=k * 0.008, latency_s=k * 1.3, details=details)) + b"\n")
                    n_rows += 1
                    for _ in range(k):
                        verdict, inputs, label = verdict_for(method, rng)
                        verdicts.write(enc.encode(VerdictRecord(
                            task_id=str(t), agent=agent, method=method, template=f"{method}_step", key="k" * 64,
                            cached=rng.random() < 0.2, status="ok", verdict=verdict, input_tokens=3000,
                            output_tokens=200, cost_usd=0.008, latency_s=1.3, label=label, inputs=inputs)) + b"\n")
                        n_calls += 1
    (root / "config.json").write_text("{}")
    return n_rows, n_calls


PROBE_FILTER = """(() => { const t0 = performance.now(); const f = document.getElementById('f-method');
  f.value = 'fact'; f.dispatchEvent(new Event('change'));
  return [performance.now() - t0, document.querySelectorAll('#rows tbody tr').length]; })()"""
PROBE_OPEN = """(() => { const t0 = performance.now();
  document.querySelector('#rows tbody tr').cells[0].click();
  document.querySelector('#panel details.call').open = true;
  return [performance.now() - t0, document.querySelectorAll('#panel details.call').length]; })()"""


async def measure(page: Path, repeat: int, profile: Path) -> dict[str, Any]:
    ready, load, filt, opened = [], [], [], []
    shown = calls = 0
    async with Browser(ensure_chromium(), profile) as cdp:
        for _ in range(repeat):
            await cdp.navigate("about:blank")
            t0 = time.perf_counter()
            await cdp.navigate(page.as_uri())
            load.append((time.perf_counter() - t0) * 1000)
            ready.append(await cdp.evaluate("window.viewerReady"))
            ms, shown = await cdp.evaluate(PROBE_FILTER)
            filt.append(ms)
            ms, calls = await cdp.evaluate(PROBE_OPEN)
            opened.append(ms)
        errors = cdp.errors()
        requests = [u for u in cdp.requests() if not u.startswith(("file:", "data:", "about:"))]
    return {"ready_ms": round(statistics.median(ready), 1), "load_event_ms": round(statistics.median(load), 1),
            "filter_ms": round(statistics.median(filt), 1), "open_row_ms": round(statistics.median(opened), 1),
            "rows_drawn_after_filter": shown, "calls_in_opened_row": calls, "console_errors": errors,
            "network_requests": requests, "loads": repeat}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--calls", type=float, default=8.0, help="mean judge calls per row")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="drscore-viewer-bench-") as tmp_name:
        tmp = Path(tmp_name)
        run_dir = tmp / "run"
        rows, calls = write_run(run_dir, args.tasks, args.agents, args.calls, args.seed)
        t0 = time.perf_counter()
        run = read_run_dir(run_dir)
        text = render_viewer(run, iter_verdicts(run_dir / "verdicts.jsonl"))
        render_s = time.perf_counter() - t0
        page = run_dir / "viewer.html"
        page.write_text(text, encoding="utf-8")
        browser = asyncio.run(measure(page, args.repeat, tmp / "profile"))
        print(json.dumps({
            "bench": "viewer_load", "reports": args.tasks * args.agents, "methods": len(METHODS), "rows": rows,
            "judge_calls": calls, "verdicts_jsonl_mb": round((run_dir / "verdicts.jsonl").stat().st_size / 1e6, 1),
            "viewer_html_mb": round(page.stat().st_size / 1e6, 1), "render_s": round(render_s, 2),
            **browser, "machine": machine()}))


if __name__ == "__main__":
    main()
