"""What ``open_pool`` knows of an endpoint by its host before any call: Anthropic's compatible
endpoint documents ``response_format`` as ignored, so the schema goes in the prompt from the
first call, and its token quota is charged the prompt alone (nothing is sent here)."""
from __future__ import annotations

import msgspec
import pytest

from drscore.api import JudgeConfig, open_pool
from drscore.engine.methods.quality import QualityVerdict
from drscore.judge.wire import SCHEMA_OPEN, ignores_response_format, request_body

VARS = {"question": "What changed?", "report": "A short report."}


@pytest.mark.parametrize(("url", "ignored"), [
    ("https://api.anthropic.com/v1/", True),
    ("https://eu.api.anthropic.com/v1", True),  # a subdomain of the host
    ("https://api.openai.com/v1", False),
    ("https://api.anthropic.com.example.net/v1", False),  # only the host itself or its subdomains
    (None, False),  # the offline judge
])
def test_the_hosts_that_ignore_response_format(url, ignored):
    assert ignores_response_format(url) is ignored


@pytest.mark.parametrize("url", ["https://api.anthropic.com/v1", "https://api.openai.com/v1"])
async def test_anthropics_calls_carry_the_schema_in_the_prompt_and_keep_their_cache_keys(tmp_path, url, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    pool, cache = await open_pool(JudgeConfig(url=url, model="claude-sonnet-4-5", no_cache=True))
    try:
        req, components = pool.build("quality", QualityVerdict, VARS)
        body = request_body(req, "claude-sonnet-4-5")
        anthropic = "anthropic" in url
        assert req.json_mode is not anthropic and ("response_format" in body) is not anthropic
        assert (SCHEMA_OPEN in msgspec.json.encode(body).decode()) is anthropic
        assert components["json_mode"] is True  # the key keeps the configured mode: cached answers hold
        assert pool.charges_input is anthropic  # --tpm-charge auto: its input-token quota
    finally:
        await pool.backend.close()
        assert cache is None
