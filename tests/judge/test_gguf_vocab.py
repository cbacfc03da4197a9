"""Counting with a GGUF's vocabulary as llama.cpp tokenizes (judge/gguf_vocab.py): hand-made
vocabularies worked by hand, llama.cpp's own tokenizer tests on its real vocabulary files, and
the real llama-server's ``/tokenize`` on the bundled reports."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from drscore.judge.gguf_vocab import SPACE, GgufVocab, GgufVocabError, text_counter, vocab_from_metadata
from drscore.judge.local_llama import (
    LlamaServerMissing, LocalLlama, byte_pair_vocabulary, find_llama_vocab, gguf_metadata, write_tiny_gguf,
)
from support.llama import sample_texts

S = SPACE


def _spm(pieces: dict[str, float], *, prefix: bool | None = None, types: dict[str, int] | None = None) -> GgufVocab:
    tokens = ["<unk>", *pieces]
    return GgufVocab(model="llama", tokens=tokens, scores=[0.0, *pieces.values()], add_space_prefix=prefix,
                     types=None if types is None else [types.get(t, 1) for t in tokens])


def test_sentencepiece_merges_the_best_scored_pair_first_and_falls_back_to_bytes():
    vocab = _spm({S: -1, "a": -1, "b": -1, "c": -1, S + "a": 1, "ab": 3, S + "ab": 2, "bc": 4})
    count = text_counter(vocab)
    # " abc" -> ▁ a b c: "bc" (4) beats "ab" (3) and "▁a" (1), then ▁ a bc: "▁a" -> ▁a bc
    assert count("abc") == 2  # a space is put before the text (add_space_prefix by default)
    # " ab": ab (3) first, then ▁+ab = ▁ab (2): one token
    assert count("ab") == 1
    # é is no piece: its two UTF-8 bytes count one each; 报 three
    assert count("é") == 1 + 2 and count("报") == 1 + 3
    assert count("") == 0  # no text, no leading space either (llama.cpp's empty fragment list)
    assert text_counter(_spm({S: -1, "a": -1, "b": -1, "ab": 3, S + "ab": 2}, prefix=False))("ab") == 1


def test_a_tie_goes_to_the_leftmost_pair():
    # "aabb": "aa" (at 0) and "ab" (at 1) score the same. Leftmost first: aa|b|b, and "aab" is no
    # piece: 3 tokens. Had "ab" gone first, a|ab|b and then "abb" (5): 2 tokens.
    vocab = _spm({"a": -1, "b": -1, "aa": 2, "ab": 2, "abb": 5}, prefix=False)
    assert text_counter(vocab)("aabb") == 3


def test_words_are_merged_alone_only_where_no_piece_spans_a_word_start():
    joined = {S: -1, "a": -1, "b": -1, S + "a": 1, S + "b": 1, "a" + S + "b": 9}
    assert text_counter(_spm(joined, prefix=False))("a b") == 1  # the piece across the space is reached
    apart = {S: -1, "a": -1, "b": -1, S + "a": 1, S + "b": 1}
    assert text_counter(_spm(apart, prefix=False))("a b a b") == 4  # a ▁b ▁a ▁b


def test_user_defined_tokens_count_one_each_and_a_space_follows_them():
    vocab = _spm({S: -1, "a": -1, S + "a": 2, "<t>": 0}, types={"<t>": 4})
    # "<t>" is split out first; the text after it gets the leading space as at the start
    assert text_counter(vocab)("a<t>a") == 3  # ▁a <t> ▁a


def test_the_vocabulary_in_ollamas_show_answer_only_when_verbose():
    info = {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
            "tokenizer.ggml.tokens": ["a", "b", "ab"], "tokenizer.ggml.merges": ["a b"],
            "tokenizer.ggml.token_type": [1, 1, 1]}
    vocab = vocab_from_metadata(info)
    assert vocab is not None and vocab.model == "gpt2" and vocab.pre == "qwen2" and vocab.merges == ["a b"]
    assert vocab.exact
    # Ollama empties every array over five items unless verbose; a model imported from
    # safetensors shows no tokenizer at all
    assert vocab_from_metadata({**info, "tokenizer.ggml.tokens": []}) is None
    assert vocab_from_metadata({"general.architecture": "llama"}) is None
    assert not GgufVocab(model="gpt2", tokens=["a"], merges=[], pre="somebody-new").exact


def test_kinds_not_counted_here_are_named():
    with pytest.raises(GgufVocabError, match="'bert' vocabulary"):
        text_counter(GgufVocab(model="bert", tokens=["a"]))
    with pytest.raises(GgufVocabError, match="score"):
        text_counter(GgufVocab(model="llama", tokens=["a"]))


SUPPORTED = ("llama-spm", "phi-3", "llama-bpe", "qwen2", "qwen35", "gpt-2", "mpt", "starcoder", "refact",
             "command-r", "falcon", "deepseek-llm", "deepseek-coder")


def _counter(path: Path):
    vocab = vocab_from_metadata(gguf_metadata(path))
    assert vocab is not None
    return text_counter(vocab)


def _vocab_file(name: str) -> Path:
    try:
        return find_llama_vocab(name)
    except LlamaServerMissing as e:
        pytest.fail(str(e), pytrace=False)


@pytest.mark.parametrize("name", SUPPORTED)
def test_llama_cpps_own_tokenizer_tests_count_exactly(name):
    """llama.cpp's test-tokenizer-0 inputs (whitespace runs, emoji, Cyrillic, code, numbers) and
    the tokens llama.cpp gives them, for each real vocabulary it ships."""
    path = _vocab_file(name)
    texts = Path(f"{path}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    expected = Path(f"{path}.out").read_text(encoding="utf-8").split("\n")[:len(texts)]
    count = _counter(path)
    assert len(texts) >= 45
    assert [count(t) for t in texts] == [len(line.split()) for line in expected]


def test_vocabularies_of_other_kinds_are_refused_not_guessed():
    for name, kind in (("bert-bge", "bert"), ("gemma-4", "gemma4")):
        vocab = vocab_from_metadata(gguf_metadata(_vocab_file(name)))
        assert vocab is not None and vocab.model == kind
        with pytest.raises(GgufVocabError):
            text_counter(vocab)


def _tokens(server: LocalLlama, text: str) -> int:
    req = urllib.request.Request(server.root + "/tokenize", data=json.dumps({"content": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(json.loads(r.read())["tokens"])


def test_the_real_llama_server_counts_the_reports_as_the_tiny_models_vocabulary_does(llama_server, tiny_gguf,
                                                                                     tmp_path):
    texts = sample_texts()
    assert sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts) >= 5  # Chinese reports among them
    spm = _counter(tiny_gguf)
    assert [_tokens(llama_server, t) for t in texts] == [spm(t) for t in texts]
    # a byte-level BPE vocabulary (Llama 3's kind and pre-tokenizer) trained on the same texts
    tokens, merges = byte_pair_vocabulary(texts, size=4000)
    model = write_tiny_gguf(tmp_path / "bpe.gguf", texts, context=4096, byte_pairs=(tokens, merges, "llama-bpe"))
    bpe = _counter(model)
    server = LocalLlama(model, context=4096, slots=1, alias="tiny-bpe")
    try:
        server.start()
    except LlamaServerMissing as e:
        pytest.fail(str(e), pytrace=False)
    try:
        assert [_tokens(server, t) for t in texts] == [bpe(t) for t in texts]
    finally:
        server.stop()
