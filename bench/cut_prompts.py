"""A server that cuts long prompts and answers anyway (Ollama past the context it loaded the
model with): how many scores rest on a cut prompt, and what was sent.

The 100 DeepResearch Bench reports (claude-3-7-sonnet) scored with quality against the mock's
``ollama`` profile at contexts of 2,048 to 16,384 tokens (Ollama's defaults and common
settings): the mock keeps the end of a prompt over the context and reports the tokens it kept
as the usage, as Ollama does, and states the context at ``/api/ps``. ``--ps-half`` has it
state twice the context it cuts to (an Ollama release that cut at half of it). ``--tokenizer
gguf:PATH`` has it count with a GGUF model's vocabulary and give it at ``/api/show``, as
Ollama does (llama.cpp's ``ggml-vocab-llama-bpe.gguf``, Llama 3's, which
scripts/install-llama-servers extracts into ``~/.cache/drscore/llama-vocab-*``).

Reported per context: prompts the server cut, scores that rest on a cut prompt (rows scored
that read exactly the context), items failed as cut or not sent, requests sent, wall time.
Run it on a checkout before this change (PYTHONPATH) for the same figures before.

    .venv/bin/python -m bench.cut_prompts --drb ../shared/data/drb [--contexts 2048,4096,8192,16384]
        [--tokenizer gguf:~/.cache/drscore/llama-vocab-0.3.36/ggml-vocab-llama-bpe.gguf]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import orjson

from bench.machine import machine
from bench.shared_data import DRB as DATA, require_data
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess


def _one(context: int, args: argparse.Namespace) -> dict[str, Any]:
    extra = {"ollama_ps_context": 2 * context} if args.ps_half else {}
    if extra and "ollama_ps_context" not in MockConfig.__struct_fields__:
        extra = {}  # a checkout before this change: its mock states no context
    if args.tokenizer != "words":
        extra["tokenizer"] = args.tokenizer
    cfg = MockConfig(profile="ollama", context_window=context, latency=args.latency, seed=5, **extra)
    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(cfg) as mock:
        out = Path(tmp) / "run"
        judge = JudgeConfig(url=mock.url, model="llama3.1:8b", concurrency=args.concurrency, no_cache=True)
        run = RunConfig(methods=["quality"], reports=[args.reports], tasks=args.tasks, out=str(out), judge=judge)
        wall, summary = asyncio.run(timed_run(run))
        served = mock.stats()
        rows = [orjson.loads(line) for line in (out / "scores.jsonl").read_bytes().splitlines() if line.strip()]
    t = summary["totals"]
    scored = [r for r in rows if r["status"] == "ok"]
    cut = t.get("prompts_cut") or {}
    return {
        "context": context, "stated_context": extra.get("ollama_ps_context", context),
        "rows": len(rows), "scored": len(scored),
        "server_cut_prompts": served["truncated_prompts"],
        # every prompt the mock cut reads exactly the context (a whole one that long: by chance only)
        "scores_on_a_cut_prompt": sum(1 for r in scored if r.get("input_tokens") == context),
        "failed_as_cut": cut.get("prompts", 0), "named_suspect": cut.get("scored_before_known", 0),
        "failed_not_sent": t.get("refused_over_window", 0), "failure_reasons": t.get("failure_reasons", {}),
        "stopped": (summary.get("stopped") or {}).get("reason"),
        "prompts_counted_by": (t.get("prompts_counted") or {}).get("by"),
        "requests_sent": served["requests"], "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drb", default=str(DATA), help="the DeepResearch Bench data folder")
    ap.add_argument("--contexts", default="2048,4096,8192,16384")
    ap.add_argument("--ps-half", action="store_true", help="the server states twice the context it cuts to")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tokenizer", default="words",
                    help="how the mock counts: its words rule, or gguf:PATH, a GGUF model's vocabulary, which its "
                         "/api/show then gives as Ollama does (llama.cpp's ggml-vocab-llama-bpe.gguf: Llama 3's)")
    args = ap.parse_args()
    args.reports = str(Path(args.drb) / "reports.claude-3-7-sonnet.jsonl")
    args.tasks = str(Path(args.drb) / "tasks.jsonl")
    require_data("cut_prompts", args.reports, args.tasks)
    results = [_one(int(c), args) for c in args.contexts.split(",")]
    print(orjson.dumps({"benchmark": "cut_prompts", "profile": "ollama", "ps_half": args.ps_half,
                        "mock_tokenizer": args.tokenizer,
                        "reports": Path(args.reports).name, "methods": "quality", "concurrency": args.concurrency,
                        "contexts": results, "machine": machine()},
                       option=orjson.OPT_INDENT_2, default=msgspec.to_builtins).decode())


if __name__ == "__main__":
    main()
