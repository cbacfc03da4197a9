"""Counting a prompt with the vocabulary inside a GGUF model, the way llama.cpp tokenizes it.

Ollama has no count route, but it carries the model's own tokenizer: ``POST /api/show`` with
``"verbose": true`` returns the GGUF's metadata whole (``model_info``), and with it
``tokenizer.ggml.model``, ``.tokens``, ``.token_type``, ``.scores`` or ``.merges``, and
``.pre`` (without ``verbose`` those arrays come back empty). Ollama's runners tokenize with
llama.cpp's rules for that vocabulary, so the same rules here count a prompt as the server
will, but for the chat template's tokens, which the pool learns from the usage
(:class:`~drscore.engine.runtime.calls.prompt_counts.CountDrift`), as for ``--tokenizer``.

Two kinds of vocabulary cover the models Ollama serves:

* ``llama`` (sentencepiece: Llama 2, Mistral 7B, Gemma 2 and 3): spaces become ``▁`` (and
  one leads the text where ``add_space_prefix`` is on, the default), then the adjacent pair
  whose joined text is a token of the highest score is merged, the leftmost on a tie, until
  no pair is a token; a character no token holds is its UTF-8 bytes. Written here as
  llama.cpp's ``llm_tokenizer_spm_session`` does it, word by word where no token spans a
  word's start (each word then merges alone), each distinct word counted once.
* ``gpt2`` (byte-level BPE: Llama 3, Qwen 2 and 3, Phi, Mistral's Tekken): the text is split by
  the pre-tokenizer's expressions that ``tokenizer.ggml.pre`` names, each piece's bytes are
  merged by the rank of ``merges``, by the ``tokenizers`` library. The expressions are
  llama.cpp's (``llama-vocab.cpp``); a ``pre`` not listed here is split as Llama 3's, and the
  counter says it is approximate.

Tokens marked user-defined (type 4) are split out of the text first and count one each, as
llama.cpp does whether or not special tokens are parsed.
"""
from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

SPACE = "\u2581"  # sentencepiece's visible space
USER_DEFINED = 4  # llama.cpp's LLAMA_TOKEN_TYPE_USER_DEFINED

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
           r"|\s+(?!\S)|\s+")
_GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" + _CONTRACTIONS + "?"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*" + _CONTRACTIONS + "?"
          r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
           r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
           r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# tokenizer.ggml.pre -> (the expressions applied one after another, whether a piece that is a
# token whole skips the merges): llama-vocab.cpp's table for the families Ollama serves
_SPLITS: dict[str, tuple[tuple[str, ...], bool]] = {}
for _names, _exprs, _whole in (
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "lfm2"), (_LLAMA3,), True),
    (("dbrx", "smaug-bpe", "chatglm-bpe"), (_LLAMA3,), False),
    (("glm4", "glm5"), (_LLAMA3,), True),
    (("qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez"), (_QWEN2,), False),
    (("qwen35",), (_QWEN35,), False),
    (("gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "roberta-bpe"), (_GPT2,), False),
    (("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"),
     (r"\p{N}", _GPT2), False),
    (("gpt-4o", "llama4"), (_GPT4O,), False),
    (("tekken",), (_TEKKEN,), True),
    (("default",), (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"), False),
    (("falcon",), (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"), False),
):
    for _name in _names:
        _SPLITS[_name] = (_exprs, _whole)
_UNLISTED = ((_LLAMA3,), False)


class GgufVocabError(ValueError):
    """A vocabulary these rules cannot count with (its kind, or arrays that disagree)."""


class GgufVocab(msgspec.Struct, frozen=True):
    """A GGUF's tokenizer, as its metadata holds it."""

    model: str  # tokenizer.ggml.model: "llama" (sentencepiece) or "gpt2" (byte-level BPE)
    tokens: list[str]
    types: list[int] | None = None
    scores: list[float] | None = None
    merges: list[str] | None = None
    pre: str = "default"
    add_space_prefix: bool | None = None

    @property
    def kind(self) -> str:
        """What the vocabulary is, in words: ``sentencepiece`` or ``byte-level BPE``."""
        return {"llama": "sentencepiece", "gpt2": "byte-level BPE"}.get(self.model, self.model)

    @property
    def exact(self) -> bool:
        """Whether llama.cpp's rules for this vocabulary are all written here."""
        return self.model == "llama" or self.pre in _SPLITS


def vocab_from_metadata(info: Any) -> GgufVocab | None:
    """The vocabulary in a GGUF's metadata (Ollama's ``model_info``, keyed as in the file);
    None where its arrays are missing or empty (``/api/show`` without ``verbose``)."""
    if not isinstance(info, Mapping):
        return None
    model, tokens = info.get("tokenizer.ggml.model"), info.get("tokenizer.ggml.tokens")
    if not isinstance(model, str) or not isinstance(tokens, list) or not tokens \
            or not all(isinstance(t, str) for t in tokens):
        return None

    def array(key: str, kind: type | tuple[type, ...]) -> list[Any] | None:
        value = info.get(key)
        ok = isinstance(value, list) and len(value) > 0 and all(isinstance(v, kind) for v in value)
        return value if ok else None

    pre = info.get("tokenizer.ggml.pre")
    prefix = info.get("tokenizer.ggml.add_space_prefix")
    return GgufVocab(model=model, tokens=tokens, types=array("tokenizer.ggml.token_type", int),
                     scores=array("tokenizer.ggml.scores", (int, float)), merges=array("tokenizer.ggml.merges", str),
                     pre=pre if isinstance(pre, str) else "default",
                     add_space_prefix=prefix if isinstance(prefix, bool) else None)


def _user_defined(vocab: GgufVocab) -> re.Pattern[str] | None:
    """The user-defined tokens, longest first (the first that matches wins, as in llama.cpp)."""
    if vocab.types is None:
        return None
    found = sorted({t for t, k in zip(vocab.tokens, vocab.types) if k == USER_DEFINED and t}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, found))) if found else None


def _fragments(text: str, special: re.Pattern[str] | None) -> list[tuple[str, bool]]:
    """``text`` as (fragment, is a user-defined token) in order."""
    if special is None:
        return [(text, False)]
    out: list[tuple[str, bool]] = []
    at = 0
    for m in special.finditer(text):
        if m.start() > at:
            out.append((text[at:m.start()], False))
        out.append((m.group(), True))
        at = m.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


class _Sentencepiece:
    """llama.cpp's merge-by-score tokenizer, counting."""

    CACHED_WORDS = 200_000

    def __init__(self, vocab: GgufVocab) -> None:
        if vocab.scores is None or len(vocab.scores) != len(vocab.tokens):
            raise GgufVocabError("a sentencepiece vocabulary without a score for each token")
        self.score = {t: float(s) for t, s in zip(vocab.tokens, vocab.scores)}  # a repeated token: the last wins
        self.prefix = vocab.add_space_prefix is not False  # on unless the file says otherwise
        self.special = _user_defined(vocab)
        # Where no token joins a character to a following space, no merge crosses a word's start:
        # each word merges alone and the same result, so each distinct word is counted once.
        self.by_word = not any(re.search(f"[^{SPACE}]{SPACE}", t) for t in vocab.tokens)
        self._words: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:  # no fragment at all: not even the leading space
            return 0
        total, after_special = 0, True
        for fragment, is_token in _fragments(text, self.special):
            if is_token:
                total += 1
                after_special = True
                continue
            piece = ((" " if self.prefix and after_special else "") + fragment).replace(" ", SPACE)
            after_special = False
            if not self.by_word:
                total += self._merged(piece)
                continue
            for word in re.split(f"(?<=[^{SPACE}])(?={SPACE})", piece):
                n = self._words.get(word)
                if n is None:
                    if len(self._words) >= self.CACHED_WORDS:
                        self._words.clear()
                    n = self._words[word] = self._merged(word)
                total += n
        return total

    def _merged(self, text: str) -> int:
        """Tokens of ``text`` (spaces already ``▁``) after llama.cpp's merges."""
        n = len(text)
        if n == 0:
            return 0
        sym = list(text)  # each symbol's text; "" once merged into its left neighbour
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        score = self.score
        heap: list[tuple[float, int, int, int]] = []

        def pair(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            joined = sym[left] + sym[right]
            s = score.get(joined)
            if s is not None:  # the highest score first, then the leftmost
                heapq.heappush(heap, (-s, left, right, len(joined)))

        for i in range(1, n):
            pair(i - 1, i)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if not sym[left] or not sym[right] or len(sym[left]) + len(sym[right]) != size:
                continue  # one side changed since this pair was queued
            sym[left] += sym[right]
            sym[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            pair(prev[left], left)
            pair(left, nxt[left])
        total, i = 0, 0
        while i != -1:
            # a merged symbol is a token; a lone character that is none falls back to its bytes
            total += 1 if sym[i] in score else len(sym[i].encode("utf-8"))
            i = nxt[i]
        return total


class _BytePairs:
    """llama.cpp's byte-level BPE (merges by rank), through the tokenizers library."""

    def __init__(self, vocab: GgufVocab) -> None:
        if vocab.merges is None:
            raise GgufVocabError("a byte-level BPE vocabulary without its merges")
        try:
            from tokenizers import Regex, Tokenizer, models, pre_tokenizers
        except ImportError:
            raise GgufVocabError("counting with a BPE vocabulary needs tokenizers: pip install 'drscore[tokenizer]'") \
                from None
        exprs, whole = _SPLITS.get(vocab.pre, _UNLISTED)
        ids: dict[str, int] = {}
        for i, t in enumerate(vocab.tokens):
            ids[t] = i
        pairs: list[tuple[str, str]] = []
        for m in vocab.merges:
            cut = m.find(" ", 1)  # llama.cpp's split: the first space after the first character
            if cut < 0:
                raise GgufVocabError(f"a merge without a space: {m[:40]!r}")
            pairs.append((m[:cut], m[cut + 1:]))
        try:
            tokenizer = Tokenizer(models.BPE(vocab=ids, merges=pairs, ignore_merges=whole))
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(e), behavior="isolated") for e in exprs]
                + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        except Exception as e:  # the library's own error: merges naming tokens the vocabulary lacks
            raise GgufVocabError(f"the tokenizers library refused this vocabulary: {str(e)[:200]}") from None
        self._tokenizer = tokenizer
        self.special = _user_defined(vocab)

    def count(self, text: str) -> int:
        return sum(1 if is_token else len(self._tokenizer.encode(fragment, add_special_tokens=False).ids)
                   for fragment, is_token in _fragments(text, self.special))


def text_counter(vocab: GgufVocab) -> Callable[[str], int]:
    """A function counting a text's tokens with ``vocab`` (no BOS, no template), as llama.cpp's
    ``/tokenize`` would; :class:`GgufVocabError` for a kind other than ``llama`` or ``gpt2``."""
    if vocab.model == "llama":
        return _Sentencepiece(vocab).count
    if vocab.model == "gpt2":
        return _BytePairs(vocab).count
    raise GgufVocabError(f"a {vocab.model!r} vocabulary (counted here: 'llama' and 'gpt2')")
