"""The tiny model and the two real llama.cpp servers, as the tests start them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from drscore.judge.local_llama import LlamaServerMissing, LocalLlama, LocalLlamaCppPython, write_tiny_gguf
from support.data import DATA, ROOT

EXAMPLES = ROOT / "examples"
# llama-server: 4 slots of 8,192 tokens each (the window it states per request); the longer
# English example reports do not fit, so the over-window paths are real. llama-cpp-python's
# server: one request at a time over the whole 16,384-token window, which every bundled
# report fits.
SERVER_CONTEXT, SERVER_SLOTS = 32_768, 4
PYTHON_CONTEXT = 16_384
# RACE's prompts carry the report and every criterion (9,000-13,000 tokens here): a second
# llama-server with 2 slots of 32,768 tokens scores them.
WIDE_CONTEXT, WIDE_SLOTS = 65_536, 2
ALIAS = "tiny-llama"


def sample_texts() -> list[str]:
    texts = []
    for path in (EXAMPLES / "reports.claude-3-7-sonnet.jsonl", DATA / "drb" / "reports.claude-3-7-sonnet.jsonl"):
        texts += [json.loads(line)["article"] for line in path.read_text(encoding="utf-8").splitlines()]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "prompts").glob("*.md"))]
    return texts


def write_test_model(path: Path) -> Path:
    return write_tiny_gguf(path, sample_texts(), context=WIDE_CONTEXT)


def start_server(kind: str, model: Path) -> LocalLlama:
    if kind == "llama-server":
        server = LocalLlama(model, context=SERVER_CONTEXT, slots=SERVER_SLOTS, alias=ALIAS)
    elif kind == "llama-server-wide":
        server = LocalLlama(model, context=WIDE_CONTEXT, slots=WIDE_SLOTS, alias=ALIAS)
    else:
        server = LocalLlamaCppPython(model, context=PYTHON_CONTEXT, slots=1, alias=ALIAS)
    try:
        server.start()
    except LlamaServerMissing as e:
        pytest.fail(str(e), pytrace=False)
    return server
