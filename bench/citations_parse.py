"""Citation parsing speed over the 100 real DeepResearch Bench reports.

Parses every report (``parse_citations``), then strips citations (``strip_citations``),
repeating the whole set ``--rounds`` times (or until ``--max-seconds``), and reports
reports/s, MB/s and the pair counts.

    .venv/bin/python -m bench.citations_parse [--rounds 5] [--max-seconds 20]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from drscore.engine.text.citations import cited_urls, parse_citations, strip_citations

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"


def timed(fn, texts: list[str], rounds: int, max_seconds: float) -> tuple[float, int]:
    """Seconds per pass over ``texts`` (best pass) and the number of passes run."""
    best = float("inf")
    done = 0
    t_start = time.perf_counter()
    while done < rounds and (done == 0 or time.perf_counter() - t_start < max_seconds):
        t0 = time.perf_counter()
        for text in texts:
            fn(text)
        best = min(best, time.perf_counter() - t0)
        done += 1
    return best, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", default=str(REPORTS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    args = ap.parse_args()
    require_data("citations_parse", args.reports)
    rows = [orjson.loads(line) for line in Path(args.reports).read_bytes().splitlines() if line.strip()]
    texts = [r.get("article") or r.get("report") or "" for r in rows]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6

    parses = [parse_citations(t) for t in texts]
    parse_s, parse_rounds = timed(parse_citations, texts, args.rounds, args.max_seconds)
    strip_s, strip_rounds = timed(strip_citations, texts, args.rounds, args.max_seconds)
    pairs = [len(p.pairs) for p in parses]
    print(json.dumps({
        "bench": "citations_parse",
        "reports": len(texts),
        "megabytes": round(mb, 3),
        "pairs": sum(pairs),
        "pairs_per_report": {"mean": round(sum(pairs) / len(pairs), 2), "min": min(pairs), "max": max(pairs)},
        "references": sum(len(p.references) for p in parses),
        "urls": sum(len(cited_urls(p)) for p in parses),
        "markers": sum(p.marker_count for p in parses),
        "unresolved_markers": sum(p.unresolved_count for p in parses),
        "uncited_references": sum(len(p.uncited_references) for p in parses),
        "unparseable_reports": sum(not p.parseable for p in parses),
        "parse": {"best_pass_s": round(parse_s, 4), "reports_per_s": round(len(texts) / parse_s, 1),
                  "mb_per_s": round(mb / parse_s, 2), "pairs_per_s": round(sum(pairs) / parse_s),
                  "passes": parse_rounds},
        "strip": {"best_pass_s": round(strip_s, 4), "reports_per_s": round(len(texts) / strip_s, 1),
                  "mb_per_s": round(mb / strip_s, 2), "passes": strip_rounds},
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
