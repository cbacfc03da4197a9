"""The mock judge's OpenAI-like prefix cache: 1,024-token floor, 128-token steps, filled
only when a request was answered, entries expiring (issue 11)."""
from __future__ import annotations

from drscore.judge.mock.prefix_cache import PrefixCache


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _prompt(shared: int, tail: str, total: int) -> list[str]:
    return [f"s{i}" for i in range(shared)] + [f"{tail}{i}" for i in range(total - shared)]


def test_shared_prefix_is_cached_in_128_token_steps_from_1024():
    cache = PrefixCache(clock=Clock())
    first = _prompt(1300, "a", 2000)
    assert cache.lookup(cache.boundaries(first)) == 0  # cold
    cache.store(cache.boundaries(first))
    # 1,300 tokens in common: the largest step not past it is 1,024 + 2 x 128 = 1,280
    assert cache.lookup(cache.boundaries(_prompt(1300, "b", 2000))) == 1280
    # the whole prompt again: every boundary up to 1,024 + 7 x 128 = 1,920 (of 2,000)
    assert cache.lookup(cache.boundaries(first)) == 1920


def test_prompts_under_1024_tokens_never_cache():
    cache = PrefixCache(clock=Clock())
    short = _prompt(1000, "a", 1023)
    cache.store(cache.boundaries(short))
    assert cache.boundaries(short) == [] and cache.lookup(cache.boundaries(short)) == 0
    # a shared prefix under 1,024 tokens gives nothing either
    cache.store(cache.boundaries(_prompt(1000, "x", 1500)))
    assert cache.lookup(cache.boundaries(_prompt(1000, "y", 1500))) == 0


def test_not_cached_until_answered_and_expires_after_ttl():
    clock = Clock()
    cache = PrefixCache(ttl_s=60, clock=clock)
    p = _prompt(1100, "a", 1100)
    b = cache.boundaries(p)
    assert cache.lookup(b) == 0  # a sibling arriving before the first was answered misses
    cache.store(b)
    clock.t = 59
    assert cache.lookup(b) == 1024  # ... and refreshes the entry
    clock.t = 59 + 61
    assert cache.lookup(b) == 0
