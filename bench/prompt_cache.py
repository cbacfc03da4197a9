"""Provider prompt caching (issue 11): what a prefix-caching endpoint serves from its
cache, and whether drscore bills exactly what the endpoint's usage says.

The mock judge runs with its OpenAI-like prefix cache (prompts of 1,024+ tokens, cached
in 128-token steps, reported in ``usage.prompt_tokens_details.cached_tokens``) and 50 ms
latency. Three workloads:

* Rigorous Bench: the first 5 bundles, each paired with a long real report (DRB's
  English reports 51-55 under the bundle's task id: the rubric items are real, the
  report-to-bundle pairing is synthetic);
* RACE (full variant, published criteria) on DRB tasks 51-60 with 3 agents per task
  (derived from Claude's reports: first half, second half, every other paragraph) and
  Claude's report as the reference;
* ACE on the same 30 reports.

Each runs with the warm-up order on (default) and off (``--no-prefix-warmup``). Per run:
cached share of input tokens, billed cost, the cost without the cache discount, and the
cost the endpoint's own usage counters imply at the same prices (must match to the cent).

    .venv/bin/python -m bench.prompt_cache
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig, run_async
from drscore.judge.mock.server import MockConfig, MockServerProcess

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}  # gpt-4.1's ratios


def _drb(tmp: Path) -> tuple[Path, list[Path], Path]:
    """Tasks 51-60, three derived agents, Claude's reports as references."""
    rows = [orjson.loads(x) for x in (SHARED / "drb" / "reports.claude-3-7-sonnet.jsonl").read_bytes().splitlines()]
    rows = [r for r in rows if 51 <= int(r["id"]) <= 60]
    refs = tmp / "references.jsonl"
    refs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    agents = {"first-half": lambda ps: ps[: len(ps) // 2], "second-half": lambda ps: ps[len(ps) // 2:],
              "odd-paragraphs": lambda ps: ps[::2]}
    files = []
    for name, pick in agents.items():
        path = tmp / f"reports.{name}.jsonl"
        path.write_bytes(b"".join(orjson.dumps({**r, "article": "\n\n".join(pick(r["article"].split("\n\n")))})
                                  + b"\n" for r in rows))
        files.append(path)
    tasks = tmp / "tasks.jsonl"
    task_rows = [x for x in (SHARED / "drb" / "tasks.jsonl").read_bytes().splitlines()
                 if 51 <= int(orjson.loads(x)["id"]) <= 60]
    tasks.write_bytes(b"\n".join(task_rows) + b"\n")
    return tasks, files, refs


def _rigorous(tmp: Path, n: int) -> tuple[Path, Path, Path]:
    lines = (SHARED / "rigorous" / "bundles.jsonl").read_bytes().splitlines()[:n]
    bundles = [orjson.loads(x) for x in lines]
    reports = [orjson.loads(x) for x in (SHARED / "drb" / "reports.claude-3-7-sonnet.jsonl").read_bytes().splitlines()]
    english = [r for r in reports if int(r["id"]) >= 51][:n]
    paths = tmp / "bundles.jsonl", tmp / "rig_tasks.jsonl", tmp / "rig_reports.jsonl"
    paths[0].write_bytes(b"\n".join(lines) + b"\n")
    paths[1].write_bytes(b"".join(orjson.dumps({"task_id": b["uid"], "prompt": b["query"]}) + b"\n" for b in bundles))
    paths[2].write_bytes(b"".join(orjson.dumps({"task_id": b["uid"], "agent": "claude-3-7-sonnet",
                                                "report": r["article"]}) + b"\n" for b, r in zip(bundles, english)))
    return paths


def _measure(mock: MockServerProcess, cfg: RunConfig) -> dict:
    mock.reset()  # also empties the prefix cache: every run starts cold
    wall, summary = run_async(timed_run(cfg))
    t, st = summary["totals"], mock.stats()
    implied = ((st["prompt_tokens"] - st["cached_tokens"]) * PRICE["input"] + st["cached_tokens"] * PRICE["cached_input"]
               + st["completion_tokens"] * PRICE["output"]) / 1e6
    return {
        "items": t["items"], "items_failed": t["items_failed"], "calls": t["calls"],
        "input_tokens": t["input_tokens"], "cached_input_tokens": t["cached_input_tokens"],
        "cached_share": round(t["cached_input_tokens"] / max(1, t["input_tokens"]), 4),
        "billed_usd": t["cost_usd"], "uncached_usd": t["cost_usd_uncached"],
        "saving": round(1 - t["cost_usd"] / t["cost_usd_uncached"], 4) if t["cost_usd_uncached"] else None,
        "usage_implied_usd": round(implied, 6), "billed_minus_implied_usd": round(t["cost_usd"] - implied, 6),
        "matches_to_the_cent": abs(t["cost_usd"] - implied) < 0.005,
        "calls_held_for_warmup": t["prefix_warmup_held"], "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    out: dict = {"benchmark": "prompt_cache", "mock_latency_s": args.latency, "prices_per_mtok": PRICE}
    with tempfile.TemporaryDirectory() as d, \
            MockServerProcess(MockConfig(prefix_cache=True, latency=args.latency)) as mock:
        tmp = Path(d)
        prices = tmp / "prices.json"
        prices.write_text(json.dumps({"mock-judge": PRICE}))
        tasks, agents, refs = _drb(tmp)
        bundles, rig_tasks, rig_reports = _rigorous(tmp, args.bundles)
        workloads = {
            "rigorous": dict(methods=["rigorous"], reports=[str(rig_reports)], tasks=str(rig_tasks),
                             method_options={"bundles": str(bundles)}),
            "race": dict(methods=["race"], reports=[str(p) for p in agents], tasks=str(tasks),
                         method_options={"criteria": str(SHARED / "drb" / "criteria.jsonl"),
                                         "references": str(refs)}),
            "ace": dict(methods=["ace"], reports=[str(p) for p in agents], tasks=str(tasks)),
        }
        for name, work in workloads.items():
            out[name] = {}
            for warm in (True, False):
                judge = JudgeConfig(url=mock.url, model="mock-judge", concurrency=args.concurrency,
                                    prices=str(prices), prefix_warmup=warm,
                                    cache_dir=str(tmp / f"cache-{name}-{warm}"))  # cold local cache each run
                out[name]["warmup_on" if warm else "warmup_off"] = _measure(
                    mock, RunConfig(**work, out=str(tmp / f"run-{name}-{warm}"), judge=judge))
            # The dry run's estimate of the same (its answers come from the offline judge,
            # so multi-step methods plan somewhat different calls than the mock answers ask).
            dry = JudgeConfig(url=mock.url, model="mock-judge", prices=str(prices), cache_dir=str(tmp / "dry"))
            _, plan = run_async(timed_run(RunConfig(**work, dry_run=True, judge=dry)))
            p = plan["totals"]
            out[name]["dry_run_estimate"] = {
                "planned_calls": p["planned_calls"], "planned_input_tokens": p["planned_input_tokens"],
                "estimated_cached_share": round(p["planned_cached_input_tokens_estimate"]
                                                / max(1, p["planned_input_tokens"]), 4),
                "planned_cost_usd": p["planned_cost_usd"]}
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
