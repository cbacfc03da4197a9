"""--batch: the mock's Files + Batches API and the batching backend under the pool,
over real HTTP on 127.0.0.1 (issue 11)."""
from __future__ import annotations

import asyncio
import sqlite3
from typing import Annotated

import aiohttp
import msgspec
import orjson
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.judge.batch import BatchBackend
from drscore.judge.batch_journal import custom_id
from drscore.judge.mock.server import MockConfig, start


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    reason: str


TEMPLATE = "---\nmax_tokens: 60\nexpected_output_tokens: 20\n---\n## system\nJudge.\n## user\nRate: ${text}"
PRICES = PriceTable({"mock-judge": Price(input=2.0, output=8.0)})


@pytest.fixture(autouse=True)
def template(monkeypatch):
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))


@pytest.fixture
async def mock():
    servers = []

    async def make(**kw):
        runner, port = await start(MockConfig(**{"batch_delay": 0.05, **kw}))
        servers.append(runner)
        return f"http://127.0.0.1:{port}"

    yield make
    for r in servers:
        await r.cleanup()


async def _stats(base):
    async with aiohttp.ClientSession() as s, s.get(base + "/stats") as r:
        return await r.json()


def _backend(base, tmp_path, **kw):
    return BatchBackend(base + "/v1", "mock-judge", journal=tmp_path / "batches.sqlite",
                        **{"window_s": 0.05, "poll_initial_s": 0.02, "poll_max_s": 0.05, **kw})


def _submitted(journal) -> int:
    if not journal.exists():
        return 0
    db = sqlite3.connect(journal)
    try:
        return db.execute("SELECT COUNT(*) FROM batches WHERE state='submitted'").fetchone()[0]
    except sqlite3.OperationalError:  # the journal is being created
        return 0
    finally:
        db.close()


def _pool(backend, **kw):
    # The limiter would refuse everything (rpm 1 with a tiny burst): batched calls must not use it.
    return JudgePool(backend, cache=None, limiter=RateLimiter(rpm=1, burst_s=0.01), prices=PRICES,
                     backoff_base_s=0.001, **kw)


# -- the mock's protocol ---------------------------------------------------------------------

async def test_mock_files_and_batches_protocol(mock):
    base = await mock()
    body = {"model": "mock-judge", "messages": [{"role": "user", "content": "Hello, world!"}]}
    lines = [{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body},
             {"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "mock-judge", "messages": "not a list"}}]
    async with aiohttp.ClientSession() as s:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"".join(orjson.dumps(x) + b"\n" for x in lines), filename="in.jsonl")
        async with s.post(base + "/v1/files", data=form) as r:
            file_id = (await r.json())["id"]
        async with s.post(base + "/v1/batches", json={"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                     "completion_window": "24h"}) as r:
            batch = await r.json()
        assert batch["status"] == "validating"
        while batch["status"] not in ("completed", "failed", "expired"):
            await asyncio.sleep(0.02)
            async with s.get(f"{base}/v1/batches/{batch['id']}") as r:
                batch = await r.json()
        assert batch["status"] == "completed" and batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
        async with s.get(f"{base}/v1/files/{batch['output_file_id']}/content") as r:
            out = [orjson.loads(x) for x in (await r.read()).splitlines()]
        async with s.get(f"{base}/v1/files/{batch['error_file_id']}/content") as r:
            err = [orjson.loads(x) for x in (await r.read()).splitlines()]
        # "Hello , world !" = 4 tokens + 3 for the message: the synchronous usage, unchanged
        assert out[0]["custom_id"] == "a" and out[0]["response"]["body"]["usage"]["prompt_tokens"] == 7
        assert err[0]["custom_id"] == "b" and err[0]["response"]["status_code"] == 400
        # duplicate custom ids fail the whole batch at validation
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"".join(orjson.dumps(lines[0]) + b"\n" for _ in range(2)), filename="dup.jsonl")
        async with s.post(base + "/v1/files", data=form) as r:
            dup = (await r.json())["id"]
        async with s.post(base + "/v1/batches", json={"input_file_id": dup, "endpoint": "/v1/chat/completions",
                                                     "completion_window": "24h"}) as r:
            bad = await r.json()
        await asyncio.sleep(0.01)
        async with s.get(f"{base}/v1/batches/{bad['id']}") as r:
            bad = await r.json()
        assert bad["status"] == "failed" and "duplicate custom_id" in bad["errors"]["data"][0]["message"]
    stats = await _stats(base)
    assert stats["requests"] == 0 and stats["batches_created"] == 2 and stats["batch_resubmitted"] == 0


# -- the backend under the pool ------------------------------------------------------------

async def test_calls_collect_into_one_batch_at_half_price(mock, tmp_path):
    base = await mock()
    backend = _backend(base, tmp_path)
    pool = _pool(backend)
    judged = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"report {i}"}) for i in range(20)))
    await backend.close()
    stats = await _stats(base)
    assert stats["requests"] == 0  # no synchronous call
    assert stats["batches_created"] == 1 and stats["batch_requests"] == 20
    assert all(j.batched and j.source == "network" for j in judged)
    sync_cost = (stats["batch_prompt_tokens"] * 2.0 + stats["batch_completion_tokens"] * 8.0) / 1e6
    assert pool.stats.cost_usd == pytest.approx(sync_cost / 2, rel=1e-12)
    assert pool.stats.batched_calls == 20 and backend.batch_summary()["requests_answered"] == 20


async def test_max_requests_splits_batches(mock, tmp_path):
    base = await mock()
    backend = _backend(base, tmp_path, max_requests=4)
    pool = _pool(backend)
    await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"r{i}"}) for i in range(10)))
    await backend.close()
    async with aiohttp.ClientSession() as s, s.get(base + "/v1/batches?limit=100") as r:
        sizes = [b["request_counts"]["total"] for b in (await r.json())["data"]]
    # a full batch goes at once; no batch exceeds the limit and every call went once
    assert max(sizes) == 4 and sum(sizes) == 10 and len(sizes) >= 3


async def test_reattach_after_a_crash_submits_nothing_twice(mock, tmp_path):
    base = await mock(batch_delay=0.5)
    first = _backend(base, tmp_path)
    pool = _pool(first)
    asks = [asyncio.create_task(pool.ask("t", Verdict, {"text": f"r{i}"})) for i in range(6)]
    journal = tmp_path / "batches.sqlite"
    for _ in range(500):  # until the batch is recorded as submitted
        await asyncio.sleep(0.01)
        if _submitted(journal):
            break
    for t in asks:  # the process dies: nothing of it runs on
        t.cancel()
    await asyncio.gather(*asks, return_exceptions=True)
    await first.close()
    assert _submitted(journal) == 1  # died with its batch pending at the provider
    assert (await _stats(base))["batches_created"] == 1

    second = _backend(base, tmp_path)
    pool2 = _pool(second)
    judged = await asyncio.gather(*(pool2.ask("t", Verdict, {"text": f"r{i}"}) for i in range(6)))
    await second.close()
    stats = await _stats(base)
    assert len(judged) == 6 and stats["batches_created"] == 1 and stats["batch_resubmitted"] == 0
    assert stats["requests"] == 0 and second.batch_summary()["reattached"] == 1


async def test_interrupted_creation_is_found_by_its_input_file(mock, tmp_path):
    """Killed after the provider created the batch but before the journal said so: the
    next run finds the batch by its input file instead of creating it again."""
    base = await mock()
    backend = _backend(base, tmp_path)
    await backend._start()
    from drscore.engine.runtime.calls.judging import ChatRequest, Message
    from drscore.judge.wire import request_body

    req = ChatRequest(messages=(Message("user", "Rate: x"),), template="t", template_hash="h",
                      schema_name="Verdict", schema={"type": "object"})
    body = request_body(req, "mock-judge")
    cid = custom_id(body)
    line = orjson.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}) + b"\n"
    file_id = await backend._upload(line)
    await backend._journal.record("local-1", backend.endpoint, file_id, [cid])
    await backend._create(file_id, "local-1")  # ... and the process dies here
    await backend.close()

    again = _backend(base, tmp_path)
    resp, _ = await again.complete(req)
    await again.close()
    stats = await _stats(base)
    assert resp.batched and stats["batches_created"] == 1 and stats["batch_resubmitted"] == 0


async def test_expired_batch_is_retried_in_a_new_batch(mock, tmp_path):
    base = await mock(batch_expire_first=1)
    backend = _backend(base, tmp_path)
    pool = _pool(backend)
    judged = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"r{i}"}) for i in range(3)))
    await backend.close()
    stats = await _stats(base)
    assert len(judged) == 3 and stats["batches_expired"] == 1 and stats["batches_created"] == 2
    assert stats["batch_resubmitted"] == 0  # an expired batch holds nothing: retrying is not paying twice
    summary = backend.batch_summary()
    assert summary["expired"] == 1 and "expired" in summary["failures"][0]


async def test_expired_batch_failures_are_reported_when_retries_run_out(mock, tmp_path):
    base = await mock(batch_expire_first=5)
    backend = _backend(base, tmp_path)
    pool = _pool(backend, max_retries=1)
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("t", Verdict, {"text": "r"})
    await backend.close()
    assert err.value.reason == "batch_unfinished" and "batch_expired" in err.value.detail
    assert (await _stats(base))["batches_created"] == 2  # the first try and one bounded retry


async def test_max_cost_reserves_each_requests_worst_case_before_it_joins_a_batch(mock, tmp_path):
    from drscore.engine.runtime.calls.verdicts import schema_of

    # Before any usage is known a call reserves its input bound (64 per request + 256 for
    # a schema hint + the schema's JSON + per message 8 + content bytes + role) plus the
    # whole 60-token output cap, at batch prices ($1/M in, $4/M out).
    bound = 64 + 256 + len(orjson.dumps(schema_of(Verdict))) + (8 + 6 + 6) + (8 + 8 + 4)
    worst = (bound * 1.0 + 60 * 4.0) / 1e6
    base = await mock()
    backend = _backend(base, tmp_path)
    pool = _pool(backend, max_cost_usd=2.5 * worst)  # room for two worst cases at a time
    outcomes = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"r{i}"}) for i in range(6)),
                                    return_exceptions=True)
    await backend.close()
    async with aiohttp.ClientSession() as s, s.get(base + "/v1/batches?limit=100") as r:
        sizes = [b["request_counts"]["total"] for b in reversed((await r.json())["data"])]
    assert sizes[0] == 2  # only the requests whose worst case fitted went into the first batch
    assert pool.stats.cost_usd <= 2.5 * worst and (await _stats(base))["batch_resubmitted"] == 0
    assert all(not isinstance(o, BaseException) or (isinstance(o, JudgeFailed) and o.reason == "budget")
               for o in outcomes)


def test_error_file_lines_map_to_retryable_or_fatal():
    from drscore.engine.runtime.calls.judging import FatalError, TransientError
    from drscore.judge.batch import _line_error

    expired = {"custom_id": "a", "response": None, "error": {"code": "batch_expired", "message": "late"}}
    server = {"custom_id": "b", "response": {"status_code": 500, "body": {"error": {"message": "boom"}}}}
    bad = {"custom_id": "c", "response": {"status_code": 400, "body": {"error": {"message": "bad schema"}}}}
    limited = {"custom_id": "d", "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}}}
    assert isinstance(_line_error(expired), TransientError) and "batch_expired" in str(_line_error(expired))
    assert isinstance(_line_error(server), TransientError) and isinstance(_line_error(limited), TransientError)
    assert isinstance(_line_error(bad), FatalError) and "bad schema" in str(_line_error(bad))


async def test_a_wrong_url_fails_at_upload_with_the_endpoint_fault(mock, tmp_path):
    base = await mock()
    backend = BatchBackend(base + "/no-such-prefix", "mock-judge", journal=tmp_path / "b.sqlite", window_s=0.05)
    pool = _pool(backend)
    outcomes = await asyncio.gather(*(pool.ask("t", Verdict, {"text": f"r{i}"}) for i in range(3)),
                                    return_exceptions=True)
    await backend.close()
    assert all(isinstance(o, JudgeFailed) and o.reason == "not_found" for o in outcomes)
    assert (await _stats(base))["batches_created"] == 0


async def test_a_damaged_journal_fails_at_once_naming_the_file(tmp_path):
    from drscore.engine.runtime.sqlitefile import CacheFileError
    from drscore.judge.batch_journal import BatchJournal

    path = tmp_path / "batches.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheFileError) as err:
        await BatchJournal.open(path)
    assert str(path) in str(err.value) and "not a SQLite database" in str(err.value)
