"""The connection to the team's Redis and what happens when it fails.

One :class:`TeamLink` per process: a redis-py asyncio client, one pub/sub connection
(whose listener hands each message to the handler registered for its channel), the
endpoint's key prefix, and a health flag. Every Redis operation of the team package goes
through :meth:`TeamLink.guard`, which tells three failures apart (:func:`classify`):

- a lost connection (refused, reset, timed out) marks the link down with one warning, and
  from then on every part does what one process does alone (local pacing, the local
  cache, no cross-process claims);
- Redis out of memory (``OOM command not allowed``, the default ``noeviction`` policy) is
  loud: a warning at once, ``team.degraded`` with the reason in summary.json and exit 3
  at the end, since the team no longer shares what it exists to share; the link stays up
  (reads still work) and each refused operation falls back on its own;
- a command refused on one key (``WRONGTYPE`` ...) is a miss for that key: counted, warned
  once, and the rest of the team machinery goes on.

A run never crashes and never loses an answer because of Redis.

redis-py is imported lazily: without ``--redis`` nothing here is loaded.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sys
from typing import Any, Awaitable, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from drscore.engine.runtime.extras import MissingExtra, require

T = TypeVar("T")

EXTRA_HINT = "pip install 'drscore[team]'"


class TeamError(ValueError):
    """--redis cannot be used (the extra is missing, or Redis is unreachable at start)."""


def load_redis() -> Any:
    """The ``redis.asyncio`` module, or :class:`MissingExtra` naming the 'team' extra."""
    require("team", "--redis")
    try:
        import redis.asyncio as aioredis
    except ImportError:
        raise MissingExtra(f"--redis needs the 'team' extra (redis-py cannot be imported): {EXTRA_HINT}") from None
    return aioredis


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and config.json)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


def endpoint_id(base_url: str, model: str, api_key: str | None) -> str:
    """Who shares a quota: base URL, model and a fingerprint of the key (never the key)."""
    key_fp = hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16] if api_key else "nokey"
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{model}\n{key_fp}".encode("utf-8")).hexdigest()[:20]


CONNECTION, MEMORY, COMMAND = "connection", "memory", "command"


def classify(error: BaseException) -> str:
    """What a Redis failure means: :data:`MEMORY` (Redis refuses writes at its memory
    limit), :data:`COMMAND` (one command refused, e.g. a key of the wrong type) or
    :data:`CONNECTION` (Redis is unreachable: everything else)."""
    from redis import exceptions

    if isinstance(error, exceptions.ResponseError) and not isinstance(error, exceptions.ConnectionError):
        # redis-py maps the "OOM" reply (also from inside a script or a pipeline) to its own
        # class and drops the prefix; older versions keep the text
        out_of_memory = getattr(exceptions, "OutOfMemoryError", ())
        if isinstance(error, out_of_memory) or "OOM command not allowed" in str(error):
            return MEMORY
        return COMMAND
    return CONNECTION


def _warn_stderr(message: str) -> None:
    print(f"drscore: warning: {message}", file=sys.stderr, flush=True)


class TeamLink:
    """A Redis client shared by the quota, the cache tier and the claims of one process."""

    def __init__(self, client: Any, url: str, endpoint: str, *, prefix: str = "drscore",
                 warn: Callable[[str], None] = _warn_stderr) -> None:
        self.client = client
        self.url = redact_url(url)
        self.endpoint = endpoint
        self.prefix = prefix
        self.up = True
        self.failure: str | None = None  # why the link went down
        self.out_of_memory: str | None = None  # Redis's refusal, the first time it was out of memory
        self.memory_refusals = 0
        self.key_errors = 0  # commands refused on one key, each taken as a miss
        self._warn = warn
        self._errors = self._error_types()
        self._handlers: dict[str, Callable[[bytes], None]] = {}
        self._on_down: list[Callable[[], None]] = []
        self._pubsub: Any = None
        self._listener: asyncio.Task[None] | None = None

    @staticmethod
    def _error_types() -> tuple[type[BaseException], ...]:
        from redis.exceptions import RedisError

        return (RedisError, OSError, asyncio.TimeoutError)

    @classmethod
    async def connect(cls, url: str, endpoint: str, *, prefix: str = "drscore",
                      warn: Callable[[str], None] = _warn_stderr, timeout_s: float = 5.0,
                      max_connections: int = 32) -> TeamLink:
        """Connect and check with a PING; unreachable Redis is a :class:`TeamError`."""
        aioredis = load_redis()
        from redis.exceptions import RedisError

        try:
            # A blocking pool: hundreds of calls may touch Redis at once; they queue for one of
            # a few connections instead of failing with "Too many connections" (which would
            # read as Redis going away). One connection is the pub/sub listener's for good.
            pool = aioredis.BlockingConnectionPool.from_url(
                url, max_connections=max_connections + 1, timeout=timeout_s,
                socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
            client = aioredis.Redis(connection_pool=pool)
        except (ValueError, TypeError) as e:
            raise TeamError(f"bad --redis URL {redact_url(url)}: {e}") from None
        try:
            await asyncio.wait_for(client.ping(), timeout=timeout_s)
        except (RedisError, OSError, asyncio.TimeoutError) as e:
            with contextlib.suppress(Exception):
                await client.aclose()
            reason = str(e) or type(e).__name__
            raise TeamError(f"cannot reach Redis at {redact_url(url)} ({reason}); "
                            "start redis-server (see docs/team.md) or drop --redis") from None
        link = cls(client, url, endpoint, prefix=prefix, warn=warn)
        await link._start_listener()
        return link

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    # -- failure handling --------------------------------------------------------------
    async def guard(self, op: Awaitable[T], fallback: T) -> T:
        """Await ``op``; on a Redis failure mark the link down and return ``fallback``."""
        if not self.up:
            if hasattr(op, "close"):
                op.close()  # a coroutine never awaited: close it quietly
            return fallback
        try:
            return await op
        except self._errors as e:
            self.failed(e)
            return fallback

    def failed(self, error: BaseException) -> None:
        """Account for ``error`` by its kind (see :func:`classify`)."""
        kind = classify(error)
        if kind == CONNECTION:
            self.mark_down(error)
        elif kind == MEMORY:
            self.mark_full(error)
        else:
            self.key_errors += 1
            if self.key_errors == 1:
                self._warn(f"Redis at {self.url} refused a command on one key ({error}); taken as a miss for "
                           "that key and counted in summary.json (team.key_errors); the team goes on")

    def mark_full(self, error: BaseException | str) -> None:
        """Redis refuses writes at its memory limit: warn at once (the run will exit 3)."""
        self.memory_refusals += 1
        if self.out_of_memory is not None:
            return
        self.out_of_memory = error if isinstance(error, str) else (str(error) or type(error).__name__)
        self._warn(f"Redis at {self.url} is out of memory ({self.out_of_memory}): answers are not shared and "
                   "the team's quota and claims fail call by call; raise its maxmemory, lower --redis-ttl or "
                   "flush old keys. The run goes on and will exit 3")

    @property
    def degraded_reason(self) -> str | None:
        """Why the team does not work as one (None while it does)."""
        if not self.up:
            return f"Redis went away: {self.failure}"
        if self.out_of_memory is not None:
            return f"Redis out of memory: {self.out_of_memory}"
        return None

    def mark_down(self, error: BaseException | str) -> None:
        if not self.up:
            return
        self.up = False
        self.failure = error if isinstance(error, str) else (str(error) or type(error).__name__)
        self._warn(f"Redis at {self.url} went away ({self.failure}); continuing alone: local pacing "
                   "and the local cache only (other processes no longer share this one's quota)")
        for callback in self._on_down:
            callback()

    def on_down(self, callback: Callable[[], None]) -> None:
        self._on_down.append(callback)

    # -- notifications -----------------------------------------------------------------
    def subscribe(self, channel: str, handler: Callable[[bytes], None]) -> None:
        """Register ``handler`` for ``channel`` (subscribed when the listener starts)."""
        self._handlers[channel] = handler

    async def _start_listener(self) -> None:
        self._pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        # One pattern for every notification: channels registered later need no round
        # trip, and a notification can never be missed for lack of a subscription.
        await self._pubsub.psubscribe(self.key("n", "*"))
        self._listener = asyncio.create_task(self._listen(), name="team-listener")

    def channel(self, name: str, *, per_endpoint: bool = True) -> str:
        """A notification channel: of this endpoint, or of the whole team."""
        return self.key("n", self.endpoint, name) if per_endpoint else self.key("n", name)

    async def _listen(self) -> None:
        try:
            while True:
                msg = await self._pubsub.get_message(timeout=1.0)
                if msg is None or msg.get("type") != "pmessage":
                    continue
                channel = msg["channel"].decode() if isinstance(msg["channel"], bytes) else msg["channel"]
                handler = self._handlers.get(channel)
                if handler is not None:
                    handler(msg["data"])
        except asyncio.CancelledError:
            raise
        except self._errors as e:
            self.mark_down(e)  # the listener's connection is gone, whatever the error said

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(BaseException):
                await self._listener
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()
        with contextlib.suppress(Exception):
            await self.client.aclose()
