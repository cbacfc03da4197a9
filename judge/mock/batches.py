"""The OpenAI Files + Batches API, as the mock judge serves it.

Endpoints: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}``
and ``/v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches`` (newest
first, ``limit``/``after``), ``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``.

A created batch is ``validating`` (the input is checked line by line: ``custom_id``,
``method`` POST, ``url`` equal to the batch endpoint, unique ids, a JSON body), then
``in_progress`` for ``batch_delay`` seconds, then answered line by line through the same
code as a synchronous call (schema-valid answer, fault draws, prefix cache) and
``completed``, with an output file (status 200 lines) and an error file (the rest).
The first ``batch_expire_first`` batches expire instead: every request goes to the
error file with code ``batch_expired``, as a provider reports requests it did not reach
within the window. Batches never touch the RPM/TPM quota.

``/stats`` gains ``batch_*`` counters; ``batch_resubmitted`` counts requests (by the
hash of their body) submitted in a batch while already part of an earlier batch that
did not fail, expire or get cancelled: requests paid or queued twice.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Callable

import msgspec
import orjson
from aiohttp import web

_JSON = "application/json"
MAX_REQUESTS = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024
_TERMINAL = {"completed", "failed", "expired", "cancelled"}

# answer(payload) -> (status_code, body object) for one batch line
Answerer = Callable[[Any], tuple[int, dict[str, Any]]]


class BatchStats(msgspec.Struct, kw_only=True):
    batch_files: int = 0
    batches_created: int = 0
    batches_completed: int = 0
    batches_expired: int = 0
    batches_failed: int = 0
    batches_cancelled: int = 0
    batch_requests: int = 0  # lines submitted in created batches
    batch_answered: int = 0  # lines answered with status 200
    batch_errors: int = 0  # lines in error files
    batch_resubmitted: int = 0  # lines already part of a live or completed batch
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batch_cached_tokens: int = 0


def _error(status: int, message: str, type_: str = "invalid_request_error") -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": None, "code": None}}
    return web.Response(status=status, body=orjson.dumps(body), content_type=_JSON)


class MockBatches:
    """State and handlers of the Files + Batches endpoints."""

    def __init__(self, answer: Answerer, *, delay_s: float = 1.0, expire_first: int = 0) -> None:
        self.answer, self.delay_s, self.expire_first = answer, delay_s, expire_first
        self._ids = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        self.stats = BatchStats()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, list[str | None]] = {}  # batch id -> request hashes (None: a bad request)
        self._live: dict[str, int] = {}  # request hash -> batches (not failed/expired/cancelled) holding it
        self._tasks: set[asyncio.Task[None]] = set()
        self._created = 0

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/files", self.upload)
            app.router.add_get(f"{prefix}/files/{{file_id}}", self.file_meta)
            app.router.add_get(f"{prefix}/files/{{file_id}}/content", self.file_content)
            app.router.add_post(f"{prefix}/batches", self.create)
            app.router.add_get(f"{prefix}/batches", self.list)
            app.router.add_get(f"{prefix}/batches/{{batch_id}}", self.retrieve)
            app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", self.cancel)

    # -- files ----------------------------------------------------------------------
    def _store_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        fid = f"file-{next(self._ids):08d}"
        meta = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": filename, "purpose": purpose, "status": "processed"}
        self.files[fid] = meta
        self.contents[fid] = content
        return meta

    async def upload(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            return _error(400, "upload a file as multipart/form-data with fields 'purpose' and 'file'")
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch":
            return _error(400, f"purpose must be 'batch', got {purpose!r}")
        if not isinstance(upload, web.FileField):
            return _error(400, "missing multipart field 'file'")
        content = upload.file.read()
        if len(content) > MAX_FILE_BYTES:
            return _error(400, f"file is {len(content)} bytes; the limit is {MAX_FILE_BYTES}")
        self.stats.batch_files += 1
        meta = self._store_file(content, upload.filename or "input.jsonl", "batch")
        return web.Response(body=orjson.dumps(meta), content_type=_JSON)

    async def file_meta(self, request: web.Request) -> web.Response:
        meta = self.files.get(request.match_info["file_id"])
        if meta is None:
            return _error(404, "no such file")
        return web.Response(body=orjson.dumps(meta), content_type=_JSON)

    async def file_content(self, request: web.Request) -> web.Response:
        content = self.contents.get(request.match_info["file_id"])
        if content is None:
            return _error(404, "no such file")
        return web.Response(body=content, content_type="application/octet-stream")

    # -- batches --------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        fid, endpoint = body.get("input_file_id"), body.get("endpoint")
        if fid not in self.contents:
            return _error(400, f"no such input file {fid!r}")
        if endpoint not in ("/v1/chat/completions",):
            return _error(400, f"unsupported endpoint {endpoint!r}; the mock serves /v1/chat/completions")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or len(metadata) > 16:
            return _error(400, "metadata must be an object with at most 16 keys")
        bid = f"batch_{next(self._ids):08d}"
        now = int(time.time())
        batch = {"id": bid, "object": "batch", "endpoint": endpoint, "errors": None, "input_file_id": fid,
                 "completion_window": "24h", "status": "validating", "output_file_id": None,
                 "error_file_id": None, "created_at": now, "in_progress_at": None, "expires_at": now + 86_400,
                 "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
                 "cancelling_at": None, "cancelled_at": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": metadata}
        self.batches[bid] = batch
        self._created += 1
        self.stats.batches_created += 1
        expire = self._created <= self.expire_first
        task = asyncio.create_task(self._run(batch, self.contents[fid], expire))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.Response(body=orjson.dumps(batch), content_type=_JSON)

    async def list(self, request: web.Request) -> web.Response:
        try:
            limit = max(1, min(100, int(request.query.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit must be an integer")
        ordered = sorted(self.batches.values(), key=lambda b: b["id"], reverse=True)  # ids grow: newest first
        after = request.query.get("after")
        if after:
            ordered = [b for b in ordered if b["id"] < after]
        page = ordered[:limit]
        out = {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
               "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > limit}
        return web.Response(body=orjson.dumps(out), content_type=_JSON)

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        return web.Response(body=orjson.dumps(batch), content_type=_JSON)

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        if batch["status"] not in _TERMINAL:
            batch.update(status="cancelled", cancelling_at=int(time.time()), cancelled_at=int(time.time()))
            self.stats.batches_cancelled += 1
            self._release(batch["id"])
        return web.Response(body=orjson.dumps(batch), content_type=_JSON)

    def _release(self, bid: str) -> None:
        """A failed, expired or cancelled batch no longer holds its requests."""
        self._release_keys(k for k in self._keys.pop(bid, []) if k is not None)

    def _release_keys(self, keys: Any) -> None:
        for key in keys:
            n = self._live.get(key, 0) - 1
            if n > 0:
                self._live[key] = n
            else:
                self._live.pop(key, None)

    def _fail(self, batch: dict[str, Any], message: str, line: int | None = None) -> None:
        batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
            {"code": "invalid_input", "message": message, "param": None, "line": line}]})
        self.stats.batches_failed += 1
        self._release(batch["id"])

    async def _run(self, batch: dict[str, Any], content: bytes, expire: bool) -> None:
        from drscore.judge.mock.completions import BadRequest, prepare

        lines: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for n, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return self._fail(batch, "line is not valid JSON", n)
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            if not isinstance(cid, str) or not cid:
                return self._fail(batch, "missing custom_id", n)
            if cid in seen:
                return self._fail(batch, f"duplicate custom_id {cid!r}", n)
            if obj.get("method") != "POST" or obj.get("url") != batch["endpoint"]:
                return self._fail(batch, "method must be POST and url the batch endpoint", n)
            if not isinstance(obj.get("body"), dict):
                return self._fail(batch, "body must be an object", n)
            seen.add(cid)
            lines.append((cid, obj["body"]))
        if not lines:
            return self._fail(batch, "the input file has no requests")
        if len(lines) > MAX_REQUESTS:
            return self._fail(batch, f"{len(lines)} requests; the limit is {MAX_REQUESTS}")
        keys: list[str | None] = []
        for _, body in lines:
            try:
                key = prepare(body).key
            except BadRequest:
                keys.append(None)  # answered with a 400 line later
                continue
            keys.append(key)
            if self._live.get(key, 0) > 0:
                self.stats.batch_resubmitted += 1
            self._live[key] = self._live.get(key, 0) + 1
        self._keys[batch["id"]] = keys
        self.stats.batch_requests += len(lines)
        batch.update(status="in_progress", in_progress_at=int(time.time()))
        batch["request_counts"]["total"] = len(lines)
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        if batch["status"] != "in_progress":  # cancelled meanwhile
            return
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        for i, (cid, body) in enumerate(lines):
            if expire:
                err.append({"id": f"batch_req_{batch['id']}_{i}", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired",
                                      "message": "This request could not be executed before the completion window expired."}})
                continue
            status, answer = self.answer(body)
            line = {"id": f"batch_req_{batch['id']}_{i}", "custom_id": cid,
                    "response": {"status_code": status, "request_id": f"req_{i}", "body": answer}, "error": None}
            if status == 200:
                usage = answer.get("usage", {})
                self.stats.batch_prompt_tokens += usage.get("prompt_tokens", 0)
                self.stats.batch_completion_tokens += usage.get("completion_tokens", 0)
                self.stats.batch_cached_tokens += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                out.append(line)
            else:
                err.append(line)
                if keys[i] is not None:  # an errored request may be retried: it was not paid
                    self._release_keys([keys[i]])
                    keys[i] = None
            if i % 200 == 199:
                await asyncio.sleep(0)  # keep the server responsive during a large batch
        now = int(time.time())
        batch["request_counts"].update(completed=len(out), failed=len(err))
        if out:
            batch["output_file_id"] = self._store_file(b"".join(orjson.dumps(x) + b"\n" for x in out),
                                                       f"{batch['id']}_output.jsonl", "batch_output")["id"]
        if err:
            batch["error_file_id"] = self._store_file(b"".join(orjson.dumps(x) + b"\n" for x in err),
                                                      f"{batch['id']}_error.jsonl", "batch_output")["id"]
        self.stats.batch_answered += len(out)
        self.stats.batch_errors += len(err)
        if expire:
            batch.update(status="expired", expired_at=now)
            self.stats.batches_expired += 1
            self._release(batch["id"])
        else:
            batch.update(status="completed", finalizing_at=now, completed_at=now)
            self.stats.batches_completed += 1

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
