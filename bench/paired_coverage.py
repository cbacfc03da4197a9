"""Coverage of drscore's paired 95% interval on synthetic runs with a known difference.

Each simulated run: two agents on the same ``--tasks`` tasks drawn from a population.
A task has a difficulty both agents share (sd 0.3) plus an agent-specific part (sd
``--agent-sd``); agent A is better by ``--delta`` on average over the population. With
judge noise, each report is judged ``--samples`` times, each sample adding independent
noise of sd ``--judge-sd``. The paired interval of :func:`drscore.engine.stats.paired.compare_agents`
should contain the true difference in 95% of the runs, with and without judge noise
(target [0.93, 0.97]); a run with noise that dominates the per-task differences checks
that the judge noise is not counted twice.

    .venv/bin/python -m bench.paired_coverage            # 1,000 runs per condition
    .venv/bin/python -m bench.paired_coverage --runs 200

Prints one JSON object: per condition the coverage, its Monte Carlo standard error, the
mean interval width, the mean judge-noise share, and the machine.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from bench.machine import machine
from drscore.engine.stats.paired import compare_agents


def simulate(rng: np.random.Generator, *, tasks: int, delta: float, agent_sd: float, judge_sd: float,
             samples: int) -> dict[str, dict[str, list[float]]]:
    difficulty = rng.normal(0.5, 0.3, tasks)
    out: dict[str, dict[str, list[float]]] = {}
    for name, shift in (("A", delta), ("B", 0.0)):
        own = difficulty + shift + rng.normal(0.0, agent_sd, tasks)
        noise = rng.normal(0.0, judge_sd, (tasks, samples)) if judge_sd > 0 else np.zeros((tasks, samples))
        out[name] = {str(t): list(own[t] + noise[t]) for t in range(tasks)}
    return out


def condition(runs: int, seed: int, resamples: int, **kw: float) -> dict:
    rng = np.random.Generator(np.random.PCG64(seed))
    covered, widths, shares = 0, [], []
    t0 = time.perf_counter()
    for i in range(runs):
        scores = simulate(rng, **kw)  # type: ignore[arg-type]
        d = compare_agents("synthetic", scores, resamples=resamples, seed=i)
        pair = d.pairs[0]
        assert pair.ci is not None and pair.delta is not None
        truth = kw["delta"] if pair.a == "A" else -kw["delta"]
        covered += pair.ci[0] <= truth <= pair.ci[1]
        widths.append(pair.ci[1] - pair.ci[0])
        if pair.judge_noise_share is not None:
            shares.append(pair.judge_noise_share)
    coverage = covered / runs
    return {**kw, "runs": runs, "coverage": round(coverage, 4),
            "coverage_se": round(math.sqrt(coverage * (1 - coverage) / runs), 4),
            "within_target": 0.93 <= coverage <= 0.97, "mean_width": round(float(np.mean(widths)), 4),
            "mean_judge_noise_share": round(float(np.mean(shares)), 3) if shares else None,
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--agent-sd", type=float, default=0.1)
    ap.add_argument("--judge-sd", type=float, default=0.1)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    base = dict(tasks=a.tasks, delta=a.delta)
    result = {
        "bench": "paired_coverage", "target": [0.93, 0.97], "confidence": 0.95, "resamples": a.resamples,
        "conditions": {
            "no_judge_noise": condition(a.runs, a.seed, a.resamples, **base, agent_sd=a.agent_sd, judge_sd=0.0,
                                        samples=1),
            "judge_noise": condition(a.runs, a.seed + 1, a.resamples, **base, agent_sd=a.agent_sd,
                                     judge_sd=a.judge_sd, samples=a.samples),
            "judge_noise_dominant": condition(a.runs, a.seed + 2, a.resamples, **base, agent_sd=a.agent_sd / 4,
                                              judge_sd=a.judge_sd, samples=a.samples),
        },
        "machine": machine(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
