"""The limiter's pacing, event by event: ``pacing.jsonl`` in the run directory.

Why: a run that met 429s, or took longer than its quota says it should, leaves its totals
(``learned_quota`` in ``summary.json``: the proven rates and the 429s' votes) but not how the
pace moved. This file is the limiter's own account, the way ``bench.headerless`` reads a run:

* ``start`` — an invocation's limiter started (wall clock ``at``; ``rpm``/``tpm`` told, 0 for
  none); every later ``t`` counts seconds from it;
* ``429`` — a call was refused: its grant order (``call``, from 1), its token estimate, the pause, and
  where the limiter learns the quota (nothing told or announced), the request rate a bucket
  that refused it could have (``request_bound_rpm``), the request rate the calls had proved
  (``request_proof_rpm``), the token strain and its two parts (``token_proof_tpm``: the token
  rate the calls had proved; ``token_bound_tpm``: the most a token bucket that refused it could
  have), the binding vote it cast (``vote``: a :class:`GuessVote`) and the paces after it;
* ``turn`` — the requests proved since passed an earlier refusal's bound: tokens bind
  (``strain``: the proof over that bound);
* ``probe`` — a request pace the 429s' ranks chose leaves the token quota idle: it grows again;
* ``pace`` — the learned paces, at most every ``every_s`` seconds while they move.

Paces are per minute (``rpm``: requests, ``tpm``: tokens), as ``--rpm``/``--tpm`` take them.
The file is appended by every invocation of the run (each begins with ``start``), one
``write(2)`` per line like the ledger, so a ``kill -9`` keeps what was written; a torn last
line is skipped by :func:`read_pacing`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.runtime.calls.appending import open_lines
from drscore.engine.runtime.calls.binding import GuessVote


PACING_FILE = "pacing.jsonl"
PACE_EVERY_S = 5.0  # the learned paces are sampled this often while they move


class PaceEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """One line of ``pacing.jsonl`` (the module's docstring names each ``kind``)."""

    t: float
    kind: str
    binding: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    at: float | None = None
    call: int | None = None
    tokens: int | None = None
    pause_s: float | None = None
    learning: bool | None = None
    request_bound_rpm: float | None = None
    request_proof_rpm: float | None = None
    token_strain: float | None = None
    token_proof_tpm: float | None = None
    token_bound_tpm: float | None = None
    strain: float | None = None
    vote: GuessVote | None = None


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(PaceEvent)


class PaceLog:
    """Where a :class:`RateLimiter` tells its pacing: ``path`` (appended, one line an event),
    or ``None`` to keep the events in :attr:`events` only (tests, a run without a directory).
    ``clock`` gives the seconds ``t`` counts from the first event."""

    def __init__(self, path: str | Path | None, *, every_s: float = PACE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path) if path is not None else None
        self.every_s, self._clock = every_s, clock
        self.events: list[PaceEvent] = []  # kept only without a path
        self._t0: float | None = None
        self._sampled = -float("inf")
        self._fd = open_lines(self.path) if self.path else -1

    def start(self, rpm: float, tpm: float) -> None:
        """An invocation's limiter starts, told ``rpm``/``tpm`` (0: none)."""
        self.emit(PaceEvent(t=0.0, kind="start", rpm=rpm, tpm=tpm, at=round(time.time(), 3)))

    def now(self) -> float:
        """Seconds since the first event (0 at it)."""
        now = self._clock()
        if self._t0 is None:
            self._t0 = now
        return round(now - self._t0, 3)

    def sample_due(self) -> bool:
        """Whether a ``pace`` sample is due: ``every_s`` since the last event that carried the
        learned paces (a sample, a 429)."""
        return self._clock() - self._sampled >= self.every_s

    def emit(self, event: PaceEvent) -> None:
        if event.kind == "start":
            self._t0 = self._clock()
        if event.binding is not None:
            self._sampled = self._clock()
        if self._fd < 0:
            self.events.append(event)
            return
        try:
            os.write(self._fd, _enc.encode(event) + b"\n")
        except OSError:
            pass  # a full disk must not stop the calls: the account is a diagnosis, not a record of money

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# The flat table's columns (drscore export --table pacing): the event's own fields, then its vote's
PACING_COLUMNS = (*(f for f in PaceEvent.__struct_fields__ if f != "vote"), "vote_rank", "vote_paced",
                  "vote_strain_requests", "vote_strain_tokens", "vote_by", "vote_guess")


def flat_pace(event: PaceEvent) -> dict[str, Any]:
    """One event as a flat dict of :data:`PACING_COLUMNS` (its vote spread over ``vote_*``)."""
    row: dict[str, Any] = {f: getattr(event, f) for f in PaceEvent.__struct_fields__ if f != "vote"}
    v = event.vote
    row.update(vote_rank=v and v.rank, vote_paced=v and v.paced, vote_strain_requests=v and v.strain[0],
               vote_strain_tokens=v and v.strain[1], vote_by=v and v.by, vote_guess=v and v.guess)
    return row


def read_pacing(path: str | Path) -> Iterator[PaceEvent]:
    """The events of a ``pacing.jsonl`` in order; a torn or foreign line is skipped."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return
    for line in data.splitlines():
        if line.strip():
            try:
                yield _dec.decode(line)
            except msgspec.DecodeError:
                continue
