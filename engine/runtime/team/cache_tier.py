"""The shared cache tier: Redis behind the local SQLite cache.

A lookup asks the local cache first, then Redis; a Redis hit is copied into the local
cache (so the next run on this machine needs no network at all). An answer is committed
locally first (the run's checkpoint), then written to Redis. With claims
(:mod:`.claims`) the Redis lookup and the claim are one script, and so are storing the
answer and releasing the claim: the cache then leaves those Redis steps to the claims. The keys are the same
content-addressed request keys as the local cache, so a warm re-run on another machine
pays for nothing. Entries hold the response and the request components (to fill the
local cache and keep ``drscore cache explain`` working).

:class:`TieredCache` has the interface the judge pool uses of
:class:`engine.runtime.cache.JudgeCache` (``get``/``put``/``close``), and hands anything
else (stats, explain, vacuum) to the local cache.
"""
from __future__ import annotations

from typing import Any

import orjson

from drscore.engine.runtime.team.link import TeamLink


class RedisTier:
    """Content-addressed responses in Redis hashes ``{prefix}:c:{key}`` (fields r, c)."""

    def __init__(self, link: TeamLink) -> None:
        self.link = link
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

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        ok = await self.link.guard(self.link.client.hset(
            self.key_of(key), mapping={"r": response, "c": orjson.dumps(components, option=orjson.OPT_SORT_KEYS)}),
            None)
        if ok is not None:
            self.writes += 1


class TieredCache:
    """Local cache first, then the Redis tier; writes go to both."""

    def __init__(self, local: Any, tier: RedisTier) -> None:
        self.local = local
        self.tier = tier
        self._claims: Any = None
        self._deferred: dict[str, tuple[bytes, bytes]] = {}

    def defer_to_claims(self, claims: Any) -> None:
        """Let ``claims`` do the Redis lookup (with its claim) and the Redis write (with its release)."""
        self._claims = claims

    async def get(self, key: str) -> bytes | None:
        raw = await self.local.get(key)
        if raw is not None or (self._claims is not None and self.tier.link.up):
            return raw
        hit = await self.tier.get(key)
        if hit is None:
            return None
        response, components = hit
        await self.local.put(key, response, components)
        return response

    async def adopt(self, key: str, response: bytes, components: bytes | None) -> bytes:
        """An answer found in Redis (by the claims' lookup): counted, copied locally."""
        self.tier.hits += 1
        await self.local.put(key, response, orjson.loads(components) if components else {})
        return response

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        await self.local.put(key, response, components)  # the checkpoint first
        if self._claims is not None and self._claims.holds(key) and self.tier.link.up:
            # written to Redis by the claim's release, in the same round trip
            self._deferred[key] = (response, orjson.dumps(components, option=orjson.OPT_SORT_KEYS))
            return
        await self.tier.put(key, response, components)

    def take_deferred(self, key: str) -> tuple[bytes, bytes] | None:
        return self._deferred.pop(key, None)

    async def close(self) -> None:
        await self.local.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)
