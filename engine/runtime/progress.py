"""Progress of a run, told truthfully: a live panel on a terminal, one plain line every
N seconds elsewhere (CI logs, pipes), so a long run is never silent.

What it shows: done/total per method; calls working vs waiting for quota; 429s,
retries, cache hits; spend so far against ``--max-cost``; and an ETA that respects the
quota. A rate-limited run cannot go faster than its requests- and tokens-per-minute
allow, however quick the first (often cached) items were, so the ETA is the larger of
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


def estimate_eta(snap: dict[str, Any], total: int, elapsed_s: float) -> tuple[float | None, str]:
    """Seconds left and what bounds them: ``quota`` or ``pace``.

    From the items done so far: network calls per item and tokens per call. The
    remaining items then need ``calls_left / rpm`` minutes under a request quota and
    ``calls_left * tokens_per_call / tpm`` minutes under a token quota; the observed
    pace needs ``elapsed / done * items_left``. The ETA is the largest of these. None
    before the first item is done.
    """
    done = int(snap.get("items_done", 0))
    left = max(0, total - done)
    if left == 0:
        return 0.0, "done"
    if done <= 0:
        return None, "starting"
    pace = elapsed_s / done * left
    calls = int(snap.get("calls", 0))
    calls_left = calls / done * left
    quota = 0.0
    rpm = float(snap.get("rpm") or 0)
    tpm = float(snap.get("tpm") or 0)
    if rpm > 0:
        quota = max(quota, calls_left / rpm * 60.0)
    if tpm > 0 and calls:
        per_call = (int(snap.get("input_tokens", 0)) + int(snap.get("output_tokens", 0))) / calls
        quota = max(quota, calls_left * per_call / tpm * 60.0)
    return (quota, "quota") if quota > pace else (pace, "pace")


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


def working(snap: dict[str, Any]) -> int:
    """Calls at the judge (or about to be sent). A call takes its concurrency slot before it
    queues for quota, so the limiter's ``in_flight`` includes the ones still waiting."""
    return max(0, int(snap.get("in_flight", 0)) - int(snap.get("waiting_for_quota", 0)))


def plain_line(snap: dict[str, Any], per_method: dict[str, int], elapsed_s: float,
               max_cost: float | None = None) -> str:
    """One line for logs: totals, per method, calls, quota waits, spend, ETA."""
    total = sum(per_method.values())
    done = int(snap.get("items_done", 0))
    eta, basis = estimate_eta(snap, total, elapsed_s)
    by_method = snap.get("done_by_method", {})
    methods = " ".join(f"{m} {by_method.get(m, 0)}/{n}" for m, n in per_method.items())
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    return (f"progress {done}/{total} items{pct} [{methods}] · failed {snap.get('items_failed', 0)} · "
            f"working {working(snap)}, waiting for quota {snap.get('waiting_for_quota', 0)} · "
            f"calls {snap.get('calls', 0)}, cache hits {snap.get('cache_hits', 0)}, retries "
            f"{snap.get('retries', 0)}, 429s {snap.get('rate_limited', 0)} · spent {_spend(snap, max_cost)} · "
            f"elapsed {_duration(elapsed_s)} · ETA {_duration(eta)}"
            + (f" ({basis})" if basis in ("quota", "pace") else "") + _batches(snap))


def _batches(snap: dict[str, Any]) -> str:
    """With --batch, where the calls are (the live panel shows the same)."""
    b = snap.get("batches")
    if b is None:
        return ""
    return (f" · batches submitted {b.get('submitted', 0)}, in progress {b.get('in_progress', 0)}, "
            f"completed {b.get('completed', 0)}, queued for next batch {b.get('requests_queued', 0)}")


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
        self.lines = 0

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def snapshot(self) -> dict[str, Any]:
        """The runner's state; the last good one if it changed under the read."""
        try:
            self._last = dict(self._snapshot())
        except RuntimeError:  # a dict grew in the loop thread while this thread read it
            pass
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
        eta, basis = estimate_eta(s, total, elapsed)
        by_method = s.get("done_by_method", {})
        t = Table.grid(padding=(0, 2))
        for method, n in self.per_method.items():
            done = by_method.get(method, s.get("items_done", 0) if len(self.per_method) == 1 else 0)
            t.add_row(f"[bold]{method}[/]", ProgressBar(total=max(n, 1), completed=min(done, n), width=30),
                      f"{done}/{n}")
        t.add_row(f"items {s.get('items_done', 0)}/{total}", f"failed {s.get('items_failed', 0)}",
                  f"elapsed {_duration(elapsed)} · ETA {_duration(eta)}"
                  + (f" ({basis})" if basis in ("quota", "pace") else ""))
        t.add_row(f"[green]working[/] {working(s)}",
                  f"[yellow]waiting for quota[/] {s.get('waiting_for_quota', 0)}",
                  f"concurrency {s.get('concurrency_limit', '-')}")
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
