"""Pacing without quota headers (issue 16, part 6).

An endpoint limited to 120 requests/min that announces no quota (a vLLM server behind a
gateway that answers 429 with only ``Retry-After``: the mock's ``vllm`` profile), judged
with no ``--rpm``: how close does the run come to the physical limit, and what share of
its requests are answered 429? The same workload against the ``openai`` profile (which
sends ``x-ratelimit-*`` headers) is the comparison: with headers the engine paces from
the first answer.

quality + redundancy on the first 4 bundled example reports (about 125 calls), cold cache, mock latency 0.3 s
+/- 0.2 s. Efficiency = physical limit / wall time, where the physical limit is the
answered requests at 120/min less the one-second burst the server's bucket starts with.

    .venv/bin/python -m bench.headerless [--rpm 120]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _measure(profile: str, rpm: float, latency: float, jitter: float, concurrency: int, limit: int,
             tmp: Path) -> dict:
    cfg = MockConfig(profile=profile, rpm=rpm, latency=latency, jitter=jitter, seed=3)
    with MockServerProcess(cfg) as mock:
        judge = JudgeConfig(url=mock.url, model="mock", concurrency=concurrency, no_cache=True)
        run = RunConfig(methods=["quality", "redundancy"], reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                        tasks=str(EXAMPLES / "tasks.jsonl"), out=str(tmp / profile), judge=judge, limit=limit)
        wall, summary = asyncio.run(timed_run(run))
        s = mock.stats()
    burst = max(1.0, rpm / 60)  # the server's bucket starts full: 1 s of quota
    physical = max(0.0, s["ok"] - burst) / rpm * 60
    t = summary["totals"]
    return {
        "profile": profile, "quota_headers": profile == "openai",
        "requests_sent": s["requests"], "requests_ok": s["ok"], "responses_429": s["rate_limited"],
        "share_429": round(s["rate_limited"] / max(1, s["requests"]), 4),
        "physical_limit_s": round(physical, 2), "wall_s": round(wall, 2),
        "efficiency": round(physical / wall, 3) if wall else None,
        "items": t["items"], "items_failed": t["items_failed"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=float, default=120)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--jitter", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--reports", type=int, default=4, help="the first N example reports (4: about 125 calls)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        runs = [_measure(p, args.rpm, args.latency, args.jitter, args.concurrency, args.reports, Path(d))
                for p in ("vllm", "openai")]
    out = {"benchmark": "headerless", "rpm": args.rpm, "mock_latency_s": args.latency, "mock_jitter_s": args.jitter,
           "client_concurrency": args.concurrency, "judge_rpm_option": None,
           "methods": ["quality", "redundancy"], "reports": f"examples/reports.claude-3-7-sonnet.jsonl (first {args.reports})",
           "header_less": runs[0], "with_headers": runs[1], "machine": machine()}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
