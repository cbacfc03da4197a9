"""Pacing without quota headers (issue 16, part 6; issue 30: the token-bound case).

Workloads, each judged with no ``--rpm``/``--tpm`` against an endpoint that announces
no quota (a vLLM server behind a gateway that answers 429 with only ``Retry-After``: the
mock's ``vllm`` profile) and, for comparison, against the ``openai`` profile, which sends
``x-ratelimit-*`` headers (with headers the engine paces from the first answer):

* ``requests``: 120 requests/min; quality + redundancy on the first 4 bundled example
  reports (about 125 calls), mock latency 0.3 s +/- 0.2 s.
* ``tokens``: 600,000 tokens/min and no request limit; quality on the 100 DeepResearch
  Bench reports (requests of 13-106 KB), the same latency. Sizes vary eightfold, so a
  learned *request* rate either wastes the quota on small requests or is refused on
  large ones: the learner has to find that tokens bind.
* ``mixed`` (not run by default): the same 100 reports at 150 requests/min and no token
  limit: sizes vary as in ``tokens``, but requests bind, so a refused call's size says
  nothing and the learner must not be drawn to tokens.

Figures per run: requests sent and answered 429, and the quota's limit over the span
(first request to last answer, as the mock saw them), where the limit is
max(answered / RPM, tokens charged / TPM) (the mock's own token count). The older
``efficiency`` figure (limit less the server's one-second starting burst, over the
client's wall time) is kept for comparison with earlier runs. ``--runs N`` repeats each
header-less measure: each run's 429s, limit over span, the 429s' votes on which quota binds
(``learned_quota.votes`` of its summary) and how the pace moved (``pacing``: its run
directory's ``pacing.jsonl`` in brief), and in how many runs both targets held.
``--second-run`` measures, each time, the run after a first one against the same endpoint (its
answers then deleted from the cache, the server's buckets full again): the quota the first
learned is kept in the cache, and the measured run starts from it (``resumed``; the first
run's 429s and limit over span beside it). ``--largest-first`` orders the token and mixed cases' reports by
length, longest first: the first calls are the largest and the sizes shrink as the run goes
(a file grouped by agent, or sorted); ``--largest-early N`` moves only the N longest to just after
the first report (the calls after the preflight the largest, then the file's order); ``--p80-early N``
moves the N reports at the 80th percentile of length there instead: with 2, the start-up 429
meets the 3rd call in every run (a path the usual order takes in some). ``--body-names-quota`` adds a run of each case against
the ``gemini`` profile, which sends no quota headers but names the quota in each 429's body
(``quota_named_by_429``): paced at it from that 429 on. ``--header-less-profile azure`` measures
the header-less runs against the ``azure`` profile instead: remaining counts without limits in
the headers, and each 429 naming which quota refused it (tokens or calls), not its figure.

    .venv/bin/python -m bench.headerless [--case requests,tokens,mixed] [--runs N] [--second-run] [--body-names-quota]
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
from bench.shared_data import DRB, require_data
from bench.timing import QuotaUse, add_load_arguments, quota_use, timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.pace_log import PACING_FILE, read_pacing
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


async def _forget_answers(cache_dir: Path) -> None:
    """Delete every answer the cache holds (``drscore cache vacuum --older-than-days 0``): what
    it learned of the endpoint stays."""
    cache = await JudgeCache.open(cache_dir / "judge.sqlite")
    try:
        await cache.vacuum(older_than_s=0)
    finally:
        await cache.close()


def _measure(profile: str, *, rpm: float, tpm: float, latency: float, jitter: float, concurrency: int,
             methods: list[str], reports: Path, tasks: Path, limit: int, tmp: Path, estimates: str = "proxy",
             second: bool = False) -> dict:
    """One run's figures; ``second``: the run after a first one against the same endpoint,
    whose answers are then deleted from the cache, with what it learned kept there."""
    cfg = MockConfig(profile=profile, rpm=rpm, tpm=tpm, latency=latency, jitter=jitter, seed=3)
    with MockServerProcess(cfg) as mock:
        judge = JudgeConfig(url=mock.url, model="mock", concurrency=concurrency, no_cache=not second,
                            cache_dir=str(tmp / "cache"), proxy_tokenizer=estimates == "proxy")
        run = RunConfig(methods=methods, reports=[str(reports)], tasks=str(tasks), out=str(tmp / profile),
                        judge=judge, limit=limit)
        before = None
        if second:
            asyncio.run(timed_run(run))
            first = mock.stats()
            before = {"responses_429": first["rate_limited"], "requests_sent": first["requests"],
                      "limit_over_span": _limit_over_span(quota_use(first, rpm, tpm))}
            asyncio.run(_forget_answers(tmp / "cache"))
            mock.reset()  # the counters zeroed, the server's buckets full, as a later run finds them
            run = msgspec.structs.replace(run, out=str(tmp / f"{profile}-second"))
        wall, summary = asyncio.run(timed_run(run))
        s = mock.stats()
    use = quota_use(s, rpm, tpm)
    limit_s, span = use.limit, use.span
    # the server's bucket starts full: one second of quota the client gets for free
    burst_s = 1.0
    physical = max(0.0, limit_s - burst_s)
    t = summary["totals"]
    return {
        "profile": profile, "quota_headers": profile == "openai",
        # no headers, but the 429's body named the quota (the gemini profile's QuotaFailure)
        "quota_named_by_429": (t.get("quota_named_by_429") or {}).get("quota"),
        "requests_sent": s["requests"], "requests_ok": s["ok"], "responses_429": s["rate_limited"],
        "share_429": round(s["rate_limited"] / max(1, s["requests"]), 4),
        # prompts the client had the server count first (the vllm profile's POST /tokenize, once
        # a token pace is learned)
        "prompts_counted_at_tokenize": s.get("tokenize_requests", 0),
        "tokens_charged": use.charged, "binding": use.binding,
        "limit_s": round(limit_s, 2), "span_s": round(span, 2),
        "limit_over_span": _limit_over_span(use),
        "physical_limit_s": round(physical, 2), "wall_s": round(wall, 2),
        "efficiency": round(physical / wall, 3) if wall else None,
        "items": t["items"], "items_failed": t["items_failed"],
        "estimates_on": t.get("prompts_estimated", {}).get("on", "characters"),
        # the 429s' votes on which quota binds (engine.runtime.calls.binding.GuessVote)
        "votes": (t.get("learned_quota") or {}).get("votes", []),
        # how the pace moved: the run directory's pacing.jsonl (engine.runtime.calls.pace_log)
        "pacing": _pacing_digest(Path(run.out) / PACING_FILE),
        # a second run: the learned quota it started from, and the first run's figures
        **({"resumed": (t.get("learned_quota") or {}).get("resumed"), "first_run": before} if second else {}),
    }


def _largest_early(reports: Path, folder: Path, n: int) -> Path:
    """A copy of ``reports`` in ``folder`` with its ``n`` longest reports moved to just after the
    first: the run's first calls after the preflight are its largest, then the order is the file's."""
    rows = _rows(reports)
    rest = sorted(range(1, len(rows)), key=lambda i: -len(rows[i].get("article") or ""))
    return _written(_moved_early(rows, rest[:n]), folder / f"{reports.stem}.largest-early.jsonl")


def _p80_early(reports: Path, folder: Path, n: int) -> Path:
    """A copy of ``reports`` in ``folder`` with the ``n`` reports from the 80th percentile of
    length on (by rank, shortest first) moved to just after the first, in the file's order."""
    rows = _rows(reports)
    by_length = sorted(range(1, len(rows)), key=lambda i: len(rows[i].get("article") or ""))
    at = int(0.8 * len(by_length))
    return _written(_moved_early(rows, sorted(by_length[at:at + n])), folder / f"{reports.stem}.p80-early.jsonl")


def _moved_early(rows: list[dict], early: list[int]) -> list[dict]:
    """``rows`` with those at the indices ``early`` (never the first) moved, in that order, to just
    after the first; the rest in their order."""
    moved = set(early)
    return [rows[0], *(rows[i] for i in early), *(row for i, row in enumerate(rows) if i and i not in moved)]


def _pacing_digest(path: Path) -> dict:
    """A run's ``pacing.jsonl`` in brief: each 429 as [seconds, the call's grant order, its
    token estimate, the dimension paced after it, what decided the vote, the token rate proved
    before it and the most a token bucket that refused it could have (tokens/min)], the seconds
    of each turn to tokens in hindsight and of each probe of a request pace, and the learned
    paces sampled every 5 s as [seconds, dimension, requests/min, tokens/min]."""
    events = list(read_pacing(path))
    return {"refusals": [[e.t, e.call, e.tokens, e.binding, e.vote.by if e.vote else None, e.token_proof_tpm,
                          e.token_bound_tpm] for e in events if e.kind == "429"],
            "turns_s": [e.t for e in events if e.kind == "turn"],
            "probes_s": [e.t for e in events if e.kind == "probe"],
            "paces": [[e.t, e.binding, e.rpm, e.tpm] for e in events if e.kind == "pace"]}


def _largest_first(reports: Path, folder: Path) -> Path:
    """A copy of ``reports`` (JSON lines) in ``folder``, ordered by the report's length, longest first."""
    rows = _rows(reports)
    rows.sort(key=lambda row: -len(row.get("article") or ""))
    return _written(rows, folder / f"{reports.stem}.largest-first.jsonl")


def _rows(reports: Path) -> list[dict]:
    """The records of a JSON-lines reports file."""
    return [orjson.loads(line) for line in reports.read_bytes().splitlines() if line.strip()]


def _written(rows: list[dict], out: Path) -> Path:
    """``rows`` written to ``out`` as JSON lines; ``out``."""
    out.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return out


def _limit_over_span(use: QuotaUse) -> float | None:
    """The quota's limit over the span the mock saw (first request to last answer)."""
    return round(use.limit / use.span, 3) if use.span > 0 else None


def _header_less(runs: int, **kw: Any) -> dict:
    """The header-less measure ``runs`` times: the first run in full (``header_less``, as
    earlier outputs named it), then each run's 429s, limit over span and votes, and in how
    many both targets held (≤ 3% 429, ≥ 0.95)."""
    tmp: Path = kw.pop("tmp")
    profile = kw.pop("profile", "vllm")
    results = [_measure(profile, tmp=tmp / f"run{i}", **kw) for i in range(runs)]
    out: dict = {"header_less": results[0]}
    if runs > 1:
        spans = [r["limit_over_span"] or 0 for r in results]
        keys = ("responses_429", "share_429", "limit_over_span", "votes", "pacing", "resumed", "first_run")
        out["header_less_repeated"] = {
            "runs": [{k: r[k] for k in keys if k in r} for r in results],
            "targets_held": sum(r["share_429"] <= 0.03 and s >= 0.95 for r, s in zip(results, spans)),
            "limit_over_span_range": [min(spans), max(spans)]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="requests,tokens",
                    help="requests, tokens, mixed (comma-separated); mixed: the tokens case's 100 reports at --mixed-rpm "
                         "requests/min and no token limit, where the sizes vary and requests bind")
    ap.add_argument("--mixed-rpm", type=float, default=150, help="the mixed case's limit")
    ap.add_argument("--runs", type=int, default=1, help="header-less runs per case (each run's figures and votes listed)")
    ap.add_argument("--rpm", type=float, default=120, help="the requests case's limit")
    ap.add_argument("--tpm", type=float, default=600_000, help="the tokens case's limit")
    add_load_arguments(ap)
    ap.add_argument("--reports", type=int, default=4, help="requests case: the first N example reports (4: about 125 calls)")
    ap.add_argument("--drb", default=str(DRB), help="tokens case: the folder of DeepResearch Bench's reports and tasks")
    ap.add_argument("--second-run", action="store_true",
                    help="measure each header-less run after a first one against the same endpoint, its answers "
                         "then deleted from the cache: the measured run starts from the quota the first learned")
    ap.add_argument("--header-less-profile", default="vllm", choices=("vllm", "azure"),
                    help="the header-less endpoint: vllm (a gateway's bare 429s) or azure (remaining counts and no "
                         "limits in the headers; each 429 names the quota that refused it, not its figure)")
    ap.add_argument("--body-names-quota", action="store_true",
                    help="also run each case once against the gemini profile: no quota headers, but each 429's body "
                         "names the quota that refused it (Gemini's QuotaFailure)")
    ap.add_argument("--largest-first", action="store_true",
                    help="tokens and mixed cases: the reports ordered by length, longest first (the sizes shrink as "
                         "the run goes)")
    ap.add_argument("--largest-early", type=int, default=0, metavar="N",
                    help="tokens and mixed cases: the N longest reports moved to just after the first (the calls "
                         "after the preflight the largest, then the file's order)")
    ap.add_argument("--p80-early", type=int, default=0, metavar="N",
                    help="tokens and mixed cases: the N reports at the 80th percentile of length moved to just after "
                         "the first (with 2, the start-up 429 at the 3rd call)")
    ap.add_argument("--client-estimates", default="proxy", choices=("proxy", "characters"),
                    help="what the client's token estimates learn on: cl100k_base's counts (the default where "
                         "drscore[tokenizer] is installed) or characters")
    args = ap.parse_args()
    cases = [c.strip() for c in args.case.split(",") if c.strip()]
    common = dict(latency=args.latency, jitter=args.jitter, concurrency=args.concurrency,
                  estimates=args.client_estimates)
    out: dict = {"benchmark": "headerless", "mock_latency_s": args.latency, "mock_jitter_s": args.jitter,
                 "client_concurrency": args.concurrency, "judge_rpm_option": None, "judge_tpm_option": None}
    with tempfile.TemporaryDirectory() as d:
        if "requests" in cases:
            kw = dict(rpm=args.rpm, tpm=0.0, methods=["quality", "redundancy"],
                      reports=EXAMPLES / "reports.claude-3-7-sonnet.jsonl", tasks=EXAMPLES / "tasks.jsonl",
                      limit=args.reports, **common)
            out["requests"] = {
                "rpm": args.rpm, "methods": ["quality", "redundancy"],
                "reports": f"examples/reports.claude-3-7-sonnet.jsonl (first {args.reports})",
                **_header_less(args.runs, tmp=Path(d) / "r", second=args.second_run, profile=args.header_less_profile,
                               **kw),
                "with_headers": _measure("openai", tmp=Path(d) / "r", **kw),
                **({"body_names_quota": _measure("gemini", tmp=Path(d) / "r", **kw)} if args.body_names_quota else {})}
        drb = Path(args.drb)
        reports = drb / "reports.claude-3-7-sonnet.jsonl"
        if args.largest_first and {"tokens", "mixed"} & set(cases):
            require_data("headerless", str(reports))
            reports = _largest_first(reports, Path(d))
        elif args.largest_early and {"tokens", "mixed"} & set(cases):
            require_data("headerless", str(reports))
            reports = _largest_early(reports, Path(d), args.largest_early)
        elif args.p80_early and {"tokens", "mixed"} & set(cases):
            require_data("headerless", str(reports))
            reports = _p80_early(reports, Path(d), args.p80_early)
        for case, rpm, tpm in (("tokens", 0.0, args.tpm), ("mixed", args.mixed_rpm, 0.0)):
            if case not in cases:
                continue
            require_data("headerless", str(reports), str(drb / "tasks.jsonl"))
            kw = dict(rpm=rpm, tpm=tpm, methods=["quality"], reports=reports, tasks=drb / "tasks.jsonl",
                      limit=0, **common)
            out[case] = {
                "rpm": rpm or None, "tpm": tpm or None, "methods": ["quality"],
                "reports": "DeepResearch Bench, 100 reports" + (", longest first" if args.largest_first else (
                    f", the {args.largest_early} longest after the first" if args.largest_early else (
                        f", {args.p80_early} at the 80th percentile of length after the first" if args.p80_early
                        else ""))),
                **_header_less(args.runs, tmp=Path(d) / case, second=args.second_run, profile=args.header_less_profile,
                               **kw),
                "with_headers": _measure("openai", tmp=Path(d) / case, **kw),
                **({"body_names_quota": _measure("gemini", tmp=Path(d) / case, **kw)} if args.body_names_quota else {})}
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
