"""The ledger's set of paid key ids: the same answers as a Python set, in a typed table."""
from __future__ import annotations

import random

import pytest

from drscore.engine.runtime.calls.key_set import KeySet


def test_it_answers_as_a_python_set_through_many_growths():
    rng = random.Random(7)
    keys = [rng.getrandbits(64) for _ in range(20_000)]
    kept, reference = KeySet(), set()
    for key in keys[:10_000]:
        kept.add(key)
        reference.add(key)
    for key in keys[:100]:  # kept twice: counted once
        kept.add(key)
    assert len(kept) == len(reference) == 10_000
    assert all(key in kept for key in keys[:10_000])
    assert not any(key in kept for key in keys[10_000:])


def test_keys_sharing_their_low_bits_are_told_apart():
    # every key lands on slot 5 first: the probe must walk past the others, and find each
    kept = KeySet()
    keys = [5 + (i << 40) for i in range(1, 40)]
    for key in keys:
        kept.add(key)
    assert all(key in kept for key in keys)
    assert 5 + (99 << 40) not in kept and len(kept) == 39


def test_keys_alike_in_their_low_bits_spread_over_the_table():
    # 4,096 keys differing only above bit 40: by their low bits alone they would fill one
    # run of consecutive slots, and each add would walk all of it (quadratic). Mixed, the
    # longest run of occupied slots stays short.
    kept = KeySet()
    for i in range(1, 4097):
        kept.add(i << 40)
    occupied = [slot != 0 for slot in kept._slots]
    longest = run = 0
    for used in occupied + occupied[:64]:  # the table wraps around
        run = run + 1 if used else 0
        longest = max(longest, run)
    assert len(kept) == 4096 and longest < 64


def test_zero_and_the_largest_key_are_keys_like_any_other():
    kept = KeySet()
    assert 0 not in kept
    kept.add(0)
    kept.add(2**64 - 1)
    assert 0 in kept and 2**64 - 1 in kept and len(kept) == 2


def test_what_is_not_an_unsigned_64_bit_integer_is_never_in_it_and_cannot_be_added():
    kept = KeySet()
    kept.add(1)
    assert -1 not in kept and 2**64 not in kept and "1" not in kept
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        kept.add(-1)
