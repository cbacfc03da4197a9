"""The limiter's account of its pacing (``pacing.jsonl``): what each 429 taught, and the file
across invocations."""
from __future__ import annotations

import msgspec
import pytest

from drscore.engine.runtime.calls.judging import RateLimitInfo
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pace_log import PaceEvent, PaceLog, read_pacing


async def _refused_after(lim: RateLimiter, sizes: list[int], refused: int) -> None:
    for x in sizes:
        p = await lim.acquire(x)
        await p.done(x)
    p = await lim.acquire(refused)
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))


async def test_a_learned_pace_429_is_told_with_its_vote_and_the_paces_it_left():
    lim = RateLimiter(concurrency=4)
    log = PaceLog(None)
    lim.log_pacing(log)
    # eight calls answered, the ninth (the largest of all) refused: the start-up 429
    await _refused_after(lim, [1000, 9000, 1500, 8000, 1200, 9500, 900, 8500], 9800)
    start, refused = log.events[0], log.events[-1]
    assert start.kind == "start" and start.rpm == 0 and start.tpm == 0 and start.at is not None
    assert refused.kind == "429" and refused.learning is True
    assert refused.call == 9 and refused.tokens == 9800 and refused.pause_s == 0.01  # the ninth granted
    # the vote the limiter cast is the one the summary lists, and the paces are the learners' after the cut
    assert refused.vote == lim.binding.votes[0] and refused.vote.paced == "none"
    assert refused.binding == lim.binding.dimension == "tokens"
    assert lim.token_learner.pace is not None and refused.tpm == round(lim.token_learner.pace * 60)
    assert refused.t >= 0.0
    # the token strain's two parts, a minute's worth each: the token rate the eight calls proved,
    # and the most a token bucket that refused the ninth could have
    assert refused.token_proof_tpm is not None and refused.token_bound_tpm is not None
    assert refused.token_strain == pytest.approx(refused.token_proof_tpm / refused.token_bound_tpm, abs=2e-3)


async def test_a_told_quotas_429_is_told_without_a_learned_pace():
    lim = RateLimiter(rpm=600, concurrency=4)
    log = PaceLog(None)
    lim.log_pacing(log)
    await _refused_after(lim, [100, 200], 300)
    assert [e.kind for e in log.events] == ["start", "429"]
    start, refused = log.events
    assert start.rpm == 600 and start.tpm == 0
    # nothing learned: no binding guess, no paces, no vote
    assert refused.learning is False and refused.binding is None and refused.rpm is None and refused.vote is None
    assert refused.call == 3 and refused.tokens == 300


def test_learned_paces_are_sampled_every_few_seconds_after_the_last_event_that_carried_them():
    clock = [100.0]
    log = PaceLog(None, every_s=5.0, clock=lambda: clock[0])
    log.start(0, 0)
    assert log.sample_due()  # nothing carried the paces yet
    due = []
    for now, event in ((100.0, "pace"), (101.0, None), (104.9, None), (105.0, "429"), (109.0, None),
                       (110.0, "probe"), (110.5, None)):
        clock[0] = now
        due.append(log.sample_due())
        if event:  # a probe carries the paces too: every event the limiter tells after a cut does
            log.emit(PaceEvent(t=log.now(), kind=event, binding="tokens"))
    assert due == [True, False, False, True, False, True, False]
    clock[0] = 112.25
    assert log.now() == 12.25  # seconds from the start


def test_the_file_is_appended_by_each_invocation_and_a_torn_last_line_is_skipped_and_ended(tmp_path):
    path = tmp_path / "pacing.jsonl"
    for told in (0, 600):
        log = PaceLog(path)
        log.start(told, 0)
        log.emit(PaceEvent(t=log.now(), kind="429", call=3, tokens=1200, learning=not told))
        log.close()
    with open(path, "ab") as f:
        f.write(b'{"t": 1.5, "kind": "pa')  # a power cut mid-line
    events = list(read_pacing(path))
    assert [e.kind for e in events] == ["start", "429", "start", "429"]
    # the next invocation's lines start after it, not glued to it
    log = PaceLog(path)
    log.start(0, 0)
    log.close()
    assert [e.kind for e in read_pacing(path)] == ["start", "429", "start", "429", "start"]
    assert [e.rpm for e in events if e.kind == "start"] == [0, 600]
    assert [e.learning for e in events if e.kind == "429"] == [True, False]
    # lines hold only what an event has: no nulls for the fields it lacks
    first = msgspec.json.decode(path.read_bytes().splitlines()[1])
    assert set(first) == {"t", "kind", "call", "tokens", "learning"}
    assert list(read_pacing(tmp_path / "missing.jsonl")) == []


@pytest.mark.parametrize("kind", ["turn", "probe"])
async def test_a_turn_and_a_probe_of_the_request_pace_are_told(kind):
    # a request pace chosen at start-up (the smallest call refused), whose calls then run far
    # under the token pace: the probe opens; a proof past the refusal's request bound turns it
    lim = RateLimiter(concurrency=4)
    log = PaceLog(None)
    lim.log_pacing(log)
    await _refused_after(lim, [10, 90, 15, 80, 12, 95, 9, 85], 8)
    assert lim.binding.dimension == "requests"
    lim.learner.cuts = 2  # past the second cut, where a probe may open
    lim.learner._cut_until = 0.0
    if kind == "turn":
        lim.binding.bounded(lim.learner.clock(), 0.5)  # an earlier refusal allowed at most 0.5 requests a second
    else:
        lim.binding._request_bounds.clear()  # no bound: only the probe can move it
        now = lim.learner.clock()  # the token quota the request pace leaves idle: calls proved a million a second
        for seq in range(1000, 1010):
            lim.token_learner.sent(seq, now - 20.0 + seq / 1000, 1e6)
    lim._probe_request_pace(lim.learner.clock())
    told = [e for e in log.events if e.kind == kind]
    assert len(told) == 1
    if kind == "turn":
        assert told[0].binding == "tokens" and told[0].strain is not None and told[0].strain > 1.05
    else:
        assert told[0].binding == "requests" and lim._pace_probe
