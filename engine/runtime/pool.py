"""The judge pool: every judge call of a run goes through here.

Per call: render the prompt, compute the content-addressed key, answer from the cache,
or join an identical call already in flight, or wait for quota and call the backend;
decode into the verdict Struct (re-asking a bounded number of times when the answer does
not decode), commit the raw answer to the cache, and account tokens, cost and latency.
Failures after bounded retries raise :class:`JudgeFailed` with a reason; they never
crash the run.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

import msgspec

from drscore import prompts
from drscore.engine.runtime.cache import JudgeCache, request_key
from drscore.engine.runtime.judging import (
    Backend, ChatRequest, FatalError, JudgeFailed, Message, RateLimited, TransientError,
)
from drscore.engine.runtime.limits import RateLimiter
from drscore.engine.runtime.pricing import PriceTable
from drscore.engine.runtime.tokens import TokenEstimator, estimate_messages, message_features
from drscore.engine.runtime.verdicts import VerdictDecodeError, decode_verdict, schema_of

T = TypeVar("T")


class Judged(Generic[T]):
    """A decoded verdict and what it cost. ``source`` is network | cache | shared | dry."""

    __slots__ = ("value", "text", "key", "source", "input_tokens", "output_tokens", "cost_usd", "latency_s")

    def __init__(self, value: T, text: str, key: str, source: str, input_tokens: int = 0,
                 output_tokens: int = 0, cost_usd: float = 0.0, latency_s: float = 0.0) -> None:
        self.value, self.text, self.key, self.source = value, text, key, source
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.cost_usd, self.latency_s = cost_usd, latency_s

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
    # dry-run plan (calls that would be made)
    planned_calls: int = 0
    planned_input_tokens: int = 0
    planned_output_tokens: int = 0
    planned_cost_usd: float = 0.0


class JudgePool:
    def __init__(
        self,
        backend: Backend,
        *,
        cache: JudgeCache | None,
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
    ) -> None:
        self.backend = backend
        self.cache = cache if getattr(backend, "cacheable", True) else None
        self.limiter = limiter
        self.prices = prices
        self.json_mode = json_mode
        self.max_retries = max_retries
        self.max_rate_limit_retries = max_rate_limit_retries
        self.max_reasks = max_reasks
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_cost_usd = max_cost_usd
        self.dry = dry_run_with  # when set: plan calls, answer with this backend, spend nothing
        self.price_model = price_model or backend.model
        self.stats = PoolStats()
        self.tokens = TokenEstimator()
        self._identity = {"backend": backend.name, **backend.identity()}
        self._inflight: dict[str, asyncio.Future[str]] = {}
        self._reserved_cost = 0.0
        self._planned: set[str] = set()
        # Backends that are not cached (the offline judge) still answer a repeated request
        # once per run, so task-level steps are counted once, as with a real judge.
        self._memo: OrderedDict[str, str] | None = None if self.cache is not None or not \
            hasattr(backend, "cacheable") or backend.cacheable else OrderedDict()
        self.budget_exhausted = False

    @property
    def judge_label(self) -> str:
        return "offline" if self.backend.name == "offline" else self.backend.model

    def build(self, template: str, verdict: type, variables: dict[str, Any], sample: int = 0) -> tuple[ChatRequest, dict[str, Any]]:
        """The request and its cache-key components (public for ``cache explain`` and tests)."""
        tpl = prompts.load(template)
        messages = tuple(Message(role, content) for role, content in tpl.render(variables))
        schema = schema_of(verdict)
        req = ChatRequest(
            messages=messages, template=template, template_hash=tpl.hash, schema_name=verdict.__name__,
            schema=schema, temperature=tpl.temperature, max_tokens=tpl.max_tokens, sample=sample,
            variables=variables, json_mode=self.json_mode,
        )
        components = {
            **self._identity,
            "messages": [[m.role, m.content] for m in messages],
            "temperature": tpl.temperature, "max_tokens": tpl.max_tokens,
            "schema_name": verdict.__name__, "schema": schema, "json_mode": self.json_mode,
            "template": template, "template_hash": tpl.hash, "sample": sample,
        }
        return req, components

    async def ask(self, template: str, verdict: type[T], variables: dict[str, Any], *, sample: int = 0) -> Judged[T]:
        req, components = self.build(template, verdict, variables, sample)
        key = request_key(components)
        if self.cache is not None:
            raw = await self.cache.get(key)
            if raw is not None:
                text = raw.decode("utf-8")
                try:
                    value = decode_verdict(text, verdict)
                    self.stats.cache_hits += 1
                    return Judged(value, text, key, "cache")
                except VerdictDecodeError:
                    pass  # schema changed under the same key cannot happen; be safe and re-ask
        if self._memo is not None and key in self._memo:
            self._memo.move_to_end(key)
            self.stats.shared += 1
            text = self._memo[key]
            return Judged(decode_verdict(text, verdict), text, key, "shared")
        if self.dry is not None:
            return await self._plan(req, verdict, key)
        fut = self._inflight.get(key)
        if fut is not None:
            text = await asyncio.shield(fut)
            self.stats.shared += 1
            return Judged(decode_verdict(text, verdict), text, key, "shared")
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            judged = await self._claimed_elsewhere(key, verdict) or await self._call(req, verdict, key, components)
            fut.set_result(judged.text)
            return judged
        except BaseException as e:
            if self.cache is not None:
                self.cache.release(key)  # let a process waiting for this answer pay for it
            fut.set_exception(e if isinstance(e, JudgeFailed) else JudgeFailed("error", repr(e)))
            fut.exception()  # mark retrieved: followers may not exist
            raise
        finally:
            del self._inflight[key]

    async def _claimed_elsewhere(self, key: str, verdict: type[T]) -> Judged[T] | None:
        """Processes sharing the cache pay once per key (see JudgeCache.claim_or_wait):
        the answer another process paid for, or None when this process holds the claim."""
        if self.cache is None:
            return None
        raw = await self.cache.claim_or_wait(key)
        if raw is None:
            return None
        text = raw.decode("utf-8")
        try:
            value = decode_verdict(text, verdict)
        except VerdictDecodeError:
            return None  # as for a cache hit that does not decode: ask again
        self.stats.shared += 1
        return Judged(value, text, key, "shared")

    async def _plan(self, req: ChatRequest, verdict: type[T], key: str) -> Judged[T]:
        resp, _ = await self.dry.complete(req)
        if key in self._planned:  # the real run would share or cache this call: plan it once
            self.stats.shared += 1
            return Judged(decode_verdict(resp.text, verdict), resp.text, key, "shared")
        self._planned.add(key)
        tpl = prompts.load(req.template)
        tin, tout = estimate_messages(list(req.messages)), tpl.expected_output_tokens
        cost = self.prices.cost(self.price_model, tin, tout)
        s = self.stats
        s.planned_calls += 1
        s.planned_input_tokens += tin
        s.planned_output_tokens += tout
        s.planned_cost_usd += cost
        return Judged(decode_verdict(resp.text, verdict), resp.text, key, "dry", tin, tout, cost)

    def _check_budget(self, est_cost: float) -> None:
        if self.max_cost_usd is None:
            return
        if self.stats.cost_usd + self._reserved_cost + est_cost > self.max_cost_usd:
            self.budget_exhausted = True
            raise JudgeFailed("budget", f"--max-cost {self.max_cost_usd} reached")

    async def _call(self, req: ChatRequest, verdict: type[T], key: str, components: dict[str, Any]) -> Judged[T]:
        tpl = prompts.load(req.template)
        features = message_features(req.messages)
        def estimate() -> int:  # evaluated when the call reaches the head of the quota queue
            return self.tokens.estimate(features, req.template, tpl.expected_output_tokens)

        est_cost = self.prices.cost(self.price_model, estimate(), 0) if self.max_cost_usd is not None else 0.0
        attempts = rate_limited = reasks = 0
        current = req
        t0 = time.monotonic()
        tin = tout = 0
        cost = 0.0
        while True:
            self._check_budget(est_cost)
            permit = await self.limiter.acquire(estimate)
            self._reserved_cost += est_cost
            try:
                resp, _info = await self.backend.complete(current)
            except RateLimited as e:
                self._reserved_cost -= est_cost
                delay = await self.limiter.rate_limited_release(permit, e.limits)
                self.stats.rate_limited += 1
                rate_limited += 1
                if rate_limited > self.max_rate_limit_retries:
                    self.stats.failures += 1
                    raise JudgeFailed("rate_limited", f"still rate limited after {rate_limited} tries") from None
                await asyncio.sleep(delay * random.uniform(0.0, 0.1))  # the limiter pause does the rest
                continue
            except TransientError as e:
                self._reserved_cost -= est_cost
                await self.limiter.release_failed(permit)
                attempts += 1
                if attempts > self.max_retries:
                    self.stats.failures += 1
                    raise JudgeFailed(e.reason, str(e)) from None
                self.stats.retries += 1
                await asyncio.sleep(min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempts - 1))
                                    * random.uniform(0.5, 1.5))
                continue
            except FatalError as e:
                self._reserved_cost -= est_cost
                await self.limiter.release_failed(permit)
                self.stats.failures += 1
                raise JudgeFailed("fatal", str(e)) from None
            except BaseException:
                self._reserved_cost -= est_cost
                await self.limiter.release_failed(permit)
                raise
            self._reserved_cost -= est_cost
            self.limiter.observe(_info)
            if resp.usage_estimated:
                await permit.done(None)
            else:
                await permit.done(resp.input_tokens + resp.output_tokens)
                if current is req:  # re-asks carry extra messages: not the features we measured
                    self.tokens.observe(features, req.template, resp.input_tokens, resp.output_tokens)
            call_cost = self.prices.cost(self.price_model, resp.input_tokens, resp.output_tokens)
            tin += resp.input_tokens
            tout += resp.output_tokens
            cost += call_cost
            s = self.stats
            s.calls += 1
            s.input_tokens += resp.input_tokens
            s.output_tokens += resp.output_tokens
            s.cost_usd += call_cost
            try:
                value = decode_verdict(resp.text, verdict)
            except VerdictDecodeError as e:
                reasks += 1
                if reasks > self.max_reasks:
                    s.failures += 1
                    raise JudgeFailed("undecodable", f"{e} after {reasks - 1} re-asks") from None
                s.reasks += 1
                current = _reask(req, resp.text, str(e))
                continue
            if self.cache is not None:
                await self.cache.put(key, resp.text.encode("utf-8"), components)
            elif self._memo is not None:
                self._memo[key] = resp.text
                if len(self._memo) > 20_000:
                    self._memo.popitem(last=False)
            return Judged(value, resp.text, key, "network", tin, tout, cost, time.monotonic() - t0)


def _reask(req: ChatRequest, bad_answer: str, problem: str) -> ChatRequest:
    """The original request plus the bad answer and a short correction."""
    fix = Message("user", f"Your answer could not be used ({problem}). Reply again with only a JSON object "
                          "that matches the required schema, with no text around it.")
    return msgspec.structs.replace(req, messages=req.messages + (Message("assistant", bad_answer[:4000]), fix))

