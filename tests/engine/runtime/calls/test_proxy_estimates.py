"""Token estimates learned on a proxy tokenizer's counts (the pool's ``proxy``): where the
server counts no prompts and no tokenizer was named, a token quota is paced on estimates
whose features are another tokenizer's counts, not characters."""
from __future__ import annotations

import asyncio
import math
import re
import threading
from typing import Annotated, Any

import msgspec

from drscore import prompts
from drscore.engine.runtime.calls.judging import ChatResponse
from drscore.engine.runtime.calls.limits import Permit, RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.tokens import PromptFeatures


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


TEMPLATE = "---\nmax_tokens: 400\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\nRate: ${text}"
WIDE = re.compile("[\u4e00-\u9fff]")


class WordProxy:
    """A tokenizer that is not the model's: each ASCII word a token, each Chinese character a
    token, and the chat format's 2 + 4 a message with the rest (as the real proxy's features)."""

    counted_by = "words"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def features(self, messages: Any) -> tuple[float, float]:
        self.threads.append(threading.get_ident())
        rest, wide = 2.0, 0.0
        for m in messages:
            text = m["content"] if isinstance(m, dict) else m.content
            rest += len(WIDE.sub(" ", text).split()) + 4
            wide += len(WIDE.findall(text))
        return rest, wide


def model_count(messages: Any) -> int:
    """The model's own count: twice the proxy's for the rest, three times for Chinese."""
    rest, wide = WordProxy().features(messages)
    return int(2 * rest + 3 * wide)


class ModelBackend:
    """Counts no prompts (no route); answers with the model's count and 10 tokens out."""

    name = "http"
    cacheable = True
    model = "m1"

    def identity(self) -> dict[str, str]:
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request: Any) -> tuple[ChatResponse, None]:
        await asyncio.sleep(0.001)
        return ChatResponse(text='{"score": 3}', input_tokens=model_count(request.messages), output_tokens=10), None

    async def close(self) -> None:
        pass


class Recording(RateLimiter):
    """Notes what each call was granted at (its estimate, tokens)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.granted: list[int] = []

    async def acquire(self, estimate: Any, sd: float | None = None) -> Permit:
        permit = await super().acquire(estimate, sd)
        self.granted.append(permit.estimate)
        return permit


# Words of one letter and of twenty: 4 characters a token misses both, a word a token neither
TEXTS = [" ".join(["a"] * (20 + 7 * i) + ["internationalization"] * (3 + 5 * (i % 4)) + ["中文"] * (i % 3) * 15)
         for i in range(14)]


async def _asked(monkeypatch, proxy: PromptFeatures | None, limiter: RateLimiter, texts: list[str],
                 backend: Any = None, **pool_kw: Any) -> JudgePool:
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))
    pool = JudgePool(backend or ModelBackend(), cache=None, limiter=limiter, prices=PriceTable(), preflight=False,
                     proxy=proxy, **pool_kw)
    for text in texts:
        await pool.ask("alpha", Verdict, {"text": text})
    return pool


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Judge."}, {"role": "user", "content": f"Rate: {text}"}]


async def test_a_token_quota_is_paced_on_estimates_learned_on_the_proxys_counts(monkeypatch):
    limiter = Recording(tpm=60_000_000, concurrency=1, burst_s=60)
    proxy = WordProxy()
    pool = await _asked(monkeypatch, proxy, limiter, TEXTS)
    assert pool.proxied == len(TEXTS) and pool.proxy is proxy
    # The first call, before any answer, at the proxy's count and the 10 expected out: for the
    # first text (20 "a", 3 long words, no Chinese) 2 + (1 + 4) + (1 + 23 + 4) = 35
    assert limiter.granted[0] == 35 + 10
    # The last, after 13 answers, at the model's count: the fit learned its two ratios (2 and 3)
    last = model_count(_prompt(TEXTS[-1]))
    assert abs(limiter.granted[-1] - (last + 10)) <= 1
    # Characters could not have learned it: their fit, from the same answers, misses by over 10%
    rule = pool.tokens.estimate(_char_features(TEXTS[-1]), "alpha", 10)
    assert abs(rule - (last + 10)) > 0.1 * last
    # and the error the limiter reserves for is the proxy fit's, below the characters' one
    assert limiter.estimate_error() == pool.proxy_tokens.relative_error() < pool.tokens.relative_error()
    # counted off the event loop: a report's prompt is tens of thousands of tokens
    assert proxy.threads and threading.get_ident() not in proxy.threads


def _char_features(text: str) -> tuple[float, float]:
    from drscore.engine.runtime.calls.tokens import message_features
    return message_features(_prompt(text))


async def test_no_token_quota_no_proxy_count(monkeypatch):
    # a request quota alone: no token estimate paces anything, so no prompt is counted
    proxy = WordProxy()
    pool = await _asked(monkeypatch, proxy, RateLimiter(rpm=60_000, concurrency=1), TEXTS[:3])
    assert pool.proxied == 0 and proxy.threads == []


class OnThisMachine(ModelBackend):
    """A judge answering on this machine (the offline one): nothing it answers is cached or paced."""

    cacheable = False


async def test_a_judge_on_this_machine_has_no_quota_to_estimate_for(monkeypatch):
    # nothing told and no headers: the limiter would learn a pace from 429s, which this judge never sends
    proxy = WordProxy()
    pool = await _asked(monkeypatch, proxy, RateLimiter(concurrency=1), TEXTS[:3], backend=OnThisMachine())
    assert pool.proxy is None and pool.proxied == 0 and proxy.threads == []


async def test_a_reserving_endpoint_charges_its_own_guess_not_the_proxys(monkeypatch):
    # Azure's quota charges its character guess and the output cap: known before the send
    proxy = WordProxy()
    pool = await _asked(monkeypatch, proxy, RateLimiter(tpm=60_000_000, concurrency=1, burst_s=60), TEXTS[:3],
                        tpm_charge="reserved")
    assert pool.proxy is None and pool.proxied == 0 and proxy.threads == []


class CountingModel(ModelBackend):
    """The same model behind a server that counts prompts (vLLM's /tokenize)."""

    counts_prompts: bool | None = None

    async def count_prompt(self, request: Any) -> int | None:
        self.counts_prompts = True
        return model_count(request.messages)


async def test_a_server_that_counts_prompts_is_asked_not_the_proxy(monkeypatch):
    proxy = WordProxy()
    limiter = Recording(tpm=60_000_000, concurrency=1, burst_s=60)
    pool = await _asked(monkeypatch, proxy, limiter, TEXTS[:3], backend=CountingModel())
    assert pool.prompt_counts.counted == 3 and pool.proxied == 0 and proxy.threads == []
    # each call at the server's count and the 10 expected out
    assert limiter.granted[0] == model_count(_prompt(TEXTS[0])) + 10


async def _kept(monkeypatch, cache_path: Any, proxy: PromptFeatures, texts: list[str]) -> tuple[JudgePool, Recording]:
    """A run with a cache at ``cache_path``: it starts from what earlier runs kept there and
    keeps what it learned when it closes."""
    from drscore.engine.runtime.calls.cache import JudgeCache

    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))
    cache = await JudgeCache.open(cache_path)
    limiter = Recording(tpm=60_000_000, concurrency=1, burst_s=60)
    pool = JudgePool(ModelBackend(), cache=cache, limiter=limiter, prices=PriceTable(), preflight=False, proxy=proxy)
    try:
        await pool.load_token_counting()
        for text in texts:
            await pool.ask("alpha", Verdict, {"text": text})
        pool.keep_token_counting()
    finally:
        await cache.close()
    return pool, limiter


async def test_a_later_run_starts_from_the_ratios_an_earlier_one_learned_on_the_proxys_counts(monkeypatch, tmp_path):
    first, _ = await _kept(monkeypatch, tmp_path / "judge.sqlite", WordProxy(), TEXTS[:10])
    assert first.proxy_tokens.seeded is None and first.proxy_tokens.fit.calls == 10
    # Other prompts (not cached answers): the first call, before any answer of this run, is granted
    # at the model's count (2 and 3 times the proxy's), not at the proxy's own count as a first run is
    later, limiter = await _kept(monkeypatch, tmp_path / "judge.sqlite", WordProxy(), TEXTS[10:])
    assert later.proxy_tokens.seeded is not None and later.proxy_tokens.seeded.calls == 10
    first_prompt = model_count(_prompt(TEXTS[10]))
    assert abs(limiter.granted[0] - (first_prompt + 10)) <= 1
    # and the error it reserved for from the start was the earlier fit's, not the prior 12%
    assert later.proxy_tokens.seeded.rms() < 0.01
    # The character fit is kept apart, under the model's name alone, as before
    assert later.tokens.seeded is not None and later.tokens.seeded.calls == 10


class OtherProxy(WordProxy):
    counted_by = "another tokenizer"


async def test_a_fit_learned_on_another_tokenizers_counts_is_not_used(monkeypatch, tmp_path):
    await _kept(monkeypatch, tmp_path / "judge.sqlite", WordProxy(), TEXTS[:10])
    later, limiter = await _kept(monkeypatch, tmp_path / "judge.sqlite", OtherProxy(), TEXTS[10:11])
    assert later.proxy_tokens.seeded is None
    rest, wide = WordProxy().features(_prompt(TEXTS[10]))
    assert limiter.granted[0] == math.ceil(rest + wide) + 10  # the prior (1, 1) on its counts
