"""Prompts counted on this machine with the model's tokenizer (``--tokenizer``)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from drscore.engine.runtime.calls.judging import ChatRequest
from drscore.judge.local_tokenizer import LocalTokenizer, TokenizerError, load_counter


def _request(*messages: tuple[str, str]) -> ChatRequest:
    return ChatRequest(messages=tuple({"role": r, "content": c} for r, c in messages), template="t",
                       template_hash="h", schema_name="s", schema={})


def test_a_prompt_counts_its_texts_and_the_chat_formats_overhead():
    counter = LocalTokenizer("tiktoken:cl100k_base")
    # cl100k: "Score it." is Score / " it" / "." and "hello world" is hello / " world"; 3 tokens
    # a message and 3 for the reply's opening: 3 + 2 + 2 x 3 + 3 = 14
    req = _request(("system", "Score it."), ("user", "hello world"))
    assert counter.count_messages(req.messages) == 14
    # parts of a message count by their text
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}]
    assert counter.count_messages([{"role": "user", "content": parts}]) == 2 + 3 + 3
    assert counter.counted_by == "tiktoken:cl100k_base"


async def test_counting_runs_on_a_worker_thread_not_the_event_loop():
    counter = LocalTokenizer("tiktoken:cl100k_base")
    threads: list[int] = []
    count = counter._count

    def spy(text: str) -> int:
        threads.append(threading.get_ident())
        return count(text)

    counter._count = spy
    req = _request(("system", "Score it."), ("user", "hello world"))
    assert await counter.count_prompt(req) == 14
    assert threads and threading.get_ident() not in threads
    # many at once all come back, each counted
    assert await asyncio.gather(*(counter.count_prompt(req) for _ in range(8))) == [14] * 8


@pytest.mark.parametrize("spec, says", [
    ("cl100k_base", "expected tiktoken:ENCODING"),
    ("sentencepiece:foo", "expected tiktoken:ENCODING"),
    ("tiktoken:", "expected tiktoken:ENCODING"),
    ("tiktoken:no_such_encoding", "Encodings: "),
])
def test_a_spec_that_names_no_tokenizer_is_refused_naming_the_option(spec, says):
    with pytest.raises(TokenizerError) as e:
        load_counter(spec)
    assert "--tokenizer" in str(e.value) and says in str(e.value)
    if spec.endswith("no_such_encoding"):
        assert "cl100k_base" in str(e.value)  # the encodings it could have named
