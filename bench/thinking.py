"""Thinking judges (issue 16): do o3 and Gemini 2.5 Pro score every row when each call
thinks before it answers, and is the bill exactly what the endpoint's usage says?

The mock judge acts as a thinking model: 2,000 hidden reasoning tokens per call, spent
before the answer and counted against the output cap (a smaller cap gives an empty answer
with ``finish_reason: "length"``), reported inside ``usage.completion_tokens`` with
``completion_tokens_details.reasoning_tokens``, as OpenAI does. quality + redundancy on
the 10 bundled example reports, once per judge name, with the built-in price table.

Per judge: rows scored / total, the share of answers cut off at their cap, reasoning
tokens recorded (drscore's total vs the endpoint's counter), the billed cost, and the cost
the endpoint's own usage counters imply at the same prices (must agree to the micro-dollar).
A third name the tables do not know (``acme-judge-7b``) shows the adaptation to a model
that turns out to think (its cost is unknown, so it is priced as o3 with ``--price-as``).

    .venv/bin/python -m bench.thinking
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig, run_async
from drscore.engine.runtime.calls.pricing import DEFAULT_PRICES
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _measure(mock: MockServerProcess, tmp: Path, model: str, price_as: str, concurrency: int) -> dict:
    mock.reset()
    judge = JudgeConfig(url=mock.url, model=model, concurrency=concurrency, no_cache=True,
                        price_as=None if price_as == model else price_as)
    cfg = RunConfig(methods=["quality", "redundancy"], reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                    tasks=str(EXAMPLES / "tasks.jsonl"), out=str(tmp / f"run-{model}"), judge=judge)
    wall, summary = run_async(timed_run(cfg))
    t, st = summary["totals"], mock.stats()
    price = DEFAULT_PRICES[price_as]
    implied = (st["prompt_tokens"] * price.input + st["completion_tokens"] * price.output) / 1e6
    scored = sum(e["n"] for e in summary["per_agent_method"])
    billed = t["cost_usd"]
    return {
        "judge_model": model, "priced_as": price_as,
        "rows_scored": scored, "rows_total": t["items"], "items_failed": t["items_failed"],
        "answers": t["calls"], "cut_off_answers": t["truncated_answers"],
        "cut_off_share": round(t["truncated_answers"] / max(1, t["calls"]), 4),
        "truncation_retries": t["truncation_retries"], "thinking_learned": t["thinking_learned"],
        "reasoning_tokens_recorded": t["reasoning_tokens"], "reasoning_tokens_endpoint": st["reasoning_tokens"],
        "output_tokens_recorded": t["output_tokens"], "completion_tokens_endpoint": st["completion_tokens"],
        "billed_usd": billed, "usage_implied_usd": round(implied, 6),
        "billed_minus_implied_usd": None if billed is None else round(billed - implied, 7),
        "equal_to_the_micro_dollar": billed is not None and abs(billed - implied) < 1e-6,
        "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reasoning-tokens", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    out: dict = {"benchmark": "thinking", "reasoning_tokens_per_call": args.reasoning_tokens,
                 "mock_latency_s": args.latency, "methods": ["quality", "redundancy"],
                 "reports": "examples/reports.claude-3-7-sonnet.jsonl"}
    judges = [("o3", "o3"), ("gemini-2.5-pro", "gemini-2.5-pro"), ("acme-judge-7b", "o3")]
    with tempfile.TemporaryDirectory() as d, \
            MockServerProcess(MockConfig(reasoning_tokens=args.reasoning_tokens, latency=args.latency)) as mock:
        out["runs"] = [_measure(mock, Path(d), model, price_as, args.concurrency) for model, price_as in judges]
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
