"""Progress: the ETA respects the quota, plain lines for logs, the mode chosen per stream."""
from __future__ import annotations

import io

import pytest

from drscore.engine.runtime.progress import Progress, estimate_eta, plain_line, progress_mode


def snap(**kw):
    base = {"items_done": 10, "items_failed": 1, "calls": 50, "cache_hits": 7, "retries": 2, "rate_limited": 3,
            "in_flight": 10, "waiting_for_quota": 6, "cost_usd": 1.25, "rpm": 0, "tpm": 0,
            "input_tokens": 0, "output_tokens": 0, "done_by_method": {"quality": 6, "race": 4}}
    base.update(kw)
    return base


def test_eta_is_bound_by_the_request_quota_when_the_pace_is_faster():
    # 10 of 110 items in 20 s -> the pace says 20/10*100 = 200 s. 50 calls in 10 items ->
    # 500 calls left; at 60 requests/min that takes 500/60 min = 500 s.
    eta, basis = estimate_eta(snap(rpm=60), total=110, elapsed_s=20.0)
    assert basis == "quota" and eta == pytest.approx(500.0)


def test_eta_is_bound_by_the_token_quota():
    # 5 calls per item, 1,000 tokens per call (40,000 + 10,000 over 50 calls): 100 items
    # left -> 500 calls -> 500,000 tokens at 100,000/min = 300 s; requests allow 500/600 min = 50 s.
    eta, basis = estimate_eta(snap(rpm=600, tpm=100_000, input_tokens=40_000, output_tokens=10_000),
                              total=110, elapsed_s=20.0)
    assert basis == "quota" and eta == pytest.approx(300.0)


def test_eta_follows_the_pace_without_a_binding_quota():
    eta, basis = estimate_eta(snap(rpm=100_000), total=110, elapsed_s=20.0)
    assert basis == "pace" and eta == pytest.approx(200.0)
    assert estimate_eta(snap(items_done=0), total=10, elapsed_s=5.0) == (None, "starting")
    assert estimate_eta(snap(items_done=10), total=10, elapsed_s=5.0) == (0.0, "done")


def test_a_plain_line_tells_everything():
    line = plain_line(snap(rpm=60), {"quality": 55, "race": 55}, elapsed_s=20.0, max_cost=5.0)
    assert line.startswith("progress 10/110 items (9%) [quality 6/55 race 4/55]")
    for part in ("failed 1", "at the judge 4, waiting for quota 6", "calls 50, cache hits 7, retries 2, 429s 3",
                 "spent $1.2500 of $5.00", "elapsed 20s", "ETA 8m20s (quota)"):
        assert part in line, part


def test_plain_mode_writes_lines_to_its_stream_and_a_last_one_at_the_end():
    out = io.StringIO()
    state = snap()
    with Progress(lambda: state, {"quality": 55, "race": 55}, mode="plain", every_s=3600, stream=out) as p:
        first = p.emit()
        state = snap(items_done=110, done_by_method={"quality": 55, "race": 55})
    lines = out.getvalue().splitlines()
    assert lines[0] == first and len(lines) == 2  # the emitted one, then the final one on exit
    assert lines[1].startswith("progress 110/110 items (100%) [quality 55/55 race 55/55]")


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

    p = Progress(lambda: snap(rpm=60), {"quality": 55, "race": 55}, mode="off", max_cost=5.0)
    out = io.StringIO()
    Console(file=out, width=140, color_system=None).print(p._render())
    text = out.getvalue()
    for part in ("quality", "6/55", "race", "4/55", "items 10/110", "waiting for quota 6", "at the judge 4",
                 "cache hits 7", "retries 2", "429s 3", "spent $1.2500 of $5.00", "(quota)"):
        assert part in text, part


def test_eta_counts_the_remaining_calls_per_method():
    # quality: 10 of 10 done with 10 calls; redundancy: 1 of 10 done with 30 calls.
    # Calls left: 30 / 1 * 9 = 270. Pace: 40 s for 40 calls -> 270 s; quota 30 rpm -> 540 s.
    s = snap(items_done=11, calls=40, rpm=30, done_by_method={"quality": 10, "redundancy": 1},
             calls_by_method={"quality": 10, "redundancy": 30})
    per = {"quality": 10, "redundancy": 10}
    assert estimate_eta(s, 20, 40.0, per) == (pytest.approx(540.0), "quota")
    assert estimate_eta({**s, "rpm": 0}, 20, 40.0, per) == (pytest.approx(270.0), "pace")


def test_eta_is_a_lower_bound_while_a_method_has_no_finished_item():
    s = snap(items_done=10, calls=10, done_by_method={"quality": 10, "redundancy": 0},
             calls_by_method={"quality": 10, "redundancy": 0})
    eta, basis = estimate_eta(s, 20, 10.0, {"quality": 10, "redundancy": 10})
    assert (eta, basis) == (0.0, "pace+")  # quality is done; redundancy's calls are unknown
    line = plain_line(s, {"quality": 10, "redundancy": 10}, elapsed_s=10.0)
    assert "ETA unknown (a method has no finished item yet)" in line
    # half of redundancy's items known to take 30 calls: 9 left after the first -> a lower bound
    s2 = {**s, "items_done": 11, "calls": 40, "done_by_method": {"quality": 10, "redundancy": 1},
          "calls_by_method": {"quality": 10, "redundancy": 30}}
    eta, basis = estimate_eta(s2, 30, 40.0, {"quality": 10, "redundancy": 10, "kae": 10})
    assert (eta, basis) == (pytest.approx(270.0), "pace+")  # kae unknown: at least 270 s
    assert "ETA >4m30s (pace; a method has no finished item yet)" in plain_line(
        s2, {"quality": 10, "redundancy": 10, "kae": 10}, elapsed_s=40.0)


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
