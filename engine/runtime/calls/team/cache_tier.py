"""The shared cache tier: Redis behind the local SQLite cache.

A lookup asks the local cache first, then Redis; a Redis hit is copied into the local
cache (so the next run on this machine needs no network at all). An answer is committed
locally first (the run's checkpoint), then written to Redis. With claims
(:mod:`.claims`) the Redis lookup and the claim are one script, and so are storing the
answer and releasing the claim: the cache then leaves those Redis steps to the claims.

:class:`TieredCache` offers what the judge pool uses of
:class:`drscore.engine.runtime.calls.cache.JudgeCache` — ``get``, ``put``, ``close`` and the claim API
(``claim_or_wait``, ``release``) — over both tiers, and hands anything else (stats,
explain, vacuum) to the local cache. The pool needs no Redis-specific code. The keys are the same
content-addressed request keys as the local cache, so a warm re-run on another machine
pays for nothing. Entries hold the response and the request components (to fill the
local cache and keep ``drscore cache explain`` working).
"""
from __future__ import annotations

import asyncio
from typing import Any

import orjson

from drscore.engine.runtime.calls.team.link import TeamLink


# A shared answer lives this long in Redis (the local caches keep theirs): a long-lived
# team Redis must not fill up and start refusing writes. drscore run --redis-ttl DAYS.
DEFAULT_ANSWER_TTL_S = 30 * 86_400.0


class RedisTier:
    """Content-addressed responses in Redis hashes ``{prefix}:c:{key}`` (fields r, c),
    each expiring ``ttl_s`` seconds after it was written."""

    def __init__(self, link: TeamLink, *, ttl_s: float = DEFAULT_ANSWER_TTL_S) -> None:
        self.link = link
        self.ttl_s = ttl_s
        self.hits = 0
        self.misses = 0
        self.writes = 0

    def key_of(self, key: str) -> str:
        """The Redis key holding the answer to request ``key``."""
        return self.link.key("c", key)

    async def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        """The response and its components, or None (absent, or Redis is gone)."""
        found = await self.link.guard(self.link.client.hmget(self.key_of(key), "r", "c"), None)
        if not found or found[0] is None:
            self.misses += 1
            return None
        self.hits += 1
        components = orjson.loads(found[1]) if found[1] else {}
        return found[0], components

    @property
    def ttl_ms(self) -> int:
        return max(1, int(self.ttl_s * 1000))

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        # no MULTI: inside one, an OOM refusal would come back as a generic EXECABORT
        pipe = self.link.client.pipeline(transaction=False)
        pipe.hset(self.key_of(key), mapping={"r": response, "c": orjson.dumps(components, option=orjson.OPT_SORT_KEYS)})
        pipe.pexpire(self.key_of(key), self.ttl_ms)
        ok = await self.link.guard(pipe.execute(), None)
        if ok is not None:
            self.writes += 1


class TieredCache:
    """Local cache first, then the Redis tier; writes go to both. Offers the local cache's
    claim API (``claim_or_wait``, ``put`` ending the claim, ``release``) across both tiers:
    processes sharing the SQLite file settle among themselves first, then the process that
    holds the local claim claims in Redis for everyone on other machines."""

    def __init__(self, local: Any, tier: RedisTier) -> None:
        self.local = local
        self.tier = tier
        self._claims: Any = None
        self._releases: set[asyncio.Task[None]] = set()

    def defer_to_claims(self, claims: Any) -> None:
        """Let ``claims`` do the Redis lookup (with its claim) and the Redis write (with its release)."""
        self._claims = claims

    @property
    def waited(self) -> int:
        """Answers another process paid for: through the shared file or through Redis."""
        return getattr(self.local, "waited", 0) + self.tier.hits

    async def get(self, key: str) -> bytes | None:
        raw = await self.local.get(key)
        if raw is not None or (self._claims is not None and self.tier.link.up):
            return raw  # with claims, the Redis lookup is part of claim_or_wait
        hit = await self.tier.get(key)
        if hit is None:
            return None
        response, components = hit
        await self.local.put(key, response, components)
        return response

    async def claim_or_wait(self, key: str) -> bytes | None:
        """The answer when any process sharing the file or the Redis has it or is paying for
        it (waited for), or None once this process holds both claims and should call."""
        claim_local = getattr(self.local, "claim_or_wait", None)
        if claim_local is not None:
            raw = await claim_local(key)
            if raw is not None:
                return raw
        if self._claims is None or not self.tier.link.up:
            return None
        found = await self._claims.claim(key)
        return None if found is None else found[0]

    async def adopt(self, key: str, response: bytes, components: bytes | None) -> bytes:
        """An answer found in Redis (by the claims' lookup): counted, copied locally."""
        self.tier.hits += 1
        await self.local.put(key, response, orjson.loads(components) if components else {})
        return response

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        """Commit locally (the checkpoint; ends a local claim), then store in Redis: with a
        Redis claim held, storing and releasing it are one round trip."""
        await self.local.put(key, response, components)
        if self._claims is not None and self._claims.holds(key) and self.tier.link.up:
            await self._claims.release(key, (response, orjson.dumps(components, option=orjson.OPT_SORT_KEYS)))
            return
        await self.tier.put(key, response, components)

    def release(self, key: str) -> None:
        """Give up the claims on ``key`` without an answer (the call failed): waiters on this
        file and on Redis take it over."""
        release_local = getattr(self.local, "release", None)
        if release_local is not None:
            release_local(key)
        if self._claims is not None and self._claims.holds(key):
            task = asyncio.get_running_loop().create_task(self._claims.release(key, None))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def close(self) -> None:
        if self._releases:
            await asyncio.gather(*list(self._releases), return_exceptions=True)
        await self.local.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)
