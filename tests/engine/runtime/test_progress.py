"""Progress: items and calls per method, plain lines for logs, the mode chosen per stream (the
ETA arithmetic itself: test_eta.py)."""
from __future__ import annotations

import io

import pytest

from drscore.engine.runtime.progress import Progress, plain_line, progress_mode
from support.fakes import template_work as tw


def snap(**kw):
    base = {"items_done": 10, "items_failed": 1, "calls": 50, "cache_hits": 7, "retries": 2, "rate_limited": 3,
            "in_flight": 10, "waiting_for_quota": 6,  # 10 slots held: 4 at the judge, 6 waiting for quota
            "cost_usd": 1.25, "rpm": 0, "tpm": 0,
            "input_tokens": 0, "output_tokens": 0, "done_by_method": {"quality": 6, "race": 4}}
    base.update(kw)
    return base


# quality: 6 of 55 done, one ask each, 10 running said one each, 39 not started -> 6/~55 calls.
# race: 4 of 55 done with 40 asks (10 each), 5 running said 10 each and asked 20 -> 30 left;
# 46 not started x 10 -> 460: 60/~550 calls. 44 network calls of 60 asks.
WORK = {"quality": {"started": 16, "done": 6, "announced": 10,
                    "templates": {"quality": tw(asks=6, calls=6, finished_asks=6, announced_left=10)}},
        "race": {"started": 9, "done": 4, "announced": 5,
                 "templates": {"race_score": tw(asks=60, calls=44, finished_asks=40, announced_asks=20,
                                                announced_left=30)}}}


def test_a_plain_line_tells_everything():
    line = plain_line(snap(rpm=60, work=WORK), {"quality": 55, "race": 55}, elapsed_s=20.0, max_cost=5.0)
    assert line.startswith("progress 10/110 items (9%) [quality 6/55, calls 6/~55; race 4/55, calls 60/~550]")
    # calls left: quality 49 (all to the network); race 490 x 44/60 = 359.3 -> 408.3 at 60/min = 6m48s
    for part in ("failed 1", "at the judge 4, waiting for quota 6", "calls 50, cache hits 7, retries 2, 429s 3",
                 "spent $1.2500 of $5.00", "elapsed 20s", "ETA 6m48s (quota)"):
        assert part in line, part


def test_plain_mode_writes_lines_to_its_stream_and_a_last_one_at_the_end():
    out = io.StringIO()
    state = snap()
    with Progress(lambda: state, {"quality": 55, "race": 55}, mode="plain", every_s=3600, stream=out) as p:
        first = p.emit()
        state = snap(items_done=110, done_by_method={"quality": 55, "race": 55})
    lines = out.getvalue().splitlines()
    assert lines[0] == first and len(lines) == 2  # the emitted one, then the final one on exit
    assert lines[1].startswith("progress 110/110 items (100%) [quality 55/55; race 55/55]")


def test_a_snapshot_that_changes_under_the_read_keeps_the_last_good_one():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("dictionary changed size during iteration")
        return snap(items_done=calls["n"])

    p = Progress(flaky, {"m": 5}, mode="off")
    assert p.snapshot()["items_done"] == 1 and p.snapshot()["items_done"] == 1
    assert p.snapshot()["items_done"] == 3


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_mode_per_stream_and_environment(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DRSCORE_PROGRESS", raising=False)
    assert progress_mode(Tty()) == "live"
    assert progress_mode(io.StringIO()) == "plain"  # a pipe: lines, not silence
    monkeypatch.setenv("CI", "true")
    assert progress_mode(Tty()) == "plain"
    monkeypatch.setenv("DRSCORE_PROGRESS", "off")
    assert progress_mode(Tty()) == "off"


def test_the_live_panel_draws_a_bar_per_method_and_the_counters():
    from rich.console import Console

    p = Progress(lambda: snap(rpm=60, work=WORK), {"quality": 55, "race": 55}, mode="off", max_cost=5.0)
    out = io.StringIO()
    Console(file=out, width=140, color_system=None).print(p._render())
    text = out.getvalue()
    for part in ("quality", "6/55 items · 6/~55 calls", "race", "4/55 items · 60/~550 calls", "items 10/110",
                 "waiting for quota 6", "at the judge 4", "cache hits 7", "retries 2", "429s 3",
                 "spent $1.2500 of $5.00", "ETA 6m48s (quota)"):
        assert part in text, part


def test_current_rates_against_the_limits_and_batch_state_on_the_plain_line():
    from drscore.engine.runtime.usage_window import UsageWindow

    w = UsageWindow(window_s=60.0)
    assert w.rates() is None
    w.observe(0.0, 0, 0)
    w.observe(30.0, 10, 20_000)  # 10 calls and 20k tokens in 30 s -> 20 req/min, 40k tok/min
    assert w.rates() == (pytest.approx(20.0), pytest.approx(40_000.0))
    w.observe(90.0, 40, 20_000)  # the window now starts at 30 s: 30 calls in 60 s, no tokens
    assert w.rates() == (pytest.approx(30.0), pytest.approx(0.0))
    s = snap(rpm=60, tpm=100_000, usage_rate=(20.0, 40_000.0),
             batches={"submitted": 2, "in_progress": 1, "requests_in_progress": 40, "completed": 1,
                      "requests_answered": 10, "requests_queued": 5})
    line = plain_line(s, {"quality": 55, "race": 55}, elapsed_s=20.0)
    assert "20 req/min of 60, 40k tok/min of 100k" in line
    assert "batches submitted 2 (+0 re-attached), in progress 1 (40 requests), completed 1 (10 answered), " \
           "queued 5, failed/expired 0" in line


def test_the_progress_object_measures_the_rate_between_draws():
    now = [0.0]
    state = {"calls": 0}
    p = Progress(lambda: snap(calls=state["calls"], input_tokens=0, output_tokens=0), {"q": 10}, mode="off",
                 clock=lambda: now[0])
    p.snapshot()
    now[0], state["calls"] = 6.0, 3
    assert p.snapshot()["usage_rate"] == (pytest.approx(30.0), pytest.approx(0.0))
