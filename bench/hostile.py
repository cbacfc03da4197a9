"""Endpoints that say hostile or useless things (issue 26): what a run does against them.

1. **Hostile delay hints.** quality on the 10 bundled example reports against the mock's
   ``vllm`` profile (no quota headers: the client meets 429s) at 240 rpm, each 429 saying
   ``--rate-limit-hint`` instead of the true delay (``Retry-After``; with the ``gemini``
   profile, ``retryDelay`` in the body), with ``--max-rate-limit-wait 2``. Before: ``inf``
   and ``1e309`` hung the run for ever, ``nan`` failed every item. Reported per hint: wall
   time, 429s met, items scored, hints the run noted.
2. **Thinking caps learned per run.** quality + redundancy on the example reports with
   ``o3`` against the mock as a thinking model spending 42,000 reasoning tokens per call,
   so o3's cap (answer cap + 25,000) is about 60% of what a call needs. Once as shipped,
   once with the learning switched off (every call then pays a cut-off attempt, as before),
   and once under ``--max-cost 2``. Reported: calls, cut-off answers, their share of the
   calls after the first 10 (an upper bound: every cut-off counted), their cost share.
3. **Systematic request faults.** quality + redundancy on 100 DeepResearch Bench reports
   (200 items, thousands of calls) when every prompt is over a 200-token window (``vllm``)
   or every prompt meets the content filter (``azure``, ``--filter-word JSON``). Before: the
   run tried every item (2,938 and 3,100 calls on a real run). Reported: requests the server
   saw, requests refused before sending, the stop line.

    .venv/bin/python -m bench.hostile [--reports R --tasks T] [--skip-systematic]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.engine.runtime.calls.thinking import ThinkingPolicy
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HINTS = [("vllm", "inf"), ("vllm", "1e309"), ("vllm", "nan"), ("vllm", "9" * 5000), ("vllm", "-5"),
         ("vllm", "Fri, 31 Dec 9999 23:59:59 GMT"), ("gemini", "inf"), ("gemini", "nan")]
HINT_BOUND_S = 2.0
HANG_GUARD_S = 300.0  # a run still going after this long counts as hung


def _examples(tmp: Path, name: str, methods: list[str], judge: JudgeConfig) -> RunConfig:
    return RunConfig(methods=methods, reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                     tasks=str(EXAMPLES / "tasks.jsonl"), out=str(tmp / name), judge=judge)


def _hint(tmp: Path, profile: str, hint: str) -> dict:
    with MockServerProcess(MockConfig(rpm=240, profile=profile, rate_limit_hint=hint)) as mock:
        judge = JudgeConfig(url=mock.url, model="local-judge", no_cache=True, max_rate_limit_wait_s=HINT_BOUND_S)
        t0 = time.monotonic()
        try:
            wall, summary = asyncio.run(asyncio.wait_for(
                timed_run(_examples(tmp, f"hint-{profile}-{len(hint)}-{hint[:3]}", ["quality"], judge)), HANG_GUARD_S))
        except TimeoutError:
            return {"profile": profile, "hint": hint[:40], "hung": True, "wall_s": round(time.monotonic() - t0, 1)}
        served = mock.stats()
    t = summary["totals"]
    noted = t.get("unusable_rate_limit_hints") or {}
    return {"profile": profile, "hint": hint if len(hint) <= 40 else f"{hint[:12]}... ({len(hint)} chars)",
            "hung": False, "wall_s": round(wall, 2), "rate_limited_429": served["rate_limited"],
            "items_scored": t["items"] - t["items_failed"], "items": t["items"],
            "hints_noted": noted.get("count", 0), "noted_as": noted.get("last"), "stopped": summary.get("stopped")}


def _thinking(tmp: Path, name: str, reasoning: int, *, learn: bool, max_cost: float | None = None) -> dict:
    original = ThinkingPolicy.learn_cut_off
    if not learn:  # the behaviour before: every call starts at the family cap and pays its cut-off
        ThinkingPolicy.learn_cut_off = lambda self, answer_cap, sent: None  # type: ignore[method-assign]
    try:
        with MockServerProcess(MockConfig(reasoning_tokens=reasoning, latency=0.02)) as mock:
            judge = JudgeConfig(url=mock.url, model="o3", no_cache=True, max_cost=max_cost)
            wall, summary = asyncio.run(timed_run(_examples(tmp, name, ["quality", "redundancy"], judge)))
            served = mock.stats()
    finally:
        ThinkingPolicy.learn_cut_off = original  # type: ignore[method-assign]
    t = summary["totals"]
    calls, cut = served["requests"], served["cut_off"]
    cost = t["cost_usd"] or 0.0
    stop = summary.get("stopped") or t.get("stop_after_all_items")
    return {"run": name, "max_cost_usd": max_cost, "calls": calls, "cut_off_answers": cut,
            "cut_off_share_of_calls_after_first_10": round(cut / (calls - 10), 4) if calls > 10 else None,
            "cost_usd": round(cost, 4), "cut_off_cost_usd": t["truncated_cost_usd"],
            "cut_off_cost_share": round((t["truncated_cost_usd"] or 0.0) / cost, 4) if cost else None,
            "learned_output_room": t["learned_output_room"], "items_scored": t["items"] - t["items_failed"],
            "items": t["items"], "stop": stop["message"] if stop else None, "wall_s": round(wall, 2)}


def _systematic(tmp: Path, name: str, cfg: MockConfig, url_path: str, reports: str, tasks: str) -> dict:
    with MockServerProcess(cfg) as mock:
        judge = JudgeConfig(url=mock.base + url_path, model="local-judge", no_cache=True)
        run = RunConfig(methods=["quality", "redundancy"], reports=[reports], tasks=tasks,
                        out=str(tmp / name), judge=judge)
        wall, summary = asyncio.run(timed_run(run))
        served = mock.stats()
    t, stop = summary["totals"], summary.get("stopped")
    return {"case": name, "items": t["items"], "items_failed": t["items_failed"],
            "server_requests": served["requests"], "refused_before_sending": t["refused_over_window"],
            "stop": stop["message"] if stop else None, "wall_s": round(wall, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reasoning-tokens", type=int, default=42_000,
                    help="per call; o3's cap of 26,000 (quality) is then about 60%% of the need")
    ap.add_argument("--reports", default=str(DRB / "reports.claude-3-7-sonnet.jsonl"), help="part 3's reports")
    ap.add_argument("--tasks", default=str(DRB / "tasks.jsonl"), help="part 3's tasks")
    ap.add_argument("--skip-systematic", action="store_true", help="skip part 3 (needs ../shared/data)")
    args = ap.parse_args()
    if not args.skip_systematic:
        require_data("hostile", args.reports, args.tasks)
    out: dict = {"benchmark": "hostile"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out["hostile_hints"] = {"max_rate_limit_wait_s": HINT_BOUND_S, "rpm": 240, "methods": ["quality"],
                                "reports": "examples/reports.claude-3-7-sonnet.jsonl",
                                "runs": [_hint(tmp, p, h) for p, h in HINTS]}
        out["thinking_caps"] = {"judge_model": "o3", "reasoning_tokens_per_call": args.reasoning_tokens,
                                "runs": [_thinking(tmp, "learned", args.reasoning_tokens, learn=True),
                                         _thinking(tmp, "not_learned", args.reasoning_tokens, learn=False),
                                         _thinking(tmp, "learned_max_cost_2", args.reasoning_tokens, learn=True,
                                                   max_cost=2.0),
                                         _thinking(tmp, "not_learned_max_cost_2", args.reasoning_tokens,
                                                   learn=False, max_cost=2.0)]}
        if not args.skip_systematic:
            out["systematic_faults"] = [
                _systematic(tmp, "every_prompt_over_a_200_token_window",
                            MockConfig(profile="vllm", context_window=200), "/v1", args.reports, args.tasks),
                _systematic(tmp, "every_prompt_filtered", MockConfig(profile="azure", filter_word="JSON"),
                            "/openai/deployments/judge?api-version=2024-10-21", args.reports, args.tasks),
            ]
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
