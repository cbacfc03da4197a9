"""The anthropic profile's split quotas (``otpm`` > 0): requests, input tokens and output tokens
as the real API states them, and its 429 naming the quota that refused. Figures worked by hand:
the mock counts a token per word or punctuation mark plus 3 per message, so "Hello, world!" is a
prompt of 4 + 3 = 7 and the profile's prose answer (no schema in the prompt) is 22 tokens."""
from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from typing import Any

import aiohttp
import orjson
import pytest

from drscore.judge.mock.profiles import profile, rate_limit_response, split_quota_headers
from drscore.judge.mock.quota import Figures, Quota, Refusal
from drscore.judge.mock.server import MockConfig, MockServerProcess, add_config_arguments, config_from_args
from drscore.judge.quota_refusal import NamedQuota, named_quotas
from support.mock_http import FakeClock, served

PREFIX = "anthropic-ratelimit-"
# 2025-08-21T12:40:58.3Z: a reset due now is stated as the second after
WALL = datetime(2025, 8, 21, 12, 40, 58, 300_000, tzinfo=timezone.utc).timestamp()


def _anthropic(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith(PREFIX)}


def test_a_fresh_split_quota_states_the_recorded_shape():
    # a real response: input 80,000, output 16,000, tokens their sum, every remaining at its limit
    q = Quota(rpm=1000, tpm=80_000, burst=60.0, clock=lambda: 0.0, otpm=16_000)
    full = "2025-08-21T12:40:59Z"
    assert split_quota_headers(q.figures(), now=WALL) == {
        f"{PREFIX}requests-limit": "1000", f"{PREFIX}requests-remaining": "1000", f"{PREFIX}requests-reset": full,
        f"{PREFIX}input-tokens-limit": "80000", f"{PREFIX}input-tokens-remaining": "80000",
        f"{PREFIX}input-tokens-reset": full,
        f"{PREFIX}output-tokens-limit": "16000", f"{PREFIX}output-tokens-remaining": "16000",
        f"{PREFIX}output-tokens-reset": full,
        f"{PREFIX}tokens-limit": "96000", f"{PREFIX}tokens-remaining": "96000", f"{PREFIX}tokens-reset": full,
    }


def test_remainings_are_rounded_to_the_thousand_and_resets_are_the_second_each_bucket_is_full():
    # the other recorded response: input 2,000,000 / 1,996,000 left, output 400,000 / 399,000
    q = Quota(rpm=1000, tpm=2_000_000, burst=60.0, clock=lambda: 0.0, otpm=400_000)
    assert q.admit(3_700, output=1_200) == 0.0
    wall = WALL + 0.55  # 12:40:58.85
    h = split_quota_headers(q.figures(), now=wall)
    assert h[f"{PREFIX}requests-remaining"] == "999"  # exact, not rounded
    assert h[f"{PREFIX}input-tokens-remaining"] == "1996000"  # 1,996,300
    assert h[f"{PREFIX}output-tokens-remaining"] == "399000"  # 398,800
    assert (h[f"{PREFIX}tokens-limit"], h[f"{PREFIX}tokens-remaining"]) == ("2400000", "2395000")
    # requests: 1 / (1000 / 60 a second) = 0.06 s, 58.91; input: 3,700 x 60 / 2,000,000 = 0.111 s,
    # 58.961: both 12:40:59. output: 1,200 x 60 / 400,000 = 0.18 s, 59.03: 12:41:00, and so is
    # the sum's, full when both are
    assert h[f"{PREFIX}requests-reset"] == h[f"{PREFIX}input-tokens-reset"] == "2025-08-21T12:40:59Z"
    assert h[f"{PREFIX}output-tokens-reset"] == h[f"{PREFIX}tokens-reset"] == "2025-08-21T12:41:00Z"
    # half a thousand rounds up, less rounds down; never above the limit
    h = split_quota_headers({"tokens": Figures(limit=80_000, remaining=79_500, reset_s=0.0),
                             "output_tokens": Figures(limit=16_000, remaining=14_499, reset_s=0.0)}, now=WALL)
    assert (h[f"{PREFIX}input-tokens-remaining"], h[f"{PREFIX}output-tokens-remaining"],
            h[f"{PREFIX}tokens-remaining"]) == ("80000", "14000", "94000")
    h = split_quota_headers({"tokens": Figures(limit=600, remaining=600, reset_s=0.0)}, now=WALL)
    assert h[f"{PREFIX}input-tokens-remaining"] == "600"


def _message(body: bytes) -> str:
    return orjson.loads(body)["error"]["message"]


def test_the_429_names_the_refusing_quota_in_anthropics_words():
    anthropic = profile("anthropic")
    figures = Quota(rpm=50, tpm=30_000, burst=60.0, clock=lambda: 0.0, otpm=16_000).figures()
    refusal = Refusal(dimension="output_tokens", limit=16_000, left=100, requested=1024)
    headers, body = rate_limit_response(anthropic, 2.5, {}, "claude-sonnet-4-6", refusal, True, split=figures)
    assert orjson.loads(body)["type"] == "error" and orjson.loads(body)["error"]["type"] == "rate_limit_error"
    assert _message(body) == (
        "This request would exceed your organization's rate limit of 16,000 output tokens per minute (org: "
        "mock-org, model: claude-sonnet-4-6). For details, refer to: https://docs.claude.com/en/api/rate-limits. "
        "You can see the response headers for current usage. Please reduce the prompt length or the maximum "
        "tokens requested, or try again later.")
    assert named_quotas(body) == [NamedQuota(dimension="output_tokens", per="minute", limit=16_000)]
    # 2.5 s: Retry-After 3, beside the split set (and no OpenAI-style header)
    assert headers["Retry-After"] == "3" and headers[f"{PREFIX}tokens-limit"] == "46000"
    assert not any(k.startswith("x-ratelimit") or k == "retry-after-ms" for k in headers)
    _, body = rate_limit_response(anthropic, 2.5, {}, "m", Refusal(dimension="tokens", limit=30_000, left=63,
                                                                    requested=385), True, split=figures)
    assert "rate limit of 30,000 input tokens per minute (org: mock-org, model: m)." in _message(body)
    _, body = rate_limit_response(anthropic, 2.5, {}, "m", Refusal(dimension="requests", limit=50, left=0,
                                                                    requested=1), True, split=figures)
    assert named_quotas(body) == [NamedQuota(dimension="requests", per="minute", limit=50)]
    # outside split mode: the generic body and the headers as before
    headers, body = rate_limit_response(anthropic, 2.5, {"x-ratelimit-limit-tokens": "30000",
                                                         "x-ratelimit-remaining-tokens": "63"}, "m", refusal, True)
    assert _message(body) == "This request would exceed the rate limit for your organization. Please retry after " \
                             "some time."
    assert headers == {f"{PREFIX}tokens-limit": "30000", f"{PREFIX}tokens-remaining": "63", "Retry-After": "3"}


def _served(cfg: MockConfig):
    return served(cfg, FakeClock())  # frozen: no refill between calls


async def post(s: aiohttp.ClientSession, url: str, max_tokens: int) -> tuple[int, dict[str, str], Any]:
    body = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Hello, world!"}],
            "max_tokens": max_tokens}
    async with s.post(url + "/v1/chat/completions", json=body) as r:
        return r.status, dict(r.headers), await r.json()


async def stats(s: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with s.get(url + "/stats") as r:
        return await r.json()


SPLIT = MockConfig(profile="anthropic", rpm=1000, tpm=80_000, tpm_charge="input", otpm=16_000, burst=60,
                   reasoning_tokens=30)


async def test_a_cap_over_what_the_output_bucket_holds_is_refused_naming_output_tokens():
    # burst 60 s: whole minutes. output refills 16,000 / 60 a second (none here: the clock is frozen)
    async with _served(SPLIT) as (s, url):
        before = time.time()
        status, h, reply = await post(s, url, 4321)
        after = time.time()
        # the answer: 22 tokens of prose after a hidden thought of 30, billed in completion_tokens
        assert status == 200 and reply["usage"]["prompt_tokens"] == 7 and reply["usage"]["completion_tokens"] == 52
        # stated at admission: input 80,000 - 7 = 79,993; output 16,000 - 4,321 = 11,679
        assert _anthropic(h) | {f"{PREFIX}{k}-reset": "" for k in ("requests", "input-tokens", "output-tokens",
                                                                   "tokens")} == {
            f"{PREFIX}requests-limit": "1000", f"{PREFIX}requests-remaining": "999", f"{PREFIX}requests-reset": "",
            f"{PREFIX}input-tokens-limit": "80000", f"{PREFIX}input-tokens-remaining": "80000",
            f"{PREFIX}input-tokens-reset": "",
            f"{PREFIX}output-tokens-limit": "16000", f"{PREFIX}output-tokens-remaining": "12000",
            f"{PREFIX}output-tokens-reset": "",
            f"{PREFIX}tokens-limit": "96000", f"{PREFIX}tokens-remaining": "92000", f"{PREFIX}tokens-reset": "",
        }
        # output full again in 4,321 / (16,000 / 60) = 16.2 s, stated as a UTC second
        reset = datetime.strptime(h[f"{PREFIX}output-tokens-reset"], "%Y-%m-%dT%H:%M:%SZ")
        assert before + 16.2 <= reset.replace(tzinfo=timezone.utc).timestamp() <= after + 17.21
        assert h[f"{PREFIX}tokens-reset"] == h[f"{PREFIX}output-tokens-reset"]  # the later of the two
        # the unused 4,321 - 52 given back with the answer: 52 kept, 15,948 left
        st = await stats(s, url)
        assert st["output_tokens_charged"] == 52 and st["output_tokens_level"] == 16_000 - 52
        assert st["quota_tokens"] == 7  # the input quota's charge, as before

        # a cap of 15,949 is one over: (15,949 - 15,948) / 266.7 a second = 0.004 s, said as 1
        status, h, reply = await post(s, url, 15_949)
        assert status == 429 and h["Retry-After"] == "1"
        assert reply["error"]["type"] == "rate_limit_error"
        assert "rate limit of 16,000 output tokens per minute (org: mock-org, model: mock-judge)" \
            in reply["error"]["message"]
        assert h[f"{PREFIX}output-tokens-remaining"] == "16000" and h[f"{PREFIX}requests-remaining"] == "999"
        st = await stats(s, url)
        assert (st["rate_limited"], st["rate_limited_output"], st["rate_limited_input"]) == (1, 1, 0)

        status, h, _ = await post(s, url, 15_948)  # exactly what is left
        assert status == 200 and h[f"{PREFIX}output-tokens-remaining"] == "0"
        assert h[f"{PREFIX}tokens-remaining"] == "80000"  # input 79,986 rounds to 80,000, plus 0
        st = await stats(s, url)
        assert st["output_tokens_charged"] == 52 + 52 and st["output_tokens_level"] == 15_948 - 52


async def test_outside_split_mode_the_anthropic_profile_is_unchanged():
    cfg = MockConfig(profile="anthropic", rpm=1000, tpm=80_000, tpm_charge="input", burst=60, reasoning_tokens=30)
    async with _served(cfg) as (s, url):
        status, h, _ = await post(s, url, 15_949)  # no output quota: nothing reserves the cap
        assert status == 200
        assert _anthropic(h) == {f"{PREFIX}requests-limit": "1000", f"{PREFIX}requests-remaining": "999",
                                 f"{PREFIX}tokens-limit": "80000", f"{PREFIX}tokens-remaining": "79993"}
        st = await stats(s, url)
        assert st["output_tokens_charged"] == 0 and "output_tokens_level" not in st


async def test_the_input_quota_refuses_in_its_own_words_and_an_error_answer_gives_its_whole_cap_back():
    # tpm 600, burst 1 s: 10 input tokens, refilled at 10 a second; output: 16,000 / 60 = 266.7
    cfg = MockConfig(profile="anthropic", tpm=600, tpm_charge="input", otpm=16_000, burst=1)
    async with _served(cfg) as (s, url):
        assert (await post(s, url, 100))[0] == 200  # 10 - 7 = 3 input tokens left
        status, h, reply = await post(s, url, 100)  # (7 - 3) / 10 = 0.4 s
        assert status == 429 and h["Retry-After"] == "1"
        assert "rate limit of 600 input tokens per minute" in reply["error"]["message"]
        assert h[f"{PREFIX}input-tokens-limit"] == "600" and h[f"{PREFIX}input-tokens-remaining"] == "0"  # 3
        st = await stats(s, url)
        assert (st["rate_limited_input"], st["rate_limited_output"]) == (1, 0)
        assert st["output_tokens_charged"] == 22  # the prose answer; 78 of the cap of 100 given back
    async with _served(MockConfig(profile="anthropic", otpm=16_000, burst=60, error_rate=1.0)) as (s, url):
        status, h, _ = await post(s, url, 1000)
        assert status in (500, 503) and h[f"{PREFIX}output-tokens-remaining"] == "15000"  # held at admission
        st = await stats(s, url)
        # no output used: all 1,000 reserved at admission come back
        assert st["output_tokens_charged"] == 0 and st["output_tokens_level"] == 16_000
        assert st["output_tokens_given_back_dropped"] == 0


def test_the_otpm_flag_reaches_the_config_and_must_not_be_negative():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert config_from_args(parser.parse_args(["--otpm", "16000"])).otpm == 16_000
    assert "OTPM" in parser.format_help()
    with pytest.raises(ValueError, match="otpm must be >= 0"):
        MockConfig(otpm=-1)


async def test_a_child_process_mock_runs_in_split_mode():
    # benches run the mock as a child process: the flag must reach it
    with MockServerProcess(MockConfig(profile="anthropic", tpm=80_000, tpm_charge="input", otpm=16_000,
                                      burst=60)) as mock:
        async with aiohttp.ClientSession() as s:
            status, h, _ = await post(s, mock.base, 4321)
    assert status == 200
    # 11,679 left, and at most a few tokens refilled by the time the headers are written
    assert (h[f"{PREFIX}output-tokens-limit"], h[f"{PREFIX}output-tokens-remaining"]) == ("16000", "12000")
    assert (h[f"{PREFIX}tokens-limit"], h[f"{PREFIX}input-tokens-remaining"]) == ("96000", "80000")
