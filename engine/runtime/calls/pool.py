"""The judge pool: every judge call of a run goes through here.

Per call: render the prompt, compute the content-addressed key, answer from the cache,
or join an identical call already in flight, or wait for quota and call the backend;
decode into the verdict Struct (re-asking a bounded number of times when the answer does
not decode), commit the raw answer to the cache, and account tokens, cost and latency.
Failures after bounded retries raise :class:`JudgeFailed` with a reason; they never
crash the run.

Around each send (in this order): the preflight gate (:mod:`drscore.engine.runtime.calls.health`:
the run's first call goes alone and classifies the endpoint), the quota wait
(:mod:`drscore.engine.runtime.calls.limits`), the budget reservation of the call's worst case
(:mod:`drscore.engine.runtime.calls.budget`, made after the quota wait so the spend it sees is
current), the run ledger's reservation line (:mod:`drscore.engine.runtime.calls.ledger`; its
paid line follows the answer, before the cache commit), a per-call timeout, and after the
answer the circuit breaker and redaction
(:mod:`drscore.engine.runtime.calls.redact`) of everything the endpoint said. A budget that cannot
cover the next call, a rate-limit reset beyond ``max_rate_limit_wait_s``, an endpoint
fault at preflight or a tripped breaker *stop* the pool (:attr:`JudgePool.stopped`):
every later call fails at once with the stop's reason, cache hits are still served.

Costs use the cached-input price for tokens the provider served from its prefix cache
and batch prices for calls a batching backend (``backend.batched``) answered. Batched
calls skip the RPM/TPM limiter (batch work has the provider's own queue), the preflight
gate and the per-call timeout (an answer may take hours), but still reserve their worst
case at batch prices before they join a batch. Calls sharing a long prompt prefix are
ordered by :class:`drscore.engine.runtime.calls.prefix.WarmupGate`: the first goes alone, its siblings
follow once it answered. Each result carries its time at the judge and its time waiting
(quota, warm-up, backoff) as spans, so a row can split its latency honestly. A call
shared in flight (an identical request another item of this process sent, or a claim
another process sharing the cache pays for) has its time at the judge counted once, by
the owner: the sharer's wait is a ``shared_spans`` interval, never time at the judge, so
the rows' time at the judge adds up to no more than wall time x calls in flight.

An endpoint that ignores ``response_format`` (its answer to a schema request is prose
with no JSON at all; Anthropic's compatible endpoint documents this) is detected at the
preflight answer: from then on the schema goes into the prompt, and cache keys keep the
configured mode so they do not move.

Faults of one request (``judging.REQUEST_FAULTS``: a prompt over the context window, a
content filter, a flagged prompt) fail that request at once, without retry and without
touching the breaker; a prompt clearly over the model's known window (the table in
:mod:`drscore.engine.runtime.calls.windows`, or the window an endpoint's 400 stated) is not sent.
Unless they are systematic: when the first calls of a prompt kind all fail with the same
request fault, the run stops with one line naming it
(:class:`drscore.engine.runtime.calls.health.SystematicFaults`).

Thinking models get room to think: the cap sent is the template's answer cap plus the
reasoning allowance of :class:`drscore.engine.runtime.calls.thinking.ThinkingPolicy` (the cache key
keeps the template's cap, so keys of other models do not move). An answer cut off at its
cap (``finish_reason`` ``length``) is the failure kind ``truncated``: it is retried once with
a larger cap within the model's ceiling, never at the same cap (with an explicit
``--max-output-tokens`` only when asked), later calls start at that cap, and an unknown
model that shows it thinks is given room for the rest of the run.

One module (~550 lines) on purpose: the gate, quota, budget, breaker, stop and retry steps
above all read and write the same per-run state (statistics, the in-flight map, the stop
reason, the token estimator); the policies themselves live in their own modules
(``limits``, ``budget``, ``health``, ``redact``, ``prefix``) and this one only sequences them.
"""
from __future__ import annotations

import asyncio
import functools
import math
import random
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Generic, NoReturn, TypeVar

import msgspec

from drscore import prompts
from drscore.engine.runtime.calls.budget import Budget, input_reservation
from drscore.engine.runtime.calls.cache import AnswerCache, request_key
from drscore.engine.runtime.calls.health import PREFLIGHT_OVERLAP_S, CircuitBreaker, EndpointGate, Lane, SystematicFaults
from drscore.engine.runtime.calls.ledger import RunLedger, Usage, key_id
from drscore.engine.runtime.calls.judging import (
    ENDPOINT_FAULTS, OTHER_FAULTS, REQUEST_FAULTS, REQUEST_LEFT, VALIDATION_ERROR, Backend, ChatRequest,
    JudgeError, JudgeFailed, Message, RateLimited, RateLimitInfo, StopReason, StreamingBackend, TransientError,
)
from drscore.engine.runtime.calls.limits import LimiterStopped, Permit, RateLimiter, SharedQuota
from drscore.engine.runtime.calls.prefix import CacheEstimator, WarmupGate, group_key
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.redact import redact
from drscore.engine.runtime.calls.samples import key_component
from drscore.engine.runtime.calls import output_quota
from drscore.engine.runtime.calls.slots import ServerFacts, ServerSlots
from drscore.engine.runtime.calls.output_cap import FittedCaps
from drscore.engine.runtime.calls.output_quota import OutputQuota
from drscore.engine.runtime.calls.thinking import ThinkingPolicy, is_cut_off, split_thinking
from drscore.engine.runtime.calls.follow_ups import MAX_RECORDED, AnswerList, ListLength, list_lengths, resized
from drscore.engine.runtime.calls.planned_input import COUNT_SLACK, PlannedInput, counted_basis, with_errors
from drscore.engine.runtime.calls.prompt_counts import Counting, PromptCounts
from drscore.engine.runtime.calls.prompt_cut import PromptCut, SameReads, cut_detail, cut_short
from drscore.engine.runtime.calls.quota_charge import ReservedCharge
from drscore.engine.runtime.calls.tokens import (
    PROXY_PRIOR_ERROR, PromptFeatures, RecentPrompts, TokenEstimator, estimate_tokens, message_features, prompt_id,
)
from drscore.engine.runtime.calls.verdicts import VerdictDecodeError, decode_verdict, schema_of
from drscore.engine.runtime.calls.windows import (
    OVER_MARGIN, UNLEARNED_OVER_MARGIN, clearly_over, stated_window, window_of,
)

if TYPE_CHECKING:
    from drscore.engine.runtime.calls.team import Team

T = TypeVar("T")

# Failures after which the request may have reached the model and been billed, without
# usage to say how much: the budget keeps their worst case.
_MAYBE_BILLED = frozenset({"timeout", "connection", "bad_response"})
# With an announced token quota whose bucket holds fewer than this many calls of a call's
# size, the call is streamed: the server's count of it comes with the headers at admission,
# not with the answer a latency later, so the calls after it do not wait on its estimate's
# error (in such a bucket they wait it as time, every one of them).
STREAM_BELOW_CALLS = 4


Span = tuple[float, float]  # (start, end) on time.monotonic()


class Judged(Generic[T]):
    """A decoded verdict and what it cost. ``source`` is network | cache | shared | dry.

    ``cost_uncached`` is what the call would have cost alone: no prefix-cache discount,
    and for an answer reused from the cache or from an identical call, the list price of
    that call (its leader's usage, or estimated tokens for a cache hit). ``judge_spans``
    and ``wait_spans`` are the intervals spent at the judge and waiting for quota;
    ``shared_spans`` the interval a shared call waited for its owner's answer.

    ``earlier`` is what earlier invocations of the run paid for this key and no row
    carries yet (the run ledger hands it out once); ``reused`` marks an answer from a cache
    the run did not pay for (another run's, a team's)."""

    __slots__ = ("value", "text", "key", "source", "input_tokens", "output_tokens", "cost_usd", "latency_s",
                 "cached_input_tokens", "cost_uncached", "batched", "judge_spans", "wait_spans",
                 "reasoning_tokens", "shared_spans", "earlier", "reused", "attempts", "thought")

    def __init__(self, value: T, text: str, key: str, source: str, input_tokens: int = 0,
                 output_tokens: int = 0, cost_usd: float = 0.0, latency_s: float = 0.0, *,
                 cached_input_tokens: int = 0, cost_uncached: float | None = None, batched: bool = False,
                 judge_spans: list[Span] | None = None, wait_spans: list[Span] | None = None,
                 reasoning_tokens: int = 0, shared_spans: list[Span] | None = None,
                 attempts: list[tuple[str, float, str]] | None = None, thought: str = "") -> None:
        self.value, self.text, self.key, self.source = value, text, key, source
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.cost_usd, self.latency_s = cost_usd, latency_s
        self.cached_input_tokens, self.batched = cached_input_tokens, batched
        self.cost_uncached = cost_usd if cost_uncached is None else cost_uncached
        self.judge_spans = judge_spans or []
        self.wait_spans = wait_spans or []
        self.reasoning_tokens = reasoning_tokens  # of output_tokens: the model's thinking
        self.shared_spans = shared_spans or []
        self.earlier: Usage | None = None
        self.reused = False
        self.attempts = attempts or []  # (outcome, seconds at the judge, detail) per request sent
        self.thought = thought  # the model's visible reasoning, redacted

    @property
    def cached(self) -> bool:
        return self.source in ("cache", "shared")


class PoolStats(msgspec.Struct):
    calls: int = 0  # successful network calls
    cache_hits: int = 0
    shared: int = 0  # joined an identical call in flight
    retries: int = 0
    rate_limited: int = 0
    reasks: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached_input_tokens: int = 0  # part of input_tokens read from the provider's prefix cache
    cost_usd_uncached: float = 0.0  # the same calls without the prefix-cache discount
    batched_calls: int = 0  # network calls answered through the Batch API
    warmup_held: int = 0  # calls that waited for the first call of their prefix group
    thinking_learned: bool = False  # a model not known to think turned out to, and was given room
    reasoning_tokens: int = 0  # part of output_tokens the model spent thinking
    truncated: int = 0  # answers cut off at their output cap (finish_reason length)
    truncation_retries: int = 0  # of those, retried once with a larger cap
    truncated_cost_usd: float = 0.0  # what the cut-off answers cost (billed, unused)
    fitted_cap_cuts: int = 0  # answers cut off at a cap fitted to their template's (output_cap): asked again
    fitted_cap_cut_cost_usd: float = 0.0  # what those cut-off answers cost (billed, unused)
    refused_over_window: int = 0  # requests not sent: clearly beyond the model's context window
    prompts_cut: int = 0  # answered, but the server read only part of the prompt (prompt_cut): failed
    cut_before_known: int = 0  # answers scored before their count showed as the one a server cuts to
    suspect_reads: int = 0  # answers read far short of their estimates, scored: not shown to be cut
    cuts_refuted: int = 0  # counts taken for a server's cut until an answer read more than them
    request_faults: int = 0  # requests failed by their own content (judging.REQUEST_FAULTS), not the endpoint
    stopped_calls: int = 0  # calls failed only because the pool had stopped
    structured_output_ignored: bool = False  # response_format was ignored: the schema went into the prompt
    reused: int = 0  # answers from a cache this run did not pay for (another run's, a team's)
    reused_cost_usd: float = 0.0  # their estimated list price: not spend
    unusable_hints: int = 0  # 429s whose delay hint could not be believed (inf, nan, negative...)
    unusable_hint: str = ""  # the last such hint, as the server sent it (shortened)
    # the quota a 429's body named, where no header said it (judge.quota_refusal): the pace from then on
    named_quota: str = ""
    # an AI gateway's quota headers came back (judge.gateway_quota): its family, and its refusals
    gateway: str = ""
    gateway_refusals: int = 0
    # the server states its input and output token quotas apart (Anthropic's): prompts alone were
    # charged to its token quota, and the calls' caps held against its output quota
    input_quota: bool = False
    timeouts_not_resent: int = 0  # timed out at a server that may still be working on them: not sent again
    # dry-run plan (calls that would be made)
    planned_calls: int = 0
    # planned calls each charged more than the whole minute of a known token quota (told or
    # kept): an endpoint that refuses such a call outright (OpenAI) fails them (over_quota)
    planned_over_quota: int = 0
    planned_input_tokens: int = 0
    planned_output_tokens: int = 0
    planned_cost_usd: float = 0.0
    planned_cached_input_tokens: int = 0  # an estimate (see engine.runtime.prefix)
    planned_reasoning_tokens: int = 0  # an estimate (see engine.runtime.thinking), part of planned_output_tokens


def proxy_fit_key(model: str, counted_by: str) -> str:
    """Under what a model's fit on a proxy tokenizer's counts is kept in the cache: the model
    and that tokenizer (a fit on another tokenizer's counts, or on characters, would misread them)."""
    return f"{model} on {counted_by}"


class JudgePool:
    def __init__(
        self,
        backend: Backend,
        *,
        cache: AnswerCache | None,
        limiter: RateLimiter,
        prices: PriceTable,
        json_mode: bool = True,
        max_retries: int = 5,
        max_rate_limit_retries: int = 20,
        max_reasks: int = 2,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        max_cost_usd: float | None = None,
        dry_run_with: Backend | None = None,
        price_model: str | None = None,
        timeout_s: float | None = None,
        max_rate_limit_wait_s: float = 300.0,
        breaker_threshold: int = 10,
        preflight: bool = True,
        templates: prompts.Library | None = None,
        prefix_warmup: bool = True,
        thinking: ThinkingPolicy | None = None,
        systematic_after: int = 10,
        tpm_charge: str = "counted",
        prompt_counter: Counting | None = None,
        proxy: PromptFeatures | None = None,
        fit_output_cap: bool = True,
        otpm: float = 0.0,
    ) -> None:
        """``timeout_s`` bounds each attempt (None: only the backend's own timeout);
        ``max_rate_limit_wait_s`` is the longest 429 reset the pool waits for before it
        stops; ``breaker_threshold`` consecutive same-kind failures stop it too;
        ``preflight`` sends the first call alone (see :mod:`drscore.engine.runtime.calls.health`);
        ``systematic_after`` request faults of one kind that are all a template's calls so far
        stop the run (:class:`drscore.engine.runtime.calls.health.SystematicFaults`);
        ``tpm_charge`` is what the endpoint's token quota charges a call, ``counted``,
        ``reserved`` or ``input`` (:mod:`drscore.engine.runtime.calls.quota_charge`);
        ``prompt_counter`` counts prompts in place of the server (``--tokenizer``:
        :mod:`drscore.judge.local_tokenizer`); ``proxy`` counts, where neither does, the
        features a token quota's estimates learn on (tokens of another tokenizer, not
        characters: :class:`~drscore.engine.runtime.calls.tokens.PromptFeatures`);
        ``fit_output_cap``: against a reserving endpoint, send each template's calls a cap
        fitted to its answers (:mod:`drscore.engine.runtime.calls.output_cap`). ``otpm``: an
        output-token quota a minute told (:mod:`drscore.engine.runtime.calls.output_quota`)."""
        self.backend = backend
        # Where templates come from (``--prompts DIR`` overrides); looked up per call so
        # the hash of the template actually used goes into the cache key.
        self.templates = templates
        self.cache = cache if getattr(backend, "cacheable", True) else None
        self.limiter = limiter
        self.prices = prices
        self.json_mode = json_mode  # may turn False at run time (an endpoint ignoring response_format)
        self._json_key = json_mode  # what cache keys say: the configured mode, so keys do not move
        self.max_retries = max_retries
        self.max_rate_limit_retries = max_rate_limit_retries
        self.max_reasks = max_reasks
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_cost_usd = max_cost_usd
        self.budget = Budget(max_cost_usd)
        self.timeout_s = timeout_s
        self.max_rate_limit_wait_s = max_rate_limit_wait_s
        self.breaker = CircuitBreaker(breaker_threshold)
        self.systematic = SystematicFaults(systematic_after)
        # A batching backend queues calls for the Batch API: no client-side quota, no
        # per-call timeout, batch prices, and no preflight (a first batch of one request
        # would cost a whole batch round trip); the provider orders the work (no warm-up).
        self.batched = bool(getattr(backend, "batched", False))
        # With a known quota the others go PREFLIGHT_OVERLAP_S after the preflight left (see health)
        overlap = PREFLIGHT_OVERLAP_S if limiter.told_rpm or limiter.told_tpm else None
        self.gate = EndpointGate(overlap) if preflight and getattr(backend, "cacheable", True) and not self.batched \
            else None
        self.warmup = WarmupGate() if prefix_warmup and not self.batched else None
        self._cache_estimate = CacheEstimator()
        self.stopped: StopReason | None = None
        self.team: Team | None = None  # --redis: set by drscore.api.open_pool, closed by close_team
        self.dry = dry_run_with  # when set: plan calls, answer with this backend, spend nothing
        self.price_model = price_model or backend.model
        # A model without a price is priced as unknown (None in records), never as free.
        self.priced = prices.known(self.price_model)
        # What was paid, call by call (in memory until a run directory gives it a file).
        self.ledger = RunLedger(None, priced=self.priced)
        # Output caps: room to think for thinking models, the template's cap for the rest.
        self.thinking = thinking if thinking is not None else ThinkingPolicy(backend.model)
        # The context window: the table's (by the model name, else the priced-as name), until
        # an endpoint's context-length error states its own, which wins from then on.
        known = window_of(backend.model) or (window_of(price_model) if price_model else None)
        self.window: int | None = known.context if known is not None else None
        self.window_source = "table" if known is not None else None
        # The prompt tokens a server that cuts long prompts read of one (prompt_cut): its window
        self.cut_to: int | None = None
        self.same_reads = SameReads()  # where no one cut reads short enough, the count repeating
        self._window_before_cut: tuple[int | None, str | None] = (self.window, self.window_source)
        # What the server said about itself before the preflight (its window, its parallel
        # slots): slots keep requests queued on our side (engine.runtime.calls.slots).
        self.server: ServerFacts | None = None
        self.follows_streams = True  # False once a streamed answer came without its usage
        self.slots: ServerSlots | None = None
        self._server_asked = False
        # Every prompt is counted, quota or not, where the counter is the model's vocabulary the
        # server gave (Ollama's): here, in milliseconds, and a prompt over the window it loaded
        # is then failed before it is sent, not cut by the server
        self.counts_every_prompt = False
        self.vocabulary_note: str | None = None  # why Ollama's vocabulary counts no prompt, where it does not
        self.stats = PoolStats()
        self.tokens = TokenEstimator()
        # A reserving endpoint charges the prompt's character guess and the cap sent, both known
        # before the send: nothing uncertain for the limiter's token reserve to cover.
        self.reserved = ReservedCharge() if tpm_charge == "reserved" else None
        # The output cap it reserves too, fitted to each template's answers; not where the user
        # set the cap (--max-output-tokens), nor for a thinking model (see _sent_cap)
        self.output_caps = FittedCaps() if self.reserved is not None and fit_output_cap \
            and self.thinking.max_output is None else None
        self._fits_caps = fit_output_cap and self.thinking.max_output is None  # an output quota may start it
        # Where a proxy tokenizer counts the prompts the server does not, the estimates a token
        # quota is paced on learn on its counts, and the next run's first calls start from what
        # this one learned (kept in the cache beside the character fit; the dry run still plans
        # on characters); not on a reserving endpoint (its own character guess is charged) nor
        # for the offline judge, which has no quota to pace
        self.proxy = proxy if self.reserved is None and getattr(backend, "cacheable", True) else None
        self.proxy_tokens = TokenEstimator(prior_error=PROXY_PRIOR_ERROR)  # learns where the proxy counted
        self.proxied = 0  # prompts estimated on the proxy's counts
        limiter.estimate_error = self._estimate_error if self.reserved is None else (lambda: 0.0)
        limiter.reserves_output = self.reserved is not None
        limiter.followed = self.reserved.followed if self.reserved is not None else None
        # A quota of input tokens (Gemini's) charges the prompt alone: the answer is not guessed
        self.charges_input = tpm_charge == "input"
        # Where the server states an output-token quota apart (Anthropic's), the caps of the calls
        # in flight are held against it (output_quota); from its first statement on
        self.output_quota: OutputQuota | None = None
        self._output_started_by: Permit | None = None  # the call whose answer started it
        self.output_shared: SharedQuota | None = None  # a team's bucket for it (--redis)
        if otpm > 0 and not self.batched:  # told: held from the first call (its answers may restate it)
            self._hold_output(OutputQuota(otpm))
        # The server's own prompt counts, where it gives them (vLLM's /tokenize), or the model's
        # tokenizer's here where the user named it (--tokenizer): see prompt_counts
        self.prompt_counts = PromptCounts(prompt_counter if prompt_counter is not None
                                          else backend if isinstance(backend, Counting) else None)
        self.local_counter = prompt_counter  # counts here, without the server: a dry run's prompts too
        self._identity = {"backend": backend.name, **backend.identity()}
        self._inflight: dict[str, asyncio.Future[Judged[Any]]] = {}
        self._planned: set[str] = set()
        # A dry run's planned list lengths by template, and the answers resized to them by
        # key (a shared answer is the same answer): see load_answer_lists
        self.list_lengths: dict[str, ListLength] = {}
        self.planned_inputs: dict[str, PlannedInput] = {}  # a dry run's, by template
        self._planned_prompts = RecentPrompts()  # distinct ones (samples repeat a prompt)
        self._resized: dict[str, str] = {}
        # Backends that are not cached (the offline judge) still answer a repeated request
        # once per run, so task-level steps are counted once, as with a real judge.
        self._memo: OrderedDict[int, str] | None = None if self.cache is not None or not \
            hasattr(backend, "cacheable") or backend.cacheable else OrderedDict()

    def _estimate_error(self) -> float:
        """The recent relative error of the prompt estimates the quota is paced on."""
        if self.proxied:
            return self.proxy_tokens.relative_error()
        return self.tokens.relative_error()

    def _fit_store(self) -> Any:
        local = getattr(self.cache, "local", self.cache)  # behind a --redis tier: the local file
        return local if hasattr(local, "token_fit") else None

    async def load_token_counting(self) -> None:
        """Estimate with what earlier runs recorded of this model's token counting (kept in
        the cache by :meth:`keep_token_counting`): the dry run's input estimate, and this
        run's first calls, before any answer of its own."""
        store = self._fit_store()
        fit = await store.token_fit(self.backend.model) if store is not None else None
        if fit is not None:
            self.tokens.seed(fit)
        proxied = await store.token_fit(proxy_fit_key(self.backend.model, self.proxy.counted_by)) \
            if store is not None and self.proxy is not None else None
        if proxied is not None:
            self.proxy_tokens.seed(proxied)
        if hasattr(store, "template_token_fits"):
            self.tokens.seed_templates(await store.template_token_fits(self.backend.model))
        if self.output_caps is not None and hasattr(store, "output_caps"):
            self.output_caps.seed(await store.output_caps(self.backend.model))
        # The quota this endpoint announced last time, or the pace its 429s proved: paced from
        # the first request, the preflight overlapped as with a told quota (headers replace it)
        quota = await store.quota(self._endpoint_key()) if hasattr(store, "quota") and self.dry is None else None
        if quota is not None and not self.batched and self.limiter.remember(quota) and self.gate is not None:
            self.gate.overlap_s = PREFLIGHT_OVERLAP_S

    @property
    def keeps_quota(self) -> bool:
        """What this run learns or is announced of the quota is kept for the next run (a cache
        to keep it in, not a dry run)."""
        return self.dry is None and hasattr(self._fit_store(), "save_quota")

    def _endpoint_key(self) -> str:
        """The endpoint a quota belongs to: its URL (credentials removed) and model."""
        return f"{self._identity.get('base_url') or self.backend.name} {self._identity.get('model') or self.backend.model}"

    def keep_token_counting(self) -> None:
        """Queue what this run learned of the model's token counting for the next (call
        before the cache closes)."""
        store = self._fit_store()
        if store is not None and self.dry is None and self.tokens.fit.calls:
            store.save_token_fit(self.backend.model, self.tokens.recorded())
            if hasattr(store, "save_template_token_fit"):
                for template, fit in self.tokens.recorded_templates().items():
                    store.save_template_token_fit(self.backend.model, template, fit)
        if store is not None and self.dry is None and self.output_caps is not None and hasattr(store, "save_output_cap"):
            for template, answers in self.output_caps.kept().items():
                store.save_output_cap(self.backend.model, template, answers)
        if store is not None and self.dry is None and self.proxy is not None and self.proxy_tokens.fit.calls:
            store.save_token_fit(proxy_fit_key(self.backend.model, self.proxy.counted_by), self.proxy_tokens.recorded())
        quota = self.limiter.known_quota()
        if self.keeps_quota and quota is not None:
            store.save_quota(self._endpoint_key(), quota)

    async def load_answer_lists(self, specs: dict[str, AnswerList]) -> None:
        """A dry run: plan the answers of these templates (their lists decide how many calls
        follow) with the lengths this judge model's answers had in earlier runs, as the
        cache holds them, or the published figure (:mod:`.follow_ups`)."""
        if self.dry is None:
            return
        store = self._fit_store()
        model = str(self._identity.get("model") or self.backend.model)
        for template, spec in specs.items():
            recorded = await store.answers(template, model, MAX_RECORDED) if hasattr(store, "answers") else []
            self.list_lengths[template] = ListLength(spec, list_lengths(recorded, spec.field), model)

    def input_estimate_error(self) -> tuple[float, str]:
        """The relative error of a planned input count per call (RMS), and its basis."""
        if self.local_counter is not None:
            s = self.stats
            return COUNT_SLACK * s.planned_calls / max(1, s.planned_input_tokens), \
                counted_basis(self.prompt_counts.counted_by)
        seeded = self.tokens.seeded
        if seeded is None:
            return self.tokens.PRIOR_RELATIVE_ERROR, "the character rule (no recorded usage of this model)"
        return seeded.rms(), f"learned from {seeded.calls:,} answered calls of {self.backend.model}"

    def planned_input(self) -> dict[str, PlannedInput]:
        """A dry run's planned input per template, each total with its error bar."""
        return with_errors(self.planned_inputs, self.tokens,
                           self.prompt_counts.counted_by if self.local_counter is not None else None)

    @property
    def budget_exhausted(self) -> bool:
        return self.budget.exhausted

    def use_ledger(self, ledger: RunLedger) -> None:
        """Record paid calls in the run's ledger, and let ``--max-cost`` count what earlier
        invocations of the run may have been billed."""
        self.ledger = ledger
        self.budget.spent_before = ledger.committed_before()

    @property
    def endpoint(self) -> str:
        """The judge's URL (or backend name) for messages."""
        return str(self._identity.get("base_url") or self.backend.name)

    def halt(self, stop: StopReason) -> None:
        """Stop scheduling calls: the first stop wins; waiters for quota, budget and the
        preflight gate are woken and fail with ``stop.reason``. Calls already sent finish."""
        if self.stopped is not None:
            return
        self.stopped = stop
        self.ledger.stop(stop.reason, self.budget.cap)
        self.limiter.stop()
        self.budget.close()
        if self.gate is not None:
            self.gate.open()

    def _stopped_error(self) -> JudgeFailed:
        assert self.stopped is not None
        self.stats.stopped_calls += 1
        return JudgeFailed(self.stopped.reason, self.stopped.message)

    def _prompt_tokens(self, req: ChatRequest) -> int:
        """The estimated prompt tokens of ``req`` (learned from the server's usage once it answered)."""
        return math.ceil(self.tokens.prompt(message_features(req.messages)))

    def _refuse_over_window(self, req: ChatRequest) -> None:
        """Fail a request clearly beyond the model's window before it is sent (and paid for)."""
        if self.window is None or self.counts_every_prompt:
            return  # counted, the count decides (_refuse_counted_over_window)
        if self.window_source == "ollama" and not self.tokens.observations:
            # Ollama's context, read once the model loaded, before any answer taught the estimates:
            # a character guess is no ground to refuse a prompt Ollama would read whole (such
            # refusals stopped whole runs); the first answer teaches them, and shows a cut by its usage
            return
        tokens = self._prompt_tokens(req)
        # Until the server's usage has taught the estimator its counting (the preflight
        # answer usually does), the fixed character rule can be far off (CJK text): a
        # wider margin then.
        margin = OVER_MARGIN if self.tokens.observations else UNLEARNED_OVER_MARGIN
        if clearly_over(tokens, self.window, margin):
            self._refuse(f"about {tokens} tokens")

    def _refuse(self, size: str) -> NoReturn:
        """Fail a prompt of ``size`` over the window, unsent, saying where the window came from."""
        self.stats.refused_over_window += 1
        self.stats.request_faults += 1
        self.stats.failures += 1
        said = {"endpoint": "as the endpoint stated",
                "ollama": "as Ollama loaded it, which would cut the prompt: raise OLLAMA_CONTEXT_LENGTH, or "
                          "num_ctx in a Modelfile",
                "cut": "the server cut an earlier prompt to it: raise its context (Ollama: "
                       "OLLAMA_CONTEXT_LENGTH)"}.get(self.window_source or "", "per the model table")
        raise JudgeFailed("context_length", f"prompt of {size} exceeds the {self.window}-token context window of "
                                            f"{self.backend.model} ({said}); not sent")

    def _refuse_counted_over_window(self, counted: int) -> None:
        """Fail a prompt the model's vocabulary counts over the window before it is sent (Ollama
        would cut it): the count is of the texts alone, and the chat format only adds to it."""
        if self.window is None or not self.counts_every_prompt:
            return
        tokens = counted + max(0, math.floor(self.prompt_counts.drift.mean))
        if tokens > self.window:
            self._refuse(f"{tokens} tokens ({self.prompt_counts.counted_by})")

    async def _learn_server(self) -> None:
        """Ask the endpoint about itself, once, before the preflight call (a backend
        without ``server_facts`` says nothing): a window it states is applied to every
        call from now on, and its parallel slots bound the calls sent at once."""
        if self._server_asked:
            return
        self._server_asked = True
        ask = getattr(self.backend, "server_facts", None)
        if ask is None:
            return
        facts = await ask()
        if not isinstance(facts, ServerFacts):
            return
        self.server = facts
        if facts.window:
            self.window, self.window_source = facts.window, "endpoint"
        if facts.slots:
            self.slots = ServerSlots(facts.slots, cancels=facts.cancels)
        if facts.server == "ollama":
            await self._learn_ollama()

    async def _learn_ollama(self) -> None:
        """Before Ollama is sent a prompt: the model loaded, so that the context it cuts prompts
        to is known (``_learn_loaded``), and, where no ``--tokenizer`` was named, the model's own
        vocabulary to count every prompt with from now on (Ollama counts nothing itself)."""
        load = getattr(self.backend, "load_model", None)
        if load is not None and await load():
            await self._learn_loaded()
        build = getattr(self.backend, "vocabulary_counter", None)
        if build is None or self.local_counter is not None or self.reserved is not None:
            return
        counter = await build()
        if counter is None:
            self.vocabulary_note = getattr(self.backend, "vocabulary_note", None)
            return
        self.prompt_counts = PromptCounts(counter)
        self.local_counter = counter
        self.counts_every_prompt = True

    async def _learn_loaded(self) -> None:
        """Ollama states the context it loaded the model with only once it is loaded: asked
        once it loaded the model before the first prompt (``_learn_ollama``), else after the
        first answer, it is the window from then on (a longer prompt would be cut)."""
        ask = getattr(self.backend, "loaded_window", None)
        if ask is None or self.server is None or self.server.server != "ollama" or self.window_source == "ollama":
            return  # not Ollama, or its context already read
        window = await ask()
        if isinstance(window, int) and window > 0:
            self.window, self.window_source = window, "ollama"

    def _learn_window(self, message: str) -> str:
        """Adopt the window a context-length error states; the detail for the item's error."""
        stated = stated_window(message)
        if stated is None:
            return message
        if self.window_source != "endpoint" or stated.window != self.window:
            self.window, self.window_source = stated.window, "endpoint"
        size = f"{stated.requested} tokens requested, " if stated.requested else ""
        return f"{size}window {stated.window} tokens: {message}"

    def _read_short(self, current: ChatRequest, req: ChatRequest, counted: int | None,
                    proxied: tuple[float, float] | None, features: tuple[float, float],
                    read: int) -> PromptCut | None:
        """Whether the server read only part of ``current``'s prompt: its usage (``read``)
        against the server's own count of the prompt, else the estimate and its error
        (``features``: the request's, measured once by the caller)."""
        # a read at the very window Ollama loaded the model with is one cut to it
        cut_to = self.cut_to if self.cut_to is not None or self.window_source != "ollama" else self.window
        if counted is not None and self.prompt_counts.counted_by == "server":  # the server's own count: exact
            return self._confirmed(cut_short(counted, read, error=None, counted=True, cut_to=cut_to),
                                   counted, read, counted)
        if counted is not None:
            # a tokenizer here (--tokenizer, or the vocabulary Ollama gave) counts the texts, not the
            # chat format: its count is an estimate until answers show how it differs (CountDrift)
            drift = self.prompt_counts.drift
            sent = counted + drift.mean
            error = drift.sd / max(1.0, sent) if drift.seen else None
            return self._confirmed(cut_short(sent, read, error=error, proxied=True, cut_to=cut_to),
                                   sent, read, counted)
        own = proxied is not None and current.messages is req.messages
        estimator = self.proxy_tokens if own else self.tokens
        if own and proxied is not None:
            measured = proxied
        else:
            measured = features if current.messages is req.messages else message_features(current.messages)
        sent = estimator.prompt(measured)
        # learned only where the answers so far (or earlier runs') held text of this prompt's
        # kinds: an estimate taught on English alone still guesses Chinese by the prior rule
        fit = estimator.recorded()
        error = estimator.relative_error() if fit.calls > 0 and fit.covers(measured) else None
        return self._confirmed(cut_short(sent, read, error=error, proxied=own, cut_to=cut_to),
                               sent, read, measured[0] + measured[1])

    def _confirmed(self, cut: PromptCut | None, sent: float, read: int, size: float) -> PromptCut | None:
        """A sure cut as it is; a suspect, or a read a little short, once its count repeats as
        only a server cutting to it makes it repeat (prompt_cut.SameReads; ``size``: a fixed
        measure of the prompt). A suspect alone is scored."""
        if cut is not None and cut.sure:
            self.same_reads.saw(read)
            return cut
        if self.same_reads.repeated(sent, read, size):
            self.same_reads.uncount(read)  # this one fails; the ones before it were scored (_learn_cut)
            return PromptCut(read=read, sent=round(sent))
        if self.cut_to is not None and self.window_source == "cut" and self.same_reads.read_past(self.cut_to):
            # a server cutting there reads no prompt longer: it was not a cut after all
            self.stats.cuts_refuted += 1
            self.cut_to = None
            self.window, self.window_source = self._window_before_cut
        return cut

    def _learn_cut(self, cut: PromptCut) -> None:
        """Take what a server that cuts long prompts read of one as its window: a prompt
        clearly longer is then failed before it is sent, not sent to be cut."""
        if cut.read != self.cut_to:
            # answers scored before this count showed, read to exactly it: probably cut too
            self.stats.cut_before_known += self.same_reads.forget(cut.read)
        self.cut_to = cut.read
        if self.window is None or self.window_source not in ("endpoint", "ollama") or cut.read < self.window:
            if self.window_source != "cut":
                self._window_before_cut = (self.window, self.window_source)
            self.window, self.window_source = cut.read, "cut"

    @property
    def judge_label(self) -> str:
        return "offline" if self.backend.name == "offline" else self.backend.model

    def _template(self, name: str) -> prompts.Template:
        return self.templates.load(name) if self.templates is not None else prompts.load(name)

    def build(self, template: str, verdict: type, variables: dict[str, Any], sample: int = 0,
              judge_sample: int = 0) -> tuple[ChatRequest, dict[str, Any]]:
        """The request and its cache-key components (public for ``cache explain`` and tests)."""
        tpl = self._template(template)
        messages = tuple(Message(role, content) for role, content in tpl.render(variables))
        schema = schema_of(verdict)
        req = ChatRequest(
            messages=messages, template=template, template_hash=tpl.hash, schema_name=verdict.__name__,
            schema=schema, temperature=tpl.temperature, max_tokens=self.thinking.cap(tpl.max_tokens), sample=sample,
            variables=variables, json_mode=self.json_mode, judge_sample=judge_sample,
        )
        # The key holds the template's answer cap, not the cap sent: room to think does not
        # change a complete answer, and the keys of non-thinking models stay what they were.
        components = {
            **self._identity,
            "messages": [[m.role, m.content] for m in messages],
            "temperature": tpl.temperature, "max_tokens": tpl.max_tokens,
            "schema_name": verdict.__name__, "schema": schema, "json_mode": self._json_key,
            "template": template, "template_hash": tpl.hash, "sample": sample,
            **key_component(judge_sample),  # nothing for sample 0: K = 1 keeps every key
        }
        return req, components

    async def ask(self, template: str, verdict: type[T], variables: dict[str, Any], *, sample: int = 0,
                  judge_sample: int = 0) -> Judged[T]:
        req, components = self.build(template, verdict, variables, sample, judge_sample)
        key = request_key(components)
        if self.cache is not None:
            raw = await self.cache.get(key)
            if raw is not None:
                text = raw.decode("utf-8")
                try:
                    value = decode_verdict(text, verdict)
                    self.stats.cache_hits += 1
                    return self._from_cache(Judged(value, text, key, "cache"), req)
                except VerdictDecodeError:
                    pass  # schema changed under the same key cannot happen; be safe and re-ask
        if self._memo is not None and key_id(key) in self._memo:
            self._memo.move_to_end(key_id(key))
            self.stats.shared += 1
            text = self._memo[key_id(key)]
            return Judged(decode_verdict(text, verdict), text, key, "shared", cost_uncached=self._list_cost(req, text))
        if self.dry is not None:
            return await self._plan(self.dry, req, verdict, key)
        if self.stopped is not None:
            raise self._stopped_error()
        fut = self._inflight.get(key)
        if fut is not None:
            t0 = time.monotonic()
            try:
                leader = await asyncio.shield(fut)
            except JudgeFailed as e:  # the leader's item counts what its failure cost, not ours
                raise JudgeFailed(e.reason, e.detail) from None
            self.stats.shared += 1
            # The owner's row counts the time at the judge; here it is waiting.
            return Judged(decode_verdict(leader.text, verdict), leader.text, key, "shared",
                          cost_uncached=leader.cost_uncached, shared_spans=[(t0, time.monotonic())])
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            judged = await self._claimed_elsewhere(key, verdict)
            if judged is not None:
                self._from_cache(judged, req)
            else:
                judged = await self._call(req, verdict, key, components)
                judged.earlier = earlier = self.ledger.answered(key)
                if earlier is not None:
                    judged.cost_uncached += earlier.cost_usd_uncached
            fut.set_result(judged)
            return judged
        except BaseException as e:
            if self.cache is not None:
                self.cache.release(key)  # let a process waiting for this answer pay for it
            if isinstance(e, JudgeFailed):
                # what its billed attempts cost goes to this item only, not to the followers
                e.paid = self.ledger.failed(key)
                fut.set_exception(JudgeFailed(e.reason, e.detail))
            else:
                fut.set_exception(JudgeFailed("error", redact(repr(e))))
            fut.exception()  # mark retrieved: followers may not exist
            raise
        finally:
            del self._inflight[key]

    def _from_cache(self, judged: Judged[T], req: ChatRequest) -> Judged[T]:
        """An answer the run did not pay for in this invocation: what an earlier invocation
        paid for it (carried by this row, once), or, when the run never paid for it, a
        reused answer at its estimated list price (not spend)."""
        paid_by_run, earlier = self.ledger.reused(judged.key)
        judged.earlier = earlier
        judged.cost_uncached = earlier.cost_usd_uncached if earlier is not None else self._list_cost(req, judged.text)
        if not paid_by_run:
            judged.reused = True
            self.stats.reused += 1
            self.stats.reused_cost_usd += judged.cost_uncached
        return judged

    async def _claimed_elsewhere(self, key: str, verdict: type[T]) -> Judged[T] | None:
        """Processes sharing the cache pay once per key (see JudgeCache.claim_or_wait):
        the answer another process paid for, or None when this process holds the claim."""
        if self.cache is None:
            return None
        t0 = time.monotonic()
        raw = await self.cache.claim_or_wait(key)
        if raw is None:
            return None
        text = raw.decode("utf-8")
        try:
            value = decode_verdict(text, verdict)
        except VerdictDecodeError:
            return None  # as for a cache hit that does not decode: ask again
        self.stats.shared += 1
        return Judged(value, text, key, "shared", shared_spans=[(t0, time.monotonic())])  # the other process's time

    async def _plan(self, dry: Backend, req: ChatRequest, verdict: type[T], key: str) -> Judged[T]:
        resp, _ = await dry.complete(req)
        lengths = self.list_lengths.get(req.template)
        if lengths is not None:  # as long a list as this judge writes, not the offline judge
            if key not in self._resized:
                self._resized[key] = resized(resp.text, lengths.spec.field, lengths.next())
            resp.text = self._resized[key]
        if key in self._planned:  # the real run would share or cache this call: plan it once
            self.stats.shared += 1
            return Judged(decode_verdict(resp.text, verdict), resp.text, key, "shared")
        self._planned.add(key)
        tpl = self._template(req.template)
        reasoning, _ = self.thinking.expected_reasoning()
        # the template's or the model's own counting where earlier runs recorded it
        # (load_token_counting), else the character rule
        features = message_features(req.messages)
        counted = None if self.local_counter is None else await self.local_counter.count_prompt(req)
        if counted is not None:  # the model's tokenizer, here (--tokenizer)
            tin, own = counted, False
        else:
            estimate, own = self.tokens.planned_prompt(features, req.template)
            tin = math.ceil(estimate)
        tout = tpl.expected_output_tokens + reasoning
        planned = self.planned_inputs.get(req.template)
        if planned is None:
            planned = self.planned_inputs[req.template] = PlannedInput()
        planned.add(tin, own, self._planned_prompts.first_time((req.template, prompt_id(req.messages))),
                    counted=counted is not None)
        cached = self._cache_estimate.cached_tokens(req.messages, tin) if not self.batched else 0
        cost = self.prices.cost(self.price_model, tin, tout, cached, batch=self.batched)
        s = self.stats
        lim = self.limiter
        if lim.tpm and (lim.told_tpm or lim.remembered):
            # what the endpoint's quota would charge this call (engine.runtime.calls.quota_charge)
            charge = tin if self.charges_input else \
                tin + (self._sent_cap(tpl, req, None, features)[0] if self.reserved is not None else tout)
            s.planned_over_quota += charge > lim.tpm
        s.planned_calls += 1
        s.planned_input_tokens += tin
        s.planned_output_tokens += tout
        s.planned_cost_usd += cost
        s.planned_cached_input_tokens += cached
        s.planned_reasoning_tokens += reasoning
        return Judged(decode_verdict(resp.text, verdict), resp.text, key, "dry", tin, tout, cost,
                      cached_input_tokens=cached, batched=self.batched, reasoning_tokens=reasoning,
                      cost_uncached=self.prices.cost(self.price_model, tin, tout, batch=self.batched))

    def _list_cost(self, req: ChatRequest, text: str) -> float:
        """Estimated price of a call we did not pay for (reused answer): learned prompt
        token estimate plus the answer's estimated length, at uncached rates."""
        tin = round(self.tokens.prompt(message_features(req.messages)))
        return self.prices.cost(self.price_model, tin, estimate_tokens(text), batch=self.batched)

    async def _send(self, request: ChatRequest, admitted: Callable[[RateLimitInfo | None], None] | None = None,
                    permit: Permit | None = None) -> tuple[Any, Any]:
        """One attempt, bounded by ``timeout_s``; every failure is a :class:`JudgeError`
        with a redacted message. With ``admitted`` (the preflight, a call large against the
        token bucket) a backend that can stream hands over the quota headers when the server
        accepts the call. A backend that tells when the request left times the permit's call
        from there (``REQUEST_LEFT``)."""
        limiter = self.limiter
        told = REQUEST_LEFT.set(None if permit is None else lambda: limiter.left(permit))
        try:
            # A batched call waits for its batch (minutes to hours): only the batching
            # backend's own HTTP timeouts apply.
            async with asyncio.timeout(None if self.batched else self.timeout_s):
                if admitted is not None and isinstance(self.backend, StreamingBackend):
                    return await self.backend.complete_streamed(request, admitted)
                return await self.backend.complete(request)
        except TimeoutError:
            raise TransientError(f"no answer within {self.timeout_s:g} s (--timeout)", kind="timeout") from None
        except JudgeError as e:
            e.args = (redact(str(e)),)
            raise
        finally:
            REQUEST_LEFT.reset(told)
            connect_s = getattr(self.backend, "connect_s", None)
            if connect_s is not None:
                self.limiter.measured_connect(connect_s)

    def _preflight_admitted(self, gate: EndpointGate, permit: Permit | None,
                            ) -> Callable[[RateLimitInfo | None], None] | None:
        """What the preflight does when the server admits it, before its answer (a streamed
        call's headers): the quota headers pace the run from now, and a quota they announce
        is known as if told, so the others go PREFLIGHT_OVERLAP_S after the preflight left
        (sooner once the buckets have refilled what it took) instead of one whole answer
        later. Not for a local server."""
        if self._local_server():
            return None

        sent_at = time.monotonic()

        def admitted(info: RateLimitInfo | None) -> None:
            if permit is not None:
                self._observe_split(info, permit, sent_at)
                self.limiter.observe(info, permit)
            if self.limiter.requests is not None or self.limiter.tokens is not None:
                gate.overlap(PREFLIGHT_OVERLAP_S)
                gate.shorten(self.limiter.until_full())  # the buckets as the headers left them
        return admitted

    def share_output_quota(self, store: SharedQuota) -> None:
        """Hold the caps against a team's bucket (``--redis``) of the output quota, told or
        stated, with every process sharing it."""
        self.output_shared = store
        if self.output_quota is not None:
            self.output_quota.shared = store

    def schema_in_prompt(self) -> None:
        """The endpoint is known to ignore ``response_format`` (its documents say so): the
        schema goes in the prompt from the first call, as after a preflight that showed it
        (cache keys keep the configured mode)."""
        if self.json_mode:
            self.json_mode = False
            self.stats.structured_output_ignored = True

    def _observe_split(self, info: RateLimitInfo | None, permit: Permit, sent_at: float) -> None:
        """Adopt what a server that states its input and output token quotas apart (Anthropic)
        said with the answer to ``permit`` (sent at ``sent_at``): its token quota charges the
        prompt alone, and its output quota holds the caps of the calls in flight. The call
        whose statement starts the output quota holds its cap from then (it was sent before)."""
        if info is None:
            return
        if info.tokens_are_input and self.reserved is None:
            # the prompt alone from now on: charged the answer too, the input quota idles by its share
            self.charges_input = self.stats.input_quota = True
        per_minute = info.limit_output_tokens
        if not per_minute:
            return
        if self.output_quota is None:
            self._hold_output(output_quota.started(per_minute, info.remaining_output_tokens, sent_at,
                                                   self.output_shared))
            self._output_started_by = permit
        else:
            self.output_quota.restate(per_minute)

    def _hold_output(self, quota: OutputQuota) -> None:
        """Hold the calls' caps against ``quota`` from now on, fitted to the answers where the
        caps may be (a cap held for nothing holds the others back)."""
        self.output_quota = quota
        if self.output_caps is None and self._fits_caps:
            self.output_caps = FittedCaps()

    def _settle_output(self, held: int, used: int | None, refusal: RateLimitInfo | None = None) -> None:
        """The call that held ``held`` of the output quota was answered using ``used`` output
        tokens, or (None) was not admitted; a refusal's count of the output quota corrects it."""
        quota = self.output_quota
        if quota is None:
            return
        if held:
            if used is None:
                quota.release(held)
            else:
                quota.settle(held, used)
        if refusal is not None and refusal.remaining_output_tokens is not None:
            quota.refused(refusal.remaining_output_tokens)

    def _local_server(self) -> bool:
        """The judge is a local llama.cpp or llama-cpp-python server (known from its model
        list): it announces no quota, so no call is streamed to it for its headers."""
        return self.server is not None and self.server.server is not None

    def _followed_at_admission(self, permit: Permit | None) -> Callable[[RateLimitInfo | None], None] | None:
        """For a call large against the token bucket the server announced (see
        STREAM_BELOW_CALLS): the limiter follows the server's count when the server admits
        it, the call being streamed. None for the others, for a shared (``--redis``) quota
        and for a local server."""
        lim = self.limiter
        if not self.follows_streams or permit is None or not lim.announced or lim.tokens is None \
                or lim.shared is not None:
            return None
        if self._local_server():
            return None
        if permit.estimate * STREAM_BELOW_CALLS < lim.tokens.capacity:
            return None

        def admitted(info: RateLimitInfo | None) -> None:
            lim.observe(info, permit)
        return admitted

    def _fault_stop(self, e: JudgeError, message: str, *, streak: int = 0) -> StopReason:
        what = ENDPOINT_FAULTS.get(e.kind) or OTHER_FAULTS.get(e.kind) or e.kind
        lead = f"judge at {self.endpoint}: {what}"
        if streak:
            lead += f"; stopped after {streak} consecutive calls failed this way"
        return StopReason(reason=e.kind, message=f"{lead} ({message})", fatal=True)

    def _rate_limit_stop(self, delay: float, daily: str | None = None) -> StopReason:
        """The stop of a quota that comes back beyond --max-rate-limit-wait; ``daily``: the
        daily quota a 429 named as spent (judging.RateLimitInfo.spent_daily)."""
        resets_at = time.time() + delay
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(resets_at))
        what = f"the daily quota ({daily}) is spent" if daily else "rate limited"
        return StopReason(
            reason="rate_limit", resets_at=resets_at,
            message=f"judge at {self.endpoint}: {what}; the quota resets in {_duration(delay)} (at {when}), "
                    f"beyond --max-rate-limit-wait {self.max_rate_limit_wait_s:g} s. Re-run then to resume "
                    "from the cache.")

    def _systematic_stop(self, e: JudgeFailed, template: str) -> StopReason:
        """One line for a run whose every call of ``template`` so far met the same request fault."""
        n = self.systematic.count(template)
        calls = f"the first {n} calls of the run" if self.systematic.nothing_worked else f"the first {n} {template} calls"
        model = self.backend.model
        if e.reason == "context_length" and self.window_source in ("cut", "ollama") and self.window:
            held = ("the server cuts a prompt to" if self.window_source == "cut" else
                    "of the context Ollama loaded the model with")
            what = (f"every prompt so far is longer than the {self.window:,} tokens {held} ({calls}): raise that "
                    "context (Ollama: OLLAMA_CONTEXT_LENGTH=32768 before `ollama serve`, or num_ctx in a "
                    "Modelfile), or use shorter inputs")
        elif e.reason == "context_length":
            window = f" of {self.window} tokens" if self.window else ""
            what = (f"every prompt so far exceeds the context window{window} of {model} ({calls}): check "
                    "--judge-model or the window (a model with a larger one, or shorter inputs)")
        elif e.reason == "content_filter":
            what = (f"every prompt so far met the provider's content filter ({calls}): check --judge-model and "
                    "the endpoint's filter settings")
        elif e.reason == "truncated":
            what = f"every answer so far was cut off at its output cap ({calls}; {e.detail})"
        elif e.reason == "over_quota":
            what = (f"every call so far is larger than the endpoint's whole token quota ({calls}; last: {e.detail}): "
                    "raise the quota, or use a judge whose quota fits these prompts")
        else:
            what = f"every request so far was rejected for its content ({calls}; last: {e.detail})"
        return StopReason(reason=e.reason, message=f"judge at {self.endpoint}: {what}", fatal=True)

    def _budget_stop(self, worst: float) -> StopReason:
        b = self.budget
        this = f" (${b.spent + b.unsettled:.4f} of it in this invocation)" if b.spent_before else ""
        s = self.stats
        cut = ""
        if s.truncated:  # a budget eaten by cut-off answers is a cap problem, not only a money one
            cut = (f" Of this invocation's spend, ${s.truncated_cost_usd:.4f} went to {s.truncated} answers cut off "
                   f"at their output cap ({s.truncated} of {s.calls} paid answers); see 'truncated' in the failure "
                   "reasons.")
        return StopReason(
            reason="budget",
            message=f"--max-cost ${b.cap:g} reached: the run has spent ${b.committed:.4f}{this}, and the next call "
                    f"could cost up to ${worst:.4f}.{cut} The cap covers every invocation of the run: the same "
                    "command at this cap spends nothing more; re-run with a higher --max-cost to continue from "
                    "the cache.")

    async def _call(self, req: ChatRequest, verdict: type[T], key: str, components: dict[str, Any]) -> Judged[T]:
        t0 = time.monotonic()
        warmup = self.warmup
        group = group_key(req.messages) if warmup is not None else None
        leader = False
        wait_spans: list[Span] = []
        tries: list[tuple[str, float, str]] = []
        try:
            if warmup is not None and group is not None:
                leader = await warmup.enter(group)
                if not leader and time.monotonic() > t0:
                    self.stats.warmup_held += 1
                    wait_spans.append((t0, time.monotonic()))
            kind = _prompt_kind(req.template)
            # One at a time while every call of this kind failed alike; not for batched calls
            # (one at a time there would mean one batch, hours long, per call).
            lane = None if self.batched else self.systematic.lane(kind)
            try:
                judged = await self._attempts(req, verdict, key, components, t0, wait_spans, tries, lane)
            except JudgeFailed as e:
                e.attempts = tries  # every request this call sent, for the viewer
                if lane is not None:
                    lane.ended()
                if self.stopped is None and self.systematic.failure(kind, e.reason, key):
                    self.halt(self._systematic_stop(e, kind))
                raise
            else:
                self.systematic.success(kind)
            finally:
                if lane is not None:
                    lane.ended()
                    lane.release()
            return judged
        finally:
            if leader and warmup is not None:
                warmup.leave(group)

    async def _count_prompt(self, current: ChatRequest, features: tuple[float, float] | None) -> int | None:
        """The server's count of ``current``'s prompt where a local token bucket paces the
        calls on their counts at a known quota (told, announced or remembered; not a reserving
        one, a shared ``--redis`` one or a pace learned from 429s) and the server counts
        prompts, or where the model's vocabulary counts here (``counts_every_prompt``); it
        teaches the estimator too (``features``: the prompt's, when it is the request's own).
        None otherwise."""
        if not (self.limiter.paces_known_tokens or self.counts_every_prompt) or self.reserved is not None \
                or not self.prompt_counts.available:
            return None
        count = await self.prompt_counts.count(current)
        if count is not None:
            self.limiter.prompts_counted = True
        if count is not None and features is not None:
            self.tokens.counted(features, current.template, self.prompt_counts.drift.charge(count),
                                prompt_id(current.messages))
        return count

    def _counted_sd(self, template: str, expected_output: int) -> float:
        """The standard deviation (tokens) of a call whose prompt the server counted: the
        count's usual difference from the usage, and the answer's length where the quota
        counts it too."""
        drift = self.prompt_counts.drift.sd
        if self.charges_input:
            return drift
        return math.hypot(drift, self.tokens.completion_error(template, expected_output))

    def _output_room(self, tpl: prompts.Template, current: ChatRequest, ceiling: int | None) -> int:
        """The output cap the next attempt of ``current`` is sent with: the template's (room to
        think included), within what the window leaves (``ceiling``), never below a cap
        already raised for a cut-off answer."""
        room = self.thinking.cap(tpl.max_tokens)
        if ceiling is not None:  # what the window leaves after this prompt (a cut-off showed it)
            room = min(room, ceiling)
        return max(room, current.max_tokens)

    def _sent_cap(self, tpl: prompts.Template, current: ChatRequest, ceiling: int | None,
                  fit: tuple[float, float] | None) -> tuple[int, int]:
        """The cap to send and the :meth:`_output_room` it stands for: below it where the
        template's answers fitted one (``fit``: the prompt's features, None for no fitting),
        where a token quota paces the calls: without one the cap holds back nothing, and a
        cut would be a cost for no gain. Not for a thinking model, whose reasoning varies far
        more than an answer, nor in batch mode, whose quota is not the one that reserves the
        cap and where a cut costs a batch."""
        room = self._output_room(tpl, current, ceiling)
        if fit is None or self.output_caps is None or self.batched or self.thinking.thinking or self.thinking.learned \
                or not (self.limiter.tpm or self.limiter.tokens is not None):
            return room, room
        return self.output_caps.cap(current.template, tpl.hash, room, self.tokens.prompt(fit)), room

    async def _attempts(self, req: ChatRequest, verdict: type[T], key: str, components: dict[str, Any],
                        t0: float, wait_spans: list[Span], tries: list[tuple[str, float, str]],
                        lane: Lane | None = None) -> Judged[T]:
        tpl = self._template(req.template)
        features = message_features(req.messages)
        # A reserving endpoint's: what this attempt's prompt was charged, and its features (a
        # re-ask sends more messages than the request; otherwise they are the request's)
        prompt_charge, prompt_features = 0, features
        counted: int | None = None  # the server's own count of this attempt's prompt (prompt_counts)
        proxied: tuple[float, float] | None = None  # the request's features by the proxy tokenizer
        # the cap charged to a reserving quota once the limiter granted it (the cap to send, and
        # the template's it stands for: _sent_cap), so that the cap sent is the one charged
        charged_cap: tuple[int, int] | None = None

        def charge_prompt() -> int:
            nonlocal prompt_charge, prompt_features
            assert self.reserved is not None
            prompt_features = features if current.messages is req.messages else message_features(current.messages)
            prompt_charge = self.reserved.prompt(prompt_features)
            return prompt_charge

        def estimate() -> int:  # evaluated when the call reaches the head of the quota queue
            nonlocal charged_cap
            if self.reserved is not None:  # what the server will charge: see quota_charge
                charged_cap = self._sent_cap(tpl, current, ceiling, features if fit else None)
                return charge_prompt() + charged_cap[0]
            if counted is not None:
                prompt = self.prompt_counts.drift.charge(counted)
                return prompt if self.charges_input else \
                    prompt + math.ceil(self.tokens.completion(req.template, tpl.expected_output_tokens))
            # on the proxy tokenizer's counts where it counted this prompt, else on characters
            estimator, own = (self.tokens, features) if proxied is None else (self.proxy_tokens, proxied)
            if self.charges_input:
                return max(1, math.ceil(estimator.prompt(own)))
            return estimator.estimate(own, req.template, tpl.expected_output_tokens)

        attempts = rate_limited = reasks = 0
        current = req
        tin = tout = tcached = treasoning = 0
        raised = False  # a cut-off answer gets one retry with a larger cap
        fit = self.output_caps is not None  # a cap fitted to the template's answers may be sent (output_cap)
        fitted_from: int | None = None  # this attempt's cap was fitted below this one
        ceiling: int | None = None  # the output the window leaves after this prompt, once an answer showed it
        cost = cost_uncached = 0.0
        batched = False
        judge_spans: list[Span] = []
        waits_seen = 0  # wait_spans already counted in an earlier attempt's ledger line
        refused: tuple[ChatRequest, str] | None = None  # the last 5xx validation error and its body
        limiter = None if self.batched else self.limiter  # batch work is not paced by the quota
        gate = self.gate
        while True:
            if self.stopped is not None:
                raise self._stopped_error()
            self._refuse_over_window(current)
            # the gate, when this call goes alone as the preflight (it opens the gate when answered)
            probe = None
            if gate is not None and not gate.is_open:
                tw = time.monotonic()
                probe = gate if await gate.enter() else None
                wait_spans.append((tw, time.monotonic()))  # waiting for the preflight's answer
            permit = None
            slot = False
            held = False  # the budget reserved this attempt's worst case, until the send takes it over
            out_held = 0  # the output cap this attempt holds against an output quota
            charged_cap = None
            call: int | None = None
            try:
                if lane is not None:  # every call of its kind so far failed alike: one at a time
                    tl = time.monotonic()
                    if await lane.wait():
                        wait_spans.append((tl, time.monotonic()))
                if probe is not None:
                    # asking the server about itself (Ollama: loading the model) holds this call
                    # as the gate holds the others: a wait before sending, on the item's row too
                    tl = time.monotonic()
                    await self._learn_server()
                    wait_spans.append((tl, time.monotonic()))
                    self._refuse_over_window(current)  # the window the server stated
                if self.stopped is not None:
                    raise self._stopped_error()
                if limiter is not None and self.output_quota is not None:
                    # its cap, held before the prompt's quota is granted, so the send follows the grant
                    tw = time.monotonic()
                    cap = self._sent_cap(tpl, current, ceiling, features if fit else None)[0]
                    await self.output_quota.reserve(cap)
                    out_held = cap  # held only once taken: a cancelled wait gives nothing back
                    wait_spans.append((tw, time.monotonic()))
                if limiter is not None:
                    tw = time.monotonic()
                    try:
                        prompt_charge = 0
                        # the estimator learns the request's own prompt once, not again at each retry
                        counted = await self._count_prompt(
                            current, features if current.messages is req.messages and counted is None else None)
                        if counted is not None:
                            self._refuse_counted_over_window(counted)
                        if counted is None and proxied is None and self.proxy is not None \
                                and limiter.estimates_tokens:
                            proxied = await asyncio.to_thread(self.proxy.features, req.messages)
                            self.proxied += 1
                        # the answer's length as the answers so far show it when this call's turn comes
                        permit = await limiter.acquire(estimate, None if counted is None else functools.partial(
                            self._counted_sd, req.template, tpl.expected_output_tokens))
                        if counted is not None:
                            self.prompt_counts.asking.used()
                    except LimiterStopped:
                        raise self._stopped_error() from None
                    finally:
                        wait_spans.append((tw, time.monotonic()))
                    if self.reserved is not None:  # no token bucket evaluated the estimate: charged all the same
                        charged = prompt_charge or charge_prompt()
                        self.reserved.granted(permit.seq, prompt_features, charged)
                # The cap is sized now, not when the call was built: calls that waited while
                # another one showed the model thinks get the room it needs.
                room, full = charged_cap if charged_cap is not None else self._sent_cap(
                    tpl, current, ceiling, features if fit else None)
                fitted_from = full if room < full else None
                if current.json_mode and not self.json_mode:  # the preflight showed response_format is ignored
                    current = msgspec.structs.replace(current, json_mode=False)
                if room != current.max_tokens:
                    current = msgspec.structs.replace(current, max_tokens=room)
                if out_held and self.output_quota is not None:
                    out_held = self.output_quota.resize(out_held, current.max_tokens)
                # The reservation is made now, after the quota wait: the spend it checks
                # against is current, and the quota wait cannot outdate it.
                worst = 0.0 if self.budget.cap is None else self.prices.cost(
                    self.price_model, input_reservation(current, self.tokens), current.max_tokens,
                    batch=self.batched)
                reserved = self.budget.try_reserve(worst)
                if not reserved:  # waits for calls in flight to settle (a wait, not judge time)
                    tw = time.monotonic()
                    reserved = await self.budget.reserve(worst)
                    wait_spans.append((tw, time.monotonic()))
                if not reserved:
                    if self.budget.exhausted:
                        self.halt(self._budget_stop(worst))
                    raise self._stopped_error()
                held = True
                if self.slots is not None:  # the server's own slots: queue here, not at the server
                    tw = time.monotonic()
                    await self.slots.acquire()
                    slot = True
                    wait_spans.append((tw, time.monotonic()))
                # A window learned while this call waited (an error of another call) applies now.
                self._refuse_over_window(current)
                # The reservation goes into the run ledger before the request leaves: a call lost
                # in flight (kill -9) stays bounded by it.
                call = self.ledger.sent(key, req.template, worst if self.budget.cap is not None or not self.priced
                                        else self.prices.cost(self.price_model, input_reservation(current, self.tokens),
                                                              current.max_tokens, batch=self.batched))
                if fitted_from is not None and self.output_caps is not None:
                    self.output_caps.sent(req.template, fitted_from, current.max_tokens)
                admitted = self._preflight_admitted(probe, permit) if probe is not None \
                    else self._followed_at_admission(permit)
                if probe is not None:  # the overlap runs from now; past a full bucket it leaves the quota idle
                    probe.sent()
                    if limiter is not None:
                        probe.shorten(limiter.until_full())
            except BaseException:  # stopped, cancelled, or a fault before the send: nothing was sent
                if held:
                    self.budget.release(worst)
                if out_held and self.output_quota is not None:
                    self.output_quota.release(out_held)
                if call is not None:
                    self.ledger.unpaid(call, "not sent")
                if slot and self.slots is not None:
                    self.slots.release()
                if permit is not None:  # every slot and permit is given back, or the run waits for it forever
                    await self.limiter.release_failed(permit)
                if probe is not None:
                    probe.open()
                raise
            if lane is not None:  # its outcome is awaited: the systematic rule waits for it
                lane.sent()
            tj = time.monotonic()
            try:
                resp, info = await self._send(current, admitted, permit)
            except JudgeError as e:
                judge_spans.append((tj, time.monotonic()))
                message = str(e)
                # refused, the server took nothing; failed after admitting it, it held the cap
                # and gives it all back (nothing was answered)
                self._settle_output(out_held, None if isinstance(e, RateLimited) or e.kind == "over_quota" else 0,
                                    e.limits if isinstance(e, RateLimited) else None)
                out_held = 0
                tries.append((e.kind, judge_spans[-1][1] - tj, message[:300]))
                resend = self._free_slot(slot, current, e.kind, time.monotonic() - tj)
                slot = False
                if e.kind in _MAYBE_BILLED:
                    self.budget.forfeit(worst)
                    self.ledger.unknown(call, e.kind)
                else:
                    self.budget.release(worst)
                    self.ledger.unpaid(call, e.kind)
                if lane is not None:  # known before the gate opens and anyone else is sent
                    lane.failed(e.kind, key)
                if e.endpoint_fault and (probe is not None or (gate is not None and not gate.is_open)):
                    self.halt(self._fault_stop(e, message))  # the preflight, or a call sent in its overlap
                if probe is not None:
                    probe.open()
                if isinstance(e, RateLimited):
                    if self.reserved is not None and permit is not None:
                        self.reserved.refused(permit.seq)
                    delay = await self.limiter.rate_limited_release(
                        permit, e.limits, unusable_wait_s=self.max_rate_limit_wait_s) if permit is not None else 1.0
                    if e.limits is not None and e.limits.named_quota:
                        self.stats.named_quota = e.limits.named_quota
                    if e.limits is not None and e.limits.gateway is not None:
                        self.stats.gateway = e.limits.gateway.headers
                        self.stats.gateway_refusals += 1
                    if e.limits is not None and e.limits.unusable_hint:
                        self.stats.unusable_hints += 1  # waited the bound instead (see judging.RateLimitInfo)
                        self.stats.unusable_hint = e.limits.unusable_hint
                    self.stats.rate_limited += 1
                    rate_limited += 1
                    if delay > self.max_rate_limit_wait_s:
                        self.halt(self._rate_limit_stop(delay, e.limits.spent_daily if e.limits else None))
                        self.stats.failures += 1
                        raise self._stopped_error() from None
                    if rate_limited > self.max_rate_limit_retries:
                        self.stats.failures += 1
                        raise JudgeFailed("rate_limit", f"still rate limited after {rate_limited} tries") from None
                    tw = time.monotonic()
                    await asyncio.sleep(delay * random.uniform(0.0, 0.1))  # the limiter pause does the rest
                    wait_spans.append((tw, time.monotonic()))
                    continue
                if permit is not None and e.kind == "over_quota":  # refused whole: the server took nothing
                    if self.reserved is not None:
                        self.reserved.refused(permit.seq)
                    await self.limiter.release_refused(permit)
                elif permit is not None:
                    await self.limiter.release_failed(permit)
                if isinstance(e, TransientError) and (e.status or 0) >= 500 and VALIDATION_ERROR.search(message):
                    # A server that answers a body it will never accept with a 5xx (llama-cpp-python's
                    # pydantic errors are 500s): the same body refused the same way twice is this
                    # request's fault, not the server's.
                    if refused is not None and refused[0] is current and refused[1] == message:
                        e.kind = "invalid_request"
                        message = f"refused twice with the same validation error: {message}"
                    refused = (current, message)
                if e.kind in REQUEST_FAULTS:  # this request's own fault: no retry, no breaker
                    self.stats.failures += 1
                    self.stats.request_faults += 1
                    if e.kind == "context_length":
                        message = self._learn_window(message)
                    raise JudgeFailed(e.kind, message) from None
                if self.breaker.failure(e.kind, message, key) and self.stopped is None:
                    self.halt(self._fault_stop(e, message, streak=self.breaker.count))
                    self.stats.failures += 1
                    raise JudgeFailed(e.kind, message) from None  # its own failure, not lost to the stop
                if self.stopped is not None:
                    self.stats.failures += 1
                    raise self._stopped_error() from None
                if isinstance(e, TransientError):
                    attempts += 1
                    if not resend:
                        self.stats.failures += 1
                        self.stats.timeouts_not_resent += 1
                        raise JudgeFailed(e.kind, f"{message}; not sent again: {self._server_name()} may still be "
                                                  "working on it and no answered call bounds how long") from None
                    if attempts > self.max_retries:
                        self.stats.failures += 1
                        raise JudgeFailed(e.kind, message) from None
                    self.stats.retries += 1
                    tw = time.monotonic()
                    await asyncio.sleep(min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempts - 1))
                                        * random.uniform(0.5, 1.5))
                    wait_spans.append((tw, time.monotonic()))
                    continue
                self.stats.failures += 1
                raise JudgeFailed(e.kind, message) from None
            except BaseException:
                self._settle_output(out_held, 0)
                out_held = 0
                self.budget.forfeit(worst)  # cancelled mid-call: it may have been billed
                self.ledger.unknown(call, "interrupted")
                self._free_slot(slot, current, "timeout", time.monotonic() - tj)
                slot = False
                if permit is not None:
                    await self.limiter.release_failed(permit)
                if probe is not None:
                    probe.open()
                raise
            judge_spans.append((tj, time.monotonic()))
            tries.append(("answered", judge_spans[-1][1] - tj, resp.finish_reason or ""))
            if is_cut_off(resp.finish_reason) and fitted_from is None:  # learned before the preflight gate opens
                self.thinking.learn_cut_off(tpl.max_tokens, current.max_tokens)
            if slot and self.slots is not None:
                self.slots.observe(resp.input_tokens + resp.output_tokens, time.monotonic() - tj)
                self.slots.release()
                slot = False
            if probe is not None:
                if current.json_mode and resp.finish_reason != "length" and "{" not in resp.text:
                    # Asked for a JSON schema, got prose without any JSON: the endpoint ignores
                    # response_format (Anthropic's compatible endpoint does). Known before the
                    # gate opens, so no other call is sent the ignored way.
                    self.json_mode = False
                    self.stats.structured_output_ignored = True
                await self._learn_loaded()  # before anyone else is sent, and before this answer is judged
                probe.open()
            self.breaker.success()
            if info is not None and info.gateway is not None:
                self.stats.gateway = info.gateway.headers
            if permit is not None:
                self._observe_split(info, permit, tj)
                if self._output_started_by is permit and self.output_quota is not None:
                    # its statement started the output quota: it holds its cap from then
                    out_held, self._output_started_by = current.max_tokens, None
                    self.output_quota.holds_first(out_held)
                self._settle_output(out_held, resp.output_tokens)
                out_held = 0
                self.limiter.observe(info, permit)
                # a reserving server keeps its prompt guess and the output used (quota_charge)
                await permit.done(None if resp.usage_estimated else resp.input_tokens if self.charges_input
                                  else resp.output_tokens + (prompt_charge if self.reserved is not None
                                                             else resp.input_tokens))
                if admitted is not None and resp.usage_estimated:
                    # a stream without its usage (stream_options ignored): the bill would rest on
                    # estimates; the rest go unstreamed, their usage counted
                    self.follows_streams = False
            # A server that read only part of the prompt (Ollama past its num_ctx) answered about
            # part of it: that usage teaches no estimate, and the item fails below (prompt_cut).
            # The first answer of the request only: a retry of the same prompt may be read from the
            # server's prefix cache, which some servers leave out of the usage.
            first_answer = sum(1 for t in tries if t[0] == "answered") == 1
            short = None if resp.usage_estimated or not first_answer else self._read_short(
                current, req, counted, proxied, features, resp.input_tokens)
            if short is not None and not short.sure:
                # read short, not shown to be cut: scored, and it teaches the estimate as any answer
                # (most are a kind of text the estimate has not learned yet; a cut shows later by its
                # count, which the estimate does not decide)
                self.stats.suspect_reads += 1
                short = None
            elif short is not None:
                self._learn_cut(short)
            if counted is not None and not resp.usage_estimated and short is None:
                self.prompt_counts.drift.observe(counted, resp.input_tokens)
            if not resp.usage_estimated and reasks == 0 and short is None:
                # re-asks carry extra messages: not the features we measured
                self.tokens.observe(features, req.template, resp.input_tokens, resp.output_tokens,
                                    prompt_id(req.messages), prompt_known=counted is not None)
                if proxied is not None:
                    self.proxy_tokens.observe(proxied, req.template, resp.input_tokens, resp.output_tokens,
                                              prompt_id(req.messages))
            # A thought never reaches the decoder (backends already take <think> out; this holds
            # for every backend).
            resp.text, thought = split_thinking(redact(resp.text))  # an endpoint may echo the key
            thought = redact(resp.thought) + thought if resp.thought else thought
            cut = is_cut_off(resp.finish_reason)
            if self.thinking.observe(reasoning_tokens=resp.reasoning_tokens,
                                     thought_visible=resp.thought_visible or bool(thought),
                                     cut_empty=cut and not resp.text):
                self.stats.thinking_learned = True
            call_cost = self.prices.cost(self.price_model, resp.input_tokens, resp.output_tokens,
                                         resp.cached_input_tokens, batch=resp.batched)
            call_uncached = self.prices.cost(self.price_model, resp.input_tokens, resp.output_tokens,
                                             batch=resp.batched)
            self.budget.settle(worst, call_cost)
            # Recorded before the answer reaches the cache: what the cache holds was paid.
            self.ledger.paid(call, input_tokens=resp.input_tokens, cached_input_tokens=resp.cached_input_tokens,
                             output_tokens=resp.output_tokens, reasoning_tokens=resp.reasoning_tokens,
                             cost_usd=call_cost, cost_usd_uncached=call_uncached,
                             judge_s=judge_spans[-1][1] - judge_spans[-1][0],
                             wait_s=sum(b - a for a, b in wait_spans[waits_seen:]), batched=resp.batched)
            waits_seen = len(wait_spans)
            tin += resp.input_tokens
            tout += resp.output_tokens
            tcached += resp.cached_input_tokens
            treasoning += resp.reasoning_tokens
            cost += call_cost
            cost_uncached += call_uncached
            batched = batched or resp.batched
            s = self.stats
            s.calls += 1
            s.input_tokens += resp.input_tokens
            s.output_tokens += resp.output_tokens
            s.cost_usd += call_cost
            s.cached_input_tokens += resp.cached_input_tokens
            s.cost_usd_uncached += call_uncached
            s.reasoning_tokens += resp.reasoning_tokens
            if resp.batched:
                s.batched_calls += 1
            if short is not None:  # its answer is about the part read: not the item's score, not cached
                s.failures += 1
                s.request_faults += 1
                s.prompts_cut += 1
                raise JudgeFailed("context_length", cut_detail(short, counted=counted is not None,
                                                               server=self._server_name())) from None
            if (resp.finish_reason or "").lower() in ("content_filter", "safety"):
                # The provider's filter withheld (part of) the answer; asking again gets the same.
                s.failures += 1
                s.request_faults += 1
                raise JudgeFailed("content_filter", f"answer withheld by the provider's content filter "
                                                    f"(finish_reason {resp.finish_reason})") from None
            if self.output_caps is not None and not resp.usage_estimated:
                if not cut:
                    self.output_caps.observe(req.template, tpl.hash, resp.input_tokens, resp.output_tokens,
                                             resp.reasoning_tokens)
                elif fitted_from is not None:
                    self.output_caps.cut_off(req.template, tpl.hash, resp.input_tokens, current.max_tokens)
            if cut and fitted_from is not None:  # asked again at the template's own cap
                s.fitted_cap_cuts += 1
                s.fitted_cap_cut_cost_usd += call_cost
                fit = False
                current = msgspec.structs.replace(current, max_tokens=fitted_from)
                continue
            if cut:
                s.truncated += 1
                s.truncated_cost_usd += call_cost
                bigger = None if raised else self.thinking.raised_cap(current.max_tokens)
                if bigger is not None and self.thinking.learned:  # it thinks: at least the room a thinker gets
                    bigger = max(bigger, self.thinking.cap(self._template(req.template).max_tokens))
                # Never more output than the window leaves after this prompt (the server counted it).
                left = self.window - resp.input_tokens if self.window else None
                if bigger is not None and left is not None:
                    bigger = min(bigger, left) if left > current.max_tokens else None
                    ceiling = left
                if bigger is None:
                    s.failures += 1
                    if self.window and resp.input_tokens + resp.output_tokens + _WINDOW_SLACK >= self.window:
                        raise JudgeFailed("truncated", _window_full_detail(resp.input_tokens, resp.output_tokens,
                                                                           self.window)) from None
                    raise JudgeFailed("truncated", _truncated_detail(
                        current.max_tokens, resp.reasoning_tokens, raised, self.thinking.bound(),
                        explicit=self.thinking.max_output is not None and not self.thinking.retry_cut_off)) from None
                raised = True
                s.truncation_retries += 1
                current = msgspec.structs.replace(current, max_tokens=bigger)
                continue
            try:
                value = decode_verdict(resp.text, verdict)
            except VerdictDecodeError as e:
                if current.json_mode and not self.json_mode and "{" not in resp.text:
                    # the preflight showed response_format is ignored: ask again with the schema in the prompt
                    current = msgspec.structs.replace(current, json_mode=False)
                    continue
                reasks += 1
                if reasks > self.max_reasks:
                    s.failures += 1
                    raise JudgeFailed("undecodable", f"{e} after {reasks - 1} re-asks") from None
                s.reasks += 1
                current = msgspec.structs.replace(_reask(req, resp.text, str(e)), max_tokens=current.max_tokens)
                continue
            if self.cache is not None:
                await self.cache.put(key, resp.text.encode("utf-8"), components)
            elif self._memo is not None:
                self._memo[key_id(key)] = resp.text
                if len(self._memo) > 20_000:
                    self._memo.popitem(last=False)
            return Judged(value, resp.text, key, "network", tin, tout, cost, time.monotonic() - t0,
                          cached_input_tokens=tcached, cost_uncached=cost_uncached, batched=batched,
                          judge_spans=judge_spans, wait_spans=wait_spans, reasoning_tokens=treasoning,
                          attempts=tries, thought=thought)


    def _free_slot(self, taken: bool, req: ChatRequest, kind: str, spent_s: float) -> bool:
        """Give back a server slot after a failed attempt; whether the call may be sent
        again. A timed-out call may still be running at a server that does not cancel it:
        its slot stays taken until the work is surely over (engine.runtime.calls.slots)."""
        if not taken or self.slots is None:
            return True
        if kind != "timeout":
            self.slots.release()
            return True
        tokens = self._prompt_tokens(req) + req.max_tokens
        self.slots.release_after_timeout(tokens, spent_s)
        return self.slots.resend_allowed(tokens)

    def _server_name(self) -> str:
        name = self.server.server if self.server is not None else None
        return f"the server ({name})" if name else "the server"


def _prompt_kind(template: str) -> str:
    """The template without its language variant: ``quality_zh`` and ``quality`` are one kind of prompt."""
    return template.removesuffix("_zh")


def _duration(seconds: float) -> str:
    """``3725`` -> ``1h2m5s``."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{sec}s"


def _truncated_detail(cap: int, reasoning: int, retried: bool, ceiling: int, *, explicit: bool = False) -> str:
    """Why a cut-off answer failed, with the numbers a user needs to fix it."""
    spent = f", {reasoning} of them thinking" if reasoning else ""
    if explicit:
        return (f"answer cut off at {cap} output tokens{spent} (--max-output-tokens); raise it, or pass "
                "--retry-cut-off to retry such answers once with a larger cap")
    if retried:
        return (f"answer cut off at {cap} output tokens{spent}, after one retry with a larger cap; "
                "raise --max-output-tokens or lower --reasoning-effort")
    return (f"answer cut off at {cap} output tokens{spent}, and the model allows no more than {ceiling}; "
            "lower --reasoning-effort")


# A server stops generating a few tokens short of a full window (llama-server at one token
# left): an answer cut off this close to it ran out of context, not out of cap.
_WINDOW_SLACK = 4


def _window_full_detail(prompt: int, output: int, window: int) -> str:
    """Why an answer cut off by a full context window failed: a larger output cap cannot help."""
    return (f"answer cut off when the context window was full: prompt {prompt} + answer {output} tokens of "
            f"{window}; a shorter prompt or a model with a larger window is needed")


def _reask(req: ChatRequest, bad_answer: str, problem: str) -> ChatRequest:
    """The original request plus the bad answer and a short correction."""
    fix = Message("user", f"Your answer could not be used ({problem}). Reply again with only a JSON object "
                          "that matches the required schema, with no text around it.")
    return msgspec.structs.replace(req, messages=req.messages + (Message("assistant", bad_answer[:4000]), fix))

