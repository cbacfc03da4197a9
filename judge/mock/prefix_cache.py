"""An OpenAI-like prompt prefix cache for the mock judge.

Hosted endpoints serve the start of a prompt from a cache when an earlier request began
the same way, and say so in ``usage.prompt_tokens_details.cached_tokens``. This one
behaves like OpenAI's automatic caching: only prompts of at least ``min_tokens`` (1,024)
tokens take part, and the cached part is the longest shared prefix in whole
``step_tokens`` (128) steps from ``min_tokens`` on (1,024, 1,152, 1,280, ...). Entries
live ``ttl_s`` seconds after their last use (OpenAI: minutes).

Prefixes are stored as hashes at every step boundary of a prompt, chained so that each
hash covers the whole prefix; finding the cached length is one pass over the prompt.
A request's prefixes are stored when it has been answered (:meth:`store`), not when it
arrives, so concurrent siblings of a cold prompt miss, as they do on a real endpoint.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Callable


class PrefixCache:
    def __init__(self, *, min_tokens: int = 1024, step_tokens: int = 128, ttl_s: float = 600.0,
                 clock: Callable[[], float]) -> None:
        if min_tokens < 1 or step_tokens < 1:
            raise ValueError("prefix cache: min_tokens and step_tokens must be >= 1")
        self.min_tokens, self.step_tokens, self.ttl_s, self.clock = min_tokens, step_tokens, ttl_s, clock
        self._seen: dict[bytes, float] = {}  # prefix hash -> last use
        self.lookups = 0
        self.hits = 0

    def boundaries(self, tokens: Sequence[str]) -> list[tuple[int, bytes]]:
        """(length, hash of tokens[:length]) for every cacheable length of the prompt."""
        if len(tokens) < self.min_tokens:
            return []
        out = []
        h = hashlib.sha256()
        done = 0
        length = self.min_tokens
        while length <= len(tokens):
            h.update("\x1f".join(tokens[done:length]).encode("utf-8"))
            h.update(b"\x1e")
            done = length
            out.append((length, h.copy().digest()[:16]))
            length += self.step_tokens
        return out

    def lookup(self, boundaries: list[tuple[int, bytes]]) -> int:
        """Cached tokens for a prompt with these boundaries (refreshes what it hits)."""
        self.lookups += 1
        now = self.clock()
        cached = 0
        for length, digest in boundaries:
            last = self._seen.get(digest)
            if last is None or (self.ttl_s > 0 and now - last > self.ttl_s):
                break
            self._seen[digest] = now
            cached = length
        if cached:
            self.hits += 1
        return cached

    def store(self, boundaries: list[tuple[int, bytes]]) -> None:
        now = self.clock()
        for _, digest in boundaries:
            self._seen[digest] = now
        if len(self._seen) > 2_000_000:  # bound memory in very long mock sessions
            cutoff = sorted(self._seen.values())[len(self._seen) // 2]
            self._seen = {k: t for k, t in self._seen.items() if t > cutoff}

    def clear(self) -> None:
        self._seen.clear()
        self.lookups = self.hits = 0
