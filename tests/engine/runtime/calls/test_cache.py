"""The judge cache's claim API (one payer per key across processes), its handling of
damaged rows, and that no failure leaves a connection thread behind. Two JudgeCache
instances on one file stand in for two processes (each has its own owner id)."""
from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.sqlitefile import CacheFileError

COMPONENTS = {"template": "t", "model": "m"}


def _sqlite_threads() -> set[threading.Thread]:
    # aiosqlite names nothing: find its worker threads by their target's module
    return {t for t in threading.enumerate()
            if "aiosqlite" in str(getattr(getattr(t, "_target", None), "__module__", ""))}


async def test_a_claimed_key_is_waited_for_and_its_answer_shared(tmp_path: Path) -> None:
    a = await JudgeCache.open(tmp_path / "judge.sqlite", poll_s=0.02)
    b = await JudgeCache.open(tmp_path / "judge.sqlite", poll_s=0.02)
    try:
        assert await a.claim_or_wait("k") is None  # a pays
        waiting = asyncio.create_task(b.claim_or_wait("k"))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # b waits for a's answer rather than paying
        await a.put("k", b'{"score": 1}', COMPONENTS)
        assert await asyncio.wait_for(waiting, 5) == b'{"score": 1}'
        assert (a.claimed, b.claimed, b.waited) == (1, 0, 1)
        # once answered, a later claim returns the answer at once
        assert await b.claim_or_wait("k") == b'{"score": 1}'
    finally:
        await a.close()
        await b.close()


async def test_a_released_claim_is_taken_over_by_the_waiter(tmp_path: Path) -> None:
    a = await JudgeCache.open(tmp_path / "judge.sqlite", poll_s=0.02)
    b = await JudgeCache.open(tmp_path / "judge.sqlite", poll_s=0.02)
    try:
        assert await a.claim_or_wait("k") is None
        waiting = asyncio.create_task(b.claim_or_wait("k"))
        await asyncio.sleep(0.1)
        a.release("k")  # a's call failed
        assert await asyncio.wait_for(waiting, 5) is None  # b now holds the claim and pays
        assert b.claimed == 1
    finally:
        await a.close()
        await b.close()


async def test_an_expired_lease_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    b = await JudgeCache.open(path, poll_s=0.02)
    try:
        # a claim left by a process on another host (liveness unknown) whose lease ran out
        with sqlite3.connect(path) as db:
            db.execute("INSERT INTO claims VALUES ('k', 'elsewhere:1:x', ?)", (time.time() - 1,))
            db.execute("INSERT INTO claims VALUES ('live', 'elsewhere:1:x', ?)", (time.time() + 60,))
        assert await asyncio.wait_for(b.claim_or_wait("k"), 5) is None
        live = asyncio.create_task(b.claim_or_wait("live"))
        await asyncio.sleep(0.2)
        assert not live.done()  # a live lease elsewhere is respected
        live.cancel()
    finally:
        await b.close()


async def test_a_claim_of_a_dead_process_on_this_host_is_taken_over_before_its_lease_ends(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # exited: no such process any more
    path = tmp_path / "judge.sqlite"
    b = await JudgeCache.open(path, poll_s=0.02)
    try:
        with sqlite3.connect(path) as db:
            db.execute("INSERT INTO claims VALUES ('k', ?, ?)",
                       (f"{socket.gethostname()}:{pid}:x", time.time() + 600))
        assert await asyncio.wait_for(b.claim_or_wait("k"), 5) is None
    finally:
        await b.close()


async def test_held_leases_are_renewed_and_dropped_on_close(tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    a = await JudgeCache.open(path, lease_s=0.3)
    assert await a.claim_or_wait("k") is None
    await asyncio.sleep(0.6)  # two lease lengths: renewed meanwhile, so still held
    with sqlite3.connect(path) as db:
        (expires,) = db.execute("SELECT expires FROM claims WHERE key='k'").fetchone()
    assert expires > time.time()
    await a.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


async def test_a_damaged_row_is_a_counted_miss_and_is_replaced_by_put(tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    cache = await JudgeCache.open(path)
    await cache.put("bad-text", b"x", COMPONENTS)
    await cache.put("bad-blob", b"x", COMPONENTS)
    await cache.put("good", b"fine", COMPONENTS)
    await cache.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET response = CAST(x'ff7b' AS TEXT) WHERE key='bad-text'")
        db.execute("UPDATE responses SET response = x'c328' WHERE key='bad-blob'")
    cache = await JudgeCache.open(path)
    try:
        got = await asyncio.gather(cache.get("bad-text"), cache.get("bad-blob"), cache.get("good"))
        assert got == [None, None, b"fine"]  # one batch: the damaged rows do not fail the good one
        assert cache.damaged == 2
        assert await cache.claim_or_wait("bad-text") is None  # a miss: this process pays again
        await cache.put("bad-text", b"again", COMPONENTS)
        assert await cache.get("bad-text") == b"again"
    finally:
        await cache.close()


@pytest.mark.parametrize("content", [
    b"garbage " * 200,  # refused by the header check, before SQLite is asked
    b"SQLite format 3\x00" + b"\x10\x00" + b"\x00" * 4000,  # a plausible header: SQLite itself refuses it
])
async def test_a_file_that_is_not_a_cache_fails_and_leaves_no_thread(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "judge.sqlite"
    path.write_bytes(content)
    before = _sqlite_threads()
    probe = await JudgeCache.open(tmp_path / "probe.sqlite")  # the probe does see a live connection
    try:
        assert len(_sqlite_threads() - before) == 1
    finally:
        await probe.close()
    before = _sqlite_threads()
    with pytest.raises(CacheFileError, match="drscore cache check"):
        await JudgeCache.open(path)
    started = _sqlite_threads() - before
    for thread in started:  # a closed connection's thread ends; a leaked one waits forever
        thread.join(timeout=5)
    assert not [t for t in started if t.is_alive()]


async def test_a_file_going_bad_mid_run_fails_every_later_call(tmp_path: Path, monkeypatch) -> None:
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    try:
        await cache.put("k", b"v", COMPONENTS)

        async def malformed(*args, **kwargs):  # what SQLite says when it meets a damaged page
            raise sqlite3.DatabaseError("database disk image is malformed")

        monkeypatch.setattr(cache._db, "execute_fetchall", malformed)  # noqa: SLF001
        with pytest.raises(CacheFileError, match="corrupt .database disk image is malformed.*cache check"):
            await cache.get("k")
        assert cache.failure is not None
        monkeypatch.undo()
        with pytest.raises(CacheFileError):  # no later call touches the file again
            await cache.put("n", b"v", COMPONENTS)
        with pytest.raises(CacheFileError):
            await cache.claim_or_wait("n")
    finally:
        await cache.close()


async def test_token_counting_per_template_is_kept_per_model_and_a_bad_row_left_out(tmp_path: Path) -> None:
    from drscore.engine.runtime.calls.tokens import TokenFit

    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    cache.save_template_token_fit("m", "quality", TokenFit(saa=4.0, say=2.0, calls=1))
    cache.save_template_token_fit("m", "race", TokenFit(saa=9.0, say=3.0, calls=2))
    cache.save_template_token_fit("other", "quality", TokenFit(saa=1.0, say=1.0, calls=3))
    cache.save_template_token_fit("m", "empty", TokenFit())  # nothing answered: nothing kept
    await cache.close()
    with sqlite3.connect(tmp_path / "judge.sqlite") as db:
        db.execute("INSERT INTO template_token_counts VALUES ('m', 'broken', X'7b', 0)")
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    try:
        fits = await cache.template_token_fits("m")
    finally:
        await cache.close()
    assert set(fits) == {"quality", "race"}
    assert fits["race"] == TokenFit(saa=9.0, say=3.0, calls=2)
