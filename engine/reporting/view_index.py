"""The SQLite index `drscore view` pages rows from, kept beside the run (``view.sqlite``).

Built once from ``scores.jsonl`` and ``verdicts.jsonl`` in one streaming pass each, then
brought up to date incrementally: both files are read from the byte offset the index
last reached, so a run that is still writing is followed by reading only its new lines.
``scores.jsonl`` is rewritten in input order when a run finishes (see
``rundir.RunWriter.finish``) and started again by a resumed run: a file whose
generation (recorded by the run in ``state.json`` before it truncates or rewrites it),
inode or last indexed line changed, or which shrank, is indexed again from the start.
Content identity: the index keeps a hash chained over every line it read (``sha256(previous
+ line)``); the first refresh of each process reads the indexed part again and compares,
so a file edited anywhere, even to the same size, is indexed again (about 0.3 s per
100,000 rows); while one process follows a run, the generation and the last line do.

Rows: one per (task, agent, method), the last line winning (as ``read_run_dir``), with
the sortable columns and the row's JSON. Calls: where each verdict line is in
``verdicts.jsonl`` (offset and length), so a row's calls are read back from the file
only when the row is opened. The judge's full prompt and answer are looked up by the
call's cache key in the judge cache, read-only, when that cache is on this machine.

The index is rebuilt rather than trusted when it is damaged: a file that is not SQLite,
a table missing or of another layout, rows without their bodies, a call count that does
not match, a body that is not JSON, or SQLite reporting corruption on a query (see
:meth:`ViewIndex._check` and :meth:`ViewIndex._guarded`). It is derived data: the run's
files are the truth.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import msgspec
import orjson

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir import STATE_FILE
from drscore.engine.runtime.sqlitefile import header_problem

INDEX_NAME = "view.sqlite"
INDEX_VERSION = "3"  # 3: time at the judge and waiting apart (judge_s, quota_wait_s), not latency_s
MAX_INT = 2**63 - 1  # SQLite's integers: an offset or id past this is a bad request, not a query
MAX_LIMIT = 1000
T = TypeVar("T")
# Sortable columns: name in the API -> SQL expression. Numeric task ids sort numerically.
SORTS: dict[str, tuple[str, ...]] = {
    "task": ("task_num IS NULL", "task_num", "task"), **{c: (c,) for c in (
        "agent", "method", "status", "score", "coverage", "calls", "cache_hits", "input_tokens",
        "output_tokens", "reasoning_tokens", "cached_input_tokens", "cost_usd", "judge_s", "quota_wait_s",
        "errors")},
}
COLUMNS = ("id", "task", "agent", "method", "status", "score", "coverage", "calls", "cache_hits",
           "input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens", "cost_usd",
           "judge_s", "quota_wait_s", "errors")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY, task TEXT NOT NULL, task_num INTEGER, agent TEXT NOT NULL,
    method TEXT NOT NULL, status TEXT NOT NULL, score REAL, coverage REAL, calls INTEGER,
    cache_hits INTEGER, input_tokens INTEGER, output_tokens INTEGER, reasoning_tokens INTEGER,
    cached_input_tokens INTEGER, cost_usd REAL, judge_s REAL, quota_wait_s REAL, errors INTEGER,
    UNIQUE (task, agent, method));
-- the row as written, apart: sorting and counting scan only the narrow table above
CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    task TEXT NOT NULL, agent TEXT NOT NULL, method TEXT NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS calls_row ON calls (task, agent, method);
-- the default order (natural task order) and one agent's rows of a method: the first page
-- and the pair view read 50 rows of an index instead of sorting or scanning every row
CREATE INDEX IF NOT EXISTS rows_task_order ON rows (task_num IS NULL, task_num, task, id);
CREATE INDEX IF NOT EXISTS rows_method_agent ON rows (method, agent);
"""
# What each table must hold; anything else is an index of another layout or a damaged one.
_TABLES = {
    "meta": ("key", "value"),
    "rows": ("id", "task", "task_num", "agent", "method", "status", "score", "coverage", "calls", "cache_hits",
             "input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens", "cost_usd", "judge_s",
             "quota_wait_s", "errors"),
    "bodies": ("id", "body"),
    "calls": ("task", "agent", "method", "offset", "length"),
}
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
        self.rebuilds = 0  # times the index was found damaged and built again
        self._facets: tuple[Any, dict[str, Any]] | None = None
        self._generation = 0  # counts changes to the rows (see stamp)
        self._verified: set[str] = set()  # files whose indexed bytes this process checked
        self.damage: str | None = None  # what was found the last time (for the page and the log)
        problem = header_problem(self.path)
        if problem is not None:  # not SQLite at all: start over (it is derived from the run)
            self._discard(problem)
        try:
            self._db = self._connect()
            problem = self._check()
        except sqlite3.DatabaseError as exc:
            problem = f"SQLite: {exc}"
        if problem is not None:
            self._discard(problem)
            self._db = self._connect()
            self._check()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # a lost index is rebuilt from the run
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _check(self) -> str | None:
        """Create the schema in a new index; in an existing one, what is wrong with it
        (None: usable). An index of another version is emptied, not reported."""
        db = self._db
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        if self._meta("version") != INDEX_VERSION:  # new, or of another layout: start over
            for table in ("rows", "bodies", "calls", "meta"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            db.executescript(_SCHEMA)
            self._set_meta("version", INDEX_VERSION)
            db.commit()
            return None
        for table, columns in _TABLES.items():
            found = tuple(r[1] for r in db.execute(f"PRAGMA table_info({table})"))
            if found != columns:
                return f"table {table} " + ("missing" if not found else f"has columns {', '.join(found)}")
        rows, bodies = (db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("rows", "bodies"))
        if rows != bodies:
            return f"{rows} rows but {bodies} row bodies"
        calls = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        if calls != int(self._meta("calls") or 0):
            return f"{calls} judge calls indexed, {self._meta('calls') or 0} recorded"
        db.executescript(_SCHEMA)  # the index on calls, should it be missing
        return None

    def _discard(self, problem: str) -> None:
        """Delete a damaged index file (and its WAL) so it is built again."""
        self.damage = f"{self.path}: {problem}; rebuilt from the run's files"
        self.rebuilds += 1
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    def _rebuild(self, problem: str) -> None:
        """The index found damaged while in use: closed, deleted, built again (lock held)."""
        try:
            self._db.close()
        except sqlite3.Error:
            pass
        self._discard(problem)
        self._db = self._connect()
        self._check()
        self._follow("scores", self._add_scores)
        self._follow("verdicts", self._add_calls)

    def _guarded(self, read: Callable[[], T]) -> T:
        """Run a read (lock held); on damage, rebuild the index once and read again."""
        try:
            return read()
        except (sqlite3.DatabaseError, _Damaged) as exc:
            self._rebuild(str(exc))
            return read()

    def stamp(self) -> tuple[int, int]:
        """Changes whenever the indexed rows changed (what caches of derived figures, such
        as the decisions, are keyed by): rows added or replaced, the index emptied or rebuilt."""
        return self._generation, self.rebuilds

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ building

    def refresh(self) -> dict[str, int]:
        """Index what the run's files gained since the last refresh; new lines per file.
        The filter values are computed again when anything changed (see :meth:`facets`)."""
        with self._lock:
            added = self._guarded(lambda: {"scores": self._follow("scores", self._add_scores),
                                           "verdicts": self._follow("verdicts", self._add_calls)})
        self.facets()
        return added

    def _follow(self, name: str, add: Any) -> int:
        path = self.run_dir / f"{name}.jsonl"
        try:
            st = path.stat()
        except FileNotFoundError:
            return 0
        offset = int(self._meta(f"{name}_offset") or 0)
        generation = self._run_generation()
        # The lines read so far are still the file's only if its generation (changed by the run
        # before it truncates or rewrites the file), its inode and the bytes of the last line
        # read are what they were: a resumed run truncates in place and writes other lines
        # over the same offsets, which size and inode alone do not show.
        if (self._meta(f"{name}_generation") or "") != generation or self._meta(f"{name}_inode") != str(st.st_ino) \
                or st.st_size < offset or not self._tail_matches(path, name, offset) \
                or (name not in self._verified and not self._chain_matches(path, name, offset)):
            self._reset(name)
            offset = 0
            self._set_meta(f"{name}_inode", str(st.st_ino))
            self._set_meta(f"{name}_generation", generation)
        self._verified.add(name)
        if st.st_size == offset:
            self._db.commit()
            return 0
        added = 0
        with open(path, "rb") as f:
            f.seek(offset)
            batch: list[tuple[int, bytes]] = []
            tail = ""
            chain = bytes.fromhex(self._meta(f"{name}_chain") or "")
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a line still being written: the next refresh reads it whole
                batch.append((offset, line))
                tail = f"{offset}:{hashlib.sha256(line).hexdigest()}"
                chain = hashlib.sha256(chain + line).digest()
                offset += len(line)
                if len(batch) >= _BATCH:
                    added += add(batch)
                    self._set_meta(f"{name}_offset", str(offset))
                    self._set_meta(f"{name}_tail", tail)
                    self._set_meta(f"{name}_chain", chain.hex())
                    self._db.commit()
                    batch = []
            added += add(batch)
        self._set_meta(f"{name}_offset", str(offset))
        if tail:
            self._set_meta(f"{name}_tail", tail)
            self._set_meta(f"{name}_chain", chain.hex())
        self._db.commit()
        return added

    def _run_generation(self) -> str:
        """The generation of the run's files as its ``state.json`` records it ("" when none)."""
        try:
            state = orjson.loads((self.run_dir / STATE_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return ""
        return str(state.get("generation") or "") if isinstance(state, dict) else ""

    def _chain_matches(self, path: Path, name: str, offset: int) -> bool:
        """Every line indexed is still in the file, byte for byte (the chained hash)."""
        if offset == 0:
            return True
        want = self._meta(f"{name}_chain")
        if not want:
            return False  # an index from before the chain: read the file again
        chain, read = b"", 0
        with open(path, "rb") as f:
            for line in f:
                if read >= offset:
                    break
                chain = hashlib.sha256(chain + line).digest()
                read += len(line)
        return read == offset and chain.hex() == want

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
                           r.cached_input_tokens, r.cost_usd, _finite(r.judge_s), _finite(r.quota_wait_s),
                           len(r.errors)))
            bodies.append((line.strip(), r.task_id, r.agent, r.method))
        # the last line of a (task, agent, method) wins, as in read_run_dir
        self._db.executemany(
            "INSERT INTO rows (task, task_num, agent, method, status, score, coverage, calls, cache_hits,"
            " input_tokens, output_tokens, reasoning_tokens, cached_input_tokens, cost_usd, judge_s, quota_wait_s,"
            " errors) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (task, agent, method) DO UPDATE SET"
            " status=excluded.status, score=excluded.score, coverage=excluded.coverage, calls=excluded.calls,"
            " cache_hits=excluded.cache_hits, input_tokens=excluded.input_tokens,"
            " output_tokens=excluded.output_tokens, reasoning_tokens=excluded.reasoning_tokens,"
            " cached_input_tokens=excluded.cached_input_tokens, cost_usd=excluded.cost_usd,"
            " judge_s=excluded.judge_s, quota_wait_s=excluded.quota_wait_s, errors=excluded.errors", values)
        self._db.executemany("INSERT OR REPLACE INTO bodies (id, body) SELECT id, ? FROM rows"
                             " WHERE task=? AND agent=? AND method=?", bodies)
        if values:
            self._generation += 1
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
        self._set_meta("calls", str(int(self._meta("calls") or 0) + len(values)))  # checked when opened
        return len(values)

    def _reset(self, name: str) -> None:
        self._generation += 1
        for table in (("rows", "bodies") if name == "scores" else ("calls",)):
            self._db.execute(f"DELETE FROM {table}")
        if name != "scores":
            self._set_meta("calls", "0")
        self._db.execute("DELETE FROM meta WHERE key IN (?, ?, ?, ?, ?)",
                         (f"{name}_offset", f"{name}_inode", f"{name}_tail", f"{name}_generation", f"{name}_chain"))

    def _meta(self, key: str) -> str | None:
        found = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ reading

    def facets(self) -> dict[str, Any]:
        """Distinct agents, methods and statuses (for the filter menus) and the row count;
        computed once per state of the index (:meth:`stamp`): a page load asks for them
        beside its first rows, and scanning every row for them each time would delay those."""
        stamp = self.stamp()
        cached = self._facets
        if cached is not None and cached[0] == stamp:
            return cached[1]

        def read() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for column in ("agent", "method", "status"):
                out[column + "s"] = [v for (v,) in self._db.execute(
                    f"SELECT DISTINCT {column} FROM rows ORDER BY {column}")]
            out["rows"] = self._db.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
            out["calls"] = self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            return out
        with self._lock:
            found = self._guarded(read)
        self._facets = (stamp, found)
        return found

    def page(self, q: RowQuery) -> dict[str, Any]:
        """``{"total": rows matching, "rows": [one dict per row of the page]}``. A query
        out of range (unknown sort column, an offset or limit SQLite cannot hold) is a
        ValueError naming the field."""
        check_query(q)
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
        if q.sort == "task" and not q.descending:  # the default: exactly the rows_task_order index
            order_by = "task_num IS NULL, task_num, task, id"
        else:
            order_by = f"{exprs[-1]} IS NULL, " + ", ".join(f"{e} {direction}" for e in exprs) + ", id"
        sql = f"SELECT {', '.join(COLUMNS)} FROM rows{clause} ORDER BY {order_by} LIMIT ? OFFSET ?"

        def read() -> dict[str, Any]:
            total = self._db.execute(f"SELECT COUNT(*) FROM rows{clause}", args).fetchone()[0]
            rows = [dict(zip(COLUMNS, r)) for r in self._db.execute(sql, [*args, q.limit, q.offset])]
            return {"total": total, "offset": q.offset, "rows": rows}
        with self._lock:
            return self._guarded(read)

    def find(self, task: str, agent: str, method: str) -> int | None:
        """The id of the row of (task, agent, method), or None."""
        with self._lock:
            found = self._guarded(lambda: self._db.execute(
                "SELECT id FROM rows WHERE task=? AND agent=? AND method=?", (task, agent, method)).fetchone())
        return None if found is None else int(found[0])

    def row(self, row_id: int) -> dict[str, Any] | None:
        """One row in full (its JSON as written) with its judge calls as recorded."""
        if not 0 < row_id <= MAX_INT:
            return None

        def read() -> tuple[Any, list[tuple[int, int]]] | None:
            found = self._db.execute("SELECT task, agent, method, body FROM rows JOIN bodies USING (id)"
                                     " WHERE id=?", (row_id,)).fetchone()
            if found is None:
                return None
            spots = self._db.execute("SELECT offset, length FROM calls WHERE task=? AND agent=? AND method=?"
                                     " ORDER BY offset", tuple(found[:3])).fetchall()
            return _body(found[3]), spots
        with self._lock:
            got = self._guarded(read)
        if got is None:
            return None
        return {"id": row_id, "row": got[0], "calls": list(self._read_calls(got[1]))}

    def task_rows(self, task: str, method: str | None = None) -> list[dict[str, Any]]:
        """Every row of one task (each agent, each method, or one method), in full, with
        their calls: the side-by-side view."""
        def read() -> list[tuple[int, Any, list[tuple[int, int]]]]:
            sql = ("SELECT id, agent, method, body FROM rows JOIN bodies USING (id) WHERE task=?"
                   + (" AND method=?" if method is not None else "") + " ORDER BY method, agent")
            out = []
            for rid, agent, meth, body in self._db.execute(sql, (task,) if method is None else (task, method)):
                spots = self._db.execute("SELECT offset, length FROM calls WHERE task=? AND agent=? AND method=?"
                                         " ORDER BY offset", (task, agent, meth)).fetchall()
                out.append((rid, _body(body), spots))
            return out
        with self._lock:
            found = self._guarded(read)
        return [{"id": rid, "row": body, "calls": list(self._read_calls(spots))} for rid, body, spots in found]

    def pair_tasks(self, method: str, a: str, b: str, limit: int = 20) -> dict[str, Any]:
        """The tasks where agents ``a`` and ``b`` differ most under ``method`` (both scored):
        ``{"n": shared tasks, "tasks": [{task, a, b, delta, id_a, id_b}]}``, largest |a - b| first."""
        sql = ("SELECT x.task, x.score, y.score, x.id, y.id FROM rows x JOIN rows y"
               " ON y.task = x.task AND y.method = x.method AND y.agent = ?"
               " WHERE x.method = ? AND x.agent = ? AND x.score IS NOT NULL AND y.score IS NOT NULL")

        def read() -> dict[str, Any]:
            n = self._db.execute(f"SELECT COUNT(*) FROM ({sql})", (b, method, a)).fetchone()[0]
            found = self._db.execute(f"{sql} ORDER BY abs(x.score - y.score) DESC, x.task_num, x.task LIMIT ?",
                                     (b, method, a, max(1, min(limit, MAX_LIMIT)))).fetchall()
            return {"n": n, "tasks": [{"task": t, "a": sa, "b": sb, "delta": sa - sb, "id_a": ia, "id_b": ib}
                                      for t, sa, sb, ia, ib in found]}
        with self._lock:
            return self._guarded(read)

    def scores(self, method: str, *, bins: int = 20, max_tasks: int = 100) -> dict[str, Any]:
        """What the charts draw for one method: each agent's score distribution as counts
        in ``bins`` equal bins over ``range`` (the last bin closed; binned by SQLite, so a
        large run is not carried into Python), and the scores of the first ``max_tasks``
        tasks in natural order (``tasks_total``: all of them)."""
        def read() -> dict[str, Any]:
            db = self._db
            # "+method": a scan, not the (method, agent) index, which costs more when a method
            # holds most of the rows
            lo, hi, total = db.execute("SELECT MIN(score), MAX(score), COUNT(DISTINCT task) FROM rows"
                                       " WHERE +method=? AND score IS NOT NULL", (method,)).fetchone()
            lo, hi = (0.0, 1.0) if lo is None else (float(lo), float(hi))
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            counts: dict[str, list[int]] = {}
            for agent, k, n in db.execute(
                    "SELECT agent, MIN(?, CAST((score - ?) * ? / ? AS INTEGER)), COUNT(*) FROM rows"
                    " WHERE +method=? AND score IS NOT NULL GROUP BY 1, 2", (bins - 1, lo, bins, hi - lo, method)):
                counts.setdefault(agent, [0] * bins)[int(k)] += n
            first = [t for (t,) in db.execute(  # the first tasks in the order index, not all of them sorted
                "SELECT DISTINCT task FROM rows INDEXED BY rows_task_order WHERE +method=? AND score IS NOT NULL"
                " ORDER BY task_num IS NULL, task_num, task LIMIT ?", (method, max_tasks))]
            by_task: dict[str, dict[str, float]] = {t: {} for t in first}
            if first:
                marks = ",".join("?" * len(first))
                for task, agent, score in db.execute(
                        f"SELECT task, agent, score FROM rows WHERE method=? AND score IS NOT NULL AND task IN ({marks})",
                        (method, *first)):
                    by_task[task][agent] = score
            return {"range": [lo, hi], "bins": bins, "counts": dict(sorted(counts.items())), "tasks": by_task,
                    "tasks_total": total}
        with self._lock:
            return self._guarded(read)

    def score_rows(self) -> Iterator[ScoreRow]:
        """Every indexed row as a ScoreRow (for the paired comparisons), read in blocks so
        the lock is not held for the whole pass."""
        last = 0
        while True:
            with self._lock:
                block = self._guarded(lambda: self._db.execute(
                    "SELECT id, body FROM bodies WHERE id > ? ORDER BY id LIMIT 5000", (last,)).fetchall())
            if not block:
                return
            for rid, body in block:
                try:
                    yield _ROW.decode(body)
                except msgspec.DecodeError:
                    continue  # the index holds only rows that decoded; a changed body is skipped
            last = block[-1][0]

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


class _Damaged(Exception):
    """The index holds something the run's files could not have put there."""


def _body(raw: Any) -> Any:
    try:
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        raise _Damaged("a row body is not JSON") from None


def check_query(q: RowQuery) -> None:
    """ValueError naming the first field of ``q`` out of range."""
    if q.sort not in SORTS:
        raise ValueError(f"unknown sort column {q.sort!r}; one of {', '.join(SORTS)}")
    if not 0 <= q.offset <= MAX_INT:
        raise ValueError(f"offset must be a whole number from 0 to {MAX_INT}")
    if not 1 <= q.limit <= MAX_LIMIT:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_LIMIT}")


class _CallKey(msgspec.Struct):
    task_id: str
    agent: str
    method: str


_ROW = msgspec.json.Decoder(ScoreRow)
_CALL_KEY = msgspec.json.Decoder(_CallKey)


def _finite(value: float | None) -> float | None:
    return value if value is not None and value == value and abs(value) != float("inf") else None


class PromptLookup:
    """Full prompts and answers by cache key from judge caches (``judge.sqlite``), opened
    read-only: the viewer never writes to them, and a missing cache (the offline judge has
    none) just means the recorded inputs are all there is.

    Several caches may be given (the one the run recorded, ``$DRSCORE_CACHE``'s, the
    user cache directory's): a key is looked up in each, in order. Each file is opened
    by its path, quoted into a ``file:`` URI, so no character of a path (``?``, ``#``,
    ``%``) can become a URI parameter such as ``mode=rwc``."""

    def __init__(self, cache_files: Path | list[Path] | None) -> None:
        files = [] if cache_files is None else [cache_files] if isinstance(cache_files, Path) else cache_files
        self.searched = [str(f) for f in files]
        self.opened: list[str] = []
        self._dbs: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        for f in dict.fromkeys(p.resolve() for p in files):
            if not f.is_file() or header_problem(f) is not None:
                continue
            try:
                db = sqlite3.connect(f"{f.as_uri()}?mode=ro", uri=True, check_same_thread=False)
                db.execute("SELECT 1 FROM responses LIMIT 1")
            except sqlite3.Error:
                continue
            self._dbs.append(db)
            self.opened.append(str(f))

    def get(self, key: str, *, messages: bool = True) -> dict[str, Any] | None:
        """``{"messages": [{"role", "content", "marks"}...], "answer": text, "model": ...}``
        or None. ``marks`` are where each template variable's text sits in the message
        (``[name, start, end]``), when the built-in template the call used is known.
        ``messages=False``: the answer alone (the side-by-side view)."""
        if not self._dbs or not key:
            return None
        found = None
        with self._lock:
            for db in self._dbs:
                try:
                    found = db.execute("SELECT components, CAST(response AS BLOB) FROM responses WHERE key=?",
                                       (key,)).fetchone()
                except sqlite3.Error:
                    continue
                if found is not None:
                    break
        if found is None:
            return None
        try:
            components = orjson.loads(found[0])
            answer = bytes(found[1]).decode("utf-8", "replace")
        except (orjson.JSONDecodeError, TypeError):
            return None
        if not isinstance(components, dict):
            return None
        if not messages:
            return {"model": components.get("model"), "answer": answer}
        shown = prompt_messages(components.get("messages"))
        mark_variables(shown, components.get("template"), components.get("template_hash"))
        # only the prompt and the answer: components also name the endpoint's base URL
        return {"messages": shown, "model": components.get("model"), "answer": answer}

    def close(self) -> None:
        for db in self._dbs:
            db.close()


def prompt_messages(raw: Any) -> list[dict[str, Any]]:
    """Messages as ``{"role", "content"}`` objects, whichever way they were stored: the
    cache keys them as ``[role, content]`` pairs (compact, and what the key hashes),
    older or hand-made entries as objects."""
    out: list[dict[str, Any]] = []
    for m in raw if isinstance(raw, list) else []:
        if isinstance(m, (list, tuple)) and len(m) == 2:
            role, content = m
        elif isinstance(m, dict):
            role, content = m.get("role"), m.get("content")
        else:
            continue
        out.append({"role": str(role), "content": content if isinstance(content, str) else orjson.dumps(
            content).decode()})
    return out


def mark_variables(messages: list[dict[str, Any]], template: Any, template_hash: Any) -> None:
    """Add ``marks`` to each message: the spans the template's variables filled (the
    report excerpt, the cited page, the statements), found by matching the built-in
    template's text around them. Nothing is marked when the template is not the one the
    call used (an override, another version)."""
    from drscore import prompts

    if not isinstance(template, str):
        return
    try:
        tpl = prompts.load(template)
    except (KeyError, ValueError, OSError):
        return
    if tpl.hash != template_hash or len(tpl.compiled) != len(messages):
        return
    for message, (role, compiled) in zip(messages, tpl.compiled):
        if message["role"] == role:
            message["marks"] = variable_spans(compiled.template, message["content"])


def variable_spans(template: str, text: str) -> list[list[Any]]:
    """``[[name, start, end], ...]``: where each ``${name}`` of ``template`` landed in
    ``text`` (the template rendered); empty when ``text`` does not follow it."""
    import re
    import string

    parts = re.split(r"\$\{(\w+)\}", template)
    if len(parts) == 1 or len(text) > 4_000_000:
        return []
    literal = [string.Template(p).safe_substitute({}).replace("$$", "$") for p in parts[::2]]
    pattern = "".join(re.escape(lit) + (f"(?P<v{i}>.*?)" if i < len(parts[1::2]) else "")
                      for i, lit in enumerate(literal))
    found = re.fullmatch(pattern, text, re.S)
    if found is None:
        return []
    return [[name, found.start(f"v{i}"), found.end(f"v{i}")] for i, name in enumerate(parts[1::2])
            if found.end(f"v{i}") > found.start(f"v{i}")]


def cache_files(run_dir: Path, cache_dir: str | Path | None = None) -> list[Path]:
    """The judge caches to read full prompts from. ``cache_dir`` given (``--cache DIR``):
    its ``judge.sqlite`` only. Otherwise, in order: the cache directory the run recorded in
    its config.json (``judge.cache_dir``), ``$DRSCORE_CACHE``, the user cache directory."""
    from drscore.engine.runtime.paths import default_cache_dir

    if cache_dir is not None:
        return [Path(cache_dir) / "judge.sqlite"]
    found: list[Path] = []
    try:
        config = orjson.loads((run_dir / "config.json").read_bytes())
        recorded = (config.get("judge") or {}).get("cache_dir")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and recorded:
        base = Path(recorded)
        found.append((base if base.is_absolute() else run_dir / base) / "judge.sqlite")
        found.append(base / "judge.sqlite")  # relative to where the run was started
    found.append(Path(default_cache_dir()) / "judge.sqlite")  # $DRSCORE_CACHE, else the user's
    return list(dict.fromkeys(found))


def index_size(path: Path) -> int:
    return os.path.getsize(path) if path.exists() else 0
