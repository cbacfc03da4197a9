"""Progress of a run, told truthfully: a live panel on a terminal, one plain line every
N seconds elsewhere (CI logs, pipes), so a long run is never silent.

What it shows: done/total per method, in items and in judge calls (a method whose
thirty-call items all finish at the end would otherwise sit at 0/20 while hundreds of
its calls are done); calls at the judge and calls waiting for quota, counted apart (the
limiter holds a concurrency slot while a call waits for quota, so its "in flight" count
includes the waiting ones); the current requests/min and tokens/min against the limits
(:mod:`drscore.engine.runtime.usage_window`); 429s, retries, cache hits; spend so far
against ``--max-cost``; batch state with ``--batch``; and an ETA from the quota: the
calls left per method over the rate the quota, the calls in flight and the recent pace
allow (:mod:`drscore.engine.runtime.eta`), which never counts up without saying why.

The display runs in a thread (rich's refresh thread, or a timer thread for plain
lines) and only reads the runner's ``snapshot()``.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, NamedTuple, TextIO

from drscore.engine.runtime.eta import EtaTracker, Shown, estimate, method_left, quota_tokens
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


def eta_text(shown: Shown) -> str:
    """``2m04s (quota)``, ``>1m10s (quota; ...)`` while a method's calls are unknown,
    ``2m30s (quota; up: 429 pause)`` when it went up, ``-`` before anything is known."""
    if shown.seconds is None or (shown.lower_bound and not shown.seconds):
        return "unknown (no method's calls known yet)" if shown.lower_bound else "-"
    if shown.basis == "done":
        return _duration(0)
    notes = [shown.basis]
    if shown.lower_bound:
        notes.append("a method's calls are not known yet")
    if shown.cause:
        notes.append(f"up: {shown.cause}")
    return (">" if shown.lower_bound else "") + f"{_duration(shown.seconds)} ({'; '.join(notes)})"


class MethodCount(NamedTuple):
    """One method's progress: items done of ``items``; judge calls asked of
    ``calls_total`` (None: not known yet; ``estimated``: partly from its mean item)."""

    done: int
    items: int
    calls: int | None = None  # None: the runner does not count this method's calls
    calls_total: int | None = None
    estimated: bool = False

    def calls_text(self) -> str:
        """``300/600``, ``300/~620`` or ``300/?``; "" when calls are not counted."""
        if self.calls is None:
            return ""
        if self.calls_total is None:
            return f"{self.calls}/?"
        return f"{self.calls}/{'~' if self.estimated else ''}{self.calls_total}"


def method_counts(snap: dict[str, Any], per_method: dict[str, int]) -> dict[str, MethodCount]:
    """Per method: items done and judge calls asked, of how many."""
    by_method = snap.get("done_by_method") or {}
    works = snap.get("work") or {}
    out: dict[str, MethodCount] = {}
    for m, n in per_method.items():
        done = int(by_method.get(m, snap.get("items_done", 0) if len(per_method) == 1 else 0))
        if m not in works:
            out[m] = MethodCount(done, n)
            continue
        left = method_left(works[m], n, done)
        total = None if left.asks_left is None else round(left.asks_done + left.asks_left)
        out[m] = MethodCount(done, n, left.asks_done, total, left.estimated)
    return out


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
               max_cost: float | None = None, shown: Shown | None = None) -> str:
    """One line for logs: totals, per method items and calls, calls at the judge and
    waiting, the current rates against the limits, batches, spend, ETA (``shown``: what
    the tracker shows; without it, this moment's estimate)."""
    total = sum(per_method.values())
    done = int(snap.get("items_done", 0))
    if shown is None:
        est = estimate(snap, per_method, elapsed_s)
        shown = Shown(est.seconds, est.basis, est.lower_bound)
    methods = "; ".join(f"{m} {c.done}/{c.items}" + (f", calls {c.calls_text()}" if c.calls is not None else "")
                        for m, c in method_counts(snap, per_method).items())
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    usage = usage_text(snap)
    batches = batch_text(snap)
    return (f"progress {done}/{total} items{pct} [{methods}] · failed {snap.get('items_failed', 0)} · "
            f"at the judge {at_judge(snap)}, waiting for quota {snap.get('waiting_for_quota', 0)} · "
            + (f"{usage} · " if usage else "")
            + f"calls {snap.get('calls', 0)}, cache hits {snap.get('cache_hits', 0)}, retries "
            f"{snap.get('retries', 0)}, 429s {snap.get('rate_limited', 0)} · "
            + (f"{batches} · " if batches else "")
            + f"spent {_spend(snap, max_cost)} · elapsed {_duration(elapsed_s)} · ETA {eta_text(shown)}")


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
        self._eta = EtaTracker()
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
        self._usage.observe(self._clock(), int(snap.get("calls", 0)), quota_tokens(snap))
        rates = self._usage.rates()
        if rates is not None:
            snap["usage_rate"] = rates
            snap["usage_span_s"] = self._usage.span()
        self._last = snap
        return self._last

    def eta(self, snap: dict[str, Any] | None = None) -> Shown:
        """The ETA shown now (it goes down, or up with its cause named)."""
        snap = self.snapshot() if snap is None else snap
        elapsed = self._clock() - self._t0
        return self._eta.show(elapsed, estimate(snap, self.per_method, elapsed))

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
        snap = self.snapshot()
        line = plain_line(snap, self.per_method, self._clock() - self._t0, self.max_cost, self.eta(snap))
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
        shown = self.eta(s)
        t = Table.grid(padding=(0, 2))
        for method, c in method_counts(s, self.per_method).items():
            # the bar follows the calls where they are known: an item can hold thirty of them
            if c.calls is not None and c.calls_total:
                bar = ProgressBar(total=c.calls_total, completed=min(c.calls, c.calls_total), width=30)
            else:
                bar = ProgressBar(total=max(c.items, 1), completed=min(c.done, c.items), width=30)
            t.add_row(f"[bold]{method}[/]", bar, f"{c.done}/{c.items} items"
                      + (f" · {c.calls_text()} calls" if c.calls is not None else ""))
        t.add_row(f"items {s.get('items_done', 0)}/{total}", f"failed {s.get('items_failed', 0)}",
                  f"elapsed {_duration(elapsed)} · ETA {eta_text(shown)}")
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
