"""Team scale on Redis (``--redis URL``): processes that share a Redis and an endpoint
identity share one quota (:mod:`.quota`), one cache tier (:mod:`.cache_tier`) and their
calls in flight (:mod:`.claims`). :func:`open_team` wires them to a run's limiter and
cache; the runtime's core only knows the small protocols these implement.

Needs the ``team`` extra (redis-py), imported only when ``--redis`` is given.
"""
from __future__ import annotations

from typing import Any, Callable

from drscore.engine.runtime.calls.team.cache_tier import DEFAULT_ANSWER_TTL_S, RedisTier, TieredCache
from drscore.engine.runtime.calls.team.claims import RedisClaims
from drscore.engine.runtime.calls.team.link import TeamError, TeamLink, endpoint_id, redact_url
from drscore.engine.runtime.calls.team.quota import RedisQuota

__all__ = ["DEFAULT_ANSWER_TTL_S", "Team", "TeamError", "endpoint_id", "open_team", "redact_url"]


class Team:
    """The Redis-backed parts of one process: attach them, read their stats, close."""

    def __init__(self, link: TeamLink, *, lease_s: float = 15.0, answer_ttl_s: float = DEFAULT_ANSWER_TTL_S) -> None:
        self.link = link
        self.quota = RedisQuota(link)
        # Anthropic's output-token quota, where the server states one: the caps every process
        # holds, in one bucket (engine.runtime.calls.output_quota)
        self.output_quota = RedisQuota(link, "q-out", "pause-out")
        self.tier = RedisTier(link, ttl_s=answer_ttl_s)
        self.lease_s = lease_s
        self.claims: RedisClaims | None = None

    def wrap_cache(self, local: Any, *, claims: bool = True) -> TieredCache:
        """The local cache with the Redis tier behind it, and claims on top (not for a dry
        run, which pays for nothing and so claims nothing)."""
        cache = TieredCache(local, self.tier)
        if claims:
            self.claims = RedisClaims(self.link, cache, lease_s=self.lease_s)
        return cache

    def stats(self) -> dict[str, Any]:
        reason = self.link.degraded_reason
        out: dict[str, Any] = {"redis": self.link.url, "endpoint": self.link.endpoint,
                               "degraded": reason is not None, **self.quota.stats(),
                               "output_reservations": self.output_quota.reservations,
                               "output_reservation_waits": self.output_quota.waits,
                               "redis_cache_hits": self.tier.hits, "redis_cache_writes": self.tier.writes,
                               "answer_ttl_s": self.tier.ttl_s, "key_errors": self.link.key_errors,
                               "out_of_memory": self.link.out_of_memory is not None}
        if self.claims is not None:
            out.update(self.claims.stats())
        if reason is not None:
            out["degraded_reason"] = reason
        if self.link.failure:
            out["failure"] = self.link.failure
        if self.link.memory_refusals:
            out["memory_refusals"] = self.link.memory_refusals
        return out

    async def close(self) -> None:
        if self.claims is not None:
            await self.claims.close()
        await self.link.close()


async def open_team(url: str, *, base_url: str, model: str, api_key: str | None, lease_s: float = 15.0,
                    prefix: str = "drscore", warn: Callable[[str], None] | None = None,
                    answer_ttl_s: float = DEFAULT_ANSWER_TTL_S) -> Team:
    """Connect to Redis (a :class:`TeamError` when it cannot be reached) for this endpoint;
    answers stored there expire after ``answer_ttl_s`` seconds."""
    endpoint = endpoint_id(base_url, model, api_key)
    if warn is not None:
        link = await TeamLink.connect(url, endpoint, prefix=prefix, warn=warn)
    else:
        link = await TeamLink.connect(url, endpoint, prefix=prefix)
    return Team(link, lease_s=lease_s, answer_ttl_s=answer_ttl_s)
