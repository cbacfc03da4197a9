"""Calls large against the token bucket an endpoint announced are streamed, so the limiter
takes the server's count of each when the server admits it, not a whole answer later; in a
bucket that holds many calls only the preflight is streamed. Either way the answers are the same."""
from __future__ import annotations

from drscore.engine.runtime.calls.pool import STREAM_BELOW_CALLS
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.quality_run import quality_scores as _scores


async def test_calls_large_against_the_announced_token_bucket_are_streamed(tmp_path):
    # 240,000 tokens a minute in a one-second bucket: 4,000 tokens, fewer than STREAM_BELOW_CALLS
    # of the example reports' quality calls (3,700-8,500 tokens each by the character rule, about
    # half that as the mock counts, and as the estimates learn after the first answer)
    assert STREAM_BELOW_CALLS == 4
    with MockServerProcess(MockConfig(profile="openai", tpm=240_000, latency=0.2)) as mock:
        small_bucket = await _scores(mock.url, tmp_path / "small")
        small = mock.stats()
    # a bucket of a million tokens holds dozens of them: only the preflight is streamed
    with MockServerProcess(MockConfig(profile="openai", tpm=60_000_000, latency=0.2)) as mock:
        large_bucket = await _scores(mock.url, tmp_path / "large")
        large = mock.stats()
    assert small["ok"] == large["ok"] == 6 and small["rate_limited"] == large["rate_limited"] == 0
    assert small["streamed"] == 6 and large["streamed"] == 1
    assert small_bucket == large_bucket and len(small_bucket) == 6 and None not in small_bucket.values()
    # the server's own count of every call, read from the streams' usage, is what was charged
    assert small["prompt_tokens"] == large["prompt_tokens"]


async def test_a_stream_without_its_usage_ends_the_streaming(tmp_path):
    # The mock behind a proxy that drops the usage chunk from every stream (an endpoint that
    # ignores stream_options): the preflight's answer comes without its usage, so no other call
    # is streamed, and every other call's usage is the server's count, not an estimate.
    import aiohttp
    from aiohttp import web

    from support.serve import serve

    with MockServerProcess(MockConfig(profile="openai", tpm=240_000, latency=0.2)) as mock:
        async def relay(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            async with aiohttp.ClientSession() as session, session.post(
                    f"{mock.url}/chat/completions", data=body, headers={"Content-Type": "application/json"}) as up:
                quota = {k: v for k, v in up.headers.items() if k.lower().startswith("x-ratelimit")}
                if up.content_type != "text/event-stream":
                    return web.Response(status=up.status, body=await up.read(), headers=quota,
                                        content_type=up.content_type)
                out = web.StreamResponse(status=up.status, headers={**quota, "Content-Type": "text/event-stream"})
                await out.prepare(request)
                async for line in up.content:
                    if b'"usage"' not in line or b'"choices":[]' not in line.replace(b" ", b""):
                        await out.write(line)
                await out.write_eof()
                return out

        app = web.Application()
        app.router.add_post("/v1/chat/completions", relay)
        runner, base = await serve(app)
        try:
            scores = await _scores(f"{base}/v1", tmp_path / "run")
        finally:
            await runner.cleanup()
        stats = mock.stats()
    assert stats["ok"] == 6 and stats["streamed"] == 1 and len(scores) == 6 and None not in scores.values()
