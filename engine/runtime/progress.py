"""Live progress on a terminal (rich); silent when not a TTY or under CI.

It separates items waiting for quota from items working, and counts retries, 429s and
cache hits as they happen, so a rate-limited run never looks stuck.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable


def progress_enabled(stream: Any = None) -> bool:
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("CI")


class Progress:
    """Calls ``snapshot()`` a few times a second and renders it; no-op when disabled."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]], total: int | None, enabled: bool) -> None:
        self._snapshot, self._total, self.enabled = snapshot, total, enabled
        self._live = None
        self._t0 = time.monotonic()

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(stderr=True), refresh_per_second=4,
                              get_renderable=self._render, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def _render(self) -> Any:
        from rich.table import Table

        s = self._snapshot()
        done = s.get("items_done", 0)
        total = f"/{self._total}" if self._total else ""
        t = Table.grid(padding=(0, 2))
        t.add_row(f"[bold]items[/] {done}{total}", f"failed {s.get('items_failed', 0)}",
                  f"elapsed {time.monotonic() - self._t0:,.1f}s")
        t.add_row(f"[green]working[/] {s.get('in_flight', 0)}",
                  f"[yellow]waiting for rate limit[/] {s.get('waiting_for_quota', 0)}",
                  f"concurrency {s.get('concurrency_limit', '-')}")
        t.add_row(f"calls {s.get('calls', 0)}", f"cache hits {s.get('cache_hits', 0)}",
                  f"shared {s.get('shared', 0)}")
        t.add_row(f"retries {s.get('retries', 0)}", f"429s {s.get('rate_limited', 0)}",
                  f"cost ${s.get('cost_usd', 0.0):.4f}")
        b = s.get("batches")
        if b is not None:  # --batch: where the calls are
            t.add_row(f"[bold]batches[/] submitted {b.get('submitted', 0)} (+{b.get('reattached', 0)} re-attached)",
                      f"in progress {b.get('in_progress', 0)} ({b.get('requests_in_progress', 0)} requests)",
                      f"completed {b.get('completed', 0)} ({b.get('requests_answered', 0)} answered)")
            t.add_row(f"queued for next batch {b.get('requests_queued', 0)}",
                      f"failed/expired {b.get('failed', 0) + b.get('expired', 0)}", "")
        return t
