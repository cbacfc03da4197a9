"""A streamed chat completion folded back into one completion body (judge/sse.py)."""
from __future__ import annotations

import orjson
import pytest

from drscore.engine.runtime.calls.judging import TransientError
from drscore.judge.sse import fold_events


async def _lines(*lines: bytes):
    for line in lines:
        yield line


def _event(obj) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n"


def _delta(delta, finish=None, model="m-1"):
    return _event({"object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


async def test_the_deltas_the_finish_reason_and_the_usage_chunk_make_one_body():
    body = orjson.loads(await fold_events(_lines(
        b": keep-alive\n", b"\n",
        _delta({"role": "assistant", "content": ""}),
        _delta({"reasoning_content": "weigh "}), _delta({"reasoning": "it"}),  # vLLM's and gateways' names
        _delta({"content": '{"score": '}), b"\n", _delta({"content": "3}"}),
        _event({"object": "chat.completion.chunk", "choices": [], "usage": None}),  # a gateway's empty usage
        _delta({}, finish="stop"),
        _event({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}),
        b"data: [DONE]\n",
        _delta({"content": "after the end"}),  # never read
    )))
    assert body["model"] == "m-1"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": '{"score": 3}',
                                             "reasoning_content": "weigh it"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


async def test_a_stream_cut_short_keeps_what_arrived_without_usage_or_finish_reason():
    body = orjson.loads(await fold_events(_lines(_delta({"content": "part"}))))
    assert body["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "part"},
                                  "finish_reason": None}
    assert "usage" not in body  # the parser then estimates it, and says so


async def test_an_error_event_or_an_unreadable_one_fails_the_call():
    with pytest.raises(TransientError) as e:
        await fold_events(_lines(_delta({"content": "x"}), _event({"error": {"message": "overloaded"}})))
    assert e.value.kind == "server_error" and "overloaded" in str(e.value)
    with pytest.raises(TransientError) as e:
        await fold_events(_lines(b"data: {not json\n"))
    assert e.value.kind == "bad_response"


async def test_events_split_anywhere_across_chunks_read_the_same():
    stream = b"".join([_delta({"content": "x" * 200_000}), b"\r\n", _delta({}, finish="stop"),
                       _event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}})])
    whole = orjson.loads(await fold_events(_lines(stream)))
    pieces = orjson.loads(await fold_events(_lines(*(stream[i:i + 7] for i in range(0, len(stream), 7)))))
    assert whole == pieces and len(whole["choices"][0]["message"]["content"]) == 200_000
    assert whole["usage"]["completion_tokens"] == 2 and whole["choices"][0]["finish_reason"] == "stop"
