"""Timing a whole run through the public API (shared by the benchmarks)."""
from __future__ import annotations

import argparse
import time
from typing import NamedTuple

from drscore.api import Run, RunConfig


async def timed_run(cfg: RunConfig) -> tuple[float, dict]:
    """Run ``cfg`` to completion; return (wall seconds, summary)."""
    t0 = time.monotonic()
    async with Run(cfg) as run:
        async for _ in run.rows():
            pass
    return time.monotonic() - t0, run.summary



def add_load_arguments(ap: argparse.ArgumentParser, *, latency: float = 0.3, jitter: float = 0.2,
                       concurrency: int = 16) -> None:
    """``--latency`` and ``--jitter`` (the mock judge's seconds per call) and ``--concurrency``
    (the client's calls in flight): the load every quota bench is run under."""
    ap.add_argument("--latency", type=float, default=latency, help="the mock's mean seconds per call")
    ap.add_argument("--jitter", type=float, default=jitter, help="uniform +/- seconds around it")
    ap.add_argument("--concurrency", type=int, default=concurrency, help="the client's calls in flight")


class QuotaUse(NamedTuple):
    """What the mock judge's counters say of a run against its quota."""

    charged: int  # tokens it charged (prompt + completion)
    by_requests: float  # answered requests / RPM, in seconds
    by_tokens: float  # tokens charged / TPM, in seconds
    span: float  # its first request to its last answer, in seconds

    @property
    def limit(self) -> float:
        """The least time the quota allows for what was answered."""
        return max(self.by_requests, self.by_tokens)

    @property
    def binding(self) -> str:
        return "tpm" if self.by_tokens > self.by_requests else "rpm"


def quota_use(stats: dict, rpm: float, tpm: float, *, charge: str = "counted") -> QuotaUse:
    """The mock's ``stats()`` read against an ``rpm``/``tpm`` quota (0: none); ``charge``: its
    ``--tpm-charge`` (reserved or input: what its quota kept is not the whole usage)."""
    charged = stats["quota_tokens"] if charge != "counted" else stats["prompt_tokens"] + stats["completion_tokens"]
    return QuotaUse(charged=charged, by_requests=stats["ok"] / rpm * 60 if rpm else 0.0,
                    by_tokens=charged / tpm * 60 if tpm else 0.0,
                    span=(stats["last_answer_at"] or 0.0) - (stats["first_request_at"] or 0.0))
