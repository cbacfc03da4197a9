"""What Ollama says about itself, read from its own API beside the OpenAI-compatible one.

Ollama answers a prompt longer than the context it loaded the model with by keeping its
end and answering anyway (docs/providers.md, "A server that cuts long prompts"). That
context is the loaded runner's, not the model's: the Modelfile's ``num_ctx``, else
``OLLAMA_CONTEXT_LENGTH``, else a default of 2,048-4,096 tokens (newer versions choose by
the GPU's memory). Only once the model is loaded does ``GET /api/ps`` state it
(``context_length``, Ollama 0.10 and later), so drscore has Ollama load the model first
(``POST /api/generate`` with no prompt) and asks then, or after the run's first answer.

Ollama lists its pulled models at ``/v1/models`` as owned by ``library`` (a namespace for
others), and answers ``GET /api/version`` with ``{"version": ...}``; its default port is 11434.

It has no route that counts a prompt, but ``POST /api/show`` with ``"verbose": true`` returns
the model's GGUF metadata whole (``model_info``), its tokenizer among it: drscore counts each
prompt with that vocabulary (:mod:`drscore.judge.gguf_vocab`). Without ``verbose`` the
tokenizer's arrays come back empty.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from drscore.judge.gguf_vocab import GgufVocab, vocab_from_metadata

DEFAULT_PORT = 11434


def may_be_ollama(owner: Any, base_url: str) -> bool:
    """Whether a model list's owner and the URL are worth asking ``/api/version`` about."""
    return owner == "library" or urlsplit(base_url).port == DEFAULT_PORT


def is_version(body: Any) -> bool:
    """Whether ``body`` is Ollama's answer to ``GET /api/version``."""
    return isinstance(body, dict) and isinstance(body.get("version"), str) and len(body) <= 3


def show_request(model: str) -> dict[str, Any]:
    """The body of ``POST /api/show`` that returns the model's tokenizer whole."""
    return {"model": model, "verbose": True}


def model_vocabulary(body: Any) -> GgufVocab | None:
    """The tokenizer in ``POST /api/show``'s answer; None where it holds none (not verbose,
    or a model without one)."""
    return vocab_from_metadata(body.get("model_info")) if isinstance(body, dict) else None


def _names(model: str) -> set[str]:
    # Ollama resolves a name without a tag to ":latest" and lists it so
    return {model, f"{model}:latest"} if ":" not in model.rsplit("/", 1)[-1] else {model}


def loaded_context(body: Any, model: str) -> int | None:
    """The context ``model`` is loaded with, from ``GET /api/ps``'s answer; None while it is
    not loaded, or from a version that does not state it."""
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        return None
    names = _names(model)
    for entry in models:
        if isinstance(entry, dict) and (entry.get("name") in names or entry.get("model") in names):
            ctx = entry.get("context_length")
            return ctx if isinstance(ctx, int) and not isinstance(ctx, bool) and ctx > 0 else None
    return None
