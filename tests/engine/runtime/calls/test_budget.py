"""The --max-cost ledger: reservations wait for room, unknown outcomes keep their worst
case, a call that cannot fit alone exhausts the budget."""
from __future__ import annotations

import asyncio

import pytest

from drscore.engine.runtime.calls.budget import Budget


async def test_a_call_waits_for_room_then_goes_when_a_reservation_settles_cheaper():
    b = Budget(1.0)
    assert await b.reserve(0.6)
    second = asyncio.ensure_future(b.reserve(0.6))  # 0.6 + 0.6 > 1.0, but it fits alone
    await asyncio.sleep(0)
    assert not second.done()
    b.settle(0.6, 0.1)  # the first cost 0.1: 0.1 + 0.6 <= 1.0
    assert await second is True
    assert b.spent == pytest.approx(0.1) and b.reserved == pytest.approx(0.6)


async def test_an_unknown_outcome_keeps_its_worst_case_and_can_exhaust_the_budget():
    b = Budget(1.0)
    assert await b.reserve(0.4)
    b.forfeit(0.4)  # timed out after sending: maybe billed
    assert b.committed == pytest.approx(0.4) and b.spent == 0.0
    assert await b.reserve(0.7) is False and b.exhausted  # 0.4 + 0.7 > 1.0 even alone
    # a call that was refused by the server (not billed) gives its whole reservation back
    assert await b.reserve(0.6)  # 0.4 + 0.6 <= 1.0
    b.release(0.6)
    assert b.reserved == 0.0 and b.committed == pytest.approx(0.4)


async def test_close_wakes_waiters_and_refuses_them():
    b = Budget(1.0)
    assert await b.reserve(0.9)
    waiter = asyncio.ensure_future(b.reserve(0.5))
    await asyncio.sleep(0)
    b.close()
    assert await waiter is False and not b.exhausted


async def test_without_a_cap_everything_is_admitted_and_accounted():
    b = Budget(None)
    assert all([await b.reserve(1e9) for _ in range(3)])
    for _ in range(3):
        b.settle(1e9, 2.0)
    assert b.spent == 6.0 and not b.exhausted and b.in_flight == 0
