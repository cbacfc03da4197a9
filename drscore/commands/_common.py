"""Options and helpers shared by sub-commands: the judge options, declared once."""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import click

from drscore.api import JudgeConfig, JudgeSession, judge_session, run_async
from drscore.commands._framework import on_interrupt, option, options
from drscore.judge.wire import parse_judge_params

__all__ = ["judge_config_from_args", "judge_options", "open_judge_session", "run_async"]

F = TypeVar("F", bound=Callable[..., Any])

# What Ctrl-C prints: only a cached run can promise that nothing is paid twice.
CACHED_NOTE = "interrupted; every answer received is in the cache: the same command resumes without paying again"
UNCACHED_NOTE = "interrupted; nothing was cached (--no-cache): running it again asks every judge call again"
OFFLINE_NOTE = "interrupted; the offline judge is not cached (it is free): running it again judges everything again"


def interrupt_note_for(config: JudgeConfig) -> str:
    """What Ctrl-C may truthfully say about the answers received so far."""
    return OFFLINE_NOTE if not config.url else UNCACHED_NOTE if config.no_cache else CACHED_NOTE

_J = "judge"
_L = "limits"
_C = "cache and cost"
_B = "batch (OpenAI-compatible Files + Batches API)"
_T = "team (several processes or machines on one quota)"

judge_options: Callable[[F], F] = options(
    option("--judge-url", section=_J, help="OpenAI-compatible base URL (e.g. https://api.openai.com/v1); default: "
           "$DRSCORE_JUDGE_URL, else $OPENAI_BASE_URL, else the built-in offline judge"),
    option("--judge-model", section=_J, help="model name sent to the endpoint"),
    option("--transport", section=_J, type=click.Choice(["http", "sdk"]), default="http",
           help="aiohttp (default) or the openai SDK"),
    option("--api-key-env", section=_J, default="OPENAI_API_KEY", metavar="VAR",
           help="environment variable holding the API key (default OPENAI_API_KEY; none needed locally)"),
    option("--api-key-header", section=_J, default="Authorization", metavar="NAME",
           help="header carrying the key: Authorization (Bearer, default) or e.g. api-key for Azure OpenAI"),
    option("--no-json-schema", section=_J, is_flag=True,
           help="do not send response_format json_schema (for endpoints without structured outputs)"),
    option("--judge-param", section=_J, multiple=True, metavar="KEY=VALUE",
           help="extra request-body field, repeatable (e.g. reasoning_effort=high, seed=7); values "
                "are read as JSON when they parse; part of the cache key and of config.json"),
    option("--reasoning-effort", section=_J, type=click.Choice(["low", "medium", "high"]), default=None,
           help="how hard a thinking judge thinks, spelled as its provider expects (reasoning_effort, "
                "or a thinking budget); also sizes the output cap (default: the provider's default)"),
    option("--max-output-tokens", section=_J, type=int, default=None, metavar="N",
           help="output cap sent with every call, thinking included (default: the template's answer cap, "
                "plus a reasoning allowance for thinking models; see docs/judges.md); an answer cut off at "
                "it fails as 'truncated' without a second paid attempt"),
    option("--retry-cut-off", section=_J, is_flag=True,
           help="with --max-output-tokens: retry an answer cut off at the cap once with a larger cap"),
    option("--fixed-output-cap", section=_J, is_flag=True,
           help="against an endpoint that reserves the output cap against its token quota (--tpm-charge "
                "reserved), send every call its template's own cap; by default, where a token quota paces the "
                "calls and a template has 20 answers, its calls go out with 1.5 times its longest answer + 64 "
                "tokens (an answer cut off there is asked again at the template's cap; see docs/providers.md)"),
    option("--timeout", section=_J, type=float, default=120.0,
           help="seconds each judge call may take per attempt (default 120)"),
    option("--max-retries", section=_J, type=int, default=5, help="retries on 5xx/timeouts per call (default 5)"),
    option("--prompts", section=_J, metavar="DIR", help="directory of <name>.md templates that replace the "
           "built-in ones of that name (same placeholders; see `drscore prompts list`)"),
    option("--rpm", section=_L, type=float, default=0.0, help="requests per minute (0 = unlimited)"),
    option("--tpm", section=_L, type=float, default=0.0,
           help="tokens per minute; where the endpoint's token quota is of input tokens alone (Gemini's, "
                "Anthropic's: --tpm-charge input), that quota (0 = unlimited)"),
    option("--otpm", section=_L, type=float, default=0.0,
           help="output tokens per minute, a quota apart from --tpm (Anthropic's): each call's output cap is "
                "held against it until its answer gives back what it did not use; an endpoint that states "
                "one in its headers needs none told (0 = none)"),
    option("--tpm-charge", section=_L, type=click.Choice(["auto", "counted", "reserved", "input"]), default="auto",
           help="what the endpoint's token quota charges a call: counted (prompt and answer as usage reports "
                "them), reserved (a character guess at the prompt plus the whole output cap, as OpenAI's and "
                "Azure's limiters do) or input (the prompt alone, as Gemini's and Anthropic's input-token quotas "
                "do); auto: reserved for api.openai.com, Azure OpenAI and api.cerebras.ai, input for "
                "generativelanguage.googleapis.com and api.anthropic.com, counted elsewhere; a server stating "
                "input and output token quotas apart is charged as input from its first answer (default auto)"),
    option("--tokenizer", section=_L, metavar="SPEC", default=None,
           help="the judge model's tokenizer, to count each prompt here for the token quota: "
                "tiktoken:ENCODING (o200k_base for GPT-4o and later, cl100k_base for GPT-4) or hf:PATH (an "
                "open-weights model's tokenizer.json); for a server that counts no prompts itself (no "
                "/tokenize) and sends no quota headers (default: none, the estimates learned from the usage "
                "on cl100k_base's counts, or on characters without drscore[tokenizer]; needs drscore[tokenizer])"),
    option("--concurrency", section=_L, type=int, default=16, help="max judge calls in flight (default 16)"),
    option("--burst", section=_L, type=float, default=1.0, metavar="SECONDS",
           help="quota that may be used at once, in seconds of quota (default 1)"),
    option("--max-rate-limit-wait", section=_L, type=float, default=300.0, metavar="SECONDS",
           help="a 429 whose quota resets later than this stops the run (exit 3; re-run to resume) "
                "instead of waiting; a reset hint that cannot be believed (inf, nan, negative) waits this "
                "long (default 300)"),
    option("--cache", section=_C, metavar="DIR",
           help="cache directory (default: $DRSCORE_CACHE or the user cache dir)"),
    option("--no-cache", section=_C, is_flag=True, help="neither read nor write the cache"),
    option("--prices", section=_C, metavar="FILE",
           help='JSON price table {"model": {"input": $/Mtok, "output": $/Mtok}}'),
    option("--price-as", section=_C, metavar="MODEL", help="price calls as this model (e.g. for a dry run offline)"),
    option("--max-cost", section=_C, type=float, metavar="USD",
           help="hard ceiling on the run's spend, across every invocation of it (what its ledger says "
                "earlier ones paid counts): each call reserves its worst case (input bound + the output cap "
                "sent, thinking room included) before it is sent; items left over fail with reason 'budget' "
                "(exit 3), and the same command at the same cap sends nothing"),
    option("--no-prefix-warmup", section=_C, is_flag=True,
           help="do not hold calls sharing a long prompt prefix until the first of them answered"),
    option("--batch", section=_B, is_flag=True,
           help="send judge calls as batches: batch prices (usually half), answers within the "
                "provider's 24h window; crash-safe (re-run the same command to re-attach)"),
    option("--batch-window", section=_B, type=float, default=2.0, metavar="SECONDS",
           help="send a batch after this many seconds without new calls (default 2)"),
    option("--batch-poll", section=_B, type=float, default=5.0, metavar="SECONDS",
           help="first interval between batch status polls; backs off to 2 minutes (default 5)"),
    option("--batch-max-requests", section=_B, type=int, default=50_000, metavar="N",
           help="requests per batch (default and provider maximum 50,000)"),
    option("--redis", section=_T, metavar="URL",
           help="share the endpoint's quota, a cache tier and calls in flight with every process using "
                "this Redis, e.g. redis://127.0.0.1:6379/0 (default: $DRSCORE_REDIS; needs drscore[team])"),
    option("--redis-ttl", section=_T, type=float, default=30.0, metavar="DAYS",
           help="answers shared through --redis expire this many days after they were written, so a "
                "long-lived team Redis does not fill up (default 30; the local cache keeps its own)"),
)


def judge_config_from_args(args: Any) -> JudgeConfig:
    """The judge configuration of the options of :data:`judge_options` (an object with
    them as attributes, or a mapping)."""
    a: Mapping[str, Any] = args if isinstance(args, Mapping) else vars(args)
    return JudgeConfig(
        url=a["judge_url"], model=a["judge_model"], transport=a["transport"], api_key_env=a["api_key_env"],
        api_key_header=a["api_key_header"],
        json_mode=not a["no_json_schema"], timeout_s=a["timeout"], rpm=a["rpm"], tpm=a["tpm"], otpm=a.get("otpm") or 0.0,
        concurrency=a["concurrency"], burst_s=a["burst"], tpm_charge=a.get("tpm_charge") or "auto", tokenizer=a.get("tokenizer"),
        max_rate_limit_wait_s=a["max_rate_limit_wait"],
        cache_dir=a["cache"], no_cache=a["no_cache"],
        prices=a["prices"], price_as=a["price_as"], max_cost=a["max_cost"], max_retries=a["max_retries"],
        prompts_dir=a.get("prompts"),
        params=parse_judge_params(list(a.get("judge_param") or ()) or None),
        batch=a["batch"], batch_window_s=a["batch_window"], batch_poll_s=a["batch_poll"],
        batch_max_requests=a["batch_max_requests"], prefix_warmup=not a["no_prefix_warmup"],
        redis=a["redis"], redis_ttl_days=a["redis_ttl"], reasoning_effort=a.get("reasoning_effort"),
        max_output_tokens=a.get("max_output_tokens"), retry_cut_off=bool(a.get("retry_cut_off")),
        fit_output_cap=not a.get("fixed_output_cap"))


@contextlib.asynccontextmanager
async def open_judge_session(args: Any, purpose: str = "session") -> AsyncIterator[JudgeSession]:
    """A judge session configured by the options of :data:`judge_options` (and
    ``--verdicts FILE`` when the command has it)."""
    config = judge_config_from_args(args)
    on_interrupt(interrupt_note_for(config))
    async with judge_session(config, verdicts=getattr(args, "verdicts", None),
                             purpose=purpose) as session:
        yield session
