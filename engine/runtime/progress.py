"""Progress of a run, told truthfully: a live panel on a terminal, one plain line every
N seconds elsewhere (CI logs, pipes), so a long run is never silent.

What it shows: done/total per method; calls at the judge and calls waiting for quota,
counted apart (the limiter holds a concurrency slot while a call waits for quota, so
its "in flight" count includes the waiting ones); the current requests/min and
tokens/min against the limits (:mod:`drscore.engine.runtime.usage_window`); 429s,
retries, cache hits; spend so far against ``--max-cost``; batch state with ``--batch``;
and an ETA that respects the quota. The ETA counts the remaining *calls* per method
(a method's calls per finished item times its items left), so one-call items finishing
first do not promise the same pace for thirty-call items; while a method has no
finished item its calls are unknown and the ETA is a lower bound (shown ``>``). A
rate-limited run cannot go faster than its quota allows, so the ETA is the larger of
the time the remaining calls need under the quota and the time the observed pace
needs (:func:`estimate_eta`).

The display runs in a thread (rich's refresh thread, or a timer thread for plain
lines) and only reads the runner's ``snapshot()``.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, TextIO

from drscore.engine.runtime.usage_window import UsageWindow

Snapshot = Callable[[], dict[str, Any]]


def progress_mode(stream: Any = None) -> str:
    """``live`` on an interactive terminal, else ``plain`` (CI sets ``CI``, pipes are
    not terminals); ``DRSCORE_PROGRESS=off`` silences both."""
    if os.environ.get("DRSCORE_PROGRESS", "").lower() in ("off", "0", "no", "false"):
        return "off"
    stream = stream or sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return "live" if tty and not os.environ.get("CI") else "plain"


def progress_enabled(stream: Any = None) -> bool:
    """True when a live panel would be drawn (kept for callers of the old API)."""
    return progress_mode(stream) == "live"


def remaining_calls(snap: dict[str, Any], per_method: dict[str, int] | None) -> tuple[float | None, bool]:
    """Network calls the unfinished items still need, and whether that is complete.

    Per method: its calls per finished item times its items left. A method with items
    left and none finished adds nothing (unknown), and the result is then a lower bound
    (``False``). Without per-method counts: the run's calls per item times items left."""
    done_by = snap.get("done_by_method") or {}
    calls_by = snap.get("calls_by_method")
    if per_method and calls_by is not None and set(per_method) & set(calls_by):
        total, complete = 0.0, True
        for m, n in per_method.items():
            done, left = int(done_by.get(m, 0)), max(0, n - int(done_by.get(m, 0)))
            if left == 0:
                continue
            if done == 0:
                complete = False
                continue
            total += int(calls_by.get(m, 0)) / done * left
        return total, complete
    done = int(snap.get("items_done", 0))
    if done <= 0:
        return None, False
    total_items = sum(per_method.values()) if per_method else done
    return int(snap.get("calls", 0)) / done * max(0, total_items - done), True


def estimate_eta(snap: dict[str, Any], total: int, elapsed_s: float,
                 per_method: dict[str, int] | None = None) -> tuple[float | None, str]:
    """Seconds left and what bounds them: ``quota`` or ``pace`` (``+`` appended when
    the figure is a lower bound because a method has no finished item yet).

    The remaining calls (:func:`remaining_calls`) need ``calls_left / rpm`` minutes under
    a request quota and ``calls_left * tokens_per_call / tpm`` under a token quota; the
    observed pace needs ``elapsed / calls_done * calls_left`` (per item when no call was
    made yet). The ETA is the largest of these. None before the first item is done.
    """
    done = int(snap.get("items_done", 0))
    left = max(0, total - done)
    if left == 0:
        return 0.0, "done"
    if done <= 0:
        return None, "starting"
    calls = int(snap.get("calls", 0))
    calls_left, complete = remaining_calls(snap, per_method or {"items": total})
    if calls_left is None:
        return None, "starting"
    calls_by = snap.get("calls_by_method") or {}
    finished_calls = sum(calls_by.values()) if per_method and set(per_method) & set(calls_by) else calls
    if finished_calls > 0:
        pace = elapsed_s / finished_calls * calls_left
    else:  # everything so far came from the cache: the item pace is all there is
        pace = elapsed_s / done * left
    quota = 0.0
    rpm = float(snap.get("rpm") or 0)
    tpm = float(snap.get("tpm") or 0)
    if rpm > 0:
        quota = max(quota, calls_left / rpm * 60.0)
    if tpm > 0 and calls:
        per_call = (int(snap.get("input_tokens", 0)) + int(snap.get("output_tokens", 0))) / calls
        quota = max(quota, calls_left * per_call / tpm * 60.0)
    mark = "" if complete else "+"
    return (quota, "quota" + mark) if quota > pace else (pace, "pace" + mark)


def _eta_text(eta: float | None, basis: str) -> str:
    if basis.endswith("+"):
        if not eta:  # only methods with no finished item are left: nothing to go on yet
            return "unknown (a method has no finished item yet)"
        return f">{_duration(eta)} ({basis[:-1]}; a method has no finished item yet)"
    return _duration(eta) + (f" ({basis})" if basis in ("quota", "pace") else "")


def at_judge(snap: dict[str, Any]) -> int:
    """Calls at the judge now: the limiter's slots in use minus those waiting for quota."""
    return max(0, int(snap.get("in_flight", 0)) - int(snap.get("waiting_for_quota", 0)))


def usage_text(snap: dict[str, Any]) -> str:
    """``12 req/min of 60, 41k tok/min of 100k`` (from ``snap["usage_rate"]``), or ""."""
    rate = snap.get("usage_rate")
    if not rate:
        return ""
    rpm, tpm = float(snap.get("rpm") or 0), float(snap.get("tpm") or 0)
    req = f"{rate[0]:.0f} req/min" + (f" of {rpm:g}" if rpm > 0 else "")
    tok = f"{_k(rate[1])} tok/min" + (f" of {_k(tpm)}" if tpm > 0 else "")
    return f"{req}, {tok}"


def _k(n: float) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n:.0f}"


def batch_text(snap: dict[str, Any]) -> str:
    """The batch state with ``--batch`` (``snap["batches"]``), or ""."""
    b = snap.get("batches")
    if b is None:
        return ""
    return (f"batches submitted {b.get('submitted', 0)} (+{b.get('reattached', 0)} re-attached), in progress "
            f"{b.get('in_progress', 0)} ({b.get('requests_in_progress', 0)} requests), completed "
            f"{b.get('completed', 0)} ({b.get('requests_answered', 0)} answered), queued "
            f"{b.get('requests_queued', 0)}, failed/expired {b.get('failed', 0) + b.get('expired', 0)}")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _spend(snap: dict[str, Any], max_cost: float | None) -> str:
    spent = float(snap.get("cost_usd", 0.0))
    return f"${spent:.4f}" + (f" of ${max_cost:.2f}" if max_cost is not None else "")


def plain_line(snap: dict[str, Any], per_method: dict[str, int], elapsed_s: float,
               max_cost: float | None = None) -> str:
    """One line for logs: totals, per method, calls at the judge and waiting, the
    current rates against the limits, batches, spend, ETA."""
    total = sum(per_method.values())
    done = int(snap.get("items_done", 0))
    eta, basis = estimate_eta(snap, total, elapsed_s, per_method)
    by_method = snap.get("done_by_method", {})
    methods = " ".join(f"{m} {by_method.get(m, 0)}/{n}" for m, n in per_method.items())
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    usage = usage_text(snap)
    batches = batch_text(snap)
    return (f"progress {done}/{total} items{pct} [{methods}] · failed {snap.get('items_failed', 0)} · "
            f"at the judge {at_judge(snap)}, waiting for quota {snap.get('waiting_for_quota', 0)} · "
            + (f"{usage} · " if usage else "")
            + f"calls {snap.get('calls', 0)}, cache hits {snap.get('cache_hits', 0)}, retries "
            f"{snap.get('retries', 0)}, 429s {snap.get('rate_limited', 0)} · "
            + (f"{batches} · " if batches else "")
            + f"spent {_spend(snap, max_cost)} · elapsed {_duration(elapsed_s)} · ETA {_eta_text(eta, basis)}")


class Progress:
    """Shows a run's progress while the ``with`` block runs.

    ``per_method`` is the number of items each method will score. ``mode`` is
    ``live`` (rich panel), ``plain`` (a line every ``every_s`` seconds on ``stream``)
    or ``off``.
    """

    def __init__(self, snapshot: Snapshot, per_method: dict[str, int] | int | None, enabled: bool | None = None,
                 *, mode: str | None = None, every_s: float = 30.0, max_cost: float | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(per_method, dict):
            per_method = {"items": int(per_method or 0)}
        if mode is None:
            mode = "live" if enabled else "off"
        if mode == "plain" and every_s <= 0:
            mode = "off"
        self._snapshot, self.per_method, self.mode = snapshot, per_method, mode
        self.every_s, self.max_cost, self._clock = every_s, max_cost, clock
        self._stream = stream
        self._t0 = clock()
        self._live: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last: dict[str, Any] = {}
        self._usage = UsageWindow()
        self.lines = 0

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def snapshot(self) -> dict[str, Any]:
        """The runner's state; the last good one if it changed under the read."""
        try:
            snap = dict(self._snapshot())
        except RuntimeError:  # a dict grew in the loop thread while this thread read it
            return self._last
        self._usage.observe(self._clock(), int(snap.get("calls", 0)),
                            int(snap.get("input_tokens", 0)) + int(snap.get("output_tokens", 0)))
        rates = self._usage.rates()
        if rates is not None:
            snap["usage_rate"] = rates
        self._last = snap
        return self._last

    def __enter__(self) -> Progress:
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(stderr=True), refresh_per_second=4,
                              get_renderable=self._render, transient=False)
            self._live.__enter__()
        elif self.mode == "plain":
            self._thread = threading.Thread(target=self._loop, name="drscore-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
            if self.lines:  # a run long enough to report progress also reports its end
                self.emit()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.emit()

    def emit(self) -> str:
        """Write one plain progress line now (and return it)."""
        line = plain_line(self.snapshot(), self.per_method, self._clock() - self._t0, self.max_cost)
        stream = self._stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()
        self.lines += 1
        return line

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        s = self.snapshot()
        elapsed = self._clock() - self._t0
        total = sum(self.per_method.values())
        eta, basis = estimate_eta(s, total, elapsed, self.per_method)
        by_method = s.get("done_by_method", {})
        t = Table.grid(padding=(0, 2))
        for method, n in self.per_method.items():
            done = by_method.get(method, s.get("items_done", 0) if len(self.per_method) == 1 else 0)
            t.add_row(f"[bold]{method}[/]", ProgressBar(total=max(n, 1), completed=min(done, n), width=30),
                      f"{done}/{n}")
        t.add_row(f"items {s.get('items_done', 0)}/{total}", f"failed {s.get('items_failed', 0)}",
                  f"elapsed {_duration(elapsed)} · ETA {_eta_text(eta, basis)}")
        t.add_row(f"[green]at the judge[/] {at_judge(s)}",
                  f"[yellow]waiting for quota[/] {s.get('waiting_for_quota', 0)}",
                  f"concurrency {s.get('concurrency_limit', '-')}")
        usage = usage_text(s)
        if usage:
            t.add_row("now", usage, "")
        t.add_row(f"calls {s.get('calls', 0)}", f"cache hits {s.get('cache_hits', 0)}",
                  f"shared {s.get('shared', 0)}")
        t.add_row(f"retries {s.get('retries', 0)}", f"429s {s.get('rate_limited', 0)}",
                  f"spent {_spend(s, self.max_cost)}")
        b = s.get("batches")
        if b is not None:  # --batch: where the calls are
            t.add_row(f"[bold]batches[/] submitted {b.get('submitted', 0)} (+{b.get('reattached', 0)} re-attached)",
                      f"in progress {b.get('in_progress', 0)} ({b.get('requests_in_progress', 0)} requests)",
                      f"completed {b.get('completed', 0)} ({b.get('requests_answered', 0)} answered)")
            t.add_row(f"queued for next batch {b.get('requests_queued', 0)}",
                      f"failed/expired {b.get('failed', 0) + b.get('expired', 0)}", "")
        return t
