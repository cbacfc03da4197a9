"""How much of a known quota a run uses (issue 30): the quota's limit over the span.

bench/quota.py's workload (quality + redundancy on the 100 DeepResearch Bench reports,
about 1,090 real request bodies of 0.3-106 KB) against the mock judge with a latency of
2 s +/- 1 s and a one-second burst, bound by requests (600/min) or by tokens (a limit that
makes the run last about 110 s), and the quota either told (``--rpm``/``--tpm``, the mock's
``vllm`` profile, which sends no quota headers and counts a prompt before its call at
``POST /tokenize`` as vLLM does; ``--told-profile gemini``: at its native ``countTokens``;
``ollama``: no count at all), announced (nothing told, the ``openai``
profile's ``x-ratelimit-*`` headers), or remembered (announced, and kept in the cache by an
earlier run against the same endpoint: ``rpm-remembered``, ``tpm-remembered``), or told
with the model's token counting already learned (``tpm-fitted``: the cache holds the fit an
earlier run recorded, over the first 50 of the reports against an unlimited mock, as a
team's second run of a model has, and against a reserving quota its answers' lengths, from which
the caps are fitted from the first call; every other setting starts from the character rule).

``--charge reserved`` makes the mock's token quota charge as OpenAI's and Azure's limiters are
documented to (a character guess at the prompt plus the whole ``max_tokens``, the unused part
given back with the answer; the limit is then what the quota kept, not the usage), told quotas
then against the ``azure`` profile (remaining counts without limits, as Azure sends), and
``--client-charge counted`` shows a client that charges the usage it expects instead, and
``--client-output-cap fixed`` one that sends every call its template's own cap rather than one
fitted to the answers (``caps_reserved``: the caps the quota held at admission).
``--charge input`` charges the prompt alone, as Gemini's input-token quota does (told quotas
then against the ``gemini`` profile). ``--otpm N`` adds an output-token quota apart, as
Anthropic has (each call's ``max_tokens`` reserved at admission, the unused part given back
with the answer): the announced runs then meet the ``anthropic`` profile, whose headers state
the input and output quotas apart beside a ``tokens`` pair that is their sum, token counts
rounded to the thousand (``--charge input`` is then implied); the limit counts the output
quota too (output tokens charged / OTPM).

limit = max(answered / RPM, tokens charged / TPM) (the mock's own count); span = the
mock's first request to its last answer. A client that used the whole quota from the
first second to the last, and whose last answer took no time, would score 1.0 (the
server's starting burst can lift it a little above). What is lost: the preflight's wait,
pacing under the quota, and the last answer's latency. ``used_of_available`` also counts
the starting burst as quota on offer: limit / (span + burst), the figure that means
something when the bucket holds much more than a second (``--burst 60``: OpenAI's buckets,
by their headers, hold a minute; the told runs are then told ``--burst 60`` too).

    .venv/bin/python -m bench.pacing [--latency 2 --jitter 1] [--burst 1] [--drb DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from bench.timing import quota_use, timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess


async def _remembered(cache: Path, url: str, rpm: float, tpm: float) -> None:
    """What an earlier run against this endpoint left in the cache: the quota it announced."""
    from drscore.engine.runtime.calls.cache import JudgeCache
    from drscore.engine.runtime.calls.limits import KnownQuota

    cache.mkdir(parents=True, exist_ok=True)
    store = await JudgeCache.open(cache / "judge.sqlite")
    store.save_quota(f"{url} mock", KnownQuota(rpm=rpm, tpm=tpm))
    await store.close()


async def _copy_token_counting(learned: Path, cache: Path, model: str) -> None:
    """Put the token counting an earlier run recorded in ``learned`` (and nothing else) into ``cache``."""
    from drscore.engine.runtime.calls.cache import JudgeCache
    from drscore.engine.runtime.calls.pool import proxy_fit_key
    from drscore.judge.local_tokenizer import PROXY_SPEC

    source = await JudgeCache.open(learned / "judge.sqlite")
    fit, per_template = await source.token_fit(model), await source.template_token_fits(model)
    proxied = await source.token_fit(proxy_fit_key(model, PROXY_SPEC))  # where the proxy counted the prompts
    caps = await source.output_caps(model)  # a reserving quota's answer lengths, for caps fitted to them
    await source.close()
    if fit is None:
        raise SystemExit(f"pacing: the learning run recorded no token counting in {learned}")
    cache.mkdir(parents=True, exist_ok=True)
    store = await JudgeCache.open(cache / "judge.sqlite")
    store.save_token_fit(model, fit)
    if proxied is not None:
        store.save_token_fit(proxy_fit_key(model, PROXY_SPEC), proxied)
    for template, template_fit in per_template.items():
        store.save_template_token_fit(model, template, template_fit)
    for template, answers in caps.items():
        store.save_output_cap(model, template, answers)
    await store.close()


def _learn_token_counting(*, reports: Path, tasks: Path, methods: list[str], tokenizer: str, tmp: Path,
                          cache: Path, tpm: float, charge: str, client_charge: str) -> None:
    """An earlier run over the first 50 reports against an unlimited mock that counts alike:
    what it records of the model's token counting goes into ``cache``. It is told a quota a hundred
    times the run's, which never binds, so that it estimates as a told run does (on the proxy
    tokenizer's counts where the extra is installed)."""
    half = tmp.with_name(f"{tmp.name}-learn.jsonl")
    half.write_bytes(b"".join(reports.read_bytes().splitlines(keepends=True)[:50]))
    learned = tmp.with_name(f"{tmp.name}-learn-cache")
    with MockServerProcess(MockConfig(latency=0.05, jitter=0.0, seed=11, tokenizer=tokenizer,
                                      tpm_charge=charge)) as mock:
        judge = JudgeConfig(url=mock.url, model="mock", concurrency=32, cache_dir=str(learned), tpm=tpm * 100,
                            tpm_charge=client_charge if client_charge != "auto" else charge)
        run = RunConfig(methods=methods, reports=[str(half)], tasks=str(tasks), out=str(tmp.with_name(f"{tmp.name}-learn")),
                        judge=judge, method_options={"segmentation": "sections"})
        asyncio.run(timed_run(run))
    asyncio.run(_copy_token_counting(learned, cache, "mock"))


def _run(*, profile: str, rpm: float, tpm: float, told: bool, reports: Path, tasks: Path, latency: float,
         jitter: float, concurrency: int, methods: list[str], tmp: Path, burst: float = 1.0,
         remembered: bool = False, fitted: bool = False, tokenizer: str = "words", charge: str = "counted",
         client_charge: str = "auto", client_tokenizer: str | None = None, client_estimates: str = "proxy",
         client_output_cap: str = "fitted", otpm: float = 0.0) -> dict:
    cfg = MockConfig(profile=profile, rpm=rpm, tpm=tpm, latency=latency, jitter=jitter, seed=11, burst=burst,
                     tokenizer=tokenizer, tpm_charge=charge, otpm=otpm)
    cache = tmp.with_name(f"{tmp.name}-cache")
    if fitted:
        _learn_token_counting(reports=reports, tasks=tasks, methods=methods, tokenizer=tokenizer, tmp=tmp, cache=cache,
                              tpm=tpm, charge=charge, client_charge=client_charge)
    with MockServerProcess(cfg) as mock:
        if remembered:
            asyncio.run(_remembered(cache, mock.url, rpm, tpm))
        # Gemini's OpenAI-compatible path, beside which its native countTokens lives
        url = f"{mock.base}/v1beta/openai" if profile == "gemini" else mock.url
        judge = JudgeConfig(url=url, model="mock", concurrency=concurrency, no_cache=not (remembered or fitted),
                            cache_dir=str(cache),
                            rpm=rpm if told else 0, tpm=tpm if told else 0, burst_s=burst if told else 1.0,
                            tpm_charge=client_charge if client_charge != "auto" else charge,
                            tokenizer=client_tokenizer, proxy_tokenizer=client_estimates == "proxy",
                            fit_output_cap=client_output_cap == "fitted")
        run = RunConfig(methods=methods, reports=[str(reports)], tasks=str(tasks), out=str(tmp),
                        judge=judge, method_options={"segmentation": "sections"})
        wall, summary = asyncio.run(timed_run(run))
        s = mock.stats()
    use = quota_use(s, rpm, tpm, charge=charge)
    limit, span = use.limit, use.span
    by_output = s.get("output_tokens_charged", 0) / otpm * 60 if otpm else 0.0
    binding = use.binding if use.limit >= by_output else "otpm"
    limit = max(limit, by_output)
    return {"quota": "told, token counting learned earlier" if fitted else "told" if told
            else "remembered" if remembered else "headers", "profile": profile, "rpm": rpm, "tpm": tpm,
            "client_tpm_charge": judge.tpm_charge, "client_tokenizer": client_tokenizer,
            "client_estimates_on": summary["totals"].get("prompts_estimated", {}).get("on", "characters"),
            "binding": binding, "otpm": otpm or None,
            "requests_sent": s["requests"], "requests_ok": s["ok"], "responses_429": s["rate_limited"],
            # an output quota apart (--otpm): its refusals, what it kept, and the calls that waited for it
            "responses_429_output": s.get("rate_limited_output") if otpm else None,
            "output_tokens_charged": s.get("output_tokens_charged") if otpm else None,
            "split_token_quota": summary["totals"].get("split_token_quota"),
            "prompts_counted_at_tokenize": s.get("tokenize_requests", 0),
            # what counted each prompt before its call, if anything did (the server, --tokenizer,
            # or the model's vocabulary Ollama gave), and the usage's mean difference from it
            "prompts_counted": summary["totals"].get("prompts_counted"),
            "tokens_charged": use.charged, "limit_s": round(limit, 2), "span_s": round(span, 2),
            "limit_over_span": round(limit / span, 3) if span > 0 else None,
            "used_of_available": round(limit / (span + burst), 3) if span > 0 else None, "wall_s": round(wall, 2),
            # where the span went beyond the limit: seconds the server's bucket sat full (quota
            # offered and not taken) and from the last request it received to its last answer
            "server_bucket_full_s": s.get(f"{'tokens' if binding == 'tpm' else 'requests'}_full_s")
            if binding != "otpm" else None,
            # a reserving quota's give-backs that met a full bucket and were dropped by the server
            # (seconds of quota): its loss that no pacing of ours can prevent
            "given_back_dropped_s": round(s.get("tokens_given_back_dropped", 0.0) / (tpm / 60), 2) if tpm else None,
            # a reserving quota's output caps held at admission, and the client's caps fitted to the answers
            "caps_reserved": s.get("caps_reserved", 0) if charge == "reserved" else None,
            "client_output_cap": client_output_cap if judge.tpm_charge == "reserved" else None,
            "fitted_cap_cuts": (summary["totals"].get("output_caps_fitted") or {}).get("cut", 0),
            "last_request_to_last_answer_s": round((s["last_answer_at"] or 0.0) - (s["last_request_at"] or 0.0), 2),
            "items_failed": summary["totals"]["items_failed"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--jitter", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--workload", default="quality,redundancy", choices=("quality,redundancy", "quality"),
                    help="quality alone: issue 30's setting, 100 calls (at 60/min a bucket of one request)")
    ap.add_argument("--rpm", type=float, default=0, help="the request-bound settings' limit (0: 600/min, "
                                                             "60/min for quality alone: about 110 s / 100 s)")
    ap.add_argument("--tpm", type=float, default=0,
                    help="the token-bound settings' limit (0: the workload's tokens over 110 s / 100 s)")
    ap.add_argument("--settings", default="rpm-told,rpm-headers,tpm-told,tpm-headers")
    ap.add_argument("--burst", type=float, default=1.0,
                    help="the mock's bucket in seconds of quota (60: a minute, as OpenAI's headers describe theirs)")
    ap.add_argument("--tokenizer", default="words",
                    help="how the mock counts tokens: its words rule (a line of Chinese is one token, about "
                         "half of what the character rule estimates for these reports), cl100k (GPT-4's), or "
                         "hf:PATH (a tokenizer.json, e.g. Claude's 65k-token one the anthropic package shipped "
                         "up to 0.34), or gguf:PATH (a GGUF model's vocabulary, which the ollama profile gives at "
                         "/api/show as Ollama does); the last two need --tpm")
    ap.add_argument("--charge", default="counted", choices=("counted", "reserved", "input"),
                    help="what the mock's token quota charges: the count (default), as OpenAI's and Azure's "
                         "limiters are documented to (reserved: a character guess at the prompt plus the whole "
                         "max_tokens, the unused part given back with the answer; told quotas then use the azure "
                         "profile, which sends remaining counts without limits), or the prompt alone (input, as "
                         "Gemini's quota; told quotas then use the gemini profile)")
    ap.add_argument("--told-profile", default="", choices=("", "vllm", "azure", "gemini", "ollama"),
                    help="the mock's profile for told quotas (default: azure with --charge reserved, gemini with "
                         "--charge input, else vllm, which sends no quota headers and counts a prompt at POST "
                         "/tokenize, as vLLM does; gemini counts it at its native countTokens; ollama: no quota "
                         "headers and no count, so the client paces on its estimates)")
    ap.add_argument("--client-charge", default="auto", choices=("auto", "counted", "reserved", "input"),
                    help="the client's --tpm-charge (auto: the mock's --charge; counted against --charge reserved "
                         "is what a client that ignores the reservation does)")
    ap.add_argument("--client-tokenizer", default=None, metavar="SPEC",
                    help="the client's --tokenizer: each prompt counted here (tiktoken:cl100k_base against "
                         "--tokenizer cl100k; default: none, estimates corrected by the usage)")
    ap.add_argument("--client-estimates", default="proxy", choices=("proxy", "characters"),
                    help="what the client's estimates learn on where nothing counts the prompts: cl100k_base's "
                         "counts (proxy, the default where drscore[tokenizer] is installed) or characters")
    ap.add_argument("--client-output-cap", default="fitted", choices=("fitted", "fixed"),
                    help="against a reserving quota, the client's output caps: fitted to each template's answers "
                         "(the default) or the templates' own (--fixed-output-cap)")
    ap.add_argument("--otpm", type=float, default=0.0,
                    help="an output-token quota a minute apart from the token one, as Anthropic's (its cap "
                         "reserved at admission): announced runs then meet the anthropic profile, and --charge "
                         "input is implied (default 0: none)")
    ap.add_argument("--drb", default=str(DRB), help="the folder of DeepResearch Bench's reports and tasks")
    args = ap.parse_args()
    if args.otpm:
        args.charge = "input"
    drb = Path(args.drb)
    reports, tasks = drb / "reports.claude-3-7-sonnet.jsonl", drb / "tasks.jsonl"
    require_data("pacing", reports, tasks)
    methods = args.workload.split(",")
    # The workload's tokens as the mock counts them (bench.quota: 1,090 calls, 138.9 s at
    # 600,000/min; quality alone: 371,411; by cl100k 2,516,857 and 719,039), for a token
    # limit that makes the run last 110 s / 100 s.
    alone = methods == ["quality"]
    if args.tokenizer not in ("words", "cl100k") and not args.tpm:
        raise SystemExit(f"pacing: --tokenizer {args.tokenizer} needs --tpm (its workload's count is not tabled)")
    workload = 0 if args.tpm else {("words", False): 1_389_000, ("words", True): 371_411,
                ("cl100k", False): 2_516_857, ("cl100k", True): 719_039}[(args.tokenizer, alone)]
    if args.charge == "reserved":  # what the reserving quota keeps: the character guess and the output used
        workload = 471_523 if alone else 1_803_260
    elif args.charge == "input" and not args.tpm:  # the prompts alone (measured against an unlimited mock)
        workload = {("words", False): 1_369_498, ("words", True): 367_410,
                    ("cl100k", False): 2_499_314, ("cl100k", True): 714_518}[(args.tokenizer, alone)]
    tpm = args.tpm or workload * 60 / (100 if alone else 110)
    rpm = args.rpm or (60.0 if alone else 600.0)
    told_profile = args.told_profile or {"reserved": "azure", "input": "gemini"}.get(args.charge, "vllm")
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for i, setting in enumerate(s.strip() for s in args.settings.split(",") if s.strip()):
            bound, quota = setting.split("-")
            told = quota in ("told", "fitted")
            rpm_limit, tpm_limit = (rpm, 0.0) if bound == "rpm" else (0.0, tpm)
            headers_profile = "anthropic" if args.otpm else "openai"
            runs.append(_run(profile=told_profile if told else headers_profile, rpm=rpm_limit, tpm=tpm_limit, told=told,
                             reports=reports, tasks=tasks, latency=args.latency, jitter=args.jitter,
                             concurrency=args.concurrency, methods=methods, tmp=Path(d) / str(i), burst=args.burst,
                             remembered=quota == "remembered", fitted=quota == "fitted",
                             tokenizer=args.tokenizer, charge=args.charge, client_charge=args.client_charge,
                             client_tokenizer=args.client_tokenizer, client_estimates=args.client_estimates,
                             client_output_cap=args.client_output_cap, otpm=args.otpm))
    out = {"benchmark": "pacing", "methods": methods, "reports": "DeepResearch Bench, 100 reports",
           "mock_latency_s": args.latency, "mock_jitter_s": args.jitter, "mock_burst_s": args.burst,
           "mock_tokenizer": args.tokenizer, "mock_tpm_charge": args.charge, "mock_otpm": args.otpm or None, "client_concurrency": args.concurrency, "runs": runs, "machine": machine()}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
