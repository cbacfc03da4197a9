"""Content-addressed store of judge responses on SQLite (WAL) via aiosqlite.

The cache is also the run checkpoint: a response is committed before the verdict is
handed to the method, so after ``kill -9`` the same command re-asks nothing that was
committed. Writes are group-committed (concurrent ``put`` calls share one transaction)
and reads are grouped too (concurrent ``get`` calls share one ``IN (...)`` query), so
neither durability nor the hop to SQLite's thread caps throughput.

Several processes may share one file (WAL plus a busy timeout), and they share answers:
before paying for a call, a process *claims* its key (a row in ``claims`` with a lease);
a process that finds the key claimed by another waits for that answer instead of paying
twice. The claim API, small on purpose so another tier (e.g. Redis) can offer the same:

* :meth:`JudgeCache.claim_or_wait` ``(key) -> bytes | None``: the answer when another
  process has stored it (possibly after waiting for it), or None when the caller now
  holds the claim and should make the call;
* :meth:`JudgeCache.put` stores the answer and ends the claim;
* :meth:`JudgeCache.release` ``(key)`` ends a claim without an answer (the call failed),
  so a waiting process takes it over at once.

A claim's lease (``lease_s``, default 30 s) is renewed every ``lease_s / 3`` while it is
held; a claim whose lease ran out, or whose owner is a dead process on this host, is
taken over. A damaged file fails fast as :class:`CacheFileError` (see
:mod:`.sqlitefile`); a damaged row (text that is not UTF-8) reads as a miss, is counted
in ``damaged`` and logged, and is replaced when the answer is stored again.

One module (~520 lines): the grouped reads, the group-committed writes, the claim leases
and the maintenance commands (``drscore cache``) share one connection and its queues.
"""
from __future__ import annotations

import asyncio
import gzip
import hashlib
import logging
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite
import msgspec
import orjson

from drscore.engine.runtime.calls.limits import KnownQuota
from drscore.engine.runtime.calls.output_cap import TemplateCap
from drscore.engine.runtime.calls.tokens import TokenFit
from drscore.engine.runtime.sqlitefile import CacheFileError, describe, is_damaged, open_db

log = logging.getLogger("drscore.cache")
_R = TypeVar("_R", bound=msgspec.Struct)

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
CREATE TABLE IF NOT EXISTS claims (
    key     TEXT PRIMARY KEY,
    owner   TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS token_counts (
    model   TEXT PRIMARY KEY,
    fit     BLOB NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS template_token_counts (
    model    TEXT NOT NULL,
    template TEXT NOT NULL,
    fit      BLOB NOT NULL,
    updated  REAL NOT NULL,
    PRIMARY KEY (model, template)
);
CREATE TABLE IF NOT EXISTS output_caps (
    model    TEXT NOT NULL,
    template TEXT NOT NULL,
    answers  BLOB NOT NULL,
    updated  REAL NOT NULL,
    PRIMARY KEY (model, template)
);
CREATE TABLE IF NOT EXISTS quotas (
    endpoint TEXT PRIMARY KEY,
    quota    BLOB NOT NULL,
    updated  REAL NOT NULL
);
"""
_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=30000")
# Row checks for `drscore cache check` (sqlitefile.check_file / salvage_rows).
CHECK_COLUMNS = "key, created, template, model, components, CAST(response AS BLOB)"
_CHUNK = 500  # stay under SQLite's bound-parameter limit


def check_row(row: Sequence[Any] | sqlite3.Row) -> bool:
    """A ``responses`` row (``CHECK_COLUMNS``) is usable: its answer is UTF-8 and its
    components are JSON."""
    try:
        row[5].decode("utf-8")
        orjson.loads(row[4])
    except (AttributeError, UnicodeDecodeError, orjson.JSONDecodeError):
        return False
    return True


def request_key(components: dict[str, Any]) -> str:
    """Hash of the canonical request (sorted-key JSON). See DESIGN.md: backend, base URL,
    model, messages, sampling parameters, schema, template hash and sample index."""
    return hashlib.sha256(orjson.dumps(components, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _owner_alive(owner: str, host: str) -> bool:
    """False only for a claim owner that is certainly gone: a dead pid on this host."""
    parts = owner.split(":")
    if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class AnswerCache(Protocol):
    """What a run uses of its judge cache: a :class:`JudgeCache`, or with ``--redis`` the
    team's ``TieredCache`` in front of one (which offers the same API)."""

    async def get(self, key: str) -> bytes | None: ...
    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None: ...
    async def claim_or_wait(self, key: str) -> bytes | None: ...
    def release(self, key: str) -> None: ...
    async def close(self) -> None: ...

    @property
    def path(self) -> Path: ...
    @property
    def failure(self) -> CacheFileError | None: ...
    @property
    def damaged(self) -> int: ...
    @property
    def waited(self) -> int: ...


class JudgeCache:
    """Async key -> response store. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, db: aiosqlite.Connection, path: Path, *, lease_s: float = 30.0,
                 poll_s: float = 0.2) -> None:
        self._db = db
        self.path = path
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.host = socket.gethostname().replace(":", "_")
        self.owner = f"{self.host}:{os.getpid()}:{secrets.token_hex(4)}"
        self._pending: list[tuple[tuple, asyncio.Future[None]]] = []
        self._claims: list[tuple[str, asyncio.Future[tuple[str, bytes | None]]]] = []
        self._ops: list[tuple[str, tuple]] = []  # writes without a waiter (release, renew)
        self._held: set[str] = set()
        self._waiting: dict[str, list[asyncio.Future[bytes | None]]] = {}
        self._wakeup = asyncio.Event()
        self._writer = asyncio.create_task(self._write_loop(), name="cache-writer")
        self._lookups: dict[str, list[asyncio.Future[bytes | None]]] = {}
        self._read_wakeup = asyncio.Event()
        self._reader = asyncio.create_task(self._read_loop(), name="cache-reader")
        self._waiter: asyncio.Task[None] | None = None
        self._lease: asyncio.Task[None] | None = None
        self._closed = False
        self.failure: CacheFileError | None = None  # set when the file fails mid-run
        self.reads = 0
        self.hits = 0
        self.writes = 0
        self.commits = 0
        self.damaged_keys: set[str] = set()  # rows read as a miss because they were not readable
        self.claimed = 0  # claims won (this process paid for the call)
        self.waited = 0  # answers another process paid for (stored meanwhile, or waited for)

    @classmethod
    async def open(cls, path: str | Path, **kwargs: Any) -> JudgeCache:
        """Open (or create) the cache file. A damaged or unusable file raises
        :class:`CacheFileError` and leaves nothing open."""
        path = Path(path)
        # startup: drop claims of processes long gone (their keys were never asked again)
        db = await open_db(path, pragmas=_PRAGMAS, schema=_SCHEMA,
                           startup=(("DELETE FROM claims WHERE expires < ?", (time.time() - 3600,)),))
        return cls(db, path, **kwargs)

    def _fail(self, exc: BaseException) -> BaseException:
        """Turn a SQLite error into the cache's failure (kept, so later calls fail at once)."""
        if isinstance(exc, sqlite3.Error):
            if self.failure is None:
                self.failure = CacheFileError(self.path, describe(exc))
            return self.failure
        return exc

    def _check_open(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise RuntimeError("cache is closed")

    def _answer(self, key: str, raw: Any) -> bytes | None:
        """A stored answer as bytes, or None for a miss or a damaged row (counted, logged)."""
        if raw is None:
            return None
        try:
            if isinstance(raw, str):
                raw = raw.encode("utf-8")
            raw.decode("utf-8")
            return raw
        except (AttributeError, UnicodeError):
            if key in self.damaged_keys:
                return None
            self.damaged_keys.add(key)
            if len(self.damaged_keys) <= 3:
                log.warning("%s: entry %s is damaged (its answer is not UTF-8 text); treated as a miss "
                            "and asked again", self.path, key[:16])
            return None

    async def get(self, key: str) -> bytes | None:
        self._check_open()
        self.reads += 1
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._lookups.setdefault(key, []).append(fut)
        self._read_wakeup.set()
        value = await fut
        if value is not None:
            self.hits += 1
        return value

    async def _fetch_answers(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            rows = await self._db.execute_fetchall(
                f"SELECT key, CAST(response AS BLOB) FROM responses WHERE key IN ({','.join('?' * len(part))})",
                part)
            for k, raw in rows:
                if is_damaged(k):
                    continue
                value = self._answer(k, raw)
                if value is not None:
                    found[k] = value
        return found

    async def _read_loop(self) -> None:
        while True:
            await self._read_wakeup.wait()
            self._read_wakeup.clear()
            if self._closed and not self._lookups:
                return
            while self._lookups:
                keys = list(self._lookups)[:_CHUNK]
                waiters = {k: self._lookups.pop(k) for k in keys}
                try:
                    found = await self._fetch_answers(keys)
                    for k, futs in waiters.items():
                        for fut in futs:
                            if not fut.done():
                                fut.set_result(found.get(k))
                except Exception as e:
                    err = self._fail(e)
                    for futs in waiters.values():
                        for fut in futs:
                            if not fut.done():
                                fut.set_exception(err)

    async def put(self, key: str, response: bytes, components: dict[str, Any]) -> None:
        """Store a response and end this process's claim on it; returns once committed
        (group commit)."""
        self._check_open()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        row = (key, time.time(), str(components.get("template", "")), str(components.get("model", "")),
               orjson.dumps(components, option=orjson.OPT_SORT_KEYS), response)
        self._pending.append((row, fut))
        self._held.discard(key)
        self._wakeup.set()
        await fut

    # -- claims (one payer per key across processes) ------------------------------------
    async def claim_or_wait(self, key: str) -> bytes | None:
        """The stored answer for ``key`` when another process has it or is paying for it
        (waited for), or None once this process holds the claim and should make the call
        (then :meth:`put` the answer or :meth:`release` the claim)."""
        while True:
            self._check_open()
            fut: asyncio.Future[tuple[str, bytes | None]] = asyncio.get_running_loop().create_future()
            self._claims.append((key, fut))
            self._wakeup.set()
            state, raw = await fut
            if state == "own":
                self.claimed += 1
                return None
            if state == "answered":
                self.waited += 1
                return raw
            raw = await self._wait(key)
            if raw is not None:
                self.waited += 1
                return raw

    def release(self, key: str) -> None:
        """Give up a claim without an answer (the call failed): waiters take it over.
        Harmless for a key this process does not hold."""
        if self._closed or self.failure is not None:
            return
        self._held.discard(key)
        self._ops.append(("DELETE FROM claims WHERE key = ? AND owner = ?", (key, self.owner)))
        self._wakeup.set()

    async def _wait(self, key: str) -> bytes | None:
        """The answer once its claim holder stores it, or None when the claim ends without
        one (released, lease expired, owner dead): the caller claims again."""
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(fut)
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.create_task(self._wait_loop(), name="cache-claim-waiter")
        return await fut

    async def _wait_loop(self) -> None:
        while self._waiting and not self._closed:
            await asyncio.sleep(self.poll_s)
            keys = list(self._waiting)
            try:
                answers = await self._fetch_answers(keys)
                claims: dict[str, tuple[str, float]] = {}
                for i in range(0, len(keys), _CHUNK):
                    part = keys[i:i + _CHUNK]
                    for k, owner, expires in await self._db.execute_fetchall(
                            f"SELECT key, owner, expires FROM claims WHERE key IN ({','.join('?' * len(part))})",
                            part):
                        claims[k] = (owner, expires)
            except Exception as e:
                err = self._fail(e)
                for futs in self._waiting.values():
                    for fut in futs:
                        if not fut.done():
                            fut.set_exception(err)
                self._waiting.clear()
                return
            now = time.time()
            for key in keys:
                result: bytes | None
                if key in answers:
                    result = answers[key]
                else:
                    claim = claims.get(key)
                    if claim is not None and claim[1] >= now and _owner_alive(claim[0], self.host):
                        continue  # still being paid for by a live process
                    if claim is not None and claim[1] >= now:  # dead owner: free the key
                        self._ops.append(("DELETE FROM claims WHERE key = ? AND owner = ?", (key, claim[0])))
                        self._wakeup.set()
                    result = None
                for fut in self._waiting.pop(key, []):
                    if not fut.done():
                        fut.set_result(result)

    async def _lease_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.lease_s / 3)
            if self._held:
                self._ops.append(("UPDATE claims SET expires = ? WHERE owner = ?",
                                  (time.time() + self.lease_s, self.owner)))
                self._wakeup.set()

    async def _write_claims(self, batch: list[tuple[str, asyncio.Future[tuple[str, bytes | None]]]]
                            ) -> dict[str, tuple[str, bytes | None]]:
        now = time.time()
        keys = list(dict.fromkeys(k for k, _ in batch))
        await self._db.executemany(
            "INSERT INTO claims(key, owner, expires) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET "
            "owner = excluded.owner, expires = excluded.expires WHERE claims.expires < ?",
            [(k, self.owner, now + self.lease_s, now) for k in keys])
        owners: dict[str, str] = {}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            rows = await self._db.execute_fetchall(
                f"SELECT key, owner FROM claims WHERE key IN ({','.join('?' * len(part))})", part)
            owners.update((key, owner) for key, owner in rows)
        answers = await self._fetch_answers(keys)
        done = [k for k in keys if k in answers and owners.get(k) == self.owner]
        if done:  # answered meanwhile: the claim just taken is not needed
            await self._db.executemany("DELETE FROM claims WHERE key = ? AND owner = ?",
                                       [(k, self.owner) for k in done])
        results: dict[str, tuple[str, bytes | None]] = {}
        for k in keys:
            if k in answers:
                results[k] = ("answered", answers[k])
            elif owners.get(k) == self.owner:
                self._held.add(k)
                results[k] = ("own", None)
            else:
                results[k] = ("held", None)
        return results

    async def _write_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch, self._pending = self._pending, []
            claims, self._claims = self._claims, []
            ops, self._ops = self._ops, []
            if not batch and not claims and not ops:
                if self._closed:
                    return
                continue
            claimed: dict[str, tuple[str, bytes | None]] = {}
            try:
                if batch:
                    rows = [row for row, _ in batch]
                    await self._db.executemany(
                        "INSERT OR REPLACE INTO responses(key, created, template, model, components, response)"
                        " VALUES (?,?,?,?,?,?)", rows)
                    await self._db.executemany("DELETE FROM claims WHERE key = ?", [(r[0],) for r in rows])
                for sql, params in ops:
                    await self._db.execute(sql, params)
                if claims:
                    claimed = await self._write_claims(claims)
                await self._db.commit()
                self.writes += len(batch)
                self.commits += 1
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(None)
                if claims:
                    # a key claimed twice in one batch (two waiters of one key): one owner
                    given: set[str] = set()
                    for k, claim in claims:
                        state, raw = claimed[k]
                        if state == "own" and k in given:
                            state = "held"
                        given.add(k)
                        if not claim.done():
                            claim.set_result((state, raw))
            except Exception as e:  # surface to every waiter, keep the writer alive
                err = self._fail(e)
                try:
                    await self._db.rollback()
                except Exception:
                    pass
                waiters: list[asyncio.Future[Any]] = [f for _, f in batch] + [f for _, f in claims]
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(err)
            if self._lease is None and self._held and not self._closed:
                self._lease = asyncio.create_task(self._lease_loop(), name="cache-lease")
            if self._closed and not self._pending and not self._ops and not self._claims:
                return

    async def close(self) -> None:
        """Commit what is queued, give up held claims, and close the file (always)."""
        if self._closed:
            return
        if self._held and self.failure is None:
            self._ops.append(("DELETE FROM claims WHERE owner = ?", (self.owner,)))
            self._held.clear()
        self._closed = True
        self._wakeup.set()
        self._read_wakeup.set()
        try:
            for task in (self._lease, self._waiter):
                if task is not None:
                    task.cancel()
            for futs in self._waiting.values():
                for fut in futs:
                    if not fut.done():
                        fut.set_exception(RuntimeError("cache is closed"))
            self._waiting.clear()
            await asyncio.gather(self._writer, self._reader, return_exceptions=True)
        finally:
            await self._db.close()

    # -- how the model counts tokens (tokens.TokenFit), kept for the next run's estimates --
    async def token_fit(self, model: str) -> TokenFit | None:
        """What earlier runs recorded of ``model``'s token counting (None: nothing, or a
        row this version cannot read)."""
        return await self._read_record("SELECT fit FROM token_counts WHERE model = ?", model, TokenFit)

    async def template_token_fits(self, model: str) -> dict[str, TokenFit]:
        """What earlier runs recorded of ``model``'s token counting per template (rows this
        version cannot read are left out)."""
        rows = await self._read_records("SELECT template, fit FROM template_token_counts WHERE model = ?",
                                        model, TokenFit)
        return {str(head[0]): fit for head, fit in rows}

    async def output_caps(self, model: str) -> dict[str, TemplateCap]:
        """What earlier runs recorded of ``model``'s answer lengths per template, for caps
        fitted to them (:mod:`drscore.engine.runtime.calls.output_cap`)."""
        rows = await self._read_records("SELECT template, answers FROM output_caps WHERE model = ?",
                                        model, TemplateCap)
        return {str(head[0]): answers for head, answers in rows}

    async def answers(self, template: str, model: str, limit: int) -> list[bytes]:
        """The latest ``limit`` answers ``model`` gave to prompts of ``template`` (what a dry
        run plans follow-up calls with: :mod:`drscore.engine.runtime.calls.follow_ups`)."""
        self._check_open()
        try:
            async with self._db.execute(
                    "SELECT CAST(response AS BLOB) FROM responses WHERE template = ? AND model = ? "
                    "ORDER BY created DESC LIMIT ?", (template, model, limit)) as cur:
                rows = await cur.fetchall()
        except sqlite3.Error as e:
            raise self._fail(e) from None
        return [bytes(r[0]) for r in rows]

    async def quota(self, endpoint: str) -> KnownQuota | None:
        """The limits ``endpoint`` (its URL and model, without credentials) announced in the
        latest run that met it (None: none on record, or a row this version cannot read)."""
        return await self._read_record("SELECT quota FROM quotas WHERE endpoint = ?", endpoint, KnownQuota)

    async def _read_record(self, sql: str, key: str, kind: type[_R]) -> _R | None:
        """One JSON-encoded record kept for the next run (None: none, or a row this version
        cannot read)."""
        rows = await self._read_records(sql, key, kind)
        return rows[0][1] if rows else None

    async def _read_records(self, sql: str, key: str, kind: type[_R]) -> list[tuple[tuple[Any, ...], _R]]:
        """The JSON-encoded records kept for the next run under ``key``, the record in each
        row's last column and the columns before it beside it (rows this version cannot
        read are left out)."""
        self._check_open()
        try:
            async with self._db.execute(sql, (key,)) as cur:
                rows = await cur.fetchall()
        except sqlite3.Error as e:
            raise self._fail(e) from None
        out: list[tuple[tuple[Any, ...], _R]] = []
        for row in rows:
            try:
                out.append((tuple(row[:-1]), msgspec.json.decode(row[-1], type=kind)))
            except (msgspec.DecodeError, TypeError):
                continue
        return out

    def save_quota(self, endpoint: str, quota: KnownQuota) -> None:
        """Queue what ``endpoint`` announced in this run (written with the answers)."""
        self._save_record("INSERT OR REPLACE INTO quotas (endpoint, quota, updated) VALUES (?, ?, ?)", quota, endpoint)

    def save_token_fit(self, model: str, fit: TokenFit) -> None:
        """Queue ``fit`` for ``model`` (written with the answers, at the latest on close)."""
        if fit.calls:
            self._save_record("INSERT OR REPLACE INTO token_counts (model, fit, updated) VALUES (?, ?, ?)",
                              fit, model)

    def save_template_token_fit(self, model: str, template: str, fit: TokenFit) -> None:
        """Queue ``fit`` for ``template`` as ``model`` counts it (written with the answers)."""
        if fit.calls:
            self._save_record("INSERT OR REPLACE INTO template_token_counts (model, template, fit, updated) "
                              "VALUES (?, ?, ?, ?)", fit, model, template)

    def save_output_cap(self, model: str, template: str, answers: TemplateCap) -> None:
        """Queue what ``model``'s answers to ``template`` showed (written with the answers)."""
        self._save_record("INSERT OR REPLACE INTO output_caps (model, template, answers, updated) "
                          "VALUES (?, ?, ?, ?)", answers, model, template)

    def _save_record(self, sql: str, record: msgspec.Struct, *key: str) -> None:
        if not self._closed and self.failure is None:
            self._ops.append((sql, (*key, msgspec.json.encode(record), time.time())))
            self._wakeup.set()

    @property
    def damaged(self) -> int:
        """How many distinct damaged entries were met (each read as a miss)."""
        return len(self.damaged_keys)

    # -- maintenance (drscore cache ...) ------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        async with self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(response)+LENGTH(components)),0), MIN(created), MAX(created)"
            " FROM responses") as cur:
            totals = await cur.fetchone()
        assert totals is not None  # an aggregate query without GROUP BY returns one row
        n, size, first, last = totals
        async with self._db.execute(
            "SELECT template, model, COUNT(*) FROM responses GROUP BY template, model ORDER BY 3 DESC") as cur:
            groups = [{"template": t, "model": m, "entries": c} for t, m, c in await cur.fetchall()]
        return {"path": str(self.path), "entries": n, "payload_bytes": size,
                "file_bytes": self.path.stat().st_size if self.path.exists() else 0,
                "oldest": first, "newest": last, "by_template": groups}

    async def explain(self, key: str) -> dict[str, Any] | None:
        """The components a key was computed from (to debug cache misses) and the answer
        stored under it. ``key`` may be a prefix of the 64 hex characters, as long as
        it names one entry (ValueError when it names several)."""
        prefix = key.strip().lower()
        if not prefix or any(c not in "0123456789abcdef" for c in prefix):
            raise ValueError(f"cache key {key!r}: expected hex characters (a key or the start of one)")
        async with self._db.execute(
                "SELECT key, components, created, CAST(response AS BLOB) FROM responses "
                "WHERE key >= ? AND key <= ? ORDER BY key LIMIT 6", (prefix, prefix + "g")) as cur:
            rows = list(await cur.fetchall())
        if not rows:
            return None
        if len(rows) > 1:
            shown = ", ".join(str(r[0])[:16] for r in rows[:5])
            raise ValueError(f"cache key prefix {key!r} matches {'more than 5' if len(rows) > 5 else len(rows)} "
                             f"entries ({shown}, ...); give more characters")
        full, components, created, response = rows[0]
        try:
            answer: Any = orjson.loads(response)
        except orjson.JSONDecodeError:
            answer = bytes(response).decode("utf-8", "replace")
        return {"key": full, "created": created, "components": orjson.loads(components), "answer": answer}

    @staticmethod
    def empty_stats(path: Path) -> dict[str, Any]:
        """:meth:`stats` of a cache file that does not exist (``cache stats`` creates none)."""
        return {"path": str(path), "entries": 0, "payload_bytes": 0, "file_bytes": 0,
                "oldest": None, "newest": None, "by_template": []}

    async def vacuum(self, *, older_than_s: float | None = None, template: str | None = None) -> int:
        """Delete entries (optionally only old ones / one template), then VACUUM."""
        clauses: list[str] = []
        args: list[float | str] = []
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
            async with self._db.execute(f"SELECT {CHECK_COLUMNS} FROM responses") as cur:
                async for row in cur:
                    if not check_row(row) or is_damaged(row[0]) or is_damaged(row[2]) or is_damaged(row[3]):
                        self.damaged_keys.add(str(row[0]))  # nothing portable to export
                        continue
                    key, created, template, model, comps, resp = row
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
