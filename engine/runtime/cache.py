"""Content-addressed store of judge responses on SQLite (WAL) via aiosqlite.

The cache is also the run checkpoint: a response is committed before the verdict is
handed to the method, so after ``kill -9`` the same command re-asks nothing that was
committed. Writes are group-committed (concurrent ``put`` calls share one transaction)
and reads are grouped too (concurrent ``get`` calls share one ``IN (...)`` query), so
neither durability nor the hop to SQLite's thread caps throughput. Several processes may share one file (WAL plus
a busy timeout).
"""
from __future__ import annotations

import asyncio
import gzip
import hashlib
import time
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,
    created    REAL NOT NULL,
    template   TEXT NOT NULL,
    model      TEXT NOT NULL,
    components BLOB NOT NULL,
    response   BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_template ON responses(template);
"""


def request_key(components: dict[str, Any]) -> str:
    """Hash of the canonical request (sorted-key JSON). See DESIGN.md: backend, base URL,
    model, messages, sampling parameters, schema, template hash and sample index."""
    return hashlib.sha256(orjson.dumps(components, option=orjson.OPT_SORT_KEYS)).hexdigest()


class JudgeCache:
    """Async key -> response store. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._pending: list[tuple[tuple, asyncio.Future[None]]] = []
        self._wakeup = asyncio.Event()
        self._writer = asyncio.create_task(self._write_loop(), name="cache-writer")
        self._lookups: dict[str, list[asyncio.Future[bytes | None]]] = {}
        self._read_wakeup = asyncio.Event()
        self._reader = asyncio.create_task(self._read_loop(), name="cache-reader")
        self._closed = False
        self.reads = 0
        self.hits = 0
        self.writes = 0
        self.commits = 0

    @classmethod
    async def open(cls, path: str | Path) -> JudgeCache:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, timeout=30.0)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute("PRAGMA busy_timeout=30000")
        await db.executescript(_SCHEMA)
        await db.commit()
        return cls(db, path)

    async def get(self, key: str) -> bytes | None:
        self.reads += 1
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._lookups.setdefault(key, []).append(fut)
        self._read_wakeup.set()
        value = await fut
        if value is not None:
            self.hits += 1
        return value

    async def _read_loop(self) -> None:
        while True:
            await self._read_wakeup.wait()
            self._read_wakeup.clear()
            if self._closed and not self._lookups:
                return
            while self._lookups:
                keys = list(self._lookups)[:500]  # stay under SQLite's bound-parameter limit
                waiters = {k: self._lookups.pop(k) for k in keys}
                try:
                    rows = await self._db.execute_fetchall(
                        f"SELECT key, response FROM responses WHERE key IN ({','.join('?' * len(keys))})", keys)
                    found = dict(rows)
                    for k, futs in waiters.items():
                        for fut in futs:
                            if not fut.done():
                                fut.set_result(found.get(k))
                except Exception as e:
                    for futs in waiters.values():
                        for fut in futs:
                            if not fut.done():
                                fut.set_exception(e)

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        """Store a response; returns once it is committed (group commit)."""
        if self._closed:
            raise RuntimeError("cache is closed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        row = (key, time.time(), str(components.get("template", "")), str(components.get("model", "")),
               orjson.dumps(components, option=orjson.OPT_SORT_KEYS), response)
        self._pending.append((row, fut))
        self._wakeup.set()
        await fut

    async def _write_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch, self._pending = self._pending, []
            if not batch:
                if self._closed:
                    return
                continue
            try:
                await self._db.executemany(
                    "INSERT OR REPLACE INTO responses(key, created, template, model, components, response)"
                    " VALUES (?,?,?,?,?,?)", [row for row, _ in batch])
                await self._db.commit()
                self.writes += len(batch)
                self.commits += 1
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(None)
            except Exception as e:  # surface to every waiter, keep the writer alive
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
            if self._closed and not self._pending:
                return

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wakeup.set()
        self._read_wakeup.set()
        await self._writer
        await self._reader
        await self._db.close()

    # -- maintenance (drscore cache ...) ------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        async with self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(response)+LENGTH(components)),0), MIN(created), MAX(created)"
            " FROM responses") as cur:
            n, size, first, last = await cur.fetchone()
        async with self._db.execute(
            "SELECT template, model, COUNT(*) FROM responses GROUP BY template, model ORDER BY 3 DESC") as cur:
            groups = [{"template": t, "model": m, "entries": c} for t, m, c in await cur.fetchall()]
        return {"path": str(self.path), "entries": n, "payload_bytes": size,
                "file_bytes": self.path.stat().st_size if self.path.exists() else 0,
                "oldest": first, "newest": last, "by_template": groups}

    async def explain(self, key: str) -> dict[str, Any] | None:
        """The components a key was computed from (to debug cache misses)."""
        async with self._db.execute("SELECT components, created FROM responses WHERE key=?", (key,)) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        return {"key": key, "created": row[1], "components": orjson.loads(row[0])}

    async def vacuum(self, *, older_than_s: float | None = None, template: str | None = None) -> int:
        """Delete entries (optionally only old ones / one template), then VACUUM."""
        clauses, args = [], []
        if older_than_s is not None:
            clauses.append("created < ?")
            args.append(time.time() - older_than_s)
        if template is not None:
            clauses.append("template = ?")
            args.append(template)
        deleted = 0
        if clauses:
            cur = await self._db.execute("DELETE FROM responses WHERE " + " AND ".join(clauses), args)
            deleted = cur.rowcount
            await self._db.commit()
        await self._db.execute("VACUUM")
        return deleted

    async def export(self, path: str | Path) -> int:
        """Write every entry to a gzip JSONL file (portable, mergeable)."""
        n = 0
        with gzip.open(path, "wb") as out:
            out.write(orjson.dumps({"drscore_cache": 1}) + b"\n")
            async with self._db.execute(
                    "SELECT key, created, template, model, components, response FROM responses") as cur:
                async for key, created, template, model, comps, resp in cur:
                    out.write(orjson.dumps({"key": key, "created": created, "template": template, "model": model,
                                            "components": orjson.loads(comps),
                                            "response": resp.decode("utf-8")}) + b"\n")
                    n += 1
        return n

    async def import_(self, path: str | Path) -> int:
        """Merge an exported file; entries whose key does not match their components are rejected."""
        rows = []
        with gzip.open(path, "rb") as f:
            header = orjson.loads(f.readline() or b"{}")
            if header.get("drscore_cache") != 1:
                raise ValueError(f"{path}: not a drscore cache export (bad header line)")
            for lineno, line in enumerate(f, 2):
                try:
                    obj = orjson.loads(line)
                    comps = obj["components"]
                    if request_key(comps) != obj["key"]:
                        raise ValueError("key does not match its components")
                    rows.append((obj["key"], float(obj["created"]), obj["template"], obj["model"],
                                 orjson.dumps(comps, option=orjson.OPT_SORT_KEYS), obj["response"].encode("utf-8")))
                except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as e:
                    raise ValueError(f"{path}:{lineno}: bad cache entry ({e})") from None
        await self._db.executemany(
            "INSERT OR IGNORE INTO responses(key, created, template, model, components, response)"
            " VALUES (?,?,?,?,?,?)", rows)
        await self._db.commit()
        return len(rows)
