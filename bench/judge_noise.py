"""Real judge noise: ten RACE runs of the same reports, read as ten judge samples.

Onyx ran DeepResearch Bench's RACE ten times on the same reports of its agent with the
benchmark's official judge (``/work/shared/data/onyx-race-runs``, README in
``/work/shared/data/README.md``): per report, ten ``overall_score`` values. Read as one
drscore run with ``--samples 10``, drscore's statistics should give the published
decomposition: the per-report judge spread (0.0099) and the suite mean's spread across
runs (0.00076), each within 10%. Then each of the 45 pairs of runs is compared as two
"agents" with drscore's paired interval: the agent is the same, so there is no true
difference, and about 5% of the 95% intervals should exclude 0.

    .venv/bin/python -m bench.judge_noise --data /work/shared/data/onyx-race-runs

Prints one JSON object with the figures, the published ones, and the machine.
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import orjson

from bench.machine import machine
from drscore.engine.runtime.method import MethodResult
from drscore.engine.runtime.calls.samples import combine
from drscore.engine.stats.noise import judge_noise
from drscore.engine.stats.paired import compare_agents, expanded_confidence

PUBLISHED = {"per_task_sd": 0.0099, "suite_mean_sd": 0.00076}


def expanded_z(n: int) -> float:
    """The normal quantile of the expanded percentile level drscore uses at ``n`` tasks."""
    from scipy import stats

    return float(stats.norm.ppf(0.5 + expanded_confidence(0.95, n) / 2))


def read_runs(data: Path) -> list[dict[str, float]]:
    runs = []
    for path in sorted(data.glob("run_*.raw_results.jsonl"), key=lambda p: int(p.name.split("_")[1].split(".")[0])):
        scores = {}
        for line in path.read_bytes().splitlines():
            if line.strip():
                rec = orjson.loads(line)
                scores[str(rec["id"])] = float(rec["overall_score"])
        runs.append(scores)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the onyx-race-runs directory")
    ap.add_argument("--resamples", type=int, default=1000)
    a = ap.parse_args()
    runs = read_runs(Path(a.data))
    shared = sorted(set.intersection(*(set(r) for r in runs)), key=int)
    # every report as drscore combines its judge samples (engine.runtime.samples)
    rows = {t: combine([MethodResult(score=r[t]) for r in runs])[1] for t in shared}
    noise = judge_noise({t: [v for v in spread["sample_scores"] if v is not None] for t, spread in rows.items()})
    assert noise is not None
    excluded, pairs = 0, []
    for i, j in itertools.combinations(range(len(runs)), 2):
        d = compare_agents("race", {f"run_{i + 1}": {t: [v] for t, v in runs[i].items()},
                                    f"run_{j + 1}": {t: [v] for t, v in runs[j].items()}},
                           resamples=a.resamples, seed=i * 100 + j)
        p = d.pairs[0]
        assert p.ci is not None and p.delta is not None
        out = p.ci[0] > 0 or p.ci[1] < 0
        excluded += out
        pairs.append({"a": p.a, "b": p.b, "n": p.n, "delta": round(p.delta, 5),
                      "ci": [round(p.ci[0], 5), round(p.ci[1], 5)], "excludes_0": out})
    # how far apart the runs really are, against the standard error the intervals assume
    z = expanded_z(len(shared))
    rms_delta = (sum(p["delta"] ** 2 for p in pairs) / len(pairs)) ** 0.5
    se = [(p["ci"][1] - p["ci"][0]) / 2 / z for p in pairs]
    own_means = [sum(r.values()) / len(r) for r in runs]
    mean_all = sum(own_means) / len(own_means)
    sd_own = (sum((m - mean_all) ** 2 for m in own_means) / (len(own_means) - 1)) ** 0.5
    figures = {
        "runs": len(runs), "reports_in_every_run": len(shared),
        "per_task_sd": round(noise.per_task_sd, 5),
        "per_task_sd_vs_published": round(noise.per_task_sd / PUBLISHED["per_task_sd"] - 1, 3),
        "between_task_sd": round(noise.between_task_sd or 0.0, 4),
        "suite_mean_sd_shared_reports": round(noise.suite_mean_sd or 0.0, 6),
        "suite_mean_sd_shared_vs_published": round((noise.suite_mean_sd or 0.0) / PUBLISHED["suite_mean_sd"] - 1, 3),
        "suite_mean_sd_each_runs_own_reports": round(sd_own, 6),
        "suite_mean_sd_if_independent": round(noise.suite_mean_sd_independent, 6),
        "judge_share_of_suite_mean_variance": round(noise.judge_share or 0.0, 4),
        "run_pairs": len(pairs), "paired_intervals_excluding_0": excluded,
        "share_excluding_0": round(excluded / len(pairs), 4),
        "rms_delta_between_runs": round(rms_delta, 6), "mean_standard_error_of_intervals": round(sum(se) / len(se), 6),
        "largest_abs_delta_over_se": round(max(abs(p["delta"]) / s for p, s in zip(pairs, se)), 2),
    }
    print(json.dumps({"bench": "judge_noise", "published": PUBLISHED, "figures": figures,
                      "pairs": pairs, "machine": machine()}, indent=2))


if __name__ == "__main__":
    main()
