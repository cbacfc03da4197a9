"""drscore against the two real llama.cpp servers: rows, calls and time.

The README's documented command (quality + redundancy) over the bundled example reports,
run as a user runs it (``drscore run`` in a child process), against:

* llama.cpp's ``llama-server`` (4 slots of 8,192 tokens: the longer reports do not fit),
* llama-cpp-python's server (one request at a time, a 16,384-token window: all fit),

both built by ``scripts/install-llama-servers`` and serving the tiny random-weight GGUF
the tests make. A recording proxy between drscore and the server counts what the server
was sent and answered (tests/support/recording_proxy.py), so the figures are the
server's, not drscore's own: requests, statuses, refused bodies before the run adapted,
the most requests the server had at once, and its usage against drscore's totals.

    .venv/bin/python -m bench.local_server [--limit 8] [--baseline DIR]

``--baseline DIR``: also run the same command with the drscore checked out in DIR (e.g.
``git archive d20d1b0 | tar -x -C DIR``), against the same servers, for a before/after
measured in one run.

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def failure_kind(error: str) -> str:
    """The failure kind in a row's error (``kind: detail``, or ``step: kind: detail`` such
    as redundancy's ``pair 1-11: server_error: ...``)."""
    from drscore.engine.runtime.calls.judging import ENDPOINT_FAULTS, OTHER_FAULTS

    parts = error.split(": ")
    return next((p for p in parts[:3] if p in ENDPOINT_FAULTS or p in OTHER_FAULTS), parts[0])


def run_one(kind: str, model: Path, limit: int, work: Path, code_root: Path | None = None) -> dict:
    from support.llama import ALIAS, EXAMPLES, PYTHON_CONTEXT, SERVER_CONTEXT, SERVER_SLOTS
    from support.recording_proxy import RecordingProxy

    from drscore.judge.local_llama import LocalLlama, LocalLlamaCppPython

    server = LocalLlama(model, context=SERVER_CONTEXT, slots=SERVER_SLOTS, alias=ALIAS) if kind == "llama-server" \
        else LocalLlamaCppPython(model, context=PYTHON_CONTEXT, slots=1, alias=ALIAS)
    label = f"{kind}-{'baseline' if code_root else 'this'}"
    out = work / label / "run"
    with server, RecordingProxy(server.root) as proxy:
        cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
               "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
               "--limit", str(limit), "--out", str(out), "--judge-url", proxy.url + "/v1", "--judge-model", ALIAS,
               "--rpm", "500", "--tpm", "200000", "--cache", str(work / label / "cache")]
        env = {**os.environ, "PYTHONPATH": str(code_root)} if code_root else None
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env, cwd=code_root or ROOT)
        wall = time.monotonic() - t0
        completions = proxy.completions()
        usage = proxy.usage_totals()
        statuses = collections.Counter(e.status for e in completions)
        first_ok = next((i for i, e in enumerate(completions) if e.status == 200), None)
        max_in_flight = proxy.max_in_flight
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    t = summary["totals"]
    reasons = collections.Counter(failure_kind(e) for r in rows if r["status"] == "failed" for e in r["errors"])
    return {
        "server": kind, "code": "baseline" if code_root else "this branch", "exit_code": proc.returncode, "wall_s": round(wall, 2),
        "rows": len(rows), "rows_ok": sum(r["status"] == "ok" for r in rows), "failed_by_reason": dict(reasons),
        "requests_to_server": len(completions), "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "requests_before_first_answer": first_ok, "max_requests_at_server_at_once": max_in_flight,
        "drscore_calls": t["calls"], "retries": t["retries"], "refused_over_window": t.get("refused_over_window"),
        "judge_adapted": t.get("judge_adapted", []), "judge_server": t.get("judge_server"),
        "tokens_drscore": [t["input_tokens"], t["output_tokens"]], "tokens_server_usage": list(usage),
        "tokens_match": [t["input_tokens"], t["output_tokens"]] == list(usage),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=8, help="reports of the example file (8: 16 rows)")
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier drscore to run the same command with")
    args = ap.parse_args()
    from support.llama import write_test_model

    with tempfile.TemporaryDirectory(prefix="drscore-bench-local-") as tmp:
        work = Path(tmp)
        model = write_test_model(work / "tiny.gguf")
        results = []
        for kind in ("llama-server", "llama-cpp-python"):
            results.append(run_one(kind, model, args.limit, work))
            if args.baseline:
                results.append(run_one(kind, model, args.limit, work, args.baseline.resolve()))
    print(json.dumps({"bench": "local_server", "limit": args.limit, "results": results, "machine": machine()},
                     indent=2))


if __name__ == "__main__":
    main()
