"""What an endpoint's token quota charges a call: which endpoints reserve the output cap, the
charge the pool gives the limiter for them, and the prompt guess learned from their counts."""
from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.api import JudgeConfig
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls import limits
from drscore.engine.runtime.calls.judging import ChatResponse, RateLimitInfo
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.engine.runtime.calls.quota_charge import PENDING_MAX, ReservedCharge, resolve
from drscore.engine.runtime.calls.tokens import estimate_messages


@pytest.mark.parametrize(("url", "charge"), [
    ("https://api.openai.com/v1", "reserved"),
    ("https://my-team.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21", "reserved"),
    ("https://api.anthropic.com/v1/", "input"),  # its input-token quota; the caps go to its output one
    ("https://api.cerebras.ai/v1", "reserved"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "input"),  # Gemini: input tokens a minute
    ("http://127.0.0.1:8000/v1", "counted"),  # vLLM, llama.cpp, a gateway: they count
    ("https://openai.azure.com.example.net/v1", "counted"),  # only the host itself or its subdomains
    (None, "counted"),  # the offline judge
])
def test_auto_reserves_for_the_hosts_documented_to_reserve(url, charge):
    assert resolve("auto", url) == charge
    assert resolve("counted", "https://api.openai.com/v1") == "counted"  # said outright, it wins
    assert resolve("reserved", "http://127.0.0.1:8000/v1") == "reserved"


def test_an_unknown_charge_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match="--tpm-charge must be one of auto, counted, reserved, input"):
        resolve("estimated", None)
    with pytest.raises(ValueError, match="--tpm-charge"):
        JudgeConfig(url="http://127.0.0.1:1/v1", tpm_charge="estimated").validate()


def _window(charge: ReservedCharge, seqs: range, features: list[tuple[float, float]],
            server: tuple[float, float]) -> None:
    """Grant calls ``seqs`` at the learned charge; the server then reports its count, which
    charged each prompt ``server`` x its features."""
    ours = theirs = 0.0
    for seq, f in zip(seqs, features):
        c = charge.prompt(f)
        charge.granted(seq, f, c)
        ours += c
        theirs += server[0] * f[0] + server[1] * f[1]
    charge.followed(seqs[-1], ours - theirs)  # its remaining count is above our level by what it charged less


def test_the_prompt_guess_is_learned_from_the_counts_followed():
    charge = ReservedCharge()
    english, chinese = (2_000.0, 0.0), (100.0, 4_000.0)
    assert charge.prompt(chinese) == 4_100  # the character rule, before any count
    # a server charging a wide character a quarter token: 100 + 1,000 for the Chinese prompt
    seq = 0
    for i in range(40):
        n = 1 + i % 3  # windows of one to three calls, as answers come back
        mix = [english if (i + k) % 2 else chinese for k in range(n)]
        _window(charge, range(seq + 1, seq + n + 1), mix, (1.0, 0.25))
        seq += n
    # the fit's pull towards the character rule fades with the counts: after 40 windows it
    # leaves 0.75 x 0.01 / 40 of a token a wide character, 0.75 tokens on this prompt (a pull
    # that did not fade left 3%: 0.2574, 1,130)
    assert charge.prompt(chinese) == pytest.approx(1_100, abs=2)
    assert charge.prompt(english) == 2_000


def test_a_refused_call_counts_as_charged_nothing_by_the_server():
    charge = ReservedCharge()
    f = (100.0, 1_000.0)
    for seq in range(1, 61, 2):
        c = charge.prompt(f)
        charge.granted(seq, f, c)
        charge.granted(seq + 1, f, c)
        charge.refused(seq + 1)  # a 429: the server took nothing for it, nor does the replay of its bucket
        # the server charged the first 100 + 0.5 x 1,000: the count is that much under our charge of it
        charge.followed(seq + 1, c - 600)
    assert charge.prompt(f) == pytest.approx(600, rel=0.02)  # not 100 + 1,000 x 1.1: the refusal is not in it


def test_calls_no_count_ever_covers_are_dropped_and_their_window_is_not_learned():
    # A told quota without headers: nothing is ever followed, and the record stays bounded.
    charge = ReservedCharge()
    f = (100.0, 100.0)
    for seq in range(1, PENDING_MAX + 11):
        charge.granted(seq, f, 200)
    assert len(charge._pending) <= PENDING_MAX
    # a count covering calls of which some were dropped says nothing about the rest
    charge.followed(PENDING_MAX + 10, 10 * 200 - 10 * 150)
    assert charge.windows == 0 and charge.prompt(f) == 200
    # the next count covers only calls recorded since: learned
    for seq in range(PENDING_MAX + 11, PENDING_MAX + 21):
        charge.granted(seq, f, 200)
    charge.followed(PENDING_MAX + 20, 10 * 200 - 10 * 150)
    assert charge.windows == 1 and charge.prompt(f) < 200


def test_the_ascii_part_is_charged_by_the_rule_whatever_the_counts_say():
    # Learned beside the wide ratio from mostly-Chinese prompts, the ASCII ratio drifted and an
    # English prompt was charged under the server's guess. It is the documented four characters.
    charge = ReservedCharge()
    for seq in range(1, 21):
        f = (300.0, 4_000.0)
        charge.granted(seq, f, charge.prompt(f))
        charge.followed(seq, charge.prompt(f) - (0.9 * 300 + 0.25 * 4_000))
    assert charge.prompt((2_000.0, 0.0)) == 2_000
    # the ASCII part's 30 tokens the server did not charge are read as wide characters' (-0.0075)
    assert charge.wide == pytest.approx(0.25 - 30 / 4_000, abs=0.01)


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


TEMPLATE = "---\nmax_tokens: 4000\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\nRate: ${text}"


class SlowBackend:
    """Answers after ``delay`` s, recording the limiter's token level while each call is out."""

    name = "http"
    cacheable = True
    model = "m1"

    def __init__(self, limiter: RateLimiter, delay: float = 0.2) -> None:
        self.limiter, self.delay = limiter, delay
        self.levels: list[float] = []
        self.sent: list = []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):
        self.sent.append(request)
        assert self.limiter.tokens is not None
        self.levels.append(self.limiter.tokens.level)
        await asyncio.sleep(self.delay)
        return ChatResponse(text='{"score": 3}', input_tokens=40, output_tokens=20), None

    async def close(self):
        pass


async def _ask_once(tmp_path, monkeypatch, tpm_charge: str) -> tuple[SlowBackend, RateLimiter, float]:
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))
    # 600 tokens a minute in a bucket of ten minutes: 6,000 tokens, refilled at 10 a second
    limiter = RateLimiter(tpm=600, concurrency=4, burst_s=600)
    backend = SlowBackend(limiter)
    cache = await JudgeCache.open(tmp_path / f"{tpm_charge}.sqlite")
    pool = JudgePool(backend, cache=cache, limiter=limiter, prices=PriceTable({"m1": Price(1.0, 2.0)}),
                     preflight=False, tpm_charge=tpm_charge)
    t0 = time.monotonic()
    await pool.ask("alpha", Verdict, {"text": "a short report"})
    await cache.close()
    return backend, limiter, (time.monotonic() - t0) * limiter.tokens.rate  # type: ignore[union-attr]


async def test_a_reserving_endpoint_is_charged_the_prompt_guess_and_the_whole_cap_then_what_was_used(
        tmp_path, monkeypatch):
    backend, limiter, refill = await _ask_once(tmp_path, monkeypatch, "reserved")
    assert limiter.tokens is not None
    prompt = estimate_messages(backend.sent[0].messages)
    assert backend.sent[0].max_tokens == 4000
    # out: the character rule of the prompt and the cap sent (what OpenAI's limiter holds)
    assert 6000 - prompt - 4000 <= backend.levels[0] <= 6000 - prompt - 4000 + refill
    # answered: the prompt guess and the 20 tokens written (the server gave the rest back);
    # not the usage's 40 prompt tokens, which a reserving limiter never counts
    level = limiter.tokens.level
    assert 6000 - prompt - 20 <= level <= min(6000, 6000 - prompt - 20 + refill)


async def test_a_counting_endpoint_is_charged_the_estimate_then_the_usage(tmp_path, monkeypatch):
    backend, limiter, refill = await _ask_once(tmp_path, monkeypatch, "counted")
    assert limiter.tokens is not None
    prompt = estimate_messages(backend.sent[0].messages)
    assert 6000 - prompt - 10 <= backend.levels[0] <= 6000 - prompt - 10 + refill  # the expected output
    assert 6000 - 40 - 20 <= limiter.tokens.level <= min(6000, 6000 - 40 - 20 + refill)  # the usage


async def test_an_input_token_quota_is_charged_the_prompt_estimate_then_the_prompt_used(tmp_path, monkeypatch):
    backend, limiter, refill = await _ask_once(tmp_path, monkeypatch, "input")
    assert limiter.tokens is not None
    prompt = estimate_messages(backend.sent[0].messages)
    assert 6000 - prompt <= backend.levels[0] <= 6000 - prompt + refill  # no expected output
    assert 6000 - 40 <= limiter.tokens.level <= min(6000, 6000 - 40 + refill)  # the 40 in, not the 20 out


async def test_a_reserving_endpoints_give_back_corrects_a_bucket_its_count_already_followed():
    # The count that came with the answer (remaining after admission) already set the bucket;
    # a reserving server then gives back the unused cap, and so must the bucket.
    for reserves, expected_rise in ((True, 900), (False, 0)):
        limiter = RateLimiter(tpm=60_000, concurrency=4, burst_s=60)  # 60,000 tokens, 1,000 a second
        limiter.reserves_output = reserves
        permit = await limiter.acquire(1_000)
        assert limiter.tokens is not None and permit.tokens_after is not None
        level_after = permit.tokens_after[1]
        limiter.observe(RateLimitInfo(remaining_tokens=int(level_after)), permit)
        assert permit.synced
        before = limiter.tokens.level
        t0 = time.monotonic()
        await permit.done(100)  # the answer used 100 of what was charged
        refill = (time.monotonic() - t0) * 1_000
        assert before + expected_rise <= limiter.tokens.level <= math.ceil(before + expected_rise + refill + 1)


class _Clock:
    """The limiter's clock, moved by hand (asyncio keeps its own)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


async def test_a_reserving_servers_count_sets_the_bucket_through_the_give_backs_made_after_it(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(limits, "time", clock)
    lim = RateLimiter(tpm=60_000, concurrency=4, burst_s=60, margin_s=0.0)  # 60,000 tokens, 1,000 a second
    lim.reserves_output = True
    misses: list[float | None] = []
    lim.followed = lambda seq, miss: misses.append(miss)
    a, b = await lim.acquire(10_000), await lim.acquire(10_000)  # 40,000 left, here and at the server
    clock.now += 1.0  # 41,000
    await a.done(1_000)  # 9,000 of a's reservation unused: the server gave it back as a's answer left
    clock.now += 1.0  # 51,000
    # b's answer brings the count the server took when it admitted b, 10 ms after the grant and
    # before that give-back: 40,010
    lim.observe(RateLimitInfo(remaining_tokens=40_010), b)
    assert lim.tokens is not None
    assert lim.tokens.level == pytest.approx(51_000)  # the give-back kept (it was lost: 41,000)
    assert misses == [pytest.approx(0.0, abs=1e-6)]  # and not read as a cheaper prompt
    await b.done(1_000)
    assert lim.tokens.level == pytest.approx(60_000)
    # the next count is predicted from b's: c took 10,000, and the server charged it 9,800
    c = await lim.acquire(10_000)
    clock.now += 1.0
    lim.observe(RateLimitInfo(remaining_tokens=50_200 + 10), c)
    assert misses[1] == pytest.approx(200, abs=1e-6)  # read as a cheaper prompt, as it was


async def test_a_bucket_from_announced_limits_predicts_nothing_from_where_it_started(monkeypatch):
    # Its start is a remaining count floored at 0, whatever debt it hides: no first prediction.
    clock = _Clock()
    monkeypatch.setattr(limits, "time", clock)
    lim = RateLimiter(concurrency=4, margin_s=0.0)
    lim.reserves_output = True
    misses: list[float | None] = []
    lim.followed = lambda seq, miss: misses.append(miss)
    first = await lim.acquire(5_000)
    lim.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=0), first)  # 1,000 a second, a bucket of 1,000
    await first.done(5_000)
    clock.now += 1.0  # 1,000
    a = await lim.acquire(500)
    clock.now += 1.0
    lim.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=300), a)
    assert misses == [None]
    b = await lim.acquire(500)  # from the count: 300 + 990 of refill, held at 1,000; 500 after b
    clock.now += 1.0
    # the server charged b 400: 600 left, and 10 ms of refill when it counted b
    lim.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=610), b)
    assert misses[1] == pytest.approx(100, abs=1e-6)  # b was charged 400 by the server


async def test_a_reserving_servers_give_back_is_made_when_the_answer_leaves_not_replayed_from_the_grant(
        monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(limits, "time", clock)
    for reserves, level in ((True, 200.0), (False, 100.0)):
        lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)  # 1,000 a second, a bucket of 1,000
        lim.reserves_output = reserves
        assert lim.tokens is not None
        p = lim._grant(3_000, clock.now)  # a prompt of 500 and a cap of 2,500: -2,000
        clock.now += 0.6  # -1,400
        q = lim._grant(1_000, clock.now)  # -2,400
        clock.now += 0.1  # -2,300
        await p.done(500)  # nothing written
        # Reserving: the server held the cap until now and gives back 2,500: -2,300 + 2,500. Counting,
        # the server charged 500 at p's admission, sat full from 0.5 s, q took it to 0, and 100 since.
        assert lim.tokens.level == pytest.approx(level), reserves
        await q.done(1_000)
