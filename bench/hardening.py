"""What the hardening of issue 21 costs (no performance claim rests on estimates):

1. Input hashing: ``drscore run`` records each input file's SHA-256 in summary.json (for
   ``drscore merge``'s content check) before scoring; the time to fingerprint a reports
   file of ``--mb`` megabytes (the bundled examples repeated).
2. Escaping: the output-escaping rules over 100,000 hostile agent names (terminal,
   Markdown cell, CSV cell), in microseconds per name.

    .venv/bin/python -m bench.hardening [--mb 200]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.machine import machine
from drscore.engine.runtime.escape import csv_cell, markdown_cell, terminal
from drscore.engine.runtime.io import fingerprint

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _hashing(mb: int) -> dict:
    chunk = (EXAMPLES / "reports.claude-3-7-sonnet.jsonl").read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reports.big.jsonl"
        with open(path, "wb") as f:
            written = 0
            while written < mb * 1_000_000:
                f.write(chunk)
                written += len(chunk)
        fingerprint(path, "reports")  # warm the page cache: the run reads the file right after
        t0 = time.perf_counter()
        fingerprint(path, "reports")
        seconds = time.perf_counter() - t0
    return {"file_mb": round(written / 1e6, 1), "fingerprint_s": round(seconds, 3),
            "mb_per_s": round(written / 1e6 / seconds, 1)}


def _escaping(n: int = 100_000) -> dict:
    names = [f"=HYPERLINK(\"x{i}\") <b>{i}</b> \x1b]0;t\x07 $\\frac{{$ {i}" for i in range(n)]
    t0 = time.perf_counter()
    for name in names:
        terminal(name)
        markdown_cell(name)
        csv_cell(name)
    seconds = time.perf_counter() - t0
    return {"names": n, "us_per_name_all_three_rules": round(seconds / n * 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the reports file to fingerprint")
    args = ap.parse_args()
    print(json.dumps({"bench": "hardening", "input_hashing": _hashing(args.mb), "escaping": _escaping(),
                      "machine": machine()}))


if __name__ == "__main__":
    main()
