"""Public async API: configure a run, stream its rows, read its summary."""
from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec

import drscore.engine.methods as method_registry
from drscore import prompts
from drscore.ranges import JUDGE_RANGES, RUN_RANGES, Range, check, check_all
from drscore.engine.runtime.calls.cache import AnswerCache, JudgeCache
from drscore.engine.runtime.calls.follow_ups import AnswerList
from drscore.engine.runtime.evidence import PageSource, PlaceholderPages
from drscore.engine.runtime.extras import require
from drscore.engine.runtime.task_index import TaskIndex
from drscore.engine.runtime.io import (
    InputFile, fingerprint, in_shard, iter_reports, open_input, shard_of, tasks_from_reports,
)
from drscore.engine.runtime.calls.judging import Backend
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls import quota_charge
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.method import Method
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.models import InputError, Report, ScoreRow, Task, VerdictRecord
from drscore.engine.runtime.paths import default_cache_dir
from drscore.engine.methods.language import task_language
from drscore.engine.runtime.calls.ledger import LEDGER_FILE, RunLedger, check_budget
from drscore.engine.runtime.calls.pace_log import PACING_FILE, PaceLog
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable, known_cost, unknown_price_message
from drscore.judge import wire
from drscore.judge.local_tokenizer import LocalTokenizer, ProxyTokenizer, load_counter
from drscore.engine.runtime.calls.redact import endpoint_host, redact_url as redact_judge_url, register_url_secrets
from drscore.engine.runtime.rundir import RunWriter, open_run_dir
from drscore.engine.runtime.runner import Runner
from drscore.engine.runtime.calls.thinking import ThinkingPolicy
from drscore.engine.runtime.seen import SeenKeys
from drscore.engine.stats.bootstrap import mean_ci
from drscore.protocols import protocol

T = TypeVar("T")
BATCH_ITEMS_IN_FLIGHT = 10_000


class JudgeConfig(msgspec.Struct, kw_only=True):
    """Which judge, how fast, and what may be spent. No ``url`` means the offline judge."""

    url: str | None = None
    model: str | None = None
    transport: str = "http"  # http | sdk
    api_key_env: str = "OPENAI_API_KEY"  # the key itself is read from the environment only
    api_key_header: str = "Authorization"  # "api-key" for Azure OpenAI keys
    json_mode: bool = True  # send the verdict schema as response_format
    timeout_s: float = 120.0  # per attempt of each judge call
    max_rate_limit_wait_s: float = 300.0  # a 429 resetting later than this stops the run (exit 3)
    rpm: float = 0  # 0 = no limit
    tpm: float = 0
    # Output tokens a minute, a quota apart (Anthropic's OTPM): each call's cap is held against
    # it until its answer gives back what it did not use (engine.runtime.calls.output_quota).
    # 0: none told (an endpoint's headers may still state one).
    otpm: float = 0
    concurrency: int = 16
    burst_s: float = 1.0
    # What the endpoint's token quota charges a call (engine.runtime.calls.quota_charge): auto
    # (reserved for OpenAI's, Azure's and Cerebras's hosts, input for Gemini's and Anthropic's,
    # else counted), counted, reserved, input.
    tpm_charge: str = "auto"
    # The model's tokenizer, to count each prompt here (judge.local_tokenizer): tiktoken:ENCODING
    # or hf:PATH (a tokenizer.json).
    # None: the server's count where it has a route, else an estimate corrected by the usage,
    # learned on cl100k_base's counts where drscore[tokenizer] is installed (proxy_tokenizer).
    tokenizer: str | None = None
    proxy_tokenizer: bool = True  # False: such estimates learn on characters
    cache_dir: str | None = None
    no_cache: bool = False
    prices: str | None = None
    price_as: str | None = None  # price a dry run / offline run as this model
    max_cost: float | None = None  # hard ceiling in USD: every call reserves its worst case first
    max_retries: int = 5
    prompts_dir: str | None = None  # templates here (<name>.md) replace the built-in ones
    params: dict[str, Any] = {}  # --judge-param KEY=VALUE: extra request-body fields, part of the cache key
    batch: bool = False  # send calls through the Files + Batches API (half price, hours of latency)
    batch_window_s: float = 2.0  # a batch goes out after this many quiet seconds
    batch_poll_s: float = 5.0  # first poll interval (backs off to 2 minutes)
    batch_max_requests: int = 50_000  # per batch (the provider's limit)
    prefix_warmup: bool = True  # send the first call of a shared prompt prefix before its siblings
    # Team scale: processes on this Redis share the endpoint's quota, a cache tier and their
    # calls in flight (needs the 'team' extra). None: this process is alone (the default).
    redis: str | None = None
    # Thinking judges (see docs/judges.md): how hard the model thinks (None: the provider's
    # default), the output cap outright (None: the template's answer cap + a reasoning
    # allowance per model family), an explicit thinking budget in tokens (a --protocol
    # preset's), and leaving temperature to the provider's default.
    reasoning_effort: str | None = None  # low | medium | high
    max_output_tokens: int | None = None
    retry_cut_off: bool = False  # with max_output_tokens: retry a cut-off answer once with a larger cap
    # Against a reserving endpoint (tpm_charge), send each template's calls a cap fitted to its
    # answers (engine.runtime.calls.output_cap); False: the template's own cap.
    fit_output_cap: bool = True
    thinking_budget: int | None = None
    provider_temperature: bool = False
    redis_ttl_days: float = 30.0  # answers shared through Redis expire this long after they were written

    def validate(self) -> None:
        """Every numeric setting in its range: a ValueError naming the flag otherwise."""
        check_all(self, JUDGE_RANGES)
        quota_charge.resolve(self.tpm_charge, self.url)
        if self.tokenizer:
            load_counter(self.tokenizer)  # a TokenizerError (a ValueError) naming the option


class RunConfig(msgspec.Struct, kw_only=True):
    methods: list[str]
    reports: list[str]
    tasks: str | None = None
    format: str = "auto"
    agent: str | None = None
    out: str | None = None
    judge: JudgeConfig = msgspec.field(default_factory=JudgeConfig)
    seed: int = 0
    dry_run: bool = False
    method_options: dict[str, Any] = {}
    allow_private_fetch: bool = False
    offline_pages: bool = False
    fetch_concurrency: int = 32
    max_in_flight: int = 0  # 0 = auto (4 x judge concurrency, at least 32; 10,000 with --batch)
    overwrite: bool = False  # replace a run directory that holds a different run
    limit: int = 0  # score only the first N reports of each reports file (0 = all)
    shard: str | None = None  # "K/N": score only the K-th of N deterministic parts of the reports
    # A published judge set-up (drscore.protocols: drb, drb-fact, reporteval, arena, rigorous):
    # its judge model, thinking budget, temperature and method options become defaults.
    protocol: str | None = None
    # --samples K: ask every judge call K times (distinct requests, each cached) and keep
    # the mean and spread per row; 1 = once, as always (engine.runtime.samples).
    samples: int = 1
    # Methods from outside the package, registered before the names in ``methods`` are
    # looked up: TOML method files and Python files defining Method subclasses
    # (docs/custom-methods.md). Installed plugins need neither: they are discovered.
    method_files: list[str] = []
    method_modules: list[str] = []

    def __post_init__(self) -> None:
        # msgspec does not check types at construction: a list of Report objects (or one
        # path as a bare string) would otherwise fail later as a bare TypeError
        if isinstance(self.reports, (str, os.PathLike)):
            raise TypeError("RunConfig.reports takes a list of JSONL file paths, e.g. reports=['reports.jsonl']")
        wrong = [r for r in self.reports if not isinstance(r, (str, os.PathLike))]
        if wrong:
            raise TypeError(f"RunConfig.reports takes JSONL file paths, not {type(wrong[0]).__name__} objects: "
                            "write the reports to a JSONL file first, one {\"task_id\", \"agent\", \"report\"} "
                            "object per line (see README, Inputs), and pass its path")
        self.reports = [os.fspath(r) for r in self.reports]

    def validate(self) -> None:
        """Every numeric setting (the judge's and the methods' too) in its range: a
        ValueError naming the flag."""
        load_user_methods(self.method_files, self.method_modules)
        check_all(self, RUN_RANGES)
        self.judge.validate()
        for name in self.methods:
            if name not in method_registry.available():
                continue  # an unknown method is reported by name where it is looked up
            for o in method_registry.get(name).options:
                dest = o.flag.replace("-", "_")
                if o.type in ("int", "float") and self.method_options.get(dest) is not None:
                    check(self.method_options[dest], Range(dest, f"--{o.flag}", o.low, o.high,
                                                           integer=o.type == "int"))


def with_protocol(config: RunConfig) -> RunConfig:
    """``config`` with its protocol's settings filled in wherever nothing was set
    explicitly (the judge model, the thinking settings, method options); unchanged
    without a protocol. ValueError for an unknown protocol name."""
    if not config.protocol:
        return config
    preset = protocol(config.protocol)
    jc = config.judge
    judge = msgspec.structs.replace(
        jc, model=jc.model or preset.judge_model,
        # an effort or a cap given by the user is the thinking setting; else the paper's budget
        thinking_budget=jc.thinking_budget if jc.thinking_budget is not None or jc.reasoning_effort is not None
        else preset.thinking_budget,
        provider_temperature=jc.provider_temperature or preset.provider_temperature)
    options = {**preset.method_options, **config.method_options}
    return msgspec.structs.replace(config, judge=judge, method_options=options)


def task_bootstrap_interval(values: Sequence[float]) -> list[float] | None:
    """The 95% interval every drscore leaderboard shows: percentile bootstrap over tasks,
    default resamples, seed 0 (``drscore report``'s defaults), so the numbers agree."""
    _, interval = mean_ci(values, seed=0)
    return interval.as_list() if interval else None


def add_decisions(summary: dict[str, Any], rows: Sequence[ScoreRow] | Callable[[], Iterable[ScoreRow]], *,
                  samples: int = 1) -> None:
    """Add to a run summary what decides between its agents: each entry's
    ``unranked_reason`` (engine.stats.rankable), ``decisions`` (the paired comparisons of
    engine.stats.paired, seed 0, 1,000 resamples) and, with judge samples, ``judge_noise``
    per method and agent (engine.stats.noise). ``drscore run`` and ``drscore merge`` use it.

    ``rows`` is a sequence, or a function returning a fresh iterator over them (a run's
    aggregator rebuilds its light rows one at a time): they are read twice, never kept."""
    from drscore.engine.stats.noise import judge_noise
    from drscore.engine.stats.paired import decide
    from drscore.engine.stats.rankable import count_row, reason_from_counts

    def again() -> Iterable[ScoreRow]:
        return rows() if callable(rows) else rows

    counts: dict[tuple[str, str], list[int]] = {}  # [scored, partial, coverage 0], as agent_reason
    spread: dict[tuple[str, str], dict[str, list[float]]] = {}  # judge samples, rows that have them
    any_samples = False
    for r in again():
        key = (r.method, r.agent)
        count_row(counts.setdefault(key, [0, 0, 0]), r)
        by_task = spread.setdefault(key, {})
        if r.sample_scores:
            any_samples = True
            by_task[r.task_id] = [v for v in r.sample_scores if v is not None]
    for entry in summary.get("per_agent_method", []):
        entry["unranked_reason"] = reason_from_counts(*counts.get((entry["method"], entry["agent"]), [0, 0, 0]))
    summary["decisions"] = {m: msgspec.to_builtins(d) for m, d in decide(again(), seed=0).items()}
    if samples > 1 or any_samples:  # how noisy the judge was
        noise: dict[str, dict[str, Any]] = {}
        for (method, agent), by_task in sorted(spread.items()):
            figures = judge_noise(by_task)
            if figures is not None:
                noise.setdefault(method, {})[agent] = msgspec.to_builtins(figures)
        summary["judge_noise"] = noise


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on uvloop when available (a faster event loop), else on
    asyncio's default loop. For scripts that drive the API without their own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def version() -> str:
    """The installed drscore version (single source: pyproject.toml)."""
    return importlib.metadata.version("drscore")


def methods() -> dict[str, type[Method]]:
    """Every available scoring method by name (built-in, installed plugins, and those
    :func:`load_user_methods` registered)."""
    return method_registry.available()


def load_user_methods(files: Sequence[str | os.PathLike[str]] = (),
                      modules: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
    """Register the methods of TOML method files and Python method modules; their names.
    A file's problem is a ValueError naming the file, line and field; two of them
    defining one name is a ValueError naming both."""
    method_registry.available()  # installed plugins first (and their templates), so a clash is named
    names: list[str] = []
    origins: dict[str, str] = {}
    loaded = [(os.fspath(f), [method_registry.load_method_file(os.fspath(f))]) for f in files]
    loaded += [(os.fspath(p), method_registry.load_method_module(os.fspath(p))) for p in modules]
    for path, found in loaded:
        for name in found:
            if name in origins and origins[name] != path:
                raise ValueError(f"{path}: method name {name!r} is defined by {origins[name]} too; one name, "
                                 "one method")
            origins[name] = path
            names.append(name)
    return names


def method_origin(name: str) -> str:
    """Where a method comes from: ``built-in``, ``plugin DIST VERSION``, ``file PATH``, ``module PATH``."""
    return method_registry.origin(name)


def plugin_problems() -> list[str]:
    """Installed plugins that failed to load, each with its distribution and the exception."""
    return method_registry.plugin_problems()


def thinking_policy(jc: JudgeConfig, model: str) -> ThinkingPolicy:
    """The output-cap policy of a judge configuration (raises ValueError on a bad value)."""
    return ThinkingPolicy(model, effort=jc.reasoning_effort, max_output=jc.max_output_tokens,
                          thinking_budget=jc.thinking_budget, retry_cut_off=jc.retry_cut_off)


def make_backend(jc: JudgeConfig) -> Backend:
    if not jc.url:
        if jc.batch:
            raise ValueError("--batch needs --judge-url (the offline judge has no Batch API)")
        from drscore.judge.offline.backend import OfflineBackend

        return OfflineBackend()
    if not jc.model:
        raise ValueError("--judge-model is required with --judge-url")
    register_url_secrets(jc.url)  # a key in the URL (?key=..., user:pass@) is a key like any other
    key = os.environ.get(jc.api_key_env) or None
    _check_url_credentials(jc, key)
    from drscore.judge.wire import family_profile

    thinking_policy(jc, jc.model)  # a bad --reasoning-effort fails here, before anything opens
    profile = family_profile(jc.model, jc.params, effort=jc.reasoning_effort, thinking_budget=jc.thinking_budget,
                             provider_temperature=jc.provider_temperature)
    if jc.batch:
        if jc.transport != "http":
            raise ValueError("--batch works with --transport http only")
        from drscore.judge.batch import BatchBackend

        return BatchBackend(jc.url, jc.model, journal=Path(jc.cache_dir or default_cache_dir()) / "batches.sqlite",
                            api_key=key, api_key_header=jc.api_key_header, window_s=jc.batch_window_s,
                            poll_initial_s=jc.batch_poll_s, max_requests=jc.batch_max_requests,
                            timeout_s=max(jc.timeout_s, 300.0), params=jc.params, profile=profile)
    if jc.transport == "sdk":
        from drscore.judge.sdk import SdkBackend

        if jc.api_key_header.lower() != "authorization":
            raise ValueError("--api-key-header works with --transport http only")
        return SdkBackend(jc.url, jc.model, api_key=key, timeout_s=jc.timeout_s, params=jc.params,
                          profile=profile)
    if jc.transport != "http":
        raise ValueError(f"unknown transport {jc.transport!r}; use http or sdk")
    from drscore.judge.http import HttpBackend

    return HttpBackend(jc.url, jc.model, api_key=key, timeout_s=jc.timeout_s,
                       connections=max(64, jc.concurrency * 2), api_key_header=jc.api_key_header,
                       params=jc.params, profile=profile, unset_key_env=jc.api_key_env)


def _check_url_credentials(jc: JudgeConfig, key: str | None) -> None:
    """A judge URL with ``user:password@`` is sent as HTTP basic auth (``--transport http``),
    unless the API key also goes in the Authorization header: one line says so at start
    (before: every item failed as "internal error"). The password is never shown."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(jc.url or "")
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        return  # an unreadable URL is the HTTP client's to report
    if not has_credentials:
        return
    shown = redact_judge_url(jc.url or "")
    if jc.transport == "sdk":
        raise ValueError(f"--judge-url {shown} carries a user and password, which --transport sdk cannot send; "
                         "use --transport http (it sends them as HTTP basic auth)")
    if key and jc.api_key_header.lower() == "authorization":
        raise ValueError(f"--judge-url {shown} carries a user and password (sent as HTTP basic auth) and "
                         f"${jc.api_key_env} is set: both would go in the Authorization header. Drop the "
                         f"user:password from the URL, or unset ${jc.api_key_env} (--api-key-env names the variable)")


async def open_pool(jc: JudgeConfig, *, dry_run: bool = False) -> tuple[JudgePool, AnswerCache | None]:
    """The judge pool and its cache (None when not cached). Whatever fails here (a
    damaged cache, a bad price table or prompts directory) leaves nothing open: an open
    cache would keep the process alive."""
    jc.validate()
    backend = make_backend(jc)
    cache: AnswerCache | None = None
    team = None
    try:
        if jc.redis and getattr(backend, "cacheable", True):
            from drscore.engine.runtime.calls.team import open_team

            team = await open_team(jc.redis, base_url=jc.url or "", model=jc.model or "",
                                   api_key=os.environ.get(jc.api_key_env) or None,
                                   answer_ttl_s=jc.redis_ttl_days * 86_400)
        if not jc.no_cache and getattr(backend, "cacheable", True):
            cache = await JudgeCache.open(Path(jc.cache_dir or default_cache_dir()) / "judge.sqlite")
            if team is not None:  # Redis behind the local cache, with the same claim API
                cache = team.wrap_cache(cache, claims=not dry_run)
        dry_backend = None
        if dry_run:
            from drscore.judge.offline.backend import OfflineBackend

            dry_backend = OfflineBackend()
        prices = PriceTable.load(jc.prices)
        price_model = jc.price_as or backend.model
        if jc.max_cost is not None and not dry_run and prices.lookup(price_model) is None:
            raise ValueError(f"--max-cost needs the price of {price_model!r}, which is not in the price table; "
                             "pass --prices FILE or --price-as MODEL")
        templates = prompts.Library(jc.prompts_dir) if jc.prompts_dir else None
        limiter = RateLimiter(jc.rpm, jc.tpm, jc.concurrency, burst_s=jc.burst_s)
        if team is not None:
            limiter.use_shared(team.quota)
        pool = JudgePool(
            backend, cache=cache, templates=templates, prices=prices, json_mode=jc.json_mode,
            limiter=limiter,
            max_retries=jc.max_retries, max_cost_usd=jc.max_cost, dry_run_with=dry_backend, price_model=jc.price_as,
            timeout_s=jc.timeout_s, max_rate_limit_wait_s=jc.max_rate_limit_wait_s,
            prefix_warmup=jc.prefix_warmup, thinking=thinking_policy(jc, backend.model),
            tpm_charge=quota_charge.resolve(jc.tpm_charge, jc.url),
            prompt_counter=LocalTokenizer(jc.tokenizer) if jc.tokenizer else None,
            # without it, a proxy's counts to learn the model's on, where the extra is installed
            proxy=None if jc.tokenizer or not jc.proxy_tokenizer else ProxyTokenizer.available(),
            fit_output_cap=jc.fit_output_cap, otpm=jc.otpm,
        )
    except BaseException:
        try:
            await backend.close()
        finally:
            if cache is not None:
                await cache.close()
            if team is not None:
                await team.close()
        raise
    pool.team = team  # closed with close_team(pool)
    if wire.ignores_response_format(jc.url):  # Anthropic's compatible endpoint, by its documents
        pool.schema_in_prompt()
    if team is not None:
        pool.share_output_quota(team.output_quota)
    try:
        await pool.load_token_counting()
    except BaseException:
        await backend.close()
        if cache is not None:
            await cache.close()
        if team is not None:
            await team.close()
        raise
    return pool, cache


async def close_team(pool: JudgePool) -> None:
    """Close the Redis link :func:`open_pool` opened for ``--redis`` (if any), after the cache."""
    team = getattr(pool, "team", None)
    if team is not None:
        await team.close()


def answer_lists(methods: list[Method]) -> dict[str, AnswerList]:
    """The answers whose lists decide how many calls follow, of every method in a run."""
    return {template: spec for m in methods for template, spec in m.answer_lists.items()}


def method_instances(names: list[str], options: dict[str, Any]) -> list[Method]:
    """The named methods configured with a run's method options (``Run`` and ``drscore merge``)."""
    instances = []
    for name in names:
        cls = method_registry.get(name)
        instances.append(cls({o.flag.replace("-", "_"): options.get(o.flag.replace("-", "_")) for o in cls.options}))
    return instances


class JudgeSession:
    """A judge outside report scoring (task ranking, leakage checks): the same ``ask`` as
    a method's context, with the same limits, cache and accounting. With ``verdicts``,
    every call is appended to that JSONL file as a VerdictRecord (like a run's
    ``verdicts.jsonl``), ``label`` saying what it was for."""

    def __init__(self, pool: JudgePool, verdicts: str | Path | None = None, purpose: str = "session") -> None:
        self.pool = pool
        self.meter = Meter()
        self.purpose = purpose
        self._out = open(verdicts, "ab") if verdicts else None

    async def ask(self, template: str, verdict: type[T], variables: dict[str, Any], *, sample: int = 0,
                  label: str = "") -> T:
        try:
            judged = await self.pool.ask(template, verdict, variables, sample=sample)
        except JudgeFailed as e:
            if e.paid is not None:  # what the failed call's billed attempts cost still counts
                self.meter.add_paid(e.paid)
            self._record(VerdictRecord(task_id="", agent="", method=self.purpose, template=template, key="",
                                       cached=False, status="failed", error=str(e), label=label))
            raise
        self.meter.add(judged)
        self._record(VerdictRecord(
            task_id="", agent="", method=self.purpose, template=template, key=judged.key, cached=judged.cached,
            status="ok", verdict=judged.value, input_tokens=judged.input_tokens,
            output_tokens=judged.output_tokens, cost_usd=known_cost(judged.cost_usd, self.pool.priced),
            latency_s=round(judged.latency_s, 4),
            label=label, cached_input_tokens=judged.cached_input_tokens,
            cost_usd_uncached=known_cost(judged.cost_uncached, self.pool.priced), batched=judged.batched,
            reasoning_tokens=judged.reasoning_tokens))
        return judged.value

    def _record(self, rec: VerdictRecord) -> None:
        if self._out is not None:
            self._out.write(msgspec.json.encode(rec) + b"\n")

    def close(self) -> None:
        if self._out is not None:
            self._out.close()

    def totals(self) -> dict[str, Any]:
        s = self.pool.stats
        return {"judge": self.pool.judge_label, "calls": s.calls, "cache_hits": s.cache_hits,
                "retries": s.retries, "rate_limited_429": s.rate_limited, "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens, "reasoning_tokens": s.reasoning_tokens,
                "cost_usd": known_cost(s.cost_usd, self.pool.priced, 6), "cached_input_tokens": s.cached_input_tokens,
                "cost_usd_uncached": known_cost(s.cost_usd_uncached, self.pool.priced, 6)}


@contextlib.asynccontextmanager
async def judge_session(config: JudgeConfig | None = None, *, verdicts: str | Path | None = None,
                        purpose: str = "session") -> AsyncIterator[JudgeSession]:
    """A :class:`JudgeSession` configured like a run's judge (limits, cache, prices)."""
    pool, cache = await open_pool(config or JudgeConfig())
    session = None
    try:
        session = JudgeSession(pool, verdicts, purpose)
        yield session
    finally:
        try:
            if session is not None:
                session.close()
            pool.keep_token_counting()
            await pool.backend.close()
        finally:
            if cache is not None:
                await cache.close()  # always: an open cache keeps the process alive
            await close_team(pool)


class Run:
    """One scoring run. ``async with Run(cfg) as run: async for row in run.rows(): ...``"""

    def __init__(self, config: RunConfig) -> None:
        self.config = with_protocol(config)
        self.input_errors: list[InputError] = []
        self.summary: dict[str, Any] = {}
        self._stack = contextlib.AsyncExitStack()
        self._runner: Runner | None = None
        self.pages: Any = None
        self.tasks: Mapping[str, Task] = {}
        self._cache: AnswerCache | None = None
        self._writer: RunWriter | None = None
        self._ledger_state = "interrupted"  # how the run ledger records this invocation's end
        self._started_at = time.time()
        # Said before scoring starts (the CLI prints them): e.g. a judge without a price.
        self.warnings: list[str] = []
        self.inputs: list[InputFile] = []

    def _unpaired_prompt_warnings(self, pool: JudgePool) -> list[str]:
        """A --prompts override of a template whose Chinese variant was not overridden:
        Chinese tasks would silently get the built-in variant, so say so before the run."""
        if pool.templates is None:
            return []
        variants = pool.templates.unpaired_variants("_zh")
        mode = str(self.config.method_options.get("prompt_language") or "auto")
        if not variants or mode == "en":
            return []
        chinese = sum(task_language(t, mode) == "zh" for t in self.tasks.values())
        if not chinese:
            return []
        names = ", ".join(variants)
        return [f"--prompts overrides {', '.join(v[:-3] for v in variants)} but not {names}: "
                f"Chinese tasks ({chinese} among the tasks) are judged with the built-in {names} (put your own "
                f"{names} in the directory as .md, or pass --prompt-language en)"]

    async def __aenter__(self) -> Run:
        try:
            await self._open()
        except BaseException:
            await self._stack.aclose()  # whatever was opened (cache, pages, lock) is closed again
            raise
        return self

    async def _open(self) -> None:
        cfg = self.config
        if not cfg.methods:
            raise ValueError("no methods given")
        if not cfg.reports:
            raise ValueError("no reports file given")
        cfg.validate()  # registers the run's method files and modules first
        self.warnings += [f"{p}; the other methods run" for p in plugin_problems()]
        instances = method_instances(cfg.methods, cfg.method_options)
        for path in cfg.reports:  # fail now, in one line, not halfway through the run
            open_input(path, "reports").close()
        if cfg.tasks:
            index = TaskIndex(cfg.tasks, self.input_errors)  # none held in memory: read when needed
            self._stack.callback(index.close)
            self.tasks = index
        else:
            from_reports: dict[str, Task] = {}
            for path in cfg.reports:
                for tid, task in tasks_from_reports(path, fmt=cfg.format).items():
                    from_reports.setdefault(tid, task)
            self.tasks = from_reports
            if not self.tasks:
                raise ValueError("no --tasks file given and the reports carry no prompt/topic to build tasks from")
        shard_of(cfg.shard)  # a bad --shard fails before anything is opened
        # by content, for `drscore merge` (a file of the same name on another machine may differ)
        files = [(p, "reports") for p in cfg.reports] + ([(cfg.tasks, "tasks")] if cfg.tasks else [])
        self.inputs = [await asyncio.to_thread(fingerprint, path, role) for path, role in files]
        pool, cache = await open_pool(cfg.judge, dry_run=cfg.dry_run)
        if not pool.priced:
            self.warnings.append(unknown_price_message(pool.price_model))
        self.warnings += self._unpaired_prompt_warnings(pool)
        if cfg.judge.redis and not cfg.judge.url:
            self.warnings.append("--redis is not used with the offline judge (its answers are not cached and it "
                                 "has no quota to share); give --judge-url for a team run")
        self._stack.push_async_callback(close_team, pool)  # after the cache (callbacks run last first)
        self._stack.push_async_callback(pool.backend.close)
        if cache is not None:
            self._stack.push_async_callback(cache.close)
            self._stack.callback(pool.keep_token_counting)  # runs before the cache closes
        self._cache = cache
        if cfg.dry_run:  # follow-up calls planned as this judge answered before (ACE's checklist items)
            await pool.load_answer_lists(answer_lists(instances))
        self.pages = await self._open_pages(instances)
        if cfg.offline_pages and not cfg.dry_run and any(m.needs_pages for m in instances):
            await self._offline_pages_note()
        executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drscore-cpu")
        self._stack.callback(executor.shutdown, wait=False)
        # The run directory last: a run that cannot start (bad flags, damaged cache) leaves
        # no directory behind, and one held by another process is still refused at once.
        self._writer = None
        if cfg.out and not cfg.dry_run:
            # A real judge's paid calls go into the run's ledger; a re-run that --max-cost
            # leaves nothing to spend does not start (RunBudgetSpent: nothing was touched).
            paid = getattr(pool.backend, "cacheable", True) and pool.backend.name != "offline"
            budget = (lambda root: check_budget(root / LEDGER_FILE, cfg.judge.max_cost)) if paid else None
            lock = open_run_dir(cfg.out, self.public_config(), overwrite=cfg.overwrite, check=budget)
            self._stack.callback(lock.release)
            if paid:
                ledger = RunLedger(Path(cfg.out) / LEDGER_FILE, max_cost=cfg.judge.max_cost, priced=pool.priced)
                self._stack.callback(lambda: ledger.close(self._ledger_state))
                pool.use_ledger(ledger)
                pacing = PaceLog(Path(cfg.out) / PACING_FILE)  # every 429 and pace change, for a diagnosis
                self._stack.callback(pacing.close)
                pool.limiter.log_pacing(pacing)
            self._writer = RunWriter(cfg.out, lock)
        self._runner = Runner(
            tasks=self.tasks, methods=instances, pool=pool, pages=self.pages, seed=cfg.seed, writer=self._writer,
            executor=executor, max_in_flight=cfg.max_in_flight or (
                # Batch mode: items wait hours, not seconds, so many must be open at once for
                # their calls to share a batch.
                BATCH_ITEMS_IN_FLIGHT if cfg.judge.batch else max(32, 4 * cfg.judge.concurrency)),
            samples=cfg.samples)

    def _storage_failure(self) -> BaseException | None:
        """A cache or page store that failed mid-run: the run stops (the files are not
        trustworthy, and answers could no longer be kept)."""
        if self._cache is not None and self._cache.failure is not None:
            return self._cache.failure
        return getattr(self.pages, "store_failure", None)

    async def _open_pages(self, instances: list[Method]) -> PageSource | None:
        if not any(m.needs_pages for m in instances):
            return None
        if self.config.dry_run:  # stored pages as they are, a stand-in of their mean length for the rest
            from drscore.fetch.planning import planning_pages

            pages, store = await planning_pages(Path(self.config.judge.cache_dir or default_cache_dir()))
            if store is not None:
                self._stack.push_async_callback(store.close)
            return pages
        from drscore.fetch.pool import FetchPool

        if not self.config.offline_pages:
            names = ", ".join(m.name for m in instances if m.needs_pages)
            require("pages", f"fetching the pages cited in reports ({names})")
        pool = FetchPool(Path(self.config.judge.cache_dir or default_cache_dir()),
                         offline=self.config.offline_pages, allow_private=self.config.allow_private_fetch,
                         concurrency=self.config.fetch_concurrency)
        return await self._stack.enter_async_context(pool)

    def _page_store(self) -> Path:
        from drscore.fetch.store import store_path

        return store_path(Path(self.config.judge.cache_dir or default_cache_dir()))

    def _cited_urls(self) -> set[str]:
        """The distinct (normalised) URLs the reports cite, as the parser reads them."""
        from drscore.engine.text.citations import cited_urls
        from drscore.fetch.urls import normalized_set

        cfg = self.config
        urls: set[str] = set()
        reports = itertools.chain.from_iterable(
            itertools.islice(iter_reports(p, fmt=cfg.format, agent=cfg.agent, tasks=self.tasks, errors=[]),
                             cfg.limit or None) for p in cfg.reports)
        shard = shard_of(cfg.shard)
        for report in reports:
            if shard is None or in_shard(report, *shard):
                urls |= normalized_set(cited_urls(report.report))
        return urls

    async def _offline_pages_note(self) -> None:
        """--offline-pages reads only the page cache: say up front how many cited pages it holds."""
        from drscore.fetch.store import count_stored

        urls = await asyncio.to_thread(self._cited_urls)
        held = await asyncio.to_thread(count_stored, self._page_store(), urls)
        if held < len(urls):
            self.warnings.append(
                f"--offline-pages: {held} of {len(urls)} cited pages are in the page cache ({self._page_store()}); "
                f"the other {len(urls) - held} cannot be read offline and count as unreachable (offline_missing). "
                "Import them (drscore pages import) or run without --offline-pages to fetch them")

    def public_config(self) -> dict[str, Any]:
        """The run's configuration as written to config.json (never a secret)."""
        cfg = msgspec.to_builtins(self.config)
        if cfg["judge"].get("redis"):
            from drscore.engine.runtime.calls.team.link import redact_url

            cfg["judge"]["redis"] = redact_url(cfg["judge"]["redis"])
        if cfg["judge"].get("url"):
            cfg["judge"]["url"] = redact_judge_url(cfg["judge"]["url"])
        cfg["judge"]["api_key_present"] = bool(os.environ.get(self.config.judge.api_key_env))
        cfg["drscore_version"] = version()
        return cfg

    def _reports(self) -> Iterator[Report]:
        cfg = self.config
        seen = SeenKeys()  # one (task, agent) is scored once across all files
        reports = itertools.chain.from_iterable(
            itertools.islice(iter_reports(p, fmt=cfg.format, agent=cfg.agent, tasks=self.tasks,
                                          errors=self.input_errors, seen=seen), cfg.limit or None)
            for p in cfg.reports)
        shard = shard_of(cfg.shard)
        if shard is None:
            return reports
        return (r for r in reports if in_shard(r, *shard))  # every shard reports every bad line

    @property
    def runner(self) -> Runner:
        """The runner scoring this run's items (live progress: ``runner.snapshot``)."""
        if self._runner is None:
            raise RuntimeError("the run is not open: use 'async with Run(config) as run'")
        return self._runner

    async def rows(self) -> AsyncIterator[ScoreRow]:
        """Score everything; yields each row as soon as it is done."""
        async for row in self.runner.run(self._reports()):
            failure = self._storage_failure()
            if failure is not None:
                raise failure
            yield row
        failure = self._storage_failure()
        if failure is not None:
            raise failure
        self.summary = self.runner.summary(self.input_errors, dry_run=self.config.dry_run,
                                           interval=task_bootstrap_interval)
        if self.config.shard:
            self.summary["shard"] = self.config.shard
        # the bootstrap of every pair takes a moment on big runs: off the event loop
        await asyncio.get_running_loop().run_in_executor(None, self._add_decisions)
        self.summary["inputs"] = msgspec.to_builtins(self.inputs)
        team = getattr(self.runner.pool, "team", None)
        if team is not None:
            self.summary["team"] = team.stats()
        if self._cache is not None:
            c = self._cache
            self.summary["cache"] = {"path": str(c.path), "damaged_entries": c.damaged,
                                     "answers_from_other_processes": c.waited}
        if self.pages is not None and hasattr(self.pages, "stats"):
            self.summary["pages"] = self.pages.stats()
        elif isinstance(self.pages, PlaceholderPages):
            # What the real run would do with the pages the methods asked for: read those in
            # the page cache, fetch the rest (or, --offline-pages, fetch nothing).
            from drscore.fetch.store import count_stored
            from drscore.fetch.urls import normalized_set

            urls = normalized_set(self.pages.urls)
            held = await asyncio.to_thread(count_stored, self._page_store(), urls)
            missing = len(urls) - held
            self.summary["pages"] = {"distinct_urls": len(urls), "in_page_cache": held,
                                     "would_fetch": 0 if self.config.offline_pages else missing,
                                     "offline_missing": missing if self.config.offline_pages else 0}
        self._ledger_state = "stopped" if self.summary.get("stopped") else "finished"
        if self._writer is not None:
            self._writer.finish(self.summary)
            self._writer = None

    def _add_decisions(self) -> None:
        """The run's overview (date, version, judge, endpoint host), and what
        :func:`add_decisions` adds, with the same seed and resamples as every interval."""
        add_decisions(self.summary, self.runner.aggregate.iter_light_rows, samples=self.config.samples)
        jc = self.config.judge
        t = self.summary.get("totals", {})
        self.summary["overview"] = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started_at)),
            "drscore_version": version(), "judge_model": jc.model or self.summary.get("judge"),
            "endpoint_host": endpoint_host(jc.url) or "offline", "wall_time_s": t.get("wall_time_s"),
            "cost_usd": t.get("cost_usd"), "cost_usd_uncached": t.get("cost_usd_uncached"),
            "samples": self.config.samples}

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._writer is not None:
                self._writer.abort(_stop_reason(exc_type, exc))
                self._writer = None
        finally:
            await self._stack.aclose()


def _stop_reason(exc_type: Any, exc: Any) -> str:
    """Why a run stopped before writing its summary (recorded in state.json)."""
    if exc_type is None:
        return "the caller stopped reading rows before the end"
    if issubclass(exc_type, (KeyboardInterrupt, asyncio.CancelledError)):
        return "interrupted (Ctrl-C or cancelled)"
    return f"error: {exc_type.__name__}"  # not the message: it may quote a server's reply

