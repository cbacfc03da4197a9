"""Current requests/min and tokens/min from cumulative counters, over a sliding window.

The progress display samples the pool's running totals (network calls, tokens) each time
it draws; the rate is the growth over the last ``window_s`` seconds of samples. Nothing
in the call path is touched, and memory is bounded by the number of samples kept.
"""
from __future__ import annotations

from collections import deque


class UsageWindow:
    def __init__(self, window_s: float = 60.0, max_samples: int = 512) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=max_samples)

    def observe(self, now: float, calls: int, tokens: int) -> None:
        """Record the running totals at ``now`` (seconds, monotonic)."""
        self._samples.append((now, calls, tokens))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()  # keep one sample at or beyond the window's start

    def span(self) -> float:
        """Seconds the window's samples cover (a rate over a few seconds is noise)."""
        return self._samples[-1][0] - self._samples[0][0] if len(self._samples) > 1 else 0.0

    def rates(self) -> tuple[float, float] | None:
        """``(requests/min, tokens/min)`` over the window, or None before two samples
        a moment apart."""
        if len(self._samples) < 2:
            return None
        t0, c0, k0 = self._samples[0]
        t1, c1, k1 = self._samples[-1]
        span = t1 - t0
        if span <= 0:
            return None
        return (c1 - c0) / span * 60.0, (k1 - k0) / span * 60.0
