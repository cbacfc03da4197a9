"""In-flight de-duplication across processes: a claim with a lease, and a notification.

After a local cache miss, one script looks the key up in the Redis tier and, when the
answer is not there, claims the key (``SET NX PX``, the value naming the claimant). The
holder renews its leases while it works; one more script stores its answer in the tier,
drops the claim and publishes the key. Two round trips per paid call, not four.
A process that finds the key claimed waits for that notification (or for the lease to
run out) and takes the answer from the cache tier, so the call is paid once. A holder
that dies stops renewing: its lease expires and the next waiter claims the key itself.
A holder whose call failed releases without an answer, and a waiter then tries itself.

Used by :class:`.cache_tier.TieredCache`, which offers the local cache's claim API over
both tiers. When Redis is gone, :meth:`claim` answers "go ahead" at once: the run goes
on alone and may pay twice, never waits forever.
"""
from __future__ import annotations

import asyncio
import contextlib
import uuid

from drscore.engine.runtime.calls.team.cache_tier import TieredCache
from drscore.engine.runtime.calls.team.link import TeamLink

# KEYS: answer hash, claim key. ARGV: owner, lease ms.
# -> {1, response, components} | {2} claimed by us | {0, pttl} held by someone else
_LOOKUP_OR_CLAIM = """
local found = redis.call('HMGET', KEYS[1], 'r', 'c')
if found[1] then return {1, found[1], found[2]} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {0, redis.call('PTTL', KEYS[2])}
"""

# KEYS: claim key, done channel, answer hash. ARGV: owner, request key, answer ttl ms[, response, components]
_STORE_AND_RELEASE = """
if ARGV[4] then
  redis.call('HSET', KEYS[3], 'r', ARGV[4], 'c', ARGV[5])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('PUBLISH', KEYS[2], ARGV[2])
return 1
"""

_RENEW = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    n = n + 1
  end
end
return n
"""


class RedisClaims:
    """Claims on request keys, shared by every process on the same Redis."""

    def __init__(self, link: TeamLink, cache: TieredCache, *, lease_s: float = 15.0) -> None:
        self.link = link
        self.cache = cache
        self.lease_ms = max(100, int(lease_s * 1000))
        self.owner = uuid.uuid4().hex
        self.done_channel = link.channel("done", per_endpoint=False)
        self._lookup_or_claim = link.client.register_script(_LOOKUP_OR_CLAIM)
        self._store_and_release = link.client.register_script(_STORE_AND_RELEASE)
        cache.defer_to_claims(self)
        self._renew = link.client.register_script(_RENEW)
        self._held: set[str] = set()
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._renewer: asyncio.Task[None] | None = None
        self.claimed = 0  # calls this process made on behalf of all
        self.joined = 0  # answers another process paid for, waited for here
        self.waited = 0  # times a claim was found held by someone else
        link.subscribe(self.done_channel, self._done_message)
        link.on_down(self._wake_all)

    def _claim_key(self, key: str) -> str:
        return self.link.key("claim", key)

    def _done_message(self, data: bytes) -> None:
        key = data.decode("ascii", "replace")
        for fut in self._waiters.get(key, ()):
            if not fut.done():
                fut.set_result(None)

    def _wake_all(self) -> None:
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)

    def holds(self, key: str) -> bool:
        return key in self._held

    async def claim(self, key: str) -> tuple[bytes, bool] | None:
        """None: this process holds the claim now (call, then :meth:`release`). Otherwise
        the answer from the Redis tier, and whether it was there already (False: another
        process was paying for it and this one waited)."""
        first = True
        while self.link.up:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(key, []).append(fut)  # before looking: no missed notice
            try:
                reply = await self.link.guard(self._lookup_or_claim(
                    keys=[self.cache.tier.key_of(key), self._claim_key(key)], args=[self.owner, self.lease_ms]), None)
                if reply is None or not self.link.up:
                    return None
                if reply[0] == 1:  # in the tier already
                    raw = await self.cache.adopt(key, reply[1], reply[2])
                    if not first:
                        self.joined += 1
                    return raw, first
                if reply[0] == 2:
                    self._held.add(key)
                    self.claimed += 1
                    self._ensure_renewer()
                    return None
                first = False
                self.waited += 1
                ttl_ms = int(reply[1])
                if ttl_ms == -2:
                    continue  # released just now: look again
                timeout = self.lease_ms / 1000 if ttl_ms < 0 else ttl_ms / 1000 + 0.05
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(fut, timeout)
                # answered (the next lookup finds it), released without an answer (the call
                # failed) or the lease ran out (its holder died): look again, claim if free
            finally:
                futs = self._waiters.get(key)
                if futs is not None:
                    with contextlib.suppress(ValueError):
                        futs.remove(fut)
                    if not futs:
                        del self._waiters[key]
        return None

    async def release(self, key: str, answer: tuple[bytes, bytes] | None) -> None:
        """Store ``answer`` (response, components JSON; None when the call failed) in the
        tier, drop the claim and notify, in one script."""
        self._held.discard(key)
        args: list = [self.owner, key, self.cache.tier.ttl_ms]
        if answer is not None:
            args += list(answer)
        done = await self.link.guard(self._store_and_release(
            keys=[self._claim_key(key), self.done_channel, self.cache.tier.key_of(key)], args=args), None)
        if done is not None and answer is not None:
            self.cache.tier.writes += 1

    def _ensure_renewer(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_loop(), name="team-claims-renew")

    async def _renew_loop(self) -> None:
        while self.link.up and self._held:
            await asyncio.sleep(self.lease_ms / 3000)
            held = list(self._held)
            if held:
                await self.link.guard(self._renew(keys=[self._claim_key(k) for k in held],
                                                  args=[self.owner, self.lease_ms]), None)

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(BaseException):
                await self._renewer

    def stats(self) -> dict[str, int]:
        return {"claimed": self.claimed, "joined": self.joined, "found_in_flight": self.waited}
