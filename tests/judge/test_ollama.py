"""What Ollama says about itself (drscore.judge.ollama): the server told apart by its model
list and ``/api/version``, and the context it loaded a model with from ``/api/ps``."""
from __future__ import annotations

from drscore.engine.runtime.calls.judging import ChatRequest, Message
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.judge.http import HttpBackend
from drscore.judge.mock.server import MockConfig, MockServerProcess
from drscore.judge.ollama import is_version, loaded_context, may_be_ollama

# GET /api/ps as Ollama 0.10+ answers it, one model loaded (the shape users have captured)
PS = {"models": [{"name": "qwen2.5-coder:7b", "model": "qwen2.5-coder:7b", "size": 5618579456,
                  "digest": "dae161e27b0e90dd1856c8bb3209201fd6736d8eb66298e75ed87571486f4364",
                  "details": {"parent_model": "", "format": "gguf", "family": "qwen2", "families": ["qwen2"],
                              "parameter_size": "7.6B", "quantization_level": "Q4_K_M"},
                  "expires_at": "2025-08-06T14:23:28.7482+02:00", "size_vram": 5618579456,
                  "context_length": 4096}]}


def test_the_context_of_the_loaded_model_by_its_name_with_or_without_the_tag():
    assert loaded_context(PS, "qwen2.5-coder:7b") == 4096
    latest = {"models": [dict(PS["models"][0], name="llama3.1:latest", model="llama3.1:latest")]}
    assert loaded_context(latest, "llama3.1") == 4096  # Ollama reads a name without a tag as :latest
    assert loaded_context(PS, "llama3.1:8b") is None  # another model is loaded, not this one
    assert loaded_context({"models": []}, "qwen2.5-coder:7b") is None  # not loaded yet
    older = {"models": [{k: v for k, v in PS["models"][0].items() if k != "context_length"}]}
    assert loaded_context(older, "qwen2.5-coder:7b") is None  # a version before 0.10 does not say


def test_only_a_model_list_owned_by_library_or_the_default_port_is_asked_about_its_version():
    assert may_be_ollama("library", "https://gpu-box.lan/v1")
    assert may_be_ollama("someone", "http://127.0.0.1:11434/v1")
    assert not may_be_ollama("openai", "https://api.openai.com/v1")
    assert is_version({"version": "0.12.3"}) and not is_version({"version": 3}) and not is_version([])


async def test_the_backend_knows_ollama_and_asks_the_loaded_context_after_a_chat():
    with MockServerProcess(MockConfig(profile="ollama", context_window=6000)) as mock:
        backend = HttpBackend(mock.url, "llama3.1")
        try:
            assert await backend.server_facts() == ServerFacts(server="ollama")
            assert await backend.loaded_window() is None  # the model is loaded by its first chat
            await backend.complete(ChatRequest(messages=(Message("user", "Rate."),), template="t",
                                               template_hash="h", schema_name="V", schema={"type": "object"}, max_tokens=5))
            assert await backend.loaded_window() == 6000
        finally:
            await backend.close()
    with MockServerProcess(MockConfig(profile="vllm")) as mock:  # not Ollama: nothing to ask
        backend = HttpBackend(mock.url, "llama3.1")
        try:
            assert await backend.server_facts() == ServerFacts()
        finally:
            await backend.close()


async def test_the_backend_loads_the_model_and_counts_with_the_vocabulary_show_gives(tiny_gguf):
    from drscore.judge.gguf_vocab import text_counter, vocab_from_metadata
    from drscore.judge.local_llama import gguf_metadata

    with MockServerProcess(MockConfig(profile="ollama", context_window=6000, tokenizer=f"gguf:{tiny_gguf}")) as mock:
        backend = HttpBackend(mock.url, "llama3.1")
        try:
            assert await backend.load_model()  # POST /api/generate with no prompt: done_reason "load"
            assert await backend.loaded_window() == 6000  # stated before any chat
            counter = await backend.vocabulary_counter()
            assert counter is not None and counter.counted_by == "ollama:llama3.1 (its sentencepiece vocabulary)"
            text = "The report finds that the report is long."
            vocab = vocab_from_metadata(gguf_metadata(tiny_gguf))
            assert vocab is not None
            # the texts by the GGUF's own rules, 3 tokens a message and 3 for the reply's opening
            assert counter.count_messages([Message("user", text)]) == text_counter(vocab)(text) + 3 + 3
        finally:
            await backend.close()
    with MockServerProcess(MockConfig(profile="ollama")) as mock:  # counting by its words rule: no vocabulary
        backend = HttpBackend(mock.url, "llama3.1")
        try:
            assert await backend.vocabulary_counter() is None
            assert backend.vocabulary_note is not None and "gave no tokenizer" in backend.vocabulary_note
        finally:
            await backend.close()
