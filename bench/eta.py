"""ETA benchmark (issue 25): how far the ETA a run shows is from the time it really had left.

A quota-bound multi-method run (by default quality + redundancy + ACE over the first 20
DRB reports) against the mock judge in its own process, with an RPM and a TPM quota on
both sides. The ETA is read the way the progress display reads it (a ``Progress`` over
the runner's snapshot, :meth:`Progress.eta`) every ``--every`` seconds. After the run,
each reading is compared with the time that was really left (wall time at the end minus
the reading's time):

- ``at``: the readings at 20%, 50% and 80% of the run's wall time, with their error
  ``(eta - actual) / actual``;
- ``max_abs_error_20_to_80``: the worst reading between 20% and 80% of the way;
- ``rises``: readings where the ETA went up, with the cause it named (``unnamed``
  must be 0: the display never counts up without a cause).

    .venv/bin/python -m bench.eta [--rpm 600 --tpm 300000 --methods quality,redundancy,ace --limit 20]

Target: every error within 25% from 20% of the way through.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import orjson

from bench.machine import machine
from bench.shared_data import DRB as DATA, require_data
from drscore.api import JudgeConfig, Run, RunConfig
from drscore.engine.runtime.eta import Shown
from drscore.engine.runtime.progress import Progress, plain_line
from drscore.judge.mock.server import MockConfig, MockServerProcess

MARKS = (0.2, 0.5, 0.8)


async def sampled_run(config: RunConfig, per_method: dict[str, int], every_s: float
                      ) -> tuple[float, list[tuple[float, Shown, str]], dict[str, Any]]:
    """Run ``config``; every ``every_s`` seconds read the ETA shown (and the plain line)."""
    samples: list[tuple[float, Shown, str]] = []
    t0 = time.monotonic()
    async with Run(config) as run:
        progress = Progress(run.runner.snapshot, per_method, mode="off")

        async def sample() -> None:
            while True:
                snap = progress.snapshot()
                elapsed = time.monotonic() - t0
                shown = progress.eta(snap)
                samples.append((elapsed, shown, plain_line(snap, per_method, elapsed, shown=shown)))
                await asyncio.sleep(every_s)

        sampler = asyncio.create_task(sample())
        try:
            async for _ in run.rows():
                pass
        finally:
            sampler.cancel()
    return time.monotonic() - t0, samples, run.summary


def errors(wall: float, samples: list[tuple[float, Shown, str]]) -> dict[str, Any]:
    def reading(t: float, shown: Shown) -> dict[str, Any]:
        actual = wall - t
        eta = shown.seconds
        return {"elapsed_s": round(t, 2), "eta_s": None if eta is None else round(eta, 1),
                "actual_left_s": round(actual, 1), "basis": shown.basis, "lower_bound": shown.lower_bound,
                "error": None if eta is None or actual <= 0 else round((eta - actual) / actual, 4)}

    at: dict[str, Any] = {}
    for mark in MARKS:
        before = [s for s in samples if s[0] <= mark * wall]
        t, shown, line = before[-1] if before else samples[0]
        at[f"{mark:.0%}"] = {**reading(t, shown), "line": line}
    window = [reading(t, s) for t, s, _ in samples if MARKS[0] * wall <= t <= MARKS[-1] * wall]
    errs = [abs(r["error"]) for r in window if r["error"] is not None]
    rises: dict[str, int] = {}
    for (_, a, _), (_, b, _) in zip(samples, samples[1:]):
        if a.seconds is not None and b.seconds is not None and b.seconds > a.seconds:
            key = b.cause or "unnamed"
            rises[key] = rises.get(key, 0) + 1
    first = next((t for t, s, _ in samples if s.seconds is not None and not s.lower_bound), None)
    return {"at": at, "max_abs_error_20_to_80": round(max(errs), 4) if errs else None,
            "readings_20_to_80": len(window), "rises": rises,
            "first_complete_eta_at_s": None if first is None else round(first, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=float, default=600)
    ap.add_argument("--tpm", type=float, default=300_000)
    ap.add_argument("--methods", default="quality,redundancy,ace")
    ap.add_argument("--reports", default=str(DATA / "reports.claude-3-7-sonnet.jsonl"))
    ap.add_argument("--tasks", default=str(DATA / "tasks.jsonl"))
    ap.add_argument("--limit", type=int, default=20, help="first N reports")
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--jitter", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--every", type=float, default=0.5, help="seconds between ETA readings")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a method option, e.g. race_variant=pointwise (repeatable)")
    ap.add_argument("--trace", help="write every reading (time, ETA, plain progress line) to this JSONL file")
    args = ap.parse_args()
    require_data("eta", args.reports, args.tasks)
    methods = args.methods.split(",")
    with open(args.reports, "rb") as f:
        n = min(args.limit, sum(1 for line in f if line.strip())) if args.limit else \
            sum(1 for line in open(args.reports, "rb") if line.strip())
    per_method = {m: n for m in methods}

    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(MockConfig(
            rpm=args.rpm, tpm=args.tpm, latency=args.latency, jitter=args.jitter, seed=7)) as mock:
        judge = JudgeConfig(url=mock.url, model="mock", rpm=args.rpm, tpm=args.tpm, concurrency=args.concurrency,
                            cache_dir=str(Path(tmp) / "cache"))
        config = RunConfig(methods=methods, reports=[args.reports], tasks=args.tasks, judge=judge, limit=args.limit,
                           method_options=dict(o.split("=", 1) for o in args.option), out=str(Path(tmp) / "run"))
        wall, samples, summary = asyncio.run(sampled_run(config, per_method, args.every))
        served = mock.stats()
    if args.trace:
        with open(args.trace, "wb") as out:
            for at_s, shown, line in samples:
                out.write(orjson.dumps({"elapsed_s": round(at_s, 2), "actual_left_s": round(wall - at_s, 2),
                                        "eta": msgspec.to_builtins(shown), "line": line}) + b"\n")
    t = summary["totals"]
    result = {
        "benchmark": "eta",
        "workload": {"methods": args.methods, "options": args.option, "reports": Path(args.reports).name, "limit": args.limit,
                     "items": t["items"], "rpm": args.rpm, "tpm": args.tpm, "mock_latency_s": args.latency,
                     "mock_jitter_s": args.jitter, "client_concurrency": args.concurrency},
        "run": {"wall_s": round(wall, 2), "calls": t["calls"], "cache_hits": t["cache_hits"],
                "shared_in_flight": t["shared_in_flight"], "responses_429": t["rate_limited_429"],
                "tokens_charged_by_server": served["prompt_tokens"] + served["completion_tokens"],
                "items_failed": t["items_failed"]},
        "eta": errors(wall, samples),
        "target": "abs error <= 0.25 from 20% of the way through",
        "machine": machine(),
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
