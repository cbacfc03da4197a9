"""Prompt prefixes shared by many calls: grouping, warm-up order and cache estimates.

Hosted judges discount input tokens served from a prefix cache (OpenAI: prompts of
1,024+ tokens, cached in 128-token steps). Templates put the part shared by many calls
first (the report, the page), so calls of one report share a long prefix. Two things
follow here:

* :class:`WarmupGate` lets the first call of a prefix group go alone and holds its
  siblings until it has answered, so they find the provider's cache warm instead of
  racing it cold. A group is recognised by the first ``GROUP_CHARS`` characters of the
  rendered prompt; prompts shorter than that are never held.
* :class:`CacheEstimator` predicts, for a dry run, how many input tokens the provider
  would serve from its cache, from the prefixes the run would send. It is an estimate
  (the provider's cache is best effort and lives minutes), and is labelled as one.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence

from drscore.engine.runtime.calls.judging import Message
from drscore.engine.runtime.calls.tokens import estimate_tokens

GROUP_CHARS = 6000  # about 1,500 tokens of English: past the 1,024-token caching floor
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def prompt_text(messages: Sequence[Message]) -> str:
    """The prompt as one string, roles included (what a prefix cache compares)."""
    return "".join(f"\x00{m.role}\x00{m.content}" for m in messages)


def group_key(messages: Sequence[Message]) -> str | None:
    """Key of the prefix group of a prompt, or None when it is too short to be cached.
    (On every judge call: builds only the first ``GROUP_CHARS`` characters.)"""
    parts: list[str] = []
    n = 0
    for m in messages:
        piece = f"\x00{m.role}\x00{m.content[:GROUP_CHARS + 1]}"
        parts.append(piece)
        n += len(piece)
        if n > GROUP_CHARS:
            return hashlib.sha256("".join(parts)[:GROUP_CHARS].encode("utf-8")).hexdigest()
    return None


def cacheable_tokens(shared_tokens: int) -> int:
    """Tokens a cache like OpenAI's serves for a shared prefix of ``shared_tokens``."""
    if shared_tokens < CACHE_MIN_TOKENS:
        return 0
    return shared_tokens - shared_tokens % CACHE_STEP_TOKENS


class WarmupGate:
    """Holds siblings of a prefix group while its first call is at the judge.

    ``await gate.enter(key)`` returns True for the group's leader (which must call
    :meth:`leave` when its answer arrived or it failed) and False for a sibling, after
    waiting for the leader. Groups are forgotten ``ttl_s`` after their leader answered
    (caches live minutes), so a group seen again later warms the cache again.
    """

    def __init__(self, ttl_s: float = 300.0, max_groups: int = 100_000) -> None:
        self.ttl_s, self.max_groups = ttl_s, max_groups
        self._groups: OrderedDict[str, tuple[asyncio.Event, float]] = OrderedDict()
        self.held = 0  # siblings that waited for a leader

    async def enter(self, key: str | None) -> bool:
        if key is None:
            return False
        now = time.monotonic()
        entry = self._groups.get(key)
        if entry is not None:
            event, warm_at = entry
            if event.is_set() and now - warm_at > self.ttl_s:
                entry = None  # stale: this call warms the cache again
        if entry is None:
            self._groups[key] = (asyncio.Event(), now)
            self._groups.move_to_end(key)
            while len(self._groups) > self.max_groups:
                _, (old, _t) = self._groups.popitem(last=False)
                old.set()
            return True
        event = entry[0]
        if not event.is_set():
            self.held += 1
            await event.wait()
        return False

    def leave(self, key: str | None) -> None:
        if key is None:
            return
        entry = self._groups.get(key)
        if entry is not None and not entry[0].is_set():
            entry[0].set()
            self._groups[key] = (entry[0], time.monotonic())


class CacheEstimator:
    """Dry-run estimate of cached input tokens: a call whose prompt starts like an
    earlier planned call of its group is assumed to read their common prefix from the
    cache (rounded down to the cache's 128-token steps, nothing under 1,024)."""

    def __init__(self, max_groups: int = 4096) -> None:
        self._first: OrderedDict[str, str] = OrderedDict()
        self.max_groups = max_groups

    def cached_tokens(self, messages: Sequence[Message], input_tokens: int) -> int:
        key = group_key(messages)
        if key is None:
            return 0
        text = prompt_text(messages)
        first = self._first.get(key)
        if first is None:
            self._first[key] = text
            if len(self._first) > self.max_groups:
                self._first.popitem(last=False)
            return 0
        self._first.move_to_end(key)
        shared = _common_prefix_len(first, text)
        return min(input_tokens, cacheable_tokens(estimate_tokens(text[:shared])))


def _common_prefix_len(a: str, b: str) -> int:
    """Length of the common prefix (binary search on slices: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
