"""The run ledger: lines as written, read back across invocations (paid, not billed,
unknown, lost in flight, a torn last line), what earlier invocations paid handed to a
row once, and the run's cap checked before anything is sent."""
from __future__ import annotations

import json

import pytest

from drscore.engine.runtime.calls.ledger import (
    CALLER, LEDGER_FILE, RunBudgetSpent, RunLedger, check_budget, fold, interrupted_money, key_id, may_have_billed,
    money_line, read_totals,
)


def _pay(ledger: RunLedger, key: str, cost: float, *, tokens: tuple[int, int] = (100, 10)) -> None:
    call = ledger.sent(key, "quality", worst_usd=cost * 3)
    ledger.paid(call, input_tokens=tokens[0], cached_input_tokens=0, output_tokens=tokens[1], reasoning_tokens=0,
                cost_usd=cost, cost_usd_uncached=cost, judge_s=0.5, wait_s=0.1)


def test_every_line_is_on_disk_when_written_and_the_caller_is_named(tmp_path):
    path = tmp_path / LEDGER_FILE
    ledger = RunLedger(path, max_cost=1.0)
    token = CALLER.set(("7", "agent-a", "quality"))
    try:
        _pay(ledger, "k1", 0.01)
    finally:
        CALLER.reset(token)
    # before any close or fsync: a kill -9 now would keep these lines (one write(2) each)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["begin", "sent", "paid"]
    paid = lines[2]
    assert (paid["task"], paid["agent"], paid["method"], paid["key"]) == ("7", "agent-a", "quality", "k1")
    assert paid["cost_usd"] == 0.01 and paid["input_tokens"] == 100 and lines[1]["worst_usd"] == 0.03
    ledger.close("finished")
    end = json.loads(path.read_text().splitlines()[-1])
    assert (end["type"], end["inv"], end["state"]) == ("end", 1, "finished")
    ledger.sent("after", "quality", 0.1)  # a late call after the close is dropped, not an error
    assert len(path.read_text().splitlines()) == 4


def test_invocations_add_up_and_calls_lost_in_flight_are_bounded_by_their_reservation(tmp_path):
    path = tmp_path / LEDGER_FILE
    first = RunLedger(path)
    _pay(first, "a", 0.25)
    first.sent("lost", "quality", worst_usd=0.5)  # then kill -9: no answer line ever
    # (no close: the process died)
    second = RunLedger(path)
    assert second.invocation == 2
    assert second.committed_before() == pytest.approx(0.25 + 0.5)
    _pay(second, "b", 0.125)
    call = second.sent("c", "quality", worst_usd=0.2)
    second.unpaid(call, "rate_limit")  # a 429 is not billed
    call = second.sent("d", "quality", worst_usd=0.3)
    second.unknown(call, "timeout")  # may have been billed
    second.close("finished")

    folded = fold(path)
    assert folded.invocations == 2
    assert folded.paid.calls == 2 and folded.paid.cost_usd == pytest.approx(0.375)
    assert folded.by_invocation[1].cost_usd == pytest.approx(0.25)
    assert folded.by_invocation[2].cost_usd == pytest.approx(0.125)
    assert (folded.interrupted.calls, folded.interrupted.up_to_usd) == (1, pytest.approx(0.5))
    assert (folded.unknown.calls, folded.unknown.up_to_usd) == (1, pytest.approx(0.3))
    totals = read_totals(tmp_path)
    assert totals is not None
    assert money_line(totals) == "this invocation $0.1250; run total $0.3750 for 2 paid calls (2 invocations)"
    assert may_have_billed(totals) == (
        "up to $0.5000 more may have been billed for 1 call interrupted in flight; up to $0.3000 more may have "
        "been billed for 1 call whose outcome is unknown (timeout or Ctrl-C at the judge)")


def test_a_live_invocation_s_unanswered_calls_are_in_flight_not_lost(tmp_path):
    ledger = RunLedger(tmp_path / LEDGER_FILE)
    ledger.sent("x", "quality", worst_usd=0.5)
    assert read_totals(tmp_path, running=True)["interrupted_in_flight"]["calls"] == 0
    assert read_totals(tmp_path, running=True)["in_flight_now"]["calls"] == 1
    assert ledger.totals()["in_flight_now"] == {"calls": 1, "up_to_usd": 0.5}
    assert "up to $0.5000 more may have been billed for 1 call interrupted in flight" in \
        interrupted_money(ledger.totals())


def test_a_torn_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / LEDGER_FILE
    ledger = RunLedger(path)
    _pay(ledger, "a", 0.5)
    ledger.close("interrupted")
    with open(path, "ab") as f:
        f.write(b'{"type":"paid","inv":1,"id":9,"ke')  # a power cut mid-line
    folded = fold(path)
    assert folded.paid.cost_usd == pytest.approx(0.5) and folded.damaged_lines == 1


def test_the_invocation_after_a_torn_last_line_keeps_its_own_lines(tmp_path):
    path = tmp_path / LEDGER_FILE
    first = RunLedger(path)
    _pay(first, "a", 0.5)
    with open(path, "ab") as f:
        f.write(b'{"type":"paid","inv":1,"id":9,"ke')  # a power cut mid-line, then the next morning:
    second = RunLedger(path)
    _pay(second, "b", 0.25)
    second.close("finished")
    # its begin line starts a line of its own, not glued to the torn one (and lost with it)
    folded = fold(path)
    assert folded.invocations == 2 and folded.damaged_lines == 1
    assert folded.by_invocation[2].cost_usd == pytest.approx(0.25) and folded.paid.cost_usd == pytest.approx(0.75)
    assert RunLedger(path).invocation == 3


def test_an_invocation_whose_begin_line_was_lost_is_not_numbered_again(tmp_path):
    # A ledger written before torn lines were ended: invocation 2's begin line was glued to a
    # torn one and is unreadable, but its paid line still names it.
    path = tmp_path / LEDGER_FILE
    first = RunLedger(path)
    _pay(first, "a", 0.5)
    second = RunLedger(path)
    _pay(second, "b", 0.25)
    lines = path.read_bytes().splitlines(keepends=True)
    begin_2 = next(i for i, line in enumerate(lines) if b'"begin"' in line and b'"inv":2' in line)
    lines[begin_2] = b'{"type":"paid","inv":1,"id":9,"ke' + lines[begin_2]
    path.write_bytes(b"".join(lines))
    folded = fold(path)
    assert folded.invocations == 2 and folded.damaged_lines == 1
    assert RunLedger(path).invocation == 3


def test_what_earlier_invocations_paid_is_handed_to_one_row_once(tmp_path):
    path = tmp_path / LEDGER_FILE
    first = RunLedger(path)
    _pay(first, "answered", 0.25)
    _pay(first, "failed-then", 0.5)  # e.g. an answer that did not decode: paid, not cached
    first.close("interrupted")

    second = RunLedger(path)
    paid_by_run, earlier = second.reused("answered")  # the first row to read it from the cache
    assert paid_by_run and earlier is not None and earlier.cost_usd == pytest.approx(0.25) and earlier.calls == 1
    assert second.reused("answered") == (True, None)  # a second row reads it free
    assert second.reused("someone-else-paid") == (False, None)  # another run's answer: reused
    _pay(second, "failed-then", 0.125)  # asked again now, and answered
    earlier = second.answered("failed-then")
    assert earlier is not None and earlier.cost_usd == pytest.approx(0.5)  # this call's own cost is on the answer
    _pay(second, "fails", 0.0625)
    _pay(second, "fails", 0.0625)
    failed = second.failed("fails")  # its billed attempts go to the failed item
    assert failed is not None and failed.calls == 2 and failed.cost_usd == pytest.approx(0.125)
    assert second.failed("fails") is None


def test_real_cache_keys_are_held_as_their_first_64_bits(tmp_path):
    import hashlib
    paid, other = (hashlib.sha256(t).hexdigest() for t in (b"paid", b"other"))
    assert key_id(paid) == int(paid[:16], 16) and key_id(paid) != key_id(other)
    assert key_id("k1") == key_id("k1") != key_id("k2")  # not hex: a hash of the string, as stable
    # only 16 lowercase hex digits are read as a number: no sign, prefix or short forms that
    # int() would also take (a negative id, or "12", "012" and "0x12" as one key)
    assert key_id("-1abcdef") >= 0 and len({key_id("12"), key_id("012"), key_id("0x12")}) == 3
    path = tmp_path / LEDGER_FILE
    first = RunLedger(path)
    _pay(first, paid, 0.25)
    first.close("finished")
    second = RunLedger(path)
    assert second.reused(other) == (False, None)
    was_paid, earlier = second.reused(paid)
    assert was_paid and earlier is not None and earlier.cost_usd == pytest.approx(0.25)


def test_the_cap_of_the_run_is_checked_before_an_invocation_starts(tmp_path):
    path = tmp_path / LEDGER_FILE
    check_budget(path, 1.0)  # no ledger yet: nothing to check
    ledger = RunLedger(path, max_cost=1.0)
    _pay(ledger, "a", 0.75)
    ledger.stop("budget", 1.0)  # the next call did not fit under $1
    ledger.close("stopped")
    with pytest.raises(RunBudgetSpent, match=r"--max-cost \$1 caps the whole run, and the run has spent \$0.7500 "
                                             r"over 1 invocation, stopped at --max-cost \$1: nothing more"):
        check_budget(path, 1.0)
    with pytest.raises(RunBudgetSpent):
        check_budget(path, 0.5)  # below what was spent
    check_budget(path, 2.0)  # a higher cap continues
    check_budget(path, None)  # and no cap at all
