"""Flags and helpers shared by sub-commands."""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from drscore.api import JudgeConfig, JudgeSession, judge_session, run_async
from drscore.judge.wire import parse_judge_params

__all__ = ["add_judge_args", "judge_config_from_args", "open_judge_session", "run_async"]


def add_judge_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("judge")
    g.add_argument("--judge-url", help="OpenAI-compatible base URL (e.g. https://api.openai.com/v1); "
                   "omit for the built-in offline judge")
    g.add_argument("--judge-model", help="model name sent to the endpoint")
    g.add_argument("--transport", choices=["http", "sdk"], default="http", help="aiohttp (default) or the openai SDK")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY; none needed locally)")
    g.add_argument("--api-key-header", default="Authorization", metavar="NAME",
                   help="header carrying the key: Authorization (Bearer, default) or e.g. api-key for Azure OpenAI")
    g.add_argument("--no-json-schema", action="store_true",
                   help="do not send response_format json_schema (for endpoints without structured outputs)")
    g.add_argument("--judge-param", action="append", metavar="KEY=VALUE", default=None,
                   help="extra request-body field, repeatable (e.g. reasoning_effort=high, seed=7); values "
                        "are read as JSON when they parse; part of the cache key and of config.json")
    g.add_argument("--reasoning-effort", choices=["low", "medium", "high"], default=None,
                   help="how hard a thinking judge thinks, spelled as its provider expects (reasoning_effort, "
                        "or a thinking budget); also sizes the output cap (default: the provider's default)")
    g.add_argument("--max-output-tokens", type=int, default=None, metavar="N",
                   help="output cap sent with every call, thinking included (default: the template's answer cap, "
                        "plus a reasoning allowance for thinking models; see docs/judges.md)")
    g.add_argument("--timeout", type=float, default=120.0,
                   help="seconds each judge call may take per attempt (default 120)")
    g.add_argument("--max-retries", type=int, default=5, help="retries on 5xx/timeouts per call (default 5)")
    g.add_argument("--prompts", metavar="DIR", help="directory of <name>.md templates that replace the built-in "
                   "ones of that name (same placeholders; see `drscore prompts list`)")
    lim = p.add_argument_group("limits")
    lim.add_argument("--rpm", type=float, default=0, help="requests per minute (0 = unlimited)")
    lim.add_argument("--tpm", type=float, default=0, help="tokens per minute (0 = unlimited)")
    lim.add_argument("--concurrency", type=int, default=16, help="max judge calls in flight (default 16)")
    lim.add_argument("--burst", type=float, default=1.0, metavar="SECONDS",
                     help="quota that may be used at once, in seconds of quota (default 1)")
    lim.add_argument("--max-rate-limit-wait", type=float, default=300.0, metavar="SECONDS",
                     help="a 429 whose quota resets later than this stops the run (exit 3; re-run to resume) "
                          "instead of waiting (default 300)")
    c = p.add_argument_group("cache and cost")
    c.add_argument("--cache", metavar="DIR", help="cache directory (default: $DRSCORE_CACHE or the user cache dir)")
    c.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    c.add_argument("--prices", metavar="FILE", help='JSON price table {"model": {"input": $/Mtok, "output": $/Mtok}}')
    c.add_argument("--price-as", metavar="MODEL", help="price calls as this model (e.g. for a dry run offline)")
    c.add_argument("--max-cost", type=float, metavar="USD",
                   help="hard ceiling on spend: each call reserves its worst case (input bound + the output cap "
                        "sent, thinking room included) before it is sent; items left over fail with reason 'budget' "
                        "(exit 3)")
    c.add_argument("--no-prefix-warmup", action="store_true",
                   help="do not hold calls sharing a long prompt prefix until the first of them answered")
    b = p.add_argument_group("batch (OpenAI-compatible Files + Batches API)")
    b.add_argument("--batch", action="store_true",
                   help="send judge calls as batches: batch prices (usually half), answers within the "
                        "provider's 24h window; crash-safe (re-run the same command to re-attach)")
    b.add_argument("--batch-window", type=float, default=2.0, metavar="SECONDS",
                   help="send a batch after this many seconds without new calls (default 2)")
    b.add_argument("--batch-poll", type=float, default=5.0, metavar="SECONDS",
                   help="first interval between batch status polls; backs off to 2 minutes (default 5)")
    b.add_argument("--batch-max-requests", type=int, default=50_000, metavar="N",
                   help="requests per batch (default and provider maximum 50,000)")
    t = p.add_argument_group("team (several processes or machines on one quota)")
    t.add_argument("--redis", metavar="URL",
                   help="share the endpoint's quota, a cache tier and calls in flight with every process using "
                        "this Redis, e.g. redis://127.0.0.1:6379/0 (default: $DRSCORE_REDIS; needs drscore[team])")
    t.add_argument("--redis-ttl", type=float, default=30.0, metavar="DAYS",
                   help="answers shared through --redis expire this many days after they were written, so a "
                        "long-lived team Redis does not fill up (default 30; the local cache keeps its own)")


def judge_config_from_args(args: argparse.Namespace) -> JudgeConfig:
    return JudgeConfig(
        url=args.judge_url, model=args.judge_model, transport=args.transport, api_key_env=args.api_key_env,
        api_key_header=args.api_key_header,
        json_mode=not args.no_json_schema, timeout_s=args.timeout, rpm=args.rpm, tpm=args.tpm,
        concurrency=args.concurrency, burst_s=args.burst, max_rate_limit_wait_s=args.max_rate_limit_wait, cache_dir=args.cache, no_cache=args.no_cache,
        prices=args.prices, price_as=args.price_as, max_cost=args.max_cost, max_retries=args.max_retries,
        prompts_dir=getattr(args, "prompts", None),
        params=parse_judge_params(getattr(args, "judge_param", None)),
        batch=args.batch, batch_window_s=args.batch_window, batch_poll_s=args.batch_poll,
        batch_max_requests=args.batch_max_requests, prefix_warmup=not args.no_prefix_warmup,
        redis=args.redis, redis_ttl_days=args.redis_ttl, reasoning_effort=getattr(args, "reasoning_effort", None),
        max_output_tokens=getattr(args, "max_output_tokens", None))


@contextlib.asynccontextmanager
async def open_judge_session(args: argparse.Namespace, purpose: str = "session") -> AsyncIterator[JudgeSession]:
    """A judge session configured by the flags of :func:`add_judge_args` (and
    ``--verdicts FILE`` when the command has it)."""
    async with judge_session(judge_config_from_args(args), verdicts=getattr(args, "verdicts", None),
                             purpose=purpose) as session:
        yield session
