"""Pacing without quota headers (issue 16, part 6; issue 30: the token-bound case).

Two workloads, each judged with no ``--rpm``/``--tpm`` against an endpoint that announces
no quota (a vLLM server behind a gateway that answers 429 with only ``Retry-After``: the
mock's ``vllm`` profile) and, for comparison, against the ``openai`` profile, which sends
``x-ratelimit-*`` headers (with headers the engine paces from the first answer):

* ``requests``: 120 requests/min; quality + redundancy on the first 4 bundled example
  reports (about 125 calls), mock latency 0.3 s +/- 0.2 s.
* ``tokens``: 600,000 tokens/min and no request limit; quality on the 100 DeepResearch
  Bench reports (requests of 13-106 KB), the same latency. Sizes vary eightfold, so a
  learned *request* rate either wastes the quota on small requests or is refused on
  large ones: the learner has to find that tokens bind.

Figures per run: requests sent and answered 429, and the quota's limit over the span
(first request to last answer, as the mock saw them), where the limit is
max(answered / RPM, tokens charged / TPM) (the mock's own token count). The older
``efficiency`` figure (limit less the server's one-second starting burst, over the
client's wall time) is kept for comparison with earlier runs.

    .venv/bin/python -m bench.headerless [--case requests,tokens]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from bench.timing import quota_use, timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _measure(profile: str, *, rpm: float, tpm: float, latency: float, jitter: float, concurrency: int,
             methods: list[str], reports: Path, tasks: Path, limit: int, tmp: Path, estimates: str = "proxy") -> dict:
    cfg = MockConfig(profile=profile, rpm=rpm, tpm=tpm, latency=latency, jitter=jitter, seed=3)
    with MockServerProcess(cfg) as mock:
        judge = JudgeConfig(url=mock.url, model="mock", concurrency=concurrency, no_cache=True,
                            proxy_tokenizer=estimates == "proxy")
        run = RunConfig(methods=methods, reports=[str(reports)], tasks=str(tasks), out=str(tmp / profile),
                        judge=judge, limit=limit)
        wall, summary = asyncio.run(timed_run(run))
        s = mock.stats()
    use = quota_use(s, rpm, tpm)
    limit_s, span = use.limit, use.span
    # the server's bucket starts full: one second of quota the client gets for free
    burst_s = 1.0
    physical = max(0.0, limit_s - burst_s)
    t = summary["totals"]
    return {
        "profile": profile, "quota_headers": profile == "openai",
        "requests_sent": s["requests"], "requests_ok": s["ok"], "responses_429": s["rate_limited"],
        "share_429": round(s["rate_limited"] / max(1, s["requests"]), 4),
        # prompts the client had the server count first (the vllm profile's POST /tokenize, once
        # a token pace is learned)
        "prompts_counted_at_tokenize": s.get("tokenize_requests", 0),
        "tokens_charged": use.charged, "binding": use.binding,
        "limit_s": round(limit_s, 2), "span_s": round(span, 2),
        "limit_over_span": round(limit_s / span, 3) if span > 0 else None,
        "physical_limit_s": round(physical, 2), "wall_s": round(wall, 2),
        "efficiency": round(physical / wall, 3) if wall else None,
        "items": t["items"], "items_failed": t["items_failed"],
        "estimates_on": t.get("prompts_estimated", {}).get("on", "characters"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="requests,tokens", help="requests, tokens or both (comma-separated)")
    ap.add_argument("--rpm", type=float, default=120, help="the requests case's limit")
    ap.add_argument("--tpm", type=float, default=600_000, help="the tokens case's limit")
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--jitter", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--reports", type=int, default=4, help="requests case: the first N example reports (4: about 125 calls)")
    ap.add_argument("--drb", default=str(DRB), help="tokens case: the folder of DeepResearch Bench's reports and tasks")
    ap.add_argument("--client-estimates", default="proxy", choices=("proxy", "characters"),
                    help="what the client's token estimates learn on: cl100k_base's counts (the default where "
                         "drscore[tokenizer] is installed) or characters")
    args = ap.parse_args()
    cases = [c.strip() for c in args.case.split(",") if c.strip()]
    common = dict(latency=args.latency, jitter=args.jitter, concurrency=args.concurrency,
                  estimates=args.client_estimates)
    out: dict = {"benchmark": "headerless", "mock_latency_s": args.latency, "mock_jitter_s": args.jitter,
                 "client_concurrency": args.concurrency, "judge_rpm_option": None, "judge_tpm_option": None}
    with tempfile.TemporaryDirectory() as d:
        if "requests" in cases:
            kw = dict(rpm=args.rpm, tpm=0.0, methods=["quality", "redundancy"],
                      reports=EXAMPLES / "reports.claude-3-7-sonnet.jsonl", tasks=EXAMPLES / "tasks.jsonl",
                      limit=args.reports, **common)
            out["requests"] = {
                "rpm": args.rpm, "methods": ["quality", "redundancy"],
                "reports": f"examples/reports.claude-3-7-sonnet.jsonl (first {args.reports})",
                "header_less": _measure("vllm", tmp=Path(d) / "r", **kw),
                "with_headers": _measure("openai", tmp=Path(d) / "r", **kw)}
        if "tokens" in cases:
            drb = Path(args.drb)
            reports = drb / "reports.claude-3-7-sonnet.jsonl"
            require_data("headerless", str(reports), str(drb / "tasks.jsonl"))
            kw = dict(rpm=0.0, tpm=args.tpm, methods=["quality"], reports=reports, tasks=drb / "tasks.jsonl",
                      limit=0, **common)
            out["tokens"] = {
                "tpm": args.tpm, "methods": ["quality"], "reports": "DeepResearch Bench, 100 reports",
                "header_less": _measure("vllm", tmp=Path(d) / "t", **kw),
                "with_headers": _measure("openai", tmp=Path(d) / "t", **kw)}
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
