"""Real local OpenAI-compatible servers for tests, benches and the profile recorder.

Two servers nobody on this project wrote, so drscore meets what real endpoints do rather
than what our mock says they do:

* **llama-server**, llama.cpp's own C++ server (what most local set-ups run, and what
  Ollama is built on): several parallel slots, a context window per slot.
* **llama-cpp-python's server** (``python -m llama_cpp.server``): one request at a time,
  pydantic validation answered as HTTP 500, its own JSON mode.

``scripts/install-llama-servers`` builds both from the llama-cpp-python source
distribution into a cache outside the repository (one compile of llama.cpp: the Python
server's bindings load the libllama built with llama-server); :func:`find_llama_server`
and :func:`find_llama_cpp_python` find the result (or say how to get it).

The model is made here, not downloaded: :func:`write_tiny_gguf` writes a tiny
llama-architecture GGUF with random weights and a small tokenizer built from a sample of
text (the ``gguf`` package, a test dependency). Its weights are shaped so that, under a
server's JSON grammar, greedy decoding closes strings and arrays early and picks small
digits: answers are short, valid JSON, and vary with the prompt. They mean nothing.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from drscore.engine.runtime.calls.local_process import LocalProcess

PINNED_VERSION = "0.3.36"  # the llama-cpp-python release both servers are built from
_REPO_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "install-llama-servers"


class LlamaServerMissing(RuntimeError):
    """A server binary is not built on this machine."""


def cache_dir() -> Path:
    explicit = os.environ.get("DRSCORE_LLAMA_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "drscore"


def _version() -> str:
    return os.environ.get("DRSCORE_LLAMA_CPP_PYTHON_VERSION", PINNED_VERSION)


def find_llama_server() -> Path:
    """The cached ``llama-server`` binary ($DRSCORE_LLAMA_SERVER wins)."""
    explicit = os.environ.get("DRSCORE_LLAMA_SERVER")
    path = Path(explicit) if explicit else cache_dir() / f"llama-server-{_version()}" / "bin" / "llama-server"
    if not path.is_file():
        raise LlamaServerMissing(f"llama-server not found at {path}: build it with scripts/install-llama-servers "
                                 "(./scripts/test does) or point $DRSCORE_LLAMA_SERVER at a binary")
    return path


def find_llama_vocab(name: str) -> Path:
    """llama.cpp's vocabulary file ``ggml-vocab-NAME.gguf`` (``llama-bpe``: Llama 3's;
    ``llama-spm``: Llama 2's; ``qwen2``...), beside its tokenizer tests' ``.inp`` and ``.out``,
    as scripts/install-llama-servers extracts them from the source distribution."""
    path = cache_dir() / f"llama-vocab-{_version()}" / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        raise LlamaServerMissing(f"{path.name} not found in {path.parent}: scripts/install-llama-servers extracts "
                                 "llama.cpp's vocabulary files (./scripts/test does)")
    return path


def llama_lib_dir() -> Path:
    """Where the libllama that both servers run lives (beside the llama-server binary)."""
    return find_llama_server().parent.parent / "lib"


def find_llama_cpp_python() -> Path:
    """The Python of the venv that has llama-cpp-python's server ($DRSCORE_LLAMA_CPP_PYTHON wins)."""
    explicit = os.environ.get("DRSCORE_LLAMA_CPP_PYTHON")
    path = Path(explicit) if explicit else cache_dir() / f"llama-cpp-python-{_version()}" / "venv" / "bin" / "python"
    if not path.is_file():
        raise LlamaServerMissing(f"llama-cpp-python's venv not found at {path}: build it with "
                                 "scripts/install-llama-servers (./scripts/test does) or point "
                                 "$DRSCORE_LLAMA_CPP_PYTHON at a python that imports llama_cpp.server")
    return path


# --- the tiny model ---------------------------------------------------------------

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
SPACE = "\u2581"  # sentencepiece's word boundary mark
# What greedy decoding under a JSON grammar should prefer, strongest first: end the answer,
# the word "ok" (a string gets it, once: see WORD_DONE), close a string, close an object,
# open one (so a list gets one item: "{" over "]"), close a list (so it gets no second
# item: "]" over ","), separators, small digits. Everything else stays near zero, so the
# grammar's allowed set decides, and the random part of the weights (which follows the
# prompt) breaks the ties among the digits 0-4.
WORD = "ok"
_PREFERRED = {"</s>": 6.0, WORD: 5.5, '"': 5.0, "}": 4.5, "{": 4.2, "]": 4.0, ",": 3.0, ":": 3.0,
              "0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0, "4": 1.0}
# Dimension 1 of the residual stream says "the last token was the word": it holds the word
# back right after itself, so a string is "ok", not "okokok..." up to the cap.
WORD_DONE = -2.0


def tokenizer_pieces(texts: list[str], *, words: int = 1500) -> list[tuple[str, float]]:
    """A sentencepiece-style vocabulary (piece, score) from sample text: every character
    seen, and every prefix of the most frequent words (so llama.cpp's merge-by-score
    tokenizer can reach each whole word one character at a time); longer pieces score
    higher. Bytes outside it fall back to the ``<0xNN>`` tokens."""
    counts: collections.Counter[str] = collections.Counter()
    chars: set[str] = set('{}[]:,"-.0123456789')  # JSON's own characters are always pieces of their own
    for text in texts:
        chars.update(text)
        counts.update(_WORD.findall(text))
    pieces: dict[str, float] = {}
    for c in sorted(chars):
        if c.isprintable() and not c.isspace():
            pieces.setdefault(c, -1.0)
    pieces.setdefault(SPACE, -1.0)
    pieces.setdefault(WORD, 0.5)
    for word in (w for w, _ in counts.most_common(words)):
        piece = SPACE + word
        for k in range(2, len(piece) + 1):
            pieces[piece[:k]] = max(pieces.get(piece[:k], -100.0), float(k))
    return sorted(pieces.items())


# ChatML, the template llama.cpp's and llama-cpp-python's servers both recognise by name.
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_pair_vocabulary(texts: list[str], *, size: int = 3000) -> tuple[list[str], list[str]]:
    """A byte-level BPE vocabulary (tokens by id, merges as ``"a b"``) trained on ``texts``
    with the tokenizers library, the kind Llama 3 and Qwen carry (``tokenizer.ggml.model``
    ``gpt2``)."""
    import orjson
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    model = orjson.loads(tokenizer.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def write_tiny_gguf(path: Path, texts: list[str], *, context: int = 4096, embd: int = 64, layers: int = 2,
                    heads: int = 4, seed: int = 7, chat_template: str | None = CHATML,
                    byte_pairs: tuple[list[str], list[str], str] | None = None) -> Path:
    """A tiny llama-architecture GGUF at ``path`` (random weights, see the module doc). Its
    vocabulary is sentencepiece's kind, from ``texts``, unless ``byte_pairs`` (tokens, merges,
    the pre-tokenizer's name) gives a byte-level BPE one, as Llama 3's."""
    import gguf  # a test dependency (drscore[dev]); imported here so the package does not need it
    import numpy as np

    rng = np.random.default_rng(seed)
    special = [("<unk>", gguf.TokenType.UNKNOWN), ("<s>", gguf.TokenType.CONTROL), ("</s>", gguf.TokenType.CONTROL)]
    tokens = [t for t, _ in special]
    types = [int(k) for _, k in special]
    if byte_pairs is None:
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        types += [int(gguf.TokenType.BYTE)] * 256
        scores = [0.0] * len(tokens)
        for piece, score in tokenizer_pieces(texts):
            tokens.append(piece)
            types.append(int(gguf.TokenType.NORMAL))
            scores.append(score)
    else:
        tokens += byte_pairs[0]
        types += [int(gguf.TokenType.NORMAL)] * len(byte_pairs[0])
    vocab = len(tokens)
    ff = embd * 2
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("drscore tiny random llama")
    w.add_context_length(context)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(embd // heads)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if byte_pairs is None:
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(byte_pairs[2])
        w.add_token_list(tokens)
        w.add_token_merges(byte_pairs[1])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    # No space before the text: the chat template's generation prompt must tokenize as
    # written, since llama-server walks its grammar through it.
    w.add_add_space_prefix(False)
    w.add_add_eos_token(False)
    if chat_template:
        w.add_chat_template(chat_template)

    def normal(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # Dimension 0 of the residual stream is a constant 1 in every token's embedding, and the
    # layers barely move it: after the final norm it carries the preference column of the
    # output matrix into every logit, whatever the prompt.
    emb = normal(vocab, embd, scale=0.05)
    emb[:, 0] = 1.0
    emb[:, 1] = 0.0
    index = {t: i for i, t in enumerate(tokens)}
    if WORD in index:
        emb[index[WORD], 1] = 1.0
    w.add_tensor("token_embd.weight", emb)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", normal(embd, embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", normal(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", normal(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", normal(embd, ff))
    w.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    out = normal(vocab, embd, scale=0.3)
    out[:, 0] = 0.0
    out[:, 1] = 0.0
    for piece, pref in _PREFERRED.items():
        if piece in index:
            out[index[piece], 0] = pref
    if WORD in index:
        out[index[WORD], 1] = WORD_DONE
    w.add_tensor("output.weight", out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def gguf_metadata(path: Path) -> dict[str, Any]:
    """A GGUF's key-value metadata as Ollama's ``/api/show`` returns it in ``model_info``
    (``"verbose": true``): each key as in the file, arrays whole. Read here rather than by
    the gguf package's reader, which maps every tensor too: 7.5 s for Llama 3's vocabulary
    file, against a fraction of a second for the keys alone. The file is mapped, not read:
    a model's weights (gigabytes) after its keys are never touched."""
    import mmap
    import struct

    with path.open("rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    at = 24  # magic, version (uint32), tensor count (uint64): then the number of keys

    def take(fmt: str) -> Any:
        nonlocal at
        value = struct.unpack_from(fmt, data, at)[0]
        at += struct.calcsize(fmt)
        return value

    def text() -> str:
        nonlocal at
        n = take("<Q")
        at += n
        return data[at - n:at].decode("utf-8", errors="replace")

    def value(kind: int) -> Any:
        if kind == _STRING:
            return text()
        if kind == _ARRAY:
            item, n = take("<I"), take("<Q")
            return [value(item) for _ in range(n)]
        return take(_SCALARS[kind])

    try:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        (keys,) = struct.unpack_from("<Q", data, 16)
        out: dict[str, Any] = {}
        for _ in range(keys):
            key = text()
            out[key] = value(take("<I"))
        return out
    finally:
        data.close()


# --- the servers ------------------------------------------------------------------


class LocalLlama(LocalProcess):
    """One server process on a free loopback port; ``url`` is its ``/v1`` base."""

    kind = "llama-server"

    def __init__(self, model: Path, *, context: int = 4096, slots: int = 4, startup_timeout: float = 60.0,
                 alias: str = "tiny-llama") -> None:
        super().__init__(startup_timeout)
        self.model, self.context, self.slots = model, context, slots
        self.alias = alias
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def root(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.kind} is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def command(self, port: int) -> list[str]:
        # One thread per request keeps two parallel slots from fighting over 2 cores.
        return [str(find_llama_server()), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                # each slot its own part of the context: the window stated per request is context / slots
                "-c", str(self.context), "-np", str(self.slots), "--no-kv-unified", "-t", "1", "--alias", self.alias,
                "--no-webui", "--log-disable"]

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix=f"drscore-{self.kind}-", suffix=".log")
        super().start()

    def launch(self, port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command(port), stdout=self._log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self.environment())

    def ready(self) -> bool:
        with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
            return bool(r.status == 200)

    def startup_log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")[-2000:] if self._log is not None else ""

    def cleanup(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class LocalLlamaCppPython(LocalLlama):
    """llama-cpp-python's server (one request at a time: it holds one lock per model)."""

    kind = "llama-cpp-python"

    def environment(self) -> dict[str, str]:
        # Its bindings load the libllama built with llama-server (scripts/install-llama-servers).
        lib = os.environ.get("LLAMA_CPP_LIB_PATH") or str(llama_lib_dir())
        return {**os.environ, "LLAMA_CPP_LIB_PATH": lib}

    def command(self, port: int) -> list[str]:
        return [str(find_llama_cpp_python()), "-m", "llama_cpp.server", "--model", str(self.model),
                # one request at a time: that one may have both cores
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.context), "--n_threads", "2",
                "--model_alias", self.alias, "--verbose", "false"]
