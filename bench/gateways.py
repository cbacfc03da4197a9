"""A token quota kept by an AI gateway in front of the model (issue 30: the quota a client is
not told but can read).

The mock's ``--gateway`` puts APISIX's ``ai-rate-limiting`` or Kong's
``ai-rate-limiting-advanced`` in front of a vLLM-like model (judge/mock/gateway.py): a fixed
window of tokens, charged after each answer from its usage, a call admitted while the window's
counter is under the limit. APISIX's window is fixed; it refuses with a 503 and names no window.
Kong's slides (``--kong-fixed``: fixed); it refuses with a 429 whose wait is only in
``X-AI-RateLimit-Retry-After``, and names its window in its headers.

Each gateway is run with the client reading the gateway's headers (judge/gateway_quota.py) and
with it blind to them (``read_gateway_quota`` returning None, as drscore was before): quality on
the 100 DeepResearch Bench reports, 600,000 tokens a minute, a 60-second window, no
``--tpm``. Figures per run: requests sent and refused, items failed, and the quota's limit over
the span (tokens charged at the quota's rate, over first request to last answer).

    .venv/bin/python -m bench.gateways [--gateway apisix,kong] [--runs N]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from bench.timing import add_load_arguments, quota_use, timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge import ratelimit_headers
from drscore.judge.mock.server import MockConfig, MockServerProcess


def _measure(gateway: str, reads: bool, *, tpm: float, window: float, latency: float, jitter: float,
             concurrency: int, reports: Path, tasks: Path, limit: int, tmp: Path, fixed: bool = False) -> dict:
    cfg = MockConfig(profile="vllm", tpm=tpm, gateway=gateway, gateway_window=window, latency=latency,
                     jitter=jitter, seed=3, gateway_fixed=fixed)
    real = ratelimit_headers.read_gateway_quota
    if not reads:
        ratelimit_headers.read_gateway_quota = lambda headers, window_s=None: None  # type: ignore[assignment]
    try:
        with MockServerProcess(cfg) as mock:
            judge = JudgeConfig(url=mock.url, model="mock", concurrency=concurrency, no_cache=True,
                                cache_dir=str(tmp / "cache"))
            run = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(tmp / "out"),
                            judge=judge, limit=limit)
            wall, summary = asyncio.run(timed_run(run))
            s = mock.stats()
    finally:
        ratelimit_headers.read_gateway_quota = real
    use = quota_use(s, 0, tpm)
    t = summary["totals"]
    return {"gateway": gateway, "windows_slide": gateway == "kong" and not fixed, "client_reads_gateway_headers": reads,
            "requests_sent": s["requests"], "refused": s["gateway_refused"],
            "share_refused": round(s["gateway_refused"] / max(1, s["requests"]), 4),
            "items": t["items"], "items_failed": t["items_failed"],
            "windows": s["gateway_windows"], "tokens_charged": use.charged,
            "limit_s": round(use.limit, 2), "span_s": round(use.span, 2),
            "limit_over_span": round(use.limit / use.span, 3) if use.span > 0 else None,
            "wall_s": round(wall, 2), "gateway_quota": t.get("gateway_quota")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", default="apisix,kong", help="apisix, kong (comma-separated)")
    ap.add_argument("--runs", type=int, default=1, help="runs per gateway and client (taken alternately)")
    ap.add_argument("--tpm", type=float, default=600_000, help="the gateway's limit, per minute")
    ap.add_argument("--window", type=float, default=60.0, help="the gateway's window, seconds")
    add_load_arguments(ap)
    ap.add_argument("--limit", type=int, default=0, help="the first N reports (0: all 100)")
    ap.add_argument("--kong-fixed", action="store_true", help="Kong's fixed windows (its default slides)")
    ap.add_argument("--blind", action=argparse.BooleanOptionalAction, default=True,
                    help="also run the client blind to the gateway's headers (as drscore was before)")
    ap.add_argument("--drb", default=str(DRB), help="the folder of DeepResearch Bench's reports and tasks")
    args = ap.parse_args()
    drb = Path(args.drb)
    reports, tasks = drb / "reports.claude-3-7-sonnet.jsonl", drb / "tasks.jsonl"
    require_data("gateways", str(reports), str(tasks))
    out: dict = {"benchmark": "gateways", "tpm": args.tpm, "window_s": args.window, "mock_latency_s": args.latency,
                 "mock_jitter_s": args.jitter, "client_concurrency": args.concurrency,
                 "reports": "DeepResearch Bench" + (f", first {args.limit}" if args.limit else ", 100 reports"),
                 "runs": []}
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.runs):
            for gateway in [g.strip() for g in args.gateway.split(",") if g.strip()]:
                for reads in ((True, False) if args.blind else (True,)):
                    out["runs"].append(_measure(
                        gateway, reads, tpm=args.tpm, window=args.window, latency=args.latency, jitter=args.jitter,
                        concurrency=args.concurrency, reports=reports, tasks=tasks, limit=args.limit,
                        tmp=Path(d) / f"{gateway}-{reads}-{i}", fixed=args.kong_fixed))
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
