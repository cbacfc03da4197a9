"""The batch journal: a durable record (``batches.sqlite`` beside the judge cache) of every
batch submitted, the ``custom_id`` of each of its requests and its state, written before
the provider is asked to create the batch, and the answers of finished batches until the
pool has taken them. It is what lets ``--batch`` re-attach after ``kill -9`` without
submitting a request twice (see :mod:`drscore.judge.batch`). Opened like the judge cache:
a damaged file fails at once, in one line naming it.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

from drscore.engine.runtime.sqlitefile import open_db

# states of a batch the provider may still be working on
_LIVE = ("creating", "submitted")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    local_id   TEXT PRIMARY KEY,
    endpoint   TEXT NOT NULL,
    batch_id   TEXT,
    file_id    TEXT NOT NULL,
    state      TEXT NOT NULL,
    requests   INTEGER NOT NULL,
    created    REAL NOT NULL,
    updated    REAL NOT NULL,
    detail     TEXT
);
CREATE TABLE IF NOT EXISTS batch_requests (
    local_id   TEXT NOT NULL,
    custom_id  TEXT NOT NULL,
    PRIMARY KEY (local_id, custom_id)
);
CREATE TABLE IF NOT EXISTS batch_results (
    endpoint   TEXT NOT NULL,
    custom_id  TEXT NOT NULL,
    body       BLOB NOT NULL,
    created    REAL NOT NULL,
    PRIMARY KEY (endpoint, custom_id)
);
"""


def custom_id(body: dict[str, Any]) -> str:
    """The id of a request in a batch: the hash of its canonical body."""
    return "drs-" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:40]


class BatchJournal:
    """Durable record of submitted batches and harvested answers (SQLite, WAL)."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: str | Path, *, keep_results_s: float = 30 * 86_400) -> BatchJournal:
        path = Path(path)
        # a recorded batch must survive power loss too: synchronous=FULL
        db = await open_db(path, pragmas=("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                                          "PRAGMA busy_timeout=30000"), schema=_SCHEMA,
                           startup=(("DELETE FROM batch_results WHERE created < ?",
                                     (time.time() - keep_results_s,)),))
        return cls(db)

    async def record(self, local_id: str, endpoint: str, file_id: str, ids: list[str]) -> None:
        now = time.time()
        await self._db.execute("INSERT INTO batches VALUES (?,?,?,?,?,?,?,?,?)",
                               (local_id, endpoint, None, file_id, "creating", len(ids), now, now, None))
        await self._db.executemany("INSERT OR IGNORE INTO batch_requests VALUES (?,?)",
                                   [(local_id, i) for i in ids])
        await self._db.commit()

    async def set_state(self, local_id: str, state: str, *, batch_id: str | None = None,
                        detail: str | None = None) -> None:
        await self._db.execute(
            "UPDATE batches SET state=?, batch_id=COALESCE(?, batch_id), detail=COALESCE(?, detail), updated=?"
            " WHERE local_id=?", (state, batch_id, detail, time.time(), local_id))
        await self._db.commit()

    async def harvest(self, local_id: str, endpoint: str, state: str, answers: list[tuple[str, bytes]],
                      detail: str | None) -> None:
        """Store a finished batch's answers and its final state in one transaction."""
        now = time.time()
        await self._db.executemany("INSERT OR REPLACE INTO batch_results VALUES (?,?,?,?)",
                                   [(endpoint, cid, body, now) for cid, body in answers])
        await self._db.execute("UPDATE batches SET state=?, detail=?, updated=? WHERE local_id=?",
                               (state, detail, now, local_id))
        await self._db.commit()

    async def live(self, endpoint: str) -> list[tuple[str, str | None, str, str, list[str]]]:
        """(local id, batch id, file id, state, custom ids) of batches not yet finished."""
        rows = await self._db.execute_fetchall(
            f"SELECT local_id, batch_id, file_id, state FROM batches WHERE endpoint=? AND state IN "
            f"({','.join('?' * len(_LIVE))}) ORDER BY created", (endpoint, *_LIVE))
        out = []
        for local_id, batch_id, file_id, state in rows:
            ids = await self._db.execute_fetchall("SELECT custom_id FROM batch_requests WHERE local_id=?",
                                                  (local_id,))
            out.append((local_id, batch_id, file_id, state, [r[0] for r in ids]))
        return out

    async def result_ids(self, endpoint: str) -> set[str]:
        rows = await self._db.execute_fetchall("SELECT custom_id FROM batch_results WHERE endpoint=?", (endpoint,))
        return {r[0] for r in rows}

    async def result(self, endpoint: str, cid: str) -> bytes | None:
        rows = await self._db.execute_fetchall(
            "SELECT body FROM batch_results WHERE endpoint=? AND custom_id=?", (endpoint, cid))
        row = next(iter(rows), None)
        return row[0] if row is not None else None

    async def close(self) -> None:
        await self._db.close()
