"""Opening the cache's SQLite files (``judge.sqlite``, ``pages.sqlite``) safely.

A damaged file must fail fast, in one line that names the file and what to do, and must
never leave a connection behind: aiosqlite runs each connection on a non-daemon thread,
so one connection left open keeps the process alive forever after the error. Here:

* :func:`header_problem` reads the 100-byte SQLite header and catches the common damage
  (garbage, a truncated copy) before SQLite is asked anything, in O(1);
* :func:`open_db` connects, applies pragmas and schema, and closes the connection again
  if any of that fails, turning SQLite's errors into :class:`CacheFileError`;
* :func:`text_or_damaged` is the connections' text factory: a TEXT value that is not
  valid UTF-8 reads as :data:`DAMAGED` instead of failing the whole query, so a damaged
  row costs one cache miss, not a batch of lookups or the run;
* :func:`check_file` is the full check behind ``drscore cache check``; its repair keeps
  the rows :func:`salvage_rows` can still read (none from a file whose b-tree is cut off,
  such as a truncated copy: SQLite cannot reach those rows).
"""
from __future__ import annotations

import asyncio
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiosqlite

SQLITE_MAGIC = b"SQLite format 3\x00"


class CacheFileError(Exception):
    """A cache file that cannot be used: corrupt, truncated, unreadable, or a path of the
    wrong type. The message is one line: the file, the problem, what to do."""

    def __init__(self, path: Path | str, problem: str, *, hint: str | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        if hint is None:
            hint = (f"move it aside (mv {self.path} {self.path}.bad) or run "
                    f"`drscore cache check --cache {self.path.parent}`")
        super().__init__(f"{self.path}: {problem}; {hint}")


class _Damaged(str):
    """The value of a TEXT column that is not valid UTF-8 (see :func:`text_or_damaged`)."""

    __slots__ = ()


DAMAGED = _Damaged("<damaged>")


def text_or_damaged(raw: bytes) -> str:
    """SQLite text factory: the decoded text, or :data:`DAMAGED` for invalid UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return DAMAGED


def is_damaged(value: object) -> bool:
    return value is DAMAGED


def header_problem(path: Path) -> str | None:
    """What is wrong with the file's SQLite header, or None (also for a new or empty file).

    Checks the magic string, the page size, and that the file holds as many pages as the
    header says it has (a truncated copy does not)."""
    try:
        size = path.stat().st_size
        if size == 0:
            return None
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return "not a SQLite database (unrecognised header: the file is damaged or is something else)"
    page_size = struct.unpack(">H", head[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"damaged SQLite header (page size {page_size})"
    change_counter, pages = struct.unpack(">II", head[24:32])
    valid_for = struct.unpack(">I", head[92:96])[0]
    if valid_for == change_counter and pages and size < pages * page_size:
        return f"truncated ({size} bytes; its header says {pages * page_size})"
    return None


async def _settled_header_problem(path: Path, settle_s: float = 1.0) -> str | None:
    """:func:`header_problem`, but fair to a file another process is checkpointing: SQLite
    copies a WAL back page by page, header page first, so for a moment a growing file
    is shorter than its header says. With a non-empty ``-wal`` beside it, a "truncated"
    verdict is re-checked for ``settle_s``; if it persists, SQLite itself is left to judge
    (a real truncation then fails on the first read it breaks)."""
    problem = header_problem(path)
    wal = Path(f"{path}-wal")
    if problem is None or not problem.startswith("truncated") or not wal.exists() or wal.stat().st_size == 0:
        return problem
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        problem = header_problem(path)
        if problem is None or not problem.startswith("truncated"):
            return problem
    return None


def describe(exc: BaseException) -> str:
    """A short description of a SQLite failure for a :class:`CacheFileError`."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return f"stayed locked by another process ({text})"
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return f"corrupt ({text})"
    return text


def prepare_path(path: Path) -> None:
    """Create the file's directory; a file where a directory belongs (or the reverse)
    is a :class:`CacheFileError` naming the path."""
    parent = path.parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise CacheFileError(p, "is a file, but the cache needs a directory here",
                                     hint="give --cache a directory (it holds judge.sqlite and pages.sqlite)")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheFileError(parent, f"cannot create the cache directory ({exc.strerror or exc})",
                             hint="give --cache a writable directory") from None
    if path.exists() and not path.is_file():
        raise CacheFileError(path, "is not a regular file", hint="move it aside or give another --cache")


async def open_db(path: Path, *, pragmas: tuple[str, ...], schema: str,
                  startup: tuple[tuple[str, tuple], ...] = (), timeout_s: float = 30.0) -> aiosqlite.Connection:
    """Connect to ``path``, apply ``pragmas`` and ``schema``, then run the ``startup``
    statements (``(sql, params)``, e.g. pruning stale rows); on any failure the
    connection is closed again and SQLite errors become :class:`CacheFileError`.

    Several processes may open one new file at once; switching it to WAL and creating
    the schema can then meet "database is locked" without SQLite's busy handler being
    consulted, so those steps are retried for up to ``timeout_s``."""
    prepare_path(path)
    problem = await _settled_header_problem(path)
    if problem is not None:
        raise CacheFileError(path, problem)
    try:
        db = await aiosqlite.connect(path, timeout=timeout_s)
    except sqlite3.Error as exc:
        raise CacheFileError(path, describe(exc)) from None
    try:
        db.text_factory = text_or_damaged
        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while True:
            try:
                for pragma in pragmas:
                    if pragma.replace(" ", "").lower() == "pragmajournal_mode=wal":
                        async with db.execute("PRAGMA journal_mode") as cur:
                            mode = await cur.fetchone()
                            if mode is not None and mode[0].lower() == "wal":
                                continue  # already WAL: switching needs a lock, skip it
                    await db.execute(pragma)
                await db.executescript(schema)
                for sql, params in startup:
                    await db.execute(sql, params)
                await db.commit()
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(0.5, delay * 2)
    except sqlite3.Error as exc:
        await db.close()
        raise CacheFileError(path, describe(exc)) from None
    except BaseException:
        await db.close()
        raise
    return db


RowCheck = Callable[[tuple], bool]


def _row_ok(row: tuple, check: RowCheck | None) -> bool:
    return not any(v is DAMAGED for v in row) and (check is None or check(row))


def check_file(path: Path, *, tables: dict[str, tuple[str, RowCheck | None]]) -> list[str]:
    """Problems found in one SQLite file (empty when it is sound): header, SQLite's
    integrity check, and unreadable rows. ``tables`` maps a table name to the columns
    to read and an optional check of each row (False: the row is damaged)."""
    problem = header_problem(path)
    if problem is not None:
        return [problem]
    found: list[str] = []
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        return [describe(exc)]
    try:
        db.text_factory = text_or_damaged
        rows = db.execute("PRAGMA integrity_check(20)").fetchall()
        found += [f"integrity check: {r[0]}" for r in rows if r[0] != "ok"]
        for table, (columns, check) in tables.items():
            damaged = sum(1 for row in db.execute(f"SELECT {columns} FROM {table}")
                          if not _row_ok(row, check))
            if damaged:
                found.append(f"{damaged} damaged row(s) in table {table}")
    except sqlite3.Error as exc:
        found.append(describe(exc))
    finally:
        db.close()
    return found


def salvage_rows(path: Path, table: str, columns: str, check: RowCheck | None = None,
                 chunk: int = 500) -> Iterator[tuple]:
    """Every readable, undamaged row of ``table`` in a (possibly corrupt) file, read in
    rowid chunks so one bad page costs the rows on it, not the rest. Yields nothing for
    a file SQLite cannot open at all."""
    try:
        with open(path, "rb") as f:
            if f.read(16) != SQLITE_MAGIC:
                return  # garbage: nothing SQLite could read
    except OSError:
        return
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error:
        return
    try:
        db.text_factory = text_or_damaged
        try:
            top = db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
        except sqlite3.Error:
            top = 1 << 40
        start = 0
        while start <= top:
            try:
                rows = db.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? AND rowid <= ? "
                                  "ORDER BY rowid", (start, start + chunk)).fetchall()
            except sqlite3.Error:
                rows = _one_by_one(db, table, columns, start, start + chunk)
            for row in rows:
                if _row_ok(row[1:], check):
                    yield row[1:]
            start += chunk
            if top == 1 << 40 and not rows:
                break
    finally:
        db.close()


def _one_by_one(db: sqlite3.Connection, table: str, columns: str, lo: int, hi: int) -> list[tuple]:
    out = []
    for rowid in range(lo + 1, hi + 1):
        try:
            out += db.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid = ?", (rowid,)).fetchall()
        except sqlite3.Error:
            continue
    return out

