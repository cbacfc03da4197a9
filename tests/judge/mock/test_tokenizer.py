"""The mock judge's token counting: its own word rule, or GPT-4's cl100k byte-pair encoding
(a real tokenizer, for benchmarks that compare an estimate with a real count)."""
from __future__ import annotations

import aiohttp
import orjson
import pytest

from drscore.judge.mock.server import MockConfig, start
from drscore.judge.mock.tokenizer import counter


def test_cl100k_counts_as_gpt4s_tokenizer_does():
    count = counter("cl100k")
    # cl100k_base: "Hello" "," " world" "!" (ids 9906, 11, 1917, 0)
    assert count("Hello, world!") == 4
    # Chinese is several tokens a sentence, where the word rule sees one run of word characters
    assert count("你好世界") > 1 and counter("words")("你好世界") == 1


def test_an_unknown_tokenizer_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="words, cl100k"):
        MockConfig(tokenizer="gpt2")


async def test_usage_follows_the_configured_tokenizer():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hello, world! 你好世界"}], "max_tokens": 50}
    counts = {}
    for name in ("words", "cl100k"):
        runner, port = await start(MockConfig(tokenizer=name), "127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as s, s.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                                            data=orjson.dumps(body)) as r:
                counts[name] = (await r.json())["usage"]["prompt_tokens"]
        finally:
            await runner.cleanup()
    # words: Hello , world ! 你好世界 = 5; cl100k: ids 9906 11 1917 0 220 57668 53901 3574 244 98220 = 10
    # (the four characters take 5); both add 3 a message
    assert counts == {"words": 5 + 3, "cl100k": 10 + 3}
