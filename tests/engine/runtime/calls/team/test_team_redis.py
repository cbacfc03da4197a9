"""Team scale on a real redis-server (started by the ``redis_url`` fixture): the shared
quota script by hand, the 429 pause crossing processes, the cache tier, claims with
leases, and what happens when Redis is missing or goes away. Each "process" here is its
own TeamLink (its own connections and pub/sub), as separate processes would have."""
from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated

import aiohttp
import msgspec
import pytest
import redis.asyncio as aioredis

from drscore import prompts
from drscore.engine.runtime import extras
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.extras import MissingExtra
from drscore.engine.runtime.calls.judging import ChatResponse, JudgeFailed, RateLimitInfo, TransientError
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.team import Team, TeamError, endpoint_id, open_team, redact_url
from drscore.engine.runtime.calls.team.link import load_redis
from drscore.engine.runtime.calls.team.local_server import LocalRedis
from drscore.engine.runtime.calls.local_process import free_port
from drscore.judge.http import HttpBackend
from drscore.judge.mock.server import MockConfig, start


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    reason: str


@pytest.fixture
def template(monkeypatch):
    tpl = prompts.parse("t", "---\nmax_tokens: 50\nexpected_output_tokens: 10\n---\n## user\nRate: ${text}")
    monkeypatch.setattr(prompts, "load", lambda name: tpl)


class SlowBackend:
    """Answers after ``delay`` seconds; counts calls; fails the first ``fail`` calls."""

    name = "http"
    cacheable = True
    model = "m1"

    def __init__(self, delay: float = 0.0, fail: int = 0) -> None:
        self.delay, self.fail, self.calls = delay, fail, 0

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.calls <= self.fail:
            raise TransientError("injected")
        return ChatResponse(text='{"score": 2, "reason": "ok"}', input_tokens=10, output_tokens=5), None

    async def close(self):
        pass


async def _team(url: str, warnings: list[str] | None = None, lease_s: float = 15.0) -> Team:
    return await open_team(url, base_url="http://judge.test/v1", model="m1", api_key="sk-secret", lease_s=lease_s,
                           warn=(warnings.append if warnings is not None else lambda m: None))


async def _process(url, tmp_path, name, backend, *, lease_s=15.0, warnings=None, limiter=None):
    """One process's pool: its own SQLite cache, its own link to the shared Redis."""
    team = await _team(url, warnings, lease_s)
    cache = team.wrap_cache(await JudgeCache.open(tmp_path / name / "judge.sqlite"))
    limiter = limiter or RateLimiter(concurrency=8)
    limiter.use_shared(team.quota)
    pool = JudgePool(backend, cache=cache, limiter=limiter, prices=PriceTable(),
                     backoff_base_s=0.01)
    return pool, cache, team


@contextlib.asynccontextmanager
async def _two_processes(redis_url: str, cfg: MockConfig, pool_of: Callable[[str, Team], JudgePool],
                         ) -> AsyncIterator[tuple[str, list[Team], list[JudgePool]]]:
    """The mock in this process, and two processes' teams on one Redis with the pool each makes
    (``pool_of(judge_url, team)``): the mock's base URL, the teams, the pools; all closed after."""
    runner, port = await start(cfg)
    base = f"http://127.0.0.1:{port}"
    teams = [await _team(redis_url), await _team(redis_url)]
    pools: list[JudgePool] = []
    try:
        pools.extend(pool_of(f"{base}/v1", team) for team in teams)
        yield base, teams, pools
    finally:
        for pool in pools:
            await pool.backend.close()
        for team in teams:
            await team.close()
        await runner.cleanup()


async def _ask_each(pools: list[JudgePool], n: int) -> list:
    """``n`` distinct calls from each pool, all at once."""
    return await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"{i}-{j}"})
                                  for j, pool in enumerate(pools) for i in range(n)))


async def _close(cache, team):
    await cache.close()
    await team.close()


def test_endpoint_identity_uses_a_key_fingerprint_never_the_key():
    a = endpoint_id("https://api.example/v1", "m", "sk-one")
    assert a == endpoint_id("https://api.example/v1/", "m", "sk-one")  # trailing slash is the same endpoint
    assert a != endpoint_id("https://api.example/v1", "m", "sk-two")
    assert a != endpoint_id("https://api.example/v1", "m2", "sk-one")
    assert "sk-one" not in a
    assert redact_url("redis://user:hunter2@host:6380/1") == "redis://user:***@host:6380/1"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


async def test_reservation_script_by_hand(redis_url):
    team = await _team(redis_url)
    q = team.quota
    # 1 request/s, capacity 2; 10 tokens/s, capacity 20
    shape = (1.0, 2.0, 10.0, 20.0)
    try:
        assert await q.reserve(1, 5, shape) == 0.0
        assert await q.reserve(1, 5, shape) == 0.0  # requests 0 left, tokens 10 left
        wait = await q.reserve(1, 5, shape)
        assert 0.9 < wait <= 1.0  # one request refills in 1 s (minus the few ms elapsed)
        assert await q.adjust(-10, shape)  # refund 10 tokens: the calls used less than estimated
        state = await team.link.client.hgetall(q.key)
        assert float(state[b"k"]) == pytest.approx(20.0, abs=0.1)  # back to full, never above capacity
        assert float(state[b"r"]) == pytest.approx(0.0, abs=0.1)
        assert q.reservations == 2 and q.waits == 1
    finally:
        await team.close()


async def test_the_limiter_corrects_the_shared_reservation_from_usage(redis_url):
    team = await _team(redis_url)
    limiter = RateLimiter(tpm=6000, concurrency=4, safety=1.0)  # 100 tokens/s, capacity 100
    limiter.use_shared(team.quota)
    try:
        permit = await limiter.acquire(50)  # reserves 50 of the shared 100
        level = float((await team.link.client.hgetall(team.quota.key))[b"k"])
        assert level == pytest.approx(50, abs=3)
        await permit.done(20)  # the call used 20: 30 go back to everyone
        level = float((await team.link.client.hgetall(team.quota.key))[b"k"])
        assert level == pytest.approx(80, abs=3)  # 50 + 30 (+ a few ms of refill)
        assert team.quota.reservations == 1
        # The pool's order: the answer's headers first, then its usage. Whether the answer held
        # a count or not, the usage still corrects the store (the headers once stopped it).
        for info in (RateLimitInfo(), RateLimitInfo(remaining_tokens=60, limit_tokens=6000)):
            before = float((await team.link.client.hgetall(team.quota.key))[b"k"])
            permit = await limiter.acquire(40)
            limiter.observe(info, permit)
            await permit.done(10)  # 30 of the 40 back: 10 taken (uncorrected, 40)
            after = float((await team.link.client.hgetall(team.quota.key))[b"k"])
            assert after - before == pytest.approx(-10, abs=8), info  # (+ the refill of a wait, if any)
    finally:
        await team.close()


async def test_a_429_seen_by_one_process_pauses_the_others(redis_url):
    one, other = await _team(redis_url), await _team(redis_url)
    lim_one, lim_other = RateLimiter(rpm=600, concurrency=4), RateLimiter(rpm=600, concurrency=4)
    lim_one.use_shared(one.quota)
    lim_other.use_shared(other.quota)
    heard: list[float] = []
    other.quota.attach(lambda s: (heard.append(s), lim_other.pause_for(s)))
    try:
        permit = await lim_one.acquire(10)
        await lim_one.rate_limited_release(permit, RateLimitInfo(retry_after_s=0.6, remaining_requests=0))
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.01)
        assert heard == [0.6]
        assert lim_other._paused_until > time.monotonic() + 0.3  # the other limiter holds its callers
        # the store itself holds the pause: a process that missed the message is told to wait
        wait = await other.quota.reserve(1, 0, lim_other._shape())
        assert 0.3 < wait <= 0.6
    finally:
        await one.close()
        await other.close()


async def test_two_processes_share_one_rpm_and_the_server_never_says_429(redis_url, template):
    # Without sharing, two clients each told the full 600 rpm overrun the server (see
    # test_limits); sharing one bucket through Redis they stay inside it together.
    def pool_of(url: str, team: Team) -> JudgePool:
        limiter = RateLimiter(rpm=600, concurrency=16)
        limiter.use_shared(team.quota)
        return JudgePool(HttpBackend(url, "mock"), cache=None, limiter=limiter, prices=PriceTable())

    async with _two_processes(redis_url, MockConfig(rpm=600, burst=1.0), pool_of) as (base, teams, pools):
        assert len(await _ask_each(pools, 20)) == 40
        assert sum(p.stats.rate_limited for p in pools) == 0
        assert sum(t.quota.reservations for t in teams) == 40


async def test_two_processes_hold_their_caps_in_one_output_quota(redis_url, monkeypatch):
    # Anthropic's output quota (a minute's bucket of 2,400 tokens) against calls sent a 400-token
    # cap, eight at once from each of two processes: each process's own mirror of the bucket
    # would let it hold six caps, twelve together, twice what the server holds. Holding them in
    # one bucket in Redis, the two never ask it for more than it has.
    tpl = prompts.parse("t", "---\nmax_tokens: 400\nexpected_output_tokens: 10\n---\n## user\nRate: ${text}")
    monkeypatch.setattr(prompts, "load", lambda name: tpl)
    def pool_of(url: str, team: Team) -> JudgePool:
        limiter = RateLimiter(concurrency=8)
        limiter.use_shared(team.quota)
        pool = JudgePool(HttpBackend(url, "m1"), cache=None, limiter=limiter, prices=PriceTable(), fit_output_cap=False)
        pool.share_output_quota(team.output_quota)
        return pool

    cfg = MockConfig(profile="anthropic", tpm=10_000_000, tpm_charge="input", otpm=2_400, burst=60.0, latency=0.3)
    async with _two_processes(redis_url, cfg, pool_of) as (base, teams, pools):
        assert len(await _ask_each(pools, 12)) == 24
        async with aiohttp.ClientSession() as session, session.get(f"{base}/stats") as r:
            stats = await r.json()
        assert stats["rate_limited"] == 0 and sum(p.stats.rate_limited for p in pools) == 0
        assert all(p.output_quota is not None and p.output_quota.shared is t.output_quota
                   for p, t in zip(pools, teams))
        assert sum(t.output_quota.reservations for t in teams) >= 20  # the calls after each preflight
        assert sum(t.output_quota.waits for t in teams) >= 1  # the caps did not all fit at once


async def test_cache_tier_serves_another_machine_and_fills_its_local_cache(redis_url, tmp_path, template):
    backend_a, backend_b = SlowBackend(), SlowBackend()
    pool_a, cache_a, team_a = await _process(redis_url, tmp_path, "a", backend_a)
    pool_b, cache_b, team_b = await _process(redis_url, tmp_path, "b", backend_b)
    try:
        first = await pool_a.ask("t", Verdict, {"text": "x"})
        again = await pool_b.ask("t", Verdict, {"text": "x"})
        assert (backend_a.calls, backend_b.calls) == (1, 0)
        # paid by another process: the pool labels it like any answer a colleague paid for
        assert first.source == "network" and again.source == "shared" and again.value == first.value
        assert team_b.tier.hits == 1
        assert await cache_b.local.get(first.key) == first.text.encode()  # copied into b's SQLite
    finally:
        await _close(cache_a, team_a)
        await _close(cache_b, team_b)


async def test_hundreds_of_calls_at_once_queue_for_connections_and_never_degrade(redis_url, tmp_path, template):
    # More concurrent Redis operations than connections: they must wait for one, not be
    # taken for Redis going away (redis-py's default pool raises "Too many connections").
    backend = SlowBackend(delay=0.02)
    pool, cache, team = await _process(redis_url, tmp_path, "a", backend, limiter=RateLimiter(concurrency=400))
    try:
        results = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"c{i}"}) for i in range(400)))
        assert len(results) == 400 and backend.calls == 400
        assert team.stats()["degraded"] is False and team.claims.claimed == 400 and team.tier.writes == 400
    finally:
        await _close(cache, team)


async def test_two_processes_asking_the_same_calls_at_once_pay_each_once(redis_url, tmp_path, template):
    backend_a, backend_b = SlowBackend(delay=0.3), SlowBackend(delay=0.3)
    pool_a, cache_a, team_a = await _process(redis_url, tmp_path, "a", backend_a)
    pool_b, cache_b, team_b = await _process(redis_url, tmp_path, "b", backend_b)
    try:
        asks = [pool.ask("t", Verdict, {"text": str(i)}) for i in range(6) for pool in (pool_a, pool_b)]
        results = await asyncio.gather(*asks)
        assert backend_a.calls + backend_b.calls == 6  # 12 asks, 6 distinct calls, each paid once
        assert sorted(r.source for r in results).count("shared") == 6
        assert team_a.claims.joined + team_b.claims.joined == 6
        assert await team_a.link.client.keys("drscore:claim:*") == []  # every claim released
    finally:
        await _close(cache_a, team_a)
        await _close(cache_b, team_b)


async def test_a_dead_claimant_releases_its_claim_when_the_lease_expires(redis_url, tmp_path, template):
    backend = SlowBackend()
    pool, cache, team = await _process(redis_url, tmp_path, "a", backend, lease_s=5)
    try:
        req, components = pool.build("t", Verdict, {"text": "orphan"})
        from drscore.engine.runtime.calls.cache import request_key

        key = request_key(components)
        # A process claimed the call and died: nobody renews, nobody releases.
        await team.link.client.set(f"drscore:claim:{key}", "dead-process", px=400)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        judged = await pool.ask("t", Verdict, {"text": "orphan"})
        assert judged.source == "network" and backend.calls == 1
        assert loop.time() - t0 >= 0.3  # it waited for the lease rather than paying twice at once
        assert team.claims.claimed == 1 and team.claims.waited >= 1
    finally:
        await _close(cache, team)


async def test_a_failed_holder_lets_the_waiter_call_itself(redis_url, tmp_path, template):
    failing = SlowBackend(delay=0.2, fail=99)  # never answers
    healthy = SlowBackend()
    pool_a, cache_a, team_a = await _process(redis_url, tmp_path, "a", failing)
    pool_a.max_retries = 0
    pool_b, cache_b, team_b = await _process(redis_url, tmp_path, "b", healthy)
    try:
        first = asyncio.create_task(pool_a.ask("t", Verdict, {"text": "y"}))
        await asyncio.sleep(0.05)  # a holds the claim
        second = await pool_b.ask("t", Verdict, {"text": "y"})
        with pytest.raises(JudgeFailed):
            await first
        assert second.source == "network" and healthy.calls == 1 and team_b.claims.waited == 1
    finally:
        await _close(cache_a, team_a)
        await _close(cache_b, team_b)


async def test_redis_unreachable_at_start_is_one_clear_error():
    port = free_port()  # nothing listens there
    with pytest.raises(TeamError) as err:
        await open_team(f"redis://:pw@127.0.0.1:{port}/0", base_url="u", model="m", api_key=None)
    message = str(err.value)
    assert f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0" in message and "pw" not in message
    assert "\n" not in message


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)  # import fails as if not installed
    with pytest.raises(MissingExtra, match=r"--redis needs the 'team' extra.*pip install 'drscore\[team\]'"):
        load_redis()
    monkeypatch.setitem(extras.EXTRAS, "team", ("drscore_no_such_redis_xyz",))  # not even found
    with pytest.raises(MissingExtra, match=r"pip install 'drscore\[team\]'"):
        load_redis()


async def test_redis_going_away_mid_run_degrades_to_local_with_one_warning(tmp_path, template):
    server = LocalRedis()
    server.start()
    warnings: list[str] = []
    backend = SlowBackend()
    limiter = RateLimiter(rpm=6000, concurrency=4)
    pool, cache, team = await _process(server.url, tmp_path, "a", backend, warnings=warnings, limiter=limiter)
    try:
        before = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"a{i}"}) for i in range(5)))
        assert team.quota.reservations == 5
        server.stop()
        after = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"b{i}"}) for i in range(5)))
        assert len(before) == len(after) == 5 and backend.calls == 10
        assert len(warnings) == 1 and "continuing alone" in warnings[0]
        assert limiter.shared is None and team.stats()["degraded"] is True
        # nothing paid for was lost: every answer is in the local cache
        for judged in before + after:
            assert await cache.local.get(judged.key) is not None
    finally:
        await _close(cache, team)
        server.stop()


async def test_pubsub_notice_wakes_a_waiter_before_the_lease_ends(redis_url, tmp_path, template):
    backend = SlowBackend()
    pool, cache, team = await _process(redis_url, tmp_path, "a", backend, lease_s=30)
    helper = aioredis.Redis.from_url(redis_url)
    try:
        req, components = pool.build("t", Verdict, {"text": "z"})
        from drscore.engine.runtime.calls.cache import request_key

        key = request_key(components)
        await helper.set(f"drscore:claim:{key}", "other", px=30_000)

        async def other_process_finishes():
            await asyncio.sleep(0.2)
            await helper.hset(f"drscore:c:{key}", mapping={"r": b'{"score": 4, "reason": "theirs"}', "c": b"{}"})
            await helper.delete(f"drscore:claim:{key}")
            await helper.publish("drscore:n:done", key)

        finisher = asyncio.create_task(other_process_finishes())
        judged = await asyncio.wait_for(pool.ask("t", Verdict, {"text": "z"}), 5)  # far less than the lease
        await finisher
        assert judged.source == "shared" and judged.value.score == 4 and backend.calls == 0
    finally:
        await helper.aclose()
        await _close(cache, team)
