"""The run ledger: every paid judge call of a run, once, in ``ledger.jsonl``.

Why a ledger: a run is often several invocations of one command (a budget stop, a
Ctrl-C, ``kill -9``, a resume the next morning). The score files are rewritten by every
invocation (a resumed row is answered from the cache at $0), so they cannot say what the
run cost. The ledger is the record of what was paid, and it is only ever appended to:

* ``begin`` — an invocation starts (its number, ``--max-cost``, whether the model is priced);
* ``sent`` — a request is about to leave, with its cache key, method, task, agent and the
  worst case it may be billed (its reservation);
* ``paid`` — it was answered: usage (input, cached input, output, reasoning tokens), cost,
  seconds at the judge and waiting, and again key, method, task and agent, so every paid
  call is one self-contained line;
* ``unpaid`` — it was answered with an error status that is not billed (a 429, a 400);
* ``unknown`` — its outcome cannot be known (a timeout, a dropped connection, Ctrl-C while
  it was at the judge): it may have been billed, up to its reservation;
* ``stop`` — the invocation stopped early (budget, rate limit, endpoint fault); ``end`` —
  it ended (``finished`` or ``interrupted``).

A ``sent`` line with no answer line after it is a call lost in flight (``kill -9``, a
power cut): it cannot be seen, but it is bounded by its reservation, and every total says
"up to $X more may have been billed for N calls interrupted in flight".

Durability: one ``write(2)`` per line on an ``O_APPEND`` descriptor, made before the answer
is committed to the judge cache, so a killed process loses nothing it had been answered
(the kernel holds the bytes); an ``fsync`` follows within 50 ms for a group of lines (as
the cache's group commit), so a power cut loses at most that moment, like the cache. One
process writes a run's ledger (the run directory's lock); a torn last line (power cut) is
skipped by readers and counted, and ended before the next invocation appends
(:func:`drscore.engine.runtime.calls.appending.open_lines`), so its lines stay whole.

JSONL rather than a SQLite table: a line per call appends without a transaction, the file
survives the loss of its last bytes, and ``jq``/pandas read it as it is.

The caller of a call (task, agent, method) comes through :data:`CALLER`, a context
variable the item's context sets around each ask, so the pool's signature stays as it is.
"""
from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.runtime.calls.appending import open_lines
from drscore.engine.runtime.calls.key_set import KeySet

LEDGER_FILE = "ledger.jsonl"
FSYNC_AFTER_S = 0.05

# (task_id, agent, method) of the item asking, set by engine.runtime.context around each ask.
CALLER: contextvars.ContextVar[tuple[str, str, str]] = contextvars.ContextVar("drscore_caller",
                                                                              default=("", "", ""))


class Usage(msgspec.Struct, kw_only=True):
    """What calls were billed: counts, tokens, USD, seconds at the judge and waiting."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    cost_usd_uncached: float = 0.0
    judge_s: float = 0.0
    wait_s: float = 0.0

    def add(self, other: Usage) -> None:
        for f in self.__struct_fields__:
            setattr(self, f, getattr(self, f) + getattr(other, f))


class Begin(msgspec.Struct, tag="begin", kw_only=True):
    inv: int
    at: float
    pid: int
    max_cost: float | None = None
    priced: bool = True


class Sent(msgspec.Struct, tag="sent", kw_only=True):
    inv: int
    id: int
    key: str
    method: str = ""
    task: str = ""
    agent: str = ""
    template: str = ""
    worst_usd: float = 0.0
    at: float = 0.0


class Paid(msgspec.Struct, tag="paid", kw_only=True):
    inv: int
    id: int
    key: str
    method: str = ""
    task: str = ""
    agent: str = ""
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    cost_usd_uncached: float = 0.0
    judge_s: float = 0.0
    wait_s: float = 0.0
    batched: bool = False

    def usage(self) -> Usage:
        # The line is flat (its columns are paid_calls' and the export's, in this order);
        # Usage's fields other than ``calls`` are spelled the same here.
        return Usage(calls=1, **{f: getattr(self, f) for f in _BILLED})


_BILLED = tuple(f for f in Usage.__struct_fields__ if f != "calls")


class Unpaid(msgspec.Struct, tag="unpaid", kw_only=True):
    inv: int
    id: int
    why: str = ""


class Unknown(msgspec.Struct, tag="unknown", kw_only=True):
    inv: int
    id: int
    why: str = ""


class Stop(msgspec.Struct, tag="stop", kw_only=True):
    inv: int
    reason: str
    max_cost: float | None = None
    at: float = 0.0


class End(msgspec.Struct, tag="end", kw_only=True):
    inv: int
    state: str
    at: float = 0.0


Record = Begin | Sent | Paid | Unpaid | Unknown | Stop | End
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(Record)


class Bound(msgspec.Struct, kw_only=True):
    """Calls that may have been billed without the run knowing how much: at most ``up_to_usd``."""

    calls: int = 0
    up_to_usd: float = 0.0


class Folded(msgspec.Struct, kw_only=True):
    """A ledger read back: totals over all invocations and per invocation."""

    invocations: int = 0
    paid: Usage = msgspec.field(default_factory=Usage)
    by_invocation: dict[int, Usage] = {}
    interrupted: Bound = msgspec.field(default_factory=Bound)  # sent, never answered (the process died)
    unknown: Bound = msgspec.field(default_factory=Bound)  # answered by nothing we can read (timeout, Ctrl-C)
    in_flight: Bound = msgspec.field(default_factory=Bound)  # sent by a live invocation, not answered yet
    last_stop: Stop | None = None
    priced: bool = True
    damaged_lines: int = 0
    # key (as :func:`key_id`) -> paid usage (filled only when asked for: the run's own resume needs it)
    by_key: dict[int, Usage] = {}

    def committed_usd(self) -> float:
        """What may have been billed: paid, plus the worst cases of calls whose outcome is unknown."""
        return self.paid.cost_usd + self.interrupted.up_to_usd + self.unknown.up_to_usd


def _records(path: Path, damaged: list[int]) -> Iterator[Record]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if not line.strip():
                continue
            try:
                yield _dec.decode(line)
            except msgspec.DecodeError:  # a torn last line (power cut) or an edited one
                damaged[0] += 1


_HEX16 = re.compile(r"[0-9a-f]{16}")


def key_id(key: str) -> int:
    """A cache key as 64 bits: its first 16 hex digits (keys are sha256 digests), or a
    hash of any other string. About 30 bytes held a key where the 64-character string
    took 113; two keys meet by chance once in 2^64."""
    if _HEX16.match(key):
        return int(key[:16], 16)
    # int(..., 16) would also take a sign, "0x", "_" or spaces: "12", "012" and "0x12" alike
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def fold(path: str | Path, *, keys: bool = False, live_invocation: int | None = None) -> Folded:
    """Read a ledger: totals over every invocation. ``keys`` also sums what was paid per
    cache key. Calls sent by ``live_invocation`` (a run still going) and not answered are
    ``in_flight``, not interrupted."""
    out = Folded(by_invocation={}, by_key={})
    pending: dict[tuple[int, int], float] = {}
    damaged = [0]
    for rec in _records(Path(path), damaged):
        # every line names its invocation: one whose begin line was lost (torn by a power cut
        # before open_lines ended such lines) is still counted, and never numbered again
        out.invocations = max(out.invocations, rec.inv)
        if isinstance(rec, Sent):
            pending[(rec.inv, rec.id)] = rec.worst_usd
        elif isinstance(rec, Paid):
            pending.pop((rec.inv, rec.id), None)
            usage = rec.usage()
            out.paid.add(usage)
            out.by_invocation.setdefault(rec.inv, Usage()).add(usage)
            if keys:
                out.by_key.setdefault(key_id(rec.key), Usage()).add(usage)
        elif isinstance(rec, Unpaid):
            pending.pop((rec.inv, rec.id), None)
        elif isinstance(rec, Unknown):
            worst = pending.pop((rec.inv, rec.id), 0.0)
            out.unknown.calls += 1
            out.unknown.up_to_usd += worst
        elif isinstance(rec, Begin):
            out.by_invocation.setdefault(rec.inv, Usage())
            out.priced = out.priced and rec.priced
            out.last_stop = None
        elif isinstance(rec, Stop):
            out.last_stop = rec
    for (inv, _), worst in pending.items():
        bound = out.in_flight if inv == live_invocation else out.interrupted
        bound.calls += 1
        bound.up_to_usd += worst
    out.damaged_lines = damaged[0]
    return out


def totals_dict(folded: Folded, *, this_invocation: int | None = None) -> dict[str, Any]:
    """The ledger's figures as written to ``summary.json`` (``totals.ledger``) and read by
    the report, the viewer and ``load_run``."""
    def usage(u: Usage) -> dict[str, Any]:
        d = msgspec.to_builtins(u)
        for k in ("cost_usd", "cost_usd_uncached"):
            d[k] = round(d[k], 6) if folded.priced else None
        for k in ("judge_s", "wait_s"):
            d[k] = round(d[k], 3)
        return d

    out: dict[str, Any] = {
        "file": LEDGER_FILE, "invocations": folded.invocations, "run": usage(folded.paid),
        "by_invocation": {str(k): usage(v) for k, v in sorted(folded.by_invocation.items())},
        "interrupted_in_flight": _bound(folded.interrupted, folded.priced),
        "outcome_unknown": _bound(folded.unknown, folded.priced),
    }
    if folded.in_flight.calls:
        out["in_flight_now"] = _bound(folded.in_flight, folded.priced)
    if this_invocation is not None:
        out["this_invocation"] = this_invocation
    if folded.damaged_lines:
        out["damaged_lines"] = folded.damaged_lines
    if folded.last_stop is not None:
        out["last_stop"] = {"reason": folded.last_stop.reason, "max_cost": folded.last_stop.max_cost}
    return out


def _bound(b: Bound, priced: bool) -> dict[str, Any]:
    return {"calls": b.calls, "up_to_usd": round(b.up_to_usd, 6) if priced else None}


def may_have_billed(ledger: dict[str, Any]) -> str | None:
    """"up to $X more may have been billed for N calls interrupted in flight" (None when
    every call sent was answered), from :func:`totals_dict`'s figures."""
    parts = []
    for name, what in (("interrupted_in_flight", "interrupted in flight"),
                       ("outcome_unknown", "whose outcome is unknown (timeout or Ctrl-C at the judge)")):
        b = ledger.get(name) or {}
        if b.get("calls"):
            usd = b.get("up_to_usd")
            amount = f"${usd:.4f}" if isinstance(usd, (int, float)) else "an unknown amount"
            parts.append((amount, b["calls"], what))
    if not parts:
        return None
    return "; ".join(f"up to {a} more may have been billed for {n} call{'s' if n != 1 else ''} {w}"
                     for a, n, w in parts)


def money_line(ledger: dict[str, Any], label: str = "this invocation") -> str:
    """"this invocation $0.3100; run total $1.8800 for 310 paid calls (3 invocations)"
    (readers of a run directory say "last invocation")."""
    run = ledger.get("run") or {}
    n = ledger.get("invocations", 1)
    this = (ledger.get("by_invocation") or {}).get(str(ledger.get("this_invocation")))
    total = _usd(run.get("cost_usd"))
    if this is None:
        return f"run total {total} for {run.get('calls', 0)} paid calls ({n} invocation{'s' if n != 1 else ''})"
    return (f"{label} {_usd(this.get('cost_usd'))}; run total {total} for {run.get('calls', 0)} paid "
            f"calls ({n} invocation{'s' if n != 1 else ''})")


def _usd(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, (int, float)) else "unknown"


class RunLedger:
    """The ledger of one invocation: appends its lines, keeps its running totals, and
    hands out what earlier invocations paid for a key (so a row answered from the cache
    carries what its answers cost when they were paid).

    ``RunLedger(None)`` keeps the same accounts in memory only (a run without a
    directory, a judge session)."""

    def __init__(self, path: str | Path | None, *, max_cost: float | None = None, priced: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.before = fold(self.path, keys=True) if self.path is not None else Folded(by_invocation={}, by_key={})
        self.invocation = self.before.invocations + 1
        self.now = Usage()
        self.interrupted_now = Bound()  # calls of this invocation whose outcome became unknown
        # What earlier invocations paid per key; None once a row carries it (the key stays:
        # the run paid for it, so its answer is never "reused").
        # Keys are held as key_id()s: a run of a million calls keeps one per paid call.
        self._earlier: dict[int, Usage | None] = dict(self.before.by_key)
        self.before.by_key = {}
        self._paid_now = KeySet()  # keys this invocation paid for (16-32 bytes a key, not a set's 78)
        self._pending: dict[int, Usage] = {}  # this invocation's paid attempts of calls still open
        self._sent: dict[int, tuple[str, float]] = {}
        self._seq = 0
        self._fd = -1
        self._fsync_due = False
        self._fsyncing = False
        self.priced = priced
        if self.path is not None:
            self._fd = open_lines(self.path)
            self._write(Begin(inv=self.invocation, at=round(time.time(), 3), pid=os.getpid(), max_cost=max_cost,
                              priced=priced))

    # -- writing ------------------------------------------------------------------------
    def _write(self, rec: Record) -> None:
        if self._fd < 0:
            return
        try:
            os.write(self._fd, _enc.encode(rec) + b"\n")
        except OSError:
            return  # a full disk must not take the answer with it: the cache still has it
        self._schedule_fsync()

    def _schedule_fsync(self) -> None:
        if self._fsync_due:
            return
        self._fsync_due = True
        try:
            asyncio.get_running_loop().call_later(FSYNC_AFTER_S, self._fsync_soon)
        except RuntimeError:  # no loop: now
            self._fsync_now()

    def _fsync_soon(self) -> None:
        if self._fsyncing:
            asyncio.get_running_loop().call_later(FSYNC_AFTER_S, self._fsync_soon)
            return
        self._fsync_due = False
        if self._fd < 0:
            return
        self._fsyncing = True
        fut = asyncio.get_running_loop().run_in_executor(None, os.fsync, self._fd)

        def done(f: asyncio.Future[None]) -> None:
            self._fsyncing = False
            if not f.cancelled():
                f.exception()  # retrieved: a failed fsync is retried with the next group

        fut.add_done_callback(done)

    def _fsync_now(self) -> None:
        self._fsync_due = False
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass

    def sent(self, key: str, template: str, worst_usd: float) -> int:
        """A request is leaving: its reservation. Returns the call's id for the answer line."""
        self._seq += 1
        task, agent, method = CALLER.get()
        self._sent[self._seq] = (key, worst_usd)
        self._write(Sent(inv=self.invocation, id=self._seq, key=key, method=method, task=task, agent=agent,
                         template=template, worst_usd=round(worst_usd, 8), at=round(time.time(), 3)))
        return self._seq

    def paid(self, call: int, *, input_tokens: int, cached_input_tokens: int, output_tokens: int,
             reasoning_tokens: int, cost_usd: float, cost_usd_uncached: float, judge_s: float, wait_s: float,
             batched: bool = False) -> None:
        """The call was answered and billed this much."""
        key, _ = self._sent.pop(call, ("", 0.0))
        task, agent, method = CALLER.get()
        rec = Paid(inv=self.invocation, id=call, key=key, method=method, task=task, agent=agent,
                   input_tokens=input_tokens, cached_input_tokens=cached_input_tokens, output_tokens=output_tokens,
                   reasoning_tokens=reasoning_tokens, cost_usd=round(cost_usd, 10),
                   cost_usd_uncached=round(cost_usd_uncached, 10), judge_s=round(judge_s, 4),
                   wait_s=round(wait_s, 4), batched=batched)
        self._write(rec)
        usage = rec.usage()
        self.now.add(usage)
        kid = key_id(key)
        self._pending.setdefault(kid, Usage()).add(usage)
        self._paid_now.add(kid)

    def unpaid(self, call: int, why: str) -> None:
        """The call was answered with an error that is not billed."""
        self._sent.pop(call, None)
        self._write(Unpaid(inv=self.invocation, id=call, why=why))

    def unknown(self, call: int, why: str) -> None:
        """The call's outcome cannot be known: it may have been billed up to its reservation."""
        _, worst = self._sent.pop(call, ("", 0.0))
        self.interrupted_now.calls += 1
        self.interrupted_now.up_to_usd += worst
        self._write(Unknown(inv=self.invocation, id=call, why=why))

    def stop(self, reason: str, max_cost: float | None) -> None:
        self._write(Stop(inv=self.invocation, reason=reason, max_cost=max_cost, at=round(time.time(), 3)))

    def close(self, state: str) -> None:
        """Record the invocation's end and make the file durable; later lines are dropped."""
        if self._fd < 0:
            return
        self._write(End(inv=self.invocation, state=state, at=round(time.time(), 3)))
        self._fsync_now()
        os.close(self._fd)
        self._fd = -1

    # -- attribution --------------------------------------------------------------------
    def answered(self, key: str) -> Usage | None:
        """A call of this invocation returned its answer: what earlier invocations paid for
        the same key (failed attempts, an answer lost before it reached the cache), once;
        its own attempts are already on the answer."""
        kid = key_id(key)
        self._pending.pop(kid, None)
        return self._take_earlier(kid)

    def failed(self, key: str) -> Usage | None:
        """A call failed: everything paid for its key and not yet carried by a row (its own
        billed attempts, and earlier invocations'), once."""
        kid = key_id(key)
        now = self._pending.pop(kid, None)
        earlier = self._take_earlier(kid)
        if now is None:
            return earlier
        if earlier is not None:
            now.add(earlier)
        return now

    def reused(self, key: str) -> tuple[bool, Usage | None]:
        """An answer from the cache: (paid by this run?, what an earlier invocation paid for it
        and no row carries yet)."""
        kid = key_id(key)
        if kid in self._earlier:
            return True, self._take_earlier(kid)
        return kid in self._paid_now, None

    def _take_earlier(self, kid: int) -> Usage | None:
        earlier = self._earlier.get(kid)
        if earlier is not None:
            self._earlier[kid] = None
        return earlier

    # -- totals -------------------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        """The run's figures so far: every earlier invocation's plus this one's."""
        run = Folded(invocations=self.invocation, paid=Usage(), by_invocation={}, by_key={},
                     priced=self.before.priced and self.priced, damaged_lines=self.before.damaged_lines,
                     interrupted=msgspec.structs.replace(self.before.interrupted),
                     unknown=msgspec.structs.replace(self.before.unknown))
        run.paid.add(self.before.paid)
        run.paid.add(self.now)
        run.by_invocation = {**self.before.by_invocation, self.invocation: self.now}
        run.unknown.calls += self.interrupted_now.calls
        run.unknown.up_to_usd += self.interrupted_now.up_to_usd
        if self._sent:
            run.in_flight = Bound(calls=len(self._sent), up_to_usd=sum(w for _, w in self._sent.values()))
        return totals_dict(run, this_invocation=self.invocation)

    def run_cost_usd(self) -> float:
        """What the run has paid so far, every invocation (cheap: for the live progress)."""
        return self.before.paid.cost_usd + self.now.cost_usd

    def committed_before(self) -> float:
        """What earlier invocations may have been billed (the cap of the run counts it)."""
        return self.before.committed_usd()


class RunBudgetSpent(Exception):
    """The run has already reached its ``--max-cost``: this invocation would spend nothing,
    so it does not start (``drscore run`` exits 3 with this one line)."""


def check_budget(path: str | Path, max_cost: float | None) -> None:
    """Raise :class:`RunBudgetSpent` when ``max_cost`` leaves the run nothing to spend:
    what the ledger says the run may have been billed already reaches it, or the last
    invocation stopped at this cap (or a higher one) for want of room for its next call."""
    if max_cost is None:
        return
    folded = fold(path)
    if not folded.invocations:
        return
    committed = folded.committed_usd()
    stop = folded.last_stop
    stopped_at = stop.max_cost if stop is not None and stop.reason == "budget" else None
    if committed < max_cost and (stopped_at is None or max_cost > stopped_at):
        return
    n = folded.invocations
    lost = may_have_billed(totals_dict(folded))
    raise RunBudgetSpent(
        f"--max-cost ${max_cost:g} caps the whole run, and the run has spent ${folded.paid.cost_usd:.4f} over {n} "
        f"invocation{'s' if n != 1 else ''}" + (f" ({lost})" if lost else "")
        + (f", stopped at --max-cost ${stopped_at:g}" if stopped_at is not None else "")
        + ": nothing more is spent at this cap (nothing was sent). Re-run with a higher --max-cost to continue.")


def read_totals(run_dir: str | Path, *, running: bool = False) -> dict[str, Any] | None:
    """The ledger figures of a run directory (:func:`totals_dict`), or None when it has no
    ledger (an offline or older run). ``running``: the last invocation is still going, so
    its unanswered calls are in flight now, not lost."""
    path = Path(run_dir) / LEDGER_FILE
    if not path.is_file():
        return None
    folded = fold(path)
    if running and folded.invocations:
        folded = fold(path, live_invocation=folded.invocations)
    return totals_dict(folded, this_invocation=folded.invocations or None)


PAID_COLUMNS = tuple(f for f in Paid.__struct_fields__)


def iter_paid(path: str | Path) -> Iterator[Paid]:
    """Every paid call of a ledger file, in the order they were paid."""
    damaged = [0]
    for rec in _records(Path(path), damaged):
        if isinstance(rec, Paid):
            yield rec


def money_text(ledger: dict[str, Any]) -> str:
    """One sentence for pages showing a run directory: :func:`money_line` and :func:`may_have_billed`."""
    lost = may_have_billed(ledger)
    return f"cost: {money_line(ledger, 'last invocation')}" + (f"; {lost}" if lost else "")


def interrupted_money(ledger: dict[str, Any]) -> str:
    """What an interrupted invocation says about money: :func:`money_line`, and the calls it
    left at the judge (their answers may still be billed) with the bound on what they cost."""
    lost = Bound()
    for name in ("in_flight_now", "outcome_unknown", "interrupted_in_flight"):
        b = ledger.get(name) or {}
        lost.calls += b.get("calls", 0)
        lost.up_to_usd += b.get("up_to_usd") or 0.0
    text = money_line(ledger)
    if lost.calls:
        text += (f"; up to ${lost.up_to_usd:.4f} more may have been billed for {lost.calls} call"
                 f"{'s' if lost.calls != 1 else ''} interrupted in flight")
    return text
