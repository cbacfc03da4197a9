"""Redis errors told apart, on a real redis-server: a command refused on one key
(WRONGTYPE) is a miss for that key, counted and warned once, and the team goes on; Redis
out of memory (maxmemory with the default noeviction policy) is loud at once and marks
the team degraded with its reason, the link staying up; answers in Redis expire."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import msgspec
import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError

from drscore import prompts
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.judging import ChatResponse
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.team import Team, open_team
from drscore.engine.runtime.calls.team.link import COMMAND, CONNECTION, MEMORY, classify
from drscore.engine.runtime.calls.team.local_server import LocalRedis


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    reason: str


class CountingBackend:
    name = "http"
    cacheable = True
    model = "m1"

    def __init__(self) -> None:
        self.calls = 0

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):
        self.calls += 1
        return ChatResponse(text='{"score": 3, "reason": "ok"}', input_tokens=10, output_tokens=5), None

    async def close(self):
        pass


@pytest.fixture
def template(monkeypatch):
    tpl = prompts.parse("t", "---\nmax_tokens: 50\nexpected_output_tokens: 10\n---\n## user\nRate: ${text}")
    monkeypatch.setattr(prompts, "load", lambda name: tpl)


async def _process(url: str, where: Path, warnings: list[str], *, claims: bool = True,
                   ttl_s: float = 3600.0) -> tuple[JudgePool, object, Team, CountingBackend, RateLimiter]:
    team = await open_team(url, base_url="http://judge.test/v1", model="m1", api_key=None,
                           warn=warnings.append, answer_ttl_s=ttl_s)
    cache = team.wrap_cache(await JudgeCache.open(where / "judge.sqlite"), claims=claims)
    limiter = RateLimiter(rpm=60_000, concurrency=4)
    limiter.use_shared(team.quota)
    backend = CountingBackend()
    pool = JudgePool(backend, cache=cache, limiter=limiter, prices=PriceTable(), backoff_base_s=0.01)
    return pool, cache, team, backend, limiter


def test_classify_tells_the_three_failures_apart():
    assert classify(ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")) == COMMAND
    assert classify(OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")) == MEMORY
    assert classify(ResponseError("Error running script: OOM command not allowed when used memory")) == MEMORY
    assert classify(RedisConnectionError("Connection closed by server.")) == CONNECTION
    assert classify(OSError("reset")) == CONNECTION and classify(asyncio.TimeoutError()) == CONNECTION


async def test_wrong_type_key_is_a_miss_for_that_key_and_the_team_goes_on(redis_url, tmp_path, template):
    warn_a: list[str] = []
    warn_b: list[str] = []
    pool_a, cache_a, team_a, backend_a, _ = await _process(redis_url, tmp_path / "a", warn_a)
    pool_b, cache_b, team_b, backend_b, limiter_b = await _process(redis_url, tmp_path / "b", warn_b)
    client = redis.Redis.from_url(redis_url)
    try:
        first = await pool_a.ask("t", Verdict, {"text": "x"})
        answer_key = team_a.tier.key_of(first.key)
        client.delete(answer_key)
        client.set(answer_key, "a string where a hash belongs")  # another tool's key, say
        again = await pool_b.ask("t", Verdict, {"text": "x"})  # lookup: WRONGTYPE -> a miss
        assert again.value == first.value and backend_b.calls == 1
        other = await pool_b.ask("t", Verdict, {"text": "y"})  # another key: shared as usual
        assert other.value.score == 3
        stats = team_b.stats()
        # the lookup-or-claim and the store of "x" were refused; counted, warned once
        assert stats["key_errors"] == 2 and len(warn_b) == 1 and "refused a command on one key" in warn_b[0]
        assert "WRONGTYPE" in warn_b[0]
        assert stats["degraded"] is False and team_b.link.up and limiter_b.shared is not None
        assert team_b.quota.reservations == 2  # both calls were paced by the team's quota
        assert client.type(team_b.tier.key_of(other.key)) == b"hash"  # "y" was shared
        assert await pool_a.ask("t", Verdict, {"text": "y"}) and backend_a.calls == 1  # ... and a used it
    finally:
        client.close()
        for cache, team in ((cache_a, team_a), (cache_b, team_b)):
            await cache.close()
            await team.close()


async def test_out_of_memory_is_loud_at_once_and_degrades_with_the_reason(tmp_path, template):
    warnings: list[str] = []
    with LocalRedis() as server:
        pool, cache, team, backend, limiter = await _process(server.url, tmp_path / "a", warnings)
        client = aioredis.Redis.from_url(server.url)
        try:
            await client.config_set("maxmemory", "1")  # every write refused (noeviction)
            first = await pool.ask("t", Verdict, {"text": "x"})
            assert first.value.score == 3 and backend.calls == 1
            assert len(warnings) == 1 and "out of memory" in warnings[0] and "exit 3" in warnings[0]
            rest = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"z{i}"}) for i in range(4)))
            assert len(rest) == 4 and backend.calls == 5 and len(warnings) == 1  # loud once, not per call
            stats = team.stats()
            assert stats["degraded"] is True and stats["out_of_memory"] is True
            assert "Redis out of memory: command not allowed when used memory" in stats["degraded_reason"]
            assert stats["memory_refusals"] >= 5 and team.link.up  # reads still go to Redis
            assert limiter.shared is not None  # the quota is retried call by call, not dropped
            assert await client.dbsize() <= 1  # nothing was stored (the quota hash at most)
        finally:
            await client.config_set("maxmemory", "0")
            await client.aclose()
            await cache.close()
            await team.close()


@pytest.mark.parametrize("claims", [True, False])
async def test_answers_in_redis_expire(redis_url, tmp_path, template, claims):
    pool, cache, team, _, _ = await _process(redis_url, tmp_path / "a", [], claims=claims, ttl_s=3600.0)
    client = redis.Redis.from_url(redis_url)
    try:
        judged = await pool.ask("t", Verdict, {"text": "x"})
        ttl_ms = client.pttl(team.tier.key_of(judged.key))
        assert 3_590_000 < ttl_ms <= 3_600_000  # one hour, set with the answer
    finally:
        client.close()
        await cache.close()
        await team.close()
