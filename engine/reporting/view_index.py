"""The SQLite index `drscore view` pages rows from, kept beside the run (``view.sqlite``).

Built once from ``scores.jsonl`` and ``verdicts.jsonl`` in one streaming pass each, then
brought up to date incrementally: both files are read from the byte offset the index
last reached, so a run that is still writing is followed by reading only its new lines.
``scores.jsonl`` is rewritten in input order when a run finishes (see
``rundir.RunWriter.finish``) and started again by a resumed run: a file whose
generation (recorded by the run in ``state.json`` before it truncates or rewrites it),
inode or last indexed line changed, or which shrank, is indexed again from the start.

Rows: one per (task, agent, method), the last line winning (as ``read_run_dir``), with
the sortable columns and the row's JSON. Calls: where each verdict line is in
``verdicts.jsonl`` (offset and length), so a row's calls are read back from the file
only when the row is opened. The judge's full prompt and answer are looked up by the
call's cache key in the judge cache, read-only, when that cache is on this machine.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterator

import msgspec
import orjson

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir import STATE_FILE

INDEX_NAME = "view.sqlite"
INDEX_VERSION = "2"
# Sortable columns: name in the API -> SQL expression. Numeric task ids sort numerically.
SORTS: dict[str, tuple[str, ...]] = {
    "task": ("task_num IS NULL", "task_num", "task"), **{c: (c,) for c in (
        "agent", "method", "status", "score", "coverage", "calls", "cache_hits", "input_tokens",
        "output_tokens", "reasoning_tokens", "cached_input_tokens", "cost_usd", "latency_s", "errors")},
}
COLUMNS = ("id", "task", "agent", "method", "status", "score", "coverage", "calls", "cache_hits",
           "input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens", "cost_usd",
           "latency_s", "errors")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY, task TEXT NOT NULL, task_num INTEGER, agent TEXT NOT NULL,
    method TEXT NOT NULL, status TEXT NOT NULL, score REAL, coverage REAL, calls INTEGER,
    cache_hits INTEGER, input_tokens INTEGER, output_tokens INTEGER, reasoning_tokens INTEGER,
    cached_input_tokens INTEGER, cost_usd REAL, latency_s REAL, errors INTEGER,
    UNIQUE (task, agent, method));
-- the row as written, apart: sorting and counting scan only the narrow table above
CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    task TEXT NOT NULL, agent TEXT NOT NULL, method TEXT NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS calls_row ON calls (task, agent, method);
"""
_BATCH = 5000  # lines per transaction while indexing


class RowQuery(msgspec.Struct, kw_only=True, frozen=True):
    """One page of rows: filters (exact values; the task exactly or by prefix), a sort
    column from :data:`SORTS` and a direction."""

    offset: int = 0
    limit: int = 50
    sort: str = "task"
    descending: bool = False
    agent: str | None = None
    method: str | None = None
    status: str | None = None
    task: str | None = None
    task_prefix: str | None = None


class ViewIndex:
    """The index of one run directory. Thread-safe: one connection behind a lock (the
    server runs queries in a worker thread, never on the event loop)."""

    def __init__(self, run_dir: str | Path, index_path: str | Path | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = Path(index_path) if index_path else self.run_dir / INDEX_NAME
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # a lost index is rebuilt from the run
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        if self._meta("version") != INDEX_VERSION:  # an index of another layout: start over
            for table in ("rows", "bodies", "calls", "meta"):
                self._db.execute(f"DROP TABLE IF EXISTS {table}")
            self._db.executescript(_SCHEMA)
            self._set_meta("version", INDEX_VERSION)
            self._db.commit()
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ building

    def refresh(self) -> dict[str, int]:
        """Index what the run's files gained since the last refresh; new lines per file."""
        with self._lock:
            return {"scores": self._follow("scores", self._add_scores),
                    "verdicts": self._follow("verdicts", self._add_calls)}

    def _follow(self, name: str, add: Any) -> int:
        path = self.run_dir / f"{name}.jsonl"
        try:
            st = path.stat()
        except FileNotFoundError:
            return 0
        offset = int(self._meta(f"{name}_offset") or 0)
        generation = self._generation()
        # The lines read so far are still the file's only if its generation (changed by the run
        # before it truncates or rewrites the file), its inode and the bytes of the last line
        # read are what they were: a resumed run truncates in place and writes other lines
        # over the same offsets, which size and inode alone do not show.
        if (self._meta(f"{name}_generation") or "") != generation or self._meta(f"{name}_inode") != str(st.st_ino) \
                or st.st_size < offset or not self._tail_matches(path, name, offset):
            self._reset(name)
            offset = 0
            self._set_meta(f"{name}_inode", str(st.st_ino))
            self._set_meta(f"{name}_generation", generation)
        if st.st_size == offset:
            self._db.commit()
            return 0
        added = 0
        with open(path, "rb") as f:
            f.seek(offset)
            batch: list[tuple[int, bytes]] = []
            tail = ""
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a line still being written: the next refresh reads it whole
                batch.append((offset, line))
                tail = f"{offset}:{hashlib.sha256(line).hexdigest()}"
                offset += len(line)
                if len(batch) >= _BATCH:
                    added += add(batch)
                    self._set_meta(f"{name}_offset", str(offset))
                    self._set_meta(f"{name}_tail", tail)
                    self._db.commit()
                    batch = []
            added += add(batch)
        self._set_meta(f"{name}_offset", str(offset))
        if tail:
            self._set_meta(f"{name}_tail", tail)
        self._db.commit()
        return added

    def _generation(self) -> str:
        """The generation of the run's files as its ``state.json`` records it ("" when none)."""
        try:
            state = orjson.loads((self.run_dir / STATE_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return ""
        return str(state.get("generation") or "") if isinstance(state, dict) else ""

    def _tail_matches(self, path: Path, name: str, offset: int) -> bool:
        """The last line indexed is still where it was, byte for byte."""
        if offset == 0:
            return True
        start, _, digest = (self._meta(f"{name}_tail") or "").partition(":")
        if not start.isdigit() or int(start) >= offset:
            return False
        with open(path, "rb") as f:
            f.seek(int(start))
            line = f.read(offset - int(start))
        return hashlib.sha256(line).hexdigest() == digest

    def _add_scores(self, lines: list[tuple[int, bytes]]) -> int:
        values, bodies = [], []
        for _, line in lines:
            if not line.strip():
                continue
            try:
                r = _ROW.decode(line)
            except msgspec.DecodeError:
                continue  # `drscore report` lists bad lines; the viewer shows what it can read
            values.append((r.task_id, int(r.task_id) if r.task_id.isdigit() and len(r.task_id) < 18 else None,
                           r.agent, r.method, r.status, _finite(r.score), _finite(r.coverage), r.calls,
                           r.cache_hits, r.input_tokens, r.output_tokens, r.reasoning_tokens,
                           r.cached_input_tokens, r.cost_usd, r.latency_s, len(r.errors)))
            bodies.append((line.strip(), r.task_id, r.agent, r.method))
        # the last line of a (task, agent, method) wins, as in read_run_dir
        self._db.executemany(
            "INSERT INTO rows (task, task_num, agent, method, status, score, coverage, calls, cache_hits,"
            " input_tokens, output_tokens, reasoning_tokens, cached_input_tokens, cost_usd, latency_s, errors)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (task, agent, method) DO UPDATE SET"
            " status=excluded.status, score=excluded.score, coverage=excluded.coverage, calls=excluded.calls,"
            " cache_hits=excluded.cache_hits, input_tokens=excluded.input_tokens,"
            " output_tokens=excluded.output_tokens, reasoning_tokens=excluded.reasoning_tokens,"
            " cached_input_tokens=excluded.cached_input_tokens, cost_usd=excluded.cost_usd,"
            " latency_s=excluded.latency_s, errors=excluded.errors", values)
        self._db.executemany("INSERT OR REPLACE INTO bodies (id, body) SELECT id, ? FROM rows"
                             " WHERE task=? AND agent=? AND method=?", bodies)
        return len(values)

    def _add_calls(self, lines: list[tuple[int, bytes]]) -> int:
        values = []
        for offset, line in lines:
            if not line.strip():
                continue
            try:
                key = _CALL_KEY.decode(line)
            except msgspec.DecodeError:
                continue
            values.append((key.task_id, key.agent, key.method, offset, len(line)))
        self._db.executemany("INSERT INTO calls VALUES (?,?,?,?,?)", values)
        return len(values)

    def _reset(self, name: str) -> None:
        for table in (("rows", "bodies") if name == "scores" else ("calls",)):
            self._db.execute(f"DELETE FROM {table}")
        self._db.execute("DELETE FROM meta WHERE key IN (?, ?, ?, ?)",
                         (f"{name}_offset", f"{name}_inode", f"{name}_tail", f"{name}_generation"))

    def _meta(self, key: str) -> str | None:
        found = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ reading

    def facets(self) -> dict[str, Any]:
        """Distinct agents, methods and statuses (for the filter menus) and the row count."""
        with self._lock:
            out: dict[str, Any] = {}
            for column in ("agent", "method", "status"):
                out[column + "s"] = [v for (v,) in self._db.execute(
                    f"SELECT DISTINCT {column} FROM rows ORDER BY {column}")]
            out["rows"] = self._db.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
            out["calls"] = self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            return out

    def page(self, q: RowQuery) -> dict[str, Any]:
        """``{"total": rows matching, "rows": [one dict per row of the page]}``."""
        if q.sort not in SORTS:
            raise ValueError(f"unknown sort column {q.sort!r}; one of {', '.join(SORTS)}")
        where, args = [], []
        for column in ("agent", "method", "status", "task"):
            value = getattr(q, column)
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if q.task_prefix:
            where.append("substr(task, 1, ?) = ?")
            args += [len(q.task_prefix), q.task_prefix]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        direction = "DESC" if q.descending else "ASC"
        # NULLs (no score) last in both directions; the id keeps equal values in file order
        exprs = SORTS[q.sort]
        order = ", ".join(f"{e} {direction}" for e in exprs)
        sql = (f"SELECT {', '.join(COLUMNS)} FROM rows{clause} ORDER BY {exprs[-1]} IS NULL, {order}, id "
               f"LIMIT ? OFFSET ?")
        limit, offset = max(1, min(q.limit, 1000)), max(0, q.offset)
        with self._lock:
            total = self._db.execute(f"SELECT COUNT(*) FROM rows{clause}", args).fetchone()[0]
            rows = [dict(zip(COLUMNS, r)) for r in self._db.execute(sql, [*args, limit, offset])]
        return {"total": total, "offset": offset, "rows": rows}

    def row(self, row_id: int) -> dict[str, Any] | None:
        """One row in full (its JSON as written) with its judge calls as recorded."""
        with self._lock:
            found = self._db.execute("SELECT task, agent, method, body FROM rows JOIN bodies USING (id)"
                                     " WHERE id=?", (row_id,)).fetchone()
            if found is None:
                return None
            spots = self._db.execute("SELECT offset, length FROM calls WHERE task=? AND agent=? AND method=?"
                                     " ORDER BY offset", tuple(found[:3])).fetchall()
        return {"id": row_id, "row": orjson.loads(found[3]), "calls": list(self._read_calls(spots))}

    def _read_calls(self, spots: list[tuple[int, int]]) -> Iterator[dict[str, Any]]:
        path = self.run_dir / "verdicts.jsonl"
        try:
            f = open(path, "rb")
        except OSError:
            return
        with f:
            for offset, length in spots:
                f.seek(offset)
                try:
                    yield orjson.loads(f.read(length))
                except orjson.JSONDecodeError:
                    continue


class _CallKey(msgspec.Struct):
    task_id: str
    agent: str
    method: str


_ROW = msgspec.json.Decoder(ScoreRow)
_CALL_KEY = msgspec.json.Decoder(_CallKey)


def _finite(value: float | None) -> float | None:
    return value if value is not None and value == value and abs(value) != float("inf") else None


class PromptLookup:
    """Full prompts and answers by cache key from a judge cache (``judge.sqlite``),
    opened read-only: the viewer never writes to it, and a missing cache (the offline
    judge has none) just means the recorded inputs are all there is."""

    def __init__(self, cache_file: Path | None) -> None:
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if cache_file is not None and cache_file.is_file():
            try:
                self._db = sqlite3.connect(f"file:{cache_file}?mode=ro", uri=True, check_same_thread=False)
            except sqlite3.Error:
                self._db = None

    def get(self, key: str) -> dict[str, Any] | None:
        """``{"messages": [...], "answer": text, "model": ...}`` or None."""
        if self._db is None or not key:
            return None
        with self._lock:
            try:
                found = self._db.execute("SELECT components, CAST(response AS BLOB) FROM responses WHERE key=?",
                                         (key,)).fetchone()
            except sqlite3.Error:
                return None
        if found is None:
            return None
        try:
            components = orjson.loads(found[0])
            answer = bytes(found[1]).decode("utf-8", "replace")
        except (orjson.JSONDecodeError, TypeError):
            return None
        # only the prompt and the answer: components also name the endpoint's base URL
        return {"messages": components.get("messages"), "model": components.get("model"), "answer": answer}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


def default_cache_file(run_dir: Path) -> Path | None:
    """The judge cache the run used, from its config.json (judge.cache_dir), else the
    default cache directory's."""
    from drscore.engine.runtime.paths import default_cache_dir

    try:
        config = orjson.loads((run_dir / "config.json").read_bytes())
        cache_dir = (config.get("judge") or {}).get("cache_dir")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        cache_dir = None
    base = Path(cache_dir) if cache_dir else Path(default_cache_dir())
    return base / "judge.sqlite"


def index_size(path: Path) -> int:
    return os.path.getsize(path) if path.exists() else 0
