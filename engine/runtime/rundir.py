"""The run directory: ``config.json``, ``verdicts.jsonl``, ``scores.jsonl``, ``summary.json``.

Lines are appended as they arrive and flushed within 100 ms (one flush per line costs
more than the rest of the write at thousands of verdicts a second), so a crash loses at
most the last moment of lines; the cache holds every paid answer, so re-running the
command rebuilds the files for free. When the run completes, ``scores.jsonl`` is rewritten in input order so
two runs of the same command give identical files.

One process at a time: :func:`open_run_dir` takes an exclusive ``flock`` on
``run.lock`` (released by the kernel when the process dies, so a killed run never leaves a
stale lock) and records the run's state in ``state.json``: ``running`` (with pid and
host) while it works, ``finished`` or ``interrupted`` at the end (an error, Ctrl-C, or the
pool stopping early: budget, a long rate-limit reset, an endpoint fault). A run killed with
``kill -9`` stays ``running`` with a dead pid and an unheld lock, which readers
(:func:`run_state`) report as ``interrupted``. A directory holding a different run's
configuration (see :func:`run_identity`) is refused unless ``overwrite`` is given; the
same configuration resumes (the cache holds every paid answer).
"""
from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import secrets
import socket
import time
from array import array
from pathlib import Path
from typing import Any, Callable

import msgspec
import numpy as np
import orjson

from drscore.engine.runtime.models import ScoreRow, VerdictRecord

_enc = msgspec.json.Encoder()

LOCK_FILE = "run.lock"
STATE_FILE = "state.json"
# Files of a run directory that --overwrite removes (and nothing else).
RUN_FILES = ("config.json", STATE_FILE, "verdicts.jsonl", "scores.jsonl", "summary.json",
             "leaderboard.md", "leaderboard.csv", "report.html", "viewer.html", "ledger.jsonl",
             "pacing.jsonl")
# Configuration fields that decide what a run computes. Limits, timeouts, the budget and
# the cache location may change between a run and its resumption; these may not.
IDENTITY_FIELDS = ("methods", "reports", "tasks", "format", "agent", "seed", "method_options",
                   "offline_pages", "allow_private_fetch", "samples")
IDENTITY_JUDGE_FIELDS = ("url", "model", "transport", "json_mode", "prices", "price_as", "prompts_dir", "params")


class RunDirError(Exception):
    """A run directory that cannot be used for this run (one line: which and why)."""


class RunDirBusy(RunDirError):
    """Another live process is writing the run directory."""


def _abspath(value: Any, base: Path) -> Any:
    if isinstance(value, list):
        return [_abspath(v, base) for v in value]
    if isinstance(value, str) and value:
        return str((base / value).resolve()) if not Path(value).is_absolute() else str(Path(value).resolve())
    return value


def run_identity(config: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """What makes two configurations the same run: ``IDENTITY_FIELDS`` and the judge's
    ``IDENTITY_JUDGE_FIELDS``, input paths made absolute (relative to ``base``, default
    the working directory)."""
    base = base or Path.cwd()
    judge = config.get("judge") or {}
    ident: dict[str, Any] = {k: config.get(k) for k in IDENTITY_FIELDS}
    ident.update({f"judge.{k}": judge.get(k) for k in IDENTITY_JUDGE_FIELDS})
    for k in ("reports", "tasks"):
        ident[k] = _abspath(ident[k], base)
    ident["judge.prices"] = _abspath(ident["judge.prices"], base)
    ident["judge.prompts_dir"] = _abspath(ident["judge.prompts_dir"], base)
    ident["judge.params"] = ident["judge.params"] or {}  # absent in older config.json files
    for k in ("method_files", "method_modules"):  # the user's own methods (absent in older files too)
        ident[k] = _abspath(config.get(k) or [], base)
    ident["samples"] = ident["samples"] or 1  # absent before --samples: one sample
    ident["method_options"] = {k: v for k, v in sorted((ident["method_options"] or {}).items()) if v is not None}
    return ident


def identity_differences(old: dict[str, Any], new: dict[str, Any], limit: int = 4) -> list[str]:
    """``field: old -> new`` for each field that differs."""
    out = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            out.append(f"{k}: {old.get(k)!r:.80} -> {new.get(k)!r:.80}")
    return out[:limit]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def lock_holder(run_dir: str | Path) -> int | None:
    """The pid holding the run directory's lock, or None when no process holds it."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def run_state(run_dir: str | Path) -> dict[str, Any]:
    """The run directory's state as recorded, corrected for runs that died: ``state`` is
    ``running``, ``finished``, ``interrupted`` or ``unknown`` (a directory written before
    states were recorded and without ``summary.json``); ``detail`` says why."""
    root = Path(run_dir)
    recorded = _read_json(root / STATE_FILE)
    if recorded is None:
        if (root / "summary.json").is_file():
            return {"state": "finished", "detail": "summary.json present (no state.json)"}
        return {"state": "unknown", "detail": "no state.json or summary.json: the run may not have finished"}
    state = dict(recorded)
    state.pop("identity", None)
    if state.get("state") == "running":
        pid = state.get("pid")
        pid_dead = (state.get("host") == socket.gethostname() and isinstance(pid, int)
                    and not _pid_alive(pid))
        if pid_dead or lock_holder(root) is None:
            state["state"] = "interrupted"
            state["detail"] = f"the process (pid {pid}) stopped before the run finished"
        else:
            state["detail"] = f"in progress (pid {pid} on {state.get('host')})"
    return state


class RunDirLock:
    """The exclusive hold of one process on a run directory (see :func:`open_run_dir`)."""

    def __init__(self, root: Path, fd: int, identity: dict[str, Any]) -> None:
        self.root, self._fd, self.identity = root, fd, identity
        self.started_at = time.time()
        self.state = ""
        # Changes whenever scores.jsonl and verdicts.jsonl are started again or rewritten:
        # readers following the files (the view index) know their lines are not the ones
        # they read before, even where size and inode say nothing.
        self.generation = ""

    def set_state(self, state: str, **extra: Any) -> None:
        """Record ``running`` / ``finished`` / ``interrupted`` (atomically)."""
        self.state = state
        record = {"state": state, "pid": os.getpid(), "host": socket.gethostname(),
                  "started_at": round(self.started_at, 3), "updated_at": round(time.time(), 3),
                  **({"generation": self.generation} if self.generation else {}), **extra,
                  "identity": self.identity}
        _atomic_write(self.root / STATE_FILE, orjson.dumps(record, option=orjson.OPT_INDENT_2))

    def release(self) -> None:
        """Unlock; a run still ``running`` (it stopped before its writer could say why,
        e.g. in set-up) is recorded as ``interrupted`` first."""
        if self._fd >= 0 and self.state == "running":
            try:
                self.set_state("interrupted", reason="stopped during set-up")
            except OSError:
                pass
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1


def open_run_dir(out_dir: str | Path, config: dict[str, Any], *, overwrite: bool = False,
                 check: Callable[[Path], None] | None = None) -> RunDirLock:
    """Take the run directory for this process: create it, lock it (or raise
    :class:`RunDirBusy` at once), refuse a different run's configuration unless
    ``overwrite``, clear the previous run's end state, write ``config.json`` and record
    the state ``running``. ``check(root)``, when given, may refuse the same run (it raises)
    after the configuration was compared and before anything is changed."""
    root = Path(out_dir)
    if root.exists() and not root.is_dir():
        raise RunDirError(f"--out {root} is a file, not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunDirError(f"run directory {root}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = ""
            for _ in range(20):  # the holder writes its pid right after locking
                pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                if pid:
                    break
                time.sleep(0.01)
            raise RunDirBusy(f"run directory {root} is in use by pid {pid or '?'}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        identity = run_identity(config)
        _check_identity(root, identity, overwrite)
        if check is not None and not overwrite:
            check(root)
        if overwrite:
            for name in RUN_FILES:
                (root / name).unlink(missing_ok=True)
        (root / "summary.json").unlink(missing_ok=True)  # a stale summary must not read as finished
        lock = RunDirLock(root, fd, identity)
        _atomic_write(root / "config.json", orjson.dumps(config, option=orjson.OPT_INDENT_2))
        lock.set_state("running")
        return lock
    except BaseException:
        os.close(fd)
        raise


def _check_identity(root: Path, identity: dict[str, Any], overwrite: bool) -> None:
    state = _read_json(root / STATE_FILE)
    old = state.get("identity") if state else None
    if old is None:
        config = _read_json(root / "config.json")
        if config is None:
            return  # a new directory (or one holding no run)
        old = run_identity(config)
    shared = set(old) & set(identity)  # a field another drscore version did not record is not a difference
    changes = identity_differences({k: old[k] for k in shared}, {k: identity[k] for k in shared})
    if not changes or overwrite:
        return
    changed = "; ".join(changes)
    raise RunDirError(f"run directory {root} holds a different run ({changed}); pass --overwrite to "
                      "replace it, or choose another --out")


class RunWriter:
    def __init__(self, out_dir: str | Path, lock: RunDirLock | None = None) -> None:
        self.dir = Path(out_dir)
        self.lock = lock
        self.dir.mkdir(parents=True, exist_ok=True)
        self._new_generation()  # recorded before the files are truncated
        self._verdicts = open(self.dir / "verdicts.jsonl", "wb")
        self._scores = open(self.dir / "scores.jsonl", "wb")
        # The input order of each line of scores.jsonl, in the order the lines were
        # written (8 bytes a row; finish() puts the file in input order from it).
        self._order = array("q")
        self._flush_pending = False

    def _new_generation(self) -> None:
        if self.lock is not None:
            self.lock.generation = secrets.token_hex(8)
            self.lock.set_state(self.lock.state or "running")

    def _schedule_flush(self) -> None:
        if self._flush_pending:
            return
        self._flush_pending = True
        try:
            asyncio.get_running_loop().call_later(0.1, self._flush)
        except RuntimeError:  # no loop (synchronous use): flush now
            self._flush()

    def _flush(self) -> None:
        self._flush_pending = False
        for f in (self._verdicts, self._scores):
            if not f.closed:
                f.flush()

    def write_config(self, config: dict[str, Any]) -> None:
        _atomic_write(self.dir / "config.json", orjson.dumps(config, option=orjson.OPT_INDENT_2))

    def verdict(self, rec: VerdictRecord) -> None:
        if self._verdicts.closed:  # the run is stopping (Ctrl-C): a call still landing is in the cache
            return
        self._verdicts.write(_enc.encode(rec) + b"\n")
        self._schedule_flush()

    def score(self, row: ScoreRow, order: int) -> None:
        if self._scores.closed:
            return
        self._order.append(order)
        self._scores.write(_enc.encode(row) + b"\n")
        self._schedule_flush()

    def finish(self, summary: dict[str, Any]) -> None:
        self._verdicts.close()
        self._scores.close()
        if _needs_sort(self._order):
            self._new_generation()
            _sort_lines(self.dir / "scores.jsonl", self._order)
        self._order = array("q")
        # What merge checks a shard's rows against: their count and the file's hash as it is now.
        summary["scores_file"] = scores_identity(self.dir / "scores.jsonl")
        _atomic_write(self.dir / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        if self.lock is None:
            return
        stop = summary.get("stopped")
        if stop:  # the pool stopped (budget, rate-limit reset, endpoint fault): items were not run
            why = stop.get("reason", "stopped") if isinstance(stop, dict) else str(stop)
            self.lock.set_state("interrupted", reason=f"stopped early: {why} (see summary.json 'stopped')",
                                finished_at=round(time.time(), 3))
        else:
            self.lock.set_state("finished", finished_at=round(time.time(), 3))

    def abort(self, reason: str = "stopped") -> None:
        """Close the files and record the run as ``interrupted`` (re-run to resume)."""
        self._verdicts.close()
        self._scores.close()
        if self.lock is not None:
            self.lock.set_state("interrupted", reason=reason)


def _sort_lines(path: Path, order: array) -> None:
    """Rewrite ``path`` with its lines in ``order`` (one key per line, in file order),
    without holding the file: line offsets and keys are typed arrays (16 bytes a line),
    lines are copied one by one from the old file into a new one replaced atomically.
    A file already in order (a run with one item in flight at a time, the usual offline
    case) is left as it is."""
    if not _needs_sort(order):
        return
    keys = np.frombuffer(order, dtype=np.int64)
    starts = array("q")
    with open(path, "rb") as f:
        pos = 0
        for line in f:
            if line.strip():
                starts.append(pos)
            pos += len(line)
    offsets = np.frombuffer(starts, dtype=np.int64)
    if offsets.size != keys.size:  # not the file this writer wrote: leave it alone
        return
    sequence = np.argsort(keys, kind="stable")
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for at in range(0, sequence.size, 65536):  # Python ints for a block at a time
            for start in offsets[sequence[at:at + 65536]].tolist():
                src.seek(start)
                line = src.readline()
                dst.write(line if line.endswith(b"\n") else line + b"\n")
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, path)


def _needs_sort(order: array) -> bool:
    keys = np.frombuffer(order, dtype=np.int64) if len(order) else np.zeros(0, dtype=np.int64)
    return keys.size >= 2 and not bool(np.all(keys[1:] >= keys[:-1]))


def scores_identity(path: Path) -> dict[str, Any]:
    """``{"rows": lines, "sha256": hash of the file's bytes}`` of a ``scores.jsonl``."""
    digest = hashlib.sha256()
    rows = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            rows += block.count(b"\n")
    return {"rows": rows, "sha256": digest.hexdigest()}


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
