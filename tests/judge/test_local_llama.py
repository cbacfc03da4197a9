"""The tiny model and the server launchers of judge/local_llama.py."""
from __future__ import annotations

import json
import urllib.request

import numpy as np

from drscore.judge.local_llama import SPACE, tokenizer_pieces, write_tiny_gguf


def test_the_vocabulary_reaches_every_frequent_word_one_character_at_a_time():
    pieces = dict(tokenizer_pieces(["the report the report finds", "报告"], words=2))
    for word in ("the", "report"):
        prefixes = [SPACE + word[:k] for k in range(1, len(word) + 1)]
        assert all(p in pieces for p in prefixes)
        assert [pieces[p] for p in prefixes] == sorted(pieces[p] for p in prefixes)  # longer scores higher
    assert "报" in pieces and "告" in pieces  # every character seen is a piece of its own
    assert SPACE + "finds" not in pieces  # beyond the 2 most frequent words


def test_the_gguf_is_a_tiny_llama_whose_output_prefers_closing_tokens(tmp_path):
    import gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", ["the report finds that the report"], context=1024, embd=32)
    reader = gguf.GGUFReader(str(path))
    fields = {f.name: f for f in reader.fields.values()}
    arch = bytes(fields["general.architecture"].parts[-1]).decode()
    assert arch == "llama"
    assert int(fields["llama.context_length"].parts[-1][0]) == 1024
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in fields["tokenizer.ggml.tokens"].data]
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and "<0x41>" in tokens and SPACE + "report" in tokens
    out = next(t for t in reader.tensors if t.name == "output.weight")
    weights = np.asarray(out.data).reshape(len(tokens), 32)
    quote, digit = tokens.index('"'), tokens.index("7")
    assert weights[2, 0] > weights[quote, 0] > weights[tokens.index("0"), 0] > weights[digit, 0] == 0.0


def test_llama_server_serves_the_model_with_the_tokenizer_built_here(llama_server):
    req = urllib.request.Request(llama_server.root + "/tokenize", data=json.dumps({"content": " the report"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        tokens = json.loads(r.read())["tokens"]
    assert len(tokens) == 2  # whole words: "▁the", "▁report"
    with urllib.request.urlopen(llama_server.url + "/models", timeout=30) as r:
        listed = json.loads(r.read())
    assert listed["data"][0]["owned_by"] == "llamacpp"
