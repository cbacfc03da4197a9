"""``--batch``: judge calls sent through the OpenAI-compatible Files + Batches API.

:class:`BatchBackend` is a :class:`drscore.engine.runtime.calls.judging.Backend`: the pool asks it for
one call at a time exactly as it asks the HTTP backend, so methods, decoding, re-asks
and the cache do not change. Behind ``complete()`` calls are collected until a quiet
period of ``window_s`` seconds (or ``max_requests`` requests / ``max_bytes`` of JSONL,
the provider's per-batch limits) and go out as one batch: the JSONL is uploaded
(``POST /files``, purpose ``batch``), the batch created (``POST /batches``, 24h window)
and polled (``GET /batches/{id}``) with backoff; the output and error files are then
downloaded and every answer handed to the call that asked for it. Dependent steps of a
method (criteria before scoring) simply become later batches.

Crash safety. Every batch is recorded in a journal (SQLite next to the judge cache)
before the provider is asked to create it: local id, input file id, the ``custom_id``
of each request (the hash of its request body, so equal requests have equal ids) and a
state. After ``kill -9`` the same command re-attaches: live batches are polled again,
finished ones harvested, and a request that sits in a live batch waits for that batch
instead of being submitted again. A batch whose creation was interrupted is looked up
by its input file before it is created again. Answers of finished batches are kept in
the journal until the pool has asked for them (the pool then commits them to the cache
as it does synchronous answers), so nothing paid for is lost. Requests of a failed or
expired batch, and requests the error file reports, raise ``TransientError``: the pool
retries them (bounded by ``--max-retries``) in a later batch and reports a failure like a
synchronous one.
"""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from drscore.engine.runtime.calls.judging import (
    ENDPOINT_FAULTS, ChatRequest, ChatResponse, FatalError, JudgeError, RateLimitInfo, TransientError,
)
from drscore.engine.runtime.calls.redact import redact, redact_any, redact_url, register_secret, register_url_secrets
from drscore.judge.batch_journal import BatchJournal, custom_id
from drscore.judge.http import classify_connection_error, parse_completion, status_error
from drscore.judge.wire import WireProfile, family_profile, request_body

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000  # provider limits per batch
MAX_BYTES = 190 * 1024 * 1024  # the file limit is 200 MB: keep a margin for the JSONL framing
_TERMINAL = {"completed", "failed", "expired", "cancelled"}
# A request its batch did not answer (the batch expired, failed or was cancelled, or the
# provider's batch queue was full): retried in a later batch. Not an endpoint fault, and
# one such batch fails many requests at once, so the pool's circuit breaker ignores it.
UNFINISHED = "batch_unfinished"

class BatchBackend:
    """The Batch API as a judge backend (see the module docstring)."""

    name = "http"  # same answers as synchronous calls: share their cache entries
    cacheable = True
    batched = True

    def __init__(self, base_url: str, model: str, *, journal: str | Path, api_key: str | None = None,
                 api_key_header: str = "Authorization", window_s: float = 2.0, max_requests: int = MAX_REQUESTS,
                 max_bytes: int = MAX_BYTES, poll_initial_s: float = 5.0, poll_max_s: float = 120.0,
                 timeout_s: float = 300.0, max_hold_s: float | None = None,
                 params: dict[str, Any] | None = None, profile: WireProfile | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        register_url_secrets(base_url)
        self.model = model
        # the same body spelling as synchronous calls
        self.wire = profile if profile is not None else family_profile(model, params)
        self.endpoint = f"{redact_url(self.base_url)}|{model}"  # the journal keeps no URL secret
        self.journal_path = Path(journal)
        self.window_s = max(0.0, window_s)
        self.max_requests = max(1, min(MAX_REQUESTS, max_requests))
        self.max_bytes = max(1, min(MAX_BYTES, max_bytes))
        self.poll_initial_s, self.poll_max_s = poll_initial_s, max(poll_initial_s, poll_max_s)
        # A steady trickle of calls never leaves a quiet window: send what waited this long anyway.
        self.max_hold_s = max_hold_s if max_hold_s is not None else max(30.0, 20 * self.window_s)
        self._headers: dict[str, str] = {}
        if api_key:
            register_secret(api_key)  # from here on, no message can carry it
            self._headers[api_key_header] = f"Bearer {api_key}" if api_key_header.lower() == "authorization" \
                else api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._journal: BatchJournal | None = None
        self._start_lock = asyncio.Lock()
        self._queue: dict[str, bytes] = {}  # custom_id -> JSONL line, not yet submitted
        self._queued_bytes = 0
        self._first_queued_at = 0.0
        self._added = asyncio.Event()
        self._waiting: dict[str, asyncio.Future[bytes]] = {}
        self._live_ids: set[str] = set()  # in a batch that has not finished
        self._orphaned: set[str] = set()  # in a live batch this run lost track of
        self._result_ids: set[str] = set()  # answered, in the journal
        self._tasks: set[asyncio.Task[None]] = set()
        self._collector: asyncio.Task[None] | None = None
        self.counts = {"submitted": 0, "reattached": 0, "in_progress": 0, "completed": 0, "failed": 0,
                       "expired": 0, "cancelled": 0, "requests_submitted": 0, "requests_in_progress": 0,
                       "requests_answered": 0, "requests_errored": 0, "requests_reused": 0}
        self.failures: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"base_url": redact_url(self.base_url), "model": self.model, **self.wire.identity()}

    @property
    def journal(self) -> BatchJournal:
        """The journal, open from the first call on (:meth:`_start`)."""
        if self._journal is None:
            raise RuntimeError("the batch journal is opened by the first call")
        return self._journal

    # -- the Backend protocol -------------------------------------------------------
    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        await self._start()
        body = request_body(request, self.model, self.wire)
        cid = custom_id(body)
        if cid in self._result_ids and cid not in self._waiting:
            raw = await self.journal.result(self.endpoint, cid)
            if raw is not None:
                self.counts["requests_reused"] += 1
                return self._response(raw, request), None
        if cid in self._orphaned:
            raise FatalError("request is in a batch this run could not follow; run the same command again",
                             kind="batch_unfollowed")
        fut = self._waiting.get(cid)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._waiting[cid] = fut
            if cid not in self._live_ids:  # already in a live batch (e.g. before a crash): wait for it
                line = orjson.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}) + b"\n"
                if not self._queue:
                    self._first_queued_at = time.monotonic()
                self._queue[cid] = line
                self._queued_bytes += len(line)
                self._added.set()
        raw = await asyncio.shield(fut)
        return self._response(raw, request), None

    def _response(self, raw: bytes, request: ChatRequest) -> ChatResponse:
        resp = parse_completion(raw, request)
        resp.batched = True
        return resp

    # -- start and re-attach --------------------------------------------------------
    async def _start(self) -> None:
        if self._collector is not None:
            return
        async with self._start_lock:
            if self._collector is not None:
                return
            self._journal = await BatchJournal.open(self.journal_path)
            self._result_ids = await self._journal.result_ids(self.endpoint)
            for local_id, batch_id, file_id, state, ids in await self._journal.live(self.endpoint):
                self._live_ids.update(ids)
                self.counts["reattached"] += 1
                self.counts["in_progress"] += 1
                self.counts["requests_in_progress"] += len(ids)
                self._spawn(self._follow(local_id, batch_id, file_id, ids, resume=True))
            self._collector = asyncio.create_task(self._collect(), name="batch-collector")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- collecting -----------------------------------------------------------------
    async def _collect(self) -> None:
        while True:
            await self._added.wait()
            while self._queue and len(self._queue) < self.max_requests and self._queued_bytes < self.max_bytes:
                self._added.clear()
                hold = self._first_queued_at + self.max_hold_s - time.monotonic()
                if hold <= 0:
                    break
                try:
                    await asyncio.wait_for(self._added.wait(), min(self.window_s, hold))
                except asyncio.TimeoutError:
                    break  # a quiet window: send what we have
            self._added.clear()
            while self._queue:  # everything that arrived before the window closed goes now
                ids: list[str] = []
                lines: list[bytes] = []
                size = 0
                for cid, line in self._queue.items():
                    if ids and (len(ids) >= self.max_requests or size + len(line) > self.max_bytes):
                        break
                    ids.append(cid)
                    lines.append(line)
                    size += len(line)
                for cid in ids:
                    del self._queue[cid]
                self._queued_bytes -= size
                self._live_ids.update(ids)
                self.counts["requests_in_progress"] += len(ids)
                self.counts["in_progress"] += 1
                self._spawn(self._submit(ids, b"".join(lines)))

    async def _submit(self, ids: list[str], content: bytes) -> None:
        local_id = uuid.uuid4().hex
        try:
            file_id = await self._retrying("upload", lambda: self._upload(content))
            await self.journal.record(local_id, self.endpoint, file_id, ids)  # durable before the batch exists
        except Exception as e:  # nothing was submitted: the requests may go again
            self._finish_ids(ids)
            self._note_failure(f"batch upload failed: {e}")
            self._fail(ids, e if isinstance(e, JudgeError) else TransientError(f"batch upload failed: {e}"))
            self.counts["in_progress"] -= 1
            self.counts["failed"] += 1
            return
        self.counts["submitted"] += 1
        self.counts["requests_submitted"] += len(ids)
        await self._follow(local_id, None, file_id, ids, resume=False)

    async def _follow(self, local_id: str, batch_id: str | None, file_id: str, ids: list[str], *,
                      resume: bool) -> None:
        """Create the batch if needed, wait for it, harvest it; never raises."""
        try:
            if batch_id is None:
                batch_id = await self._create_once(local_id, file_id, look_first=resume)
                await self.journal.set_state(local_id, "submitted", batch_id=batch_id)
            batch = await self._wait(batch_id)
            await self._harvest(local_id, batch, ids)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # The batch's fate is unknown (e.g. the endpoint stays unreachable). It stays
            # live in the journal and its requests are not submitted again in this run:
            # the next run re-attaches to it instead of paying twice.
            message = f"batch {batch_id or local_id} could not be followed ({e}); run the same command again " \
                      "to re-attach to it"
            self._orphaned.update(ids)
            self._note_failure(message)
            self._fail(ids, FatalError(message, kind="batch_unfollowed"))
            self.counts["in_progress"] -= 1

    async def _create_once(self, local_id: str, file_id: str, *, look_first: bool) -> str:
        """Create the batch for ``file_id``, or find the one an interrupted run created."""
        for attempt in range(6):
            if look_first or attempt:
                found = await self._find_batch(file_id)
                if found is not None:
                    return found
            try:
                return await self._create(file_id, local_id)
            except FatalError:
                raise
            except JudgeError as e:
                if e.kind in ENDPOINT_FAULTS:
                    raise
            except asyncio.TimeoutError:
                pass
            except aiohttp.ClientError as e:
                if classify_connection_error(e) in ENDPOINT_FAULTS:
                    raise TransientError(f"cannot reach {self.base_url}: {e}", kind=classify_connection_error(e)) \
                        from None
            await asyncio.sleep(min(30.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.5))
        raise TransientError("could not create the batch", kind="server_error")

    async def _wait(self, batch_id: str) -> dict[str, Any]:
        delay = self.poll_initial_s
        while True:
            batch = await self._retrying("poll", lambda: self._get(f"/batches/{batch_id}"))
            if batch.get("status") in _TERMINAL:
                return batch
            await asyncio.sleep(delay)
            delay = min(self.poll_max_s, delay * 1.5)

    async def _harvest(self, local_id: str, batch: dict[str, Any], ids: list[str]) -> None:
        status = batch.get("status", "failed")
        answers: list[tuple[str, bytes]] = []
        errors: dict[str, Exception] = {}
        if batch.get("output_file_id"):
            for line in await self._retrying("download", lambda: self._content(batch["output_file_id"])):
                cid, resp = line.get("custom_id"), line.get("response") or {}
                if resp.get("status_code") == 200 and isinstance(resp.get("body"), dict):
                    # the journal is a cache too: nothing the endpoint echoed of a key is kept
                    answers.append((cid, orjson.dumps(redact_any(resp["body"]))))
                else:
                    errors[cid] = self._line_error(line)
        if batch.get("error_file_id"):
            for line in await self._retrying("download", lambda: self._content(batch["error_file_id"])):
                errors[line.get("custom_id")] = self._line_error(line)
        detail = redact(_batch_errors(batch) or "") or None if status != "completed" else None
        await self.journal.harvest(local_id, self.endpoint, status, answers, detail)
        self._finish_ids(ids)
        self.counts["in_progress"] -= 1
        self.counts[status if status in self.counts else "failed"] += 1
        answered = set()
        for cid, body in answers:
            answered.add(cid)
            self._result_ids.add(cid)
            fut = self._waiting.pop(cid, None)
            if fut is not None and not fut.done():
                fut.set_result(body)
        self.counts["requests_answered"] += len(answers)
        missing = TransientError(f"batch {batch.get('id')} {status}" + (f": {detail}" if detail else ""),
                                 kind=UNFINISHED)
        rest = [cid for cid in ids if cid not in answered]
        self.counts["requests_errored"] += len(rest)
        if status != "completed":
            self._note_failure(f"batch {batch.get('id')} {status}: {len(rest)} of {len(ids)} requests unanswered"
                               + (f" ({detail})" if detail else ""))
        for cid in rest:
            fut = self._waiting.pop(cid, None)
            if fut is not None and not fut.done():
                fut.set_exception(errors.get(cid, missing))
                fut.exception()  # the waiter may be gone (cancelled run)

    def _line_error(self, line: dict[str, Any]) -> Exception:
        resp = line.get("response") or {}
        adapted = False
        if resp.get("status_code") == 400:  # e.g. "use max_completion_tokens": adapt once, retry
            adapted = self.wire.learn(400, orjson.dumps(resp.get("body") or {}))
        return _line_error(line, adapted=adapted)

    def _finish_ids(self, ids: list[str]) -> None:
        self._live_ids.difference_update(ids)
        self.counts["requests_in_progress"] -= len(ids)

    def _fail(self, ids: list[str], exc: Exception) -> None:
        for cid in ids:
            fut = self._waiting.pop(cid, None)
            if fut is not None and not fut.done():
                fut.set_exception(exc)
                fut.exception()

    def _note_failure(self, message: str) -> None:
        if len(self.failures) < 50:
            self.failures.append(redact(message))

    # -- HTTP -----------------------------------------------------------------------
    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        return self._session

    async def _checked(self, resp: aiohttp.ClientResponse, what: str) -> bytes:
        raw = await resp.read()
        if resp.status >= 400:  # classified like a synchronous call (auth, not_found, server_error, ...)
            raise status_error(resp.status, raw, f"{self.base_url} ({what})", None)
        return raw

    async def _upload(self, content: bytes) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content, filename="drscore-batch.jsonl", content_type="application/jsonl")
        async with self._get_session().post(self.base_url + "/files", data=form) as resp:
            obj = orjson.loads(await self._checked(resp, "upload"))
        return str(obj["id"])

    async def _create(self, file_id: str, local_id: str) -> str:
        payload = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h",
                   "metadata": {"drscore_batch": local_id}}
        async with self._get_session().post(self.base_url + "/batches", data=orjson.dumps(payload),
                                            headers={"Content-Type": "application/json"}) as resp:
            obj = orjson.loads(await self._checked(resp, "create batch"))
        return str(obj["id"])

    async def _get(self, path: str) -> dict[str, Any]:
        async with self._get_session().get(self.base_url + path) as resp:
            return orjson.loads(await self._checked(resp, f"GET {path}"))

    async def _content(self, file_id: str) -> list[dict[str, Any]]:
        async with self._get_session().get(f"{self.base_url}/files/{file_id}/content") as resp:
            raw = await self._checked(resp, f"download {file_id}")
        return [orjson.loads(line) for line in raw.splitlines() if line.strip()]

    async def _find_batch(self, file_id: str) -> str | None:
        """The batch created from ``file_id`` by an interrupted run, if any (newest first)."""
        after = None
        for _ in range(20):
            path = "/batches?limit=100" + (f"&after={after}" if after else "")
            page = await self._retrying("list batches", lambda: self._get(path))
            for b in page.get("data", []):
                if b.get("input_file_id") == file_id:
                    return str(b["id"])
            if not page.get("has_more") or not page.get("data"):
                return None
            after = page["data"][-1]["id"]
        return None

    async def _retrying(self, what: str, call: Any, attempts: int = 8) -> Any:
        """Provider calls other than batch creation: retried with backoff on network
        faults, 429 and 5xx (a poll must survive a flaky hour)."""
        for attempt in range(attempts):
            try:
                return await call()
            except FatalError:
                raise
            except JudgeError as e:  # 429 and 5xx: retry; an endpoint fault: at once to the pool
                if e.kind in ENDPOINT_FAULTS or attempt == attempts - 1:
                    raise
            except aiohttp.ClientError as e:
                kind = classify_connection_error(e)
                if kind in ENDPOINT_FAULTS or attempt == attempts - 1:
                    raise TransientError(f"{what}: cannot reach {self.base_url}: {type(e).__name__}",
                                         kind=kind) from None
            except (asyncio.TimeoutError, orjson.JSONDecodeError) as e:
                if attempt == attempts - 1:
                    raise TransientError(f"{what}: {type(e).__name__}: {e}", kind="timeout") from None
            await asyncio.sleep(min(60.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.5))
        raise TransientError(f"{what} failed", kind="server_error")

    # -- reporting and shutdown -------------------------------------------------------
    def batch_snapshot(self) -> dict[str, int]:
        """Live counts for the progress display."""
        return {**self.counts, "requests_queued": len(self._queue)}

    def batch_summary(self) -> dict[str, Any]:
        """What went through the Batch API in this run (for summary.json)."""
        return {**self.counts, "failures": list(self.failures)}

    async def close(self) -> None:
        tasks = [t for t in (self._collector, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._journal is not None:
            await self._journal.close()


def _line_error(line: dict[str, Any], *, adapted: bool = False) -> Exception:
    """The exception a request in an error file raises: retryable (5xx, 429, expired, or a
    400 the wire profile adapted to) unless a 4xx says the request itself is bad."""
    resp = line.get("response") or {}
    code = resp.get("status_code")
    err = line.get("error") or (resp.get("body") or {}).get("error") or {}
    message = err.get("message") if isinstance(err, dict) else str(err)
    text = f"batch request failed ({code or (err.get('code') if isinstance(err, dict) else '')}): {message}"
    if isinstance(code, int) and code >= 500:
        return TransientError(text, kind="server_error", status=code)
    if isinstance(code, int) and 400 <= code < 500 and code not in (408, 409, 429) and not adapted:
        return FatalError(text, kind="bad_request", status=code)
    return TransientError(text, kind=UNFINISHED, status=code if isinstance(code, int) else None)


def _batch_errors(batch: dict[str, Any]) -> str | None:
    errs = (batch.get("errors") or {}).get("data") or []
    if not errs:
        return None
    return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errs[:3])
