"""Redundancy pair screening speed (engine.similarity.screen), in milliseconds.

* ``synthetic_200``: a 200-paragraph report (19,900 pairs) assembled, with a fixed
  seed, from real English paragraphs of the DeepResearch Bench reports, with 5
  planted near-copies; ``synthetic_200_zh`` the same from Chinese paragraphs;
  ``synthetic_1000`` a 1,000-paragraph mixed report (499,500 pairs, 4 row blocks).
* ``real``: every one of the 100 real reports, paragraph segmentation, all pairs of
  all its paragraphs; per report and in total.

Times are the median (and best) of ``--repeat`` runs of ``screen`` from raw
paragraph texts to candidate pairs (normalisation, n-gram hashing, TF-IDF, blocked
sparse product); segmentation is timed separately.

    .venv/bin/python -m bench.screening [--repeat 15] [--threshold 0.15]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from drscore.engine.text.segment import segment
from drscore.engine.text.similarity import DEFAULT_THRESHOLD, screen

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"
TARGET_MS_200 = 100.0


def timed_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Median and best wall time of ``fn()`` in ms over ``repeat`` runs, and its result."""
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), result


def synthetic(paragraphs: list[str], k: int, copies: int, seed: int) -> list[str]:
    """``k`` paragraphs drawn without replacement, the last ``copies`` replaced by
    lightly edited copies of earlier ones (so screening has something to find)."""
    rng = random.Random(seed)
    texts = rng.sample(paragraphs, k)
    for n in range(copies):
        src = texts[rng.randrange(k - copies)]
        texts[k - copies + n] = "In other words, " + src[: max(40, len(src) * 3 // 4)]
    return texts


def run_synthetic(texts: list[str], threshold: float, repeat: int) -> dict[str, Any]:
    median, best, res = timed_ms(lambda: screen(texts, threshold), repeat)
    return {"paragraphs": len(texts), "pairs": res.total_pairs, "candidates": res.candidates,
            "screened_out": res.screened_out, "mean_chars": round(sum(map(len, texts)) / len(texts)),
            "ms_median": round(median, 2), "ms_best": round(best, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", default=str(REPORTS))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    args = ap.parse_args()
    require_data("screening", args.reports)
    rows = [orjson.loads(line) for line in Path(args.reports).read_bytes().splitlines() if line.strip()]

    seg_t0 = time.perf_counter()
    units = {row["id"]: [u.text for u in segment(row["article"], "paragraphs")] for row in rows}
    segment_ms = (time.perf_counter() - seg_t0) * 1000

    # DeepResearch Bench ids 1-50 are Chinese, 51-100 English.
    zh = [t for i, ts in units.items() if int(i) <= 50 for t in ts]
    en = [t for i, ts in units.items() if int(i) > 50 for t in ts]
    screen(en[:50], args.threshold)  # warm-up: imports, first allocations

    per_report = []
    for row in rows:
        texts = units[row["id"]]
        median, _, res = timed_ms(lambda: screen(texts, args.threshold), max(3, args.repeat // 3))
        per_report.append({"id": row["id"], "paragraphs": len(texts), "pairs": res.total_pairs,
                           "candidates": res.candidates, "ms": round(median, 3)})
    total_pairs = sum(r["pairs"] for r in per_report)
    total_candidates = sum(r["candidates"] for r in per_report)
    ms = [r["ms"] for r in per_report]

    out = {
        "bench": "screening",
        "threshold": args.threshold,
        "target_ms_200_paragraphs": TARGET_MS_200,
        "synthetic_200": run_synthetic(synthetic(en, 200, 5, seed=1), args.threshold, args.repeat),
        "synthetic_200_zh": run_synthetic(synthetic(zh, 200, 5, seed=2), args.threshold, args.repeat),
        "synthetic_1000": run_synthetic(synthetic(zh + en, 1000, 10, seed=3), args.threshold,
                                        max(3, args.repeat // 3)),
        "real": {
            "reports": len(per_report),
            "paragraphs": sum(r["paragraphs"] for r in per_report),
            "pairs": total_pairs,
            "candidates": total_candidates,
            "screened_out_share": round(1 - total_candidates / total_pairs, 4),
            "ms_total": round(sum(ms), 2),
            "ms_per_report": {"mean": round(statistics.mean(ms), 3), "median": round(statistics.median(ms), 3),
                              "max": round(max(ms), 3)},
            "segmentation_ms_total": round(segment_ms, 2),
            "per_report": per_report,
        },
        "machine": machine(),
    }
    out["synthetic_200"]["meets_target"] = out["synthetic_200"]["ms_median"] < TARGET_MS_200
    print(json.dumps(out))


if __name__ == "__main__":
    main()
