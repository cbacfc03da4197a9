"""judge.mock_server over real HTTP on 127.0.0.1 (aiohttp client)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import socket
from typing import Annotated, Any, Literal

import aiohttp
import msgspec
import orjson
import pytest

from drscore.cli import main
from drscore.commands import mock_judge as mock_judge_command
from drscore.judge.mock.completions import TOKENS_PER_MESSAGE
from drscore.judge.mock.server import (
    MockConfig,
    MockServerProcess,
    count_tokens,
    format_duration,
)
from support.data import DATA
from support.mock_http import FakeClock, served


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=10)]
    label: Literal["supported", "partial", "unsupported"]
    reason: str


SCHEMA = msgspec.json.schema(Verdict)


def chat(content: str, *, schema: dict | None = SCHEMA, system: str | None = None) -> dict[str, Any]:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    body: dict[str, Any] = {"model": "judge-x", "messages": messages, "temperature": 0.0, "max_tokens": 200}
    if schema is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "Verdict", "schema": schema, "strict": True}}
    return body


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, dict, Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with session.post(url + "/v1/chat/completions", data=data,
                            headers={"content-type": "application/json"}) as r:
        return r.status, dict(r.headers), await r.json()


def content_of(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


# -- pure helpers --------------------------------------------------------------------------


def test_count_tokens_hand_computed() -> None:
    assert count_tokens("Hello, world!") == 4  # Hello , world !
    assert count_tokens('{"verdict": "yes"}') == 9  # { " verdict " : " yes " }
    assert count_tokens("a_b 3.5%  ") == 5  # a_b 3 . 5 %
    assert count_tokens("") == 0


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.25, "250ms"), (0.0004, "1ms"), (1, "1s"), (1.5, "1.5s"),
    (59.9999, "1m0s"), (360, "6m0s"), (3723.5, "1h2m3.5s"),
])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="error_rate must be within"):
        MockConfig(error_rate=1.5)
    with pytest.raises(ValueError, match="error_rate \\+ malformed_rate"):
        MockConfig(error_rate=0.6, malformed_rate=0.6)
    with pytest.raises(ValueError, match="burst must be > 0"):
        MockConfig(burst=0)


def test_cli_flags_map_to_config(capsys: pytest.CaptureFixture[str]) -> None:
    ctx = mock_judge_command.command.make_context(
        "mock-judge", ["--port", "0", "--rpm", "30", "--tpm", "9000", "--burst", "2",
                       "--error-rate", "0.1", "--malformed-rate", "0.05", "--seed", "4",
                       "--latency", "0.2", "--jitter", "0.1", "--model", "m1"])
    cfg = mock_judge_command.config_from_args(ctx.params)
    assert cfg == MockConfig(rpm=30, tpm=9000, burst=2, error_rate=0.1, malformed_rate=0.05, seed=4,
                             latency=0.2, jitter=0.1, model="m1")
    assert main(["mock-judge", "--error-rate", "2"]) == 2  # a bad flag value: usage
    assert "error_rate must be within [0, 1]" in capsys.readouterr().err


# -- answers -------------------------------------------------------------------------------


async def test_answers_are_schema_valid_and_deterministic() -> None:
    async with served(MockConfig()) as (s, url):
        status, headers, first = await post(s, url, chat("Is claim 1 supported?"))
        assert status == 200
        assert first["object"] == "chat.completion" and first["model"] == "judge-x"
        assert first["choices"][0]["finish_reason"] == "stop"
        assert first["choices"][0]["message"]["role"] == "assistant"
        msgspec.json.decode(content_of(first), type=Verdict)
        _, _, again = await post(s, url, chat("Is claim 1 supported?"))
        assert content_of(again) == content_of(first)
        others = set()
        for i in range(2, 22):
            _, _, r = await post(s, url, chat(f"Is claim {i} supported?"))
            others.add(content_of(r))
            msgspec.json.decode(content_of(r), type=Verdict)
        assert len(others) == 20
        # No limits configured: no rate-limit headers are invented.
        assert not any(h.lower().startswith("x-ratelimit") for h in headers)
    async with served(MockConfig(seed=99)) as (s, url):  # a fresh server answers the same
        _, _, fresh = await post(s, url, chat("Is claim 1 supported?"))
        assert content_of(fresh) == content_of(first)


def _asked_key(body: dict) -> str:
    """The SHA-256 of the canonical body, less the cap and the streaming fields."""
    asked = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "max_tokens",
                                                          "max_completion_tokens")}
    return hashlib.sha256(orjson.dumps(asked, option=orjson.OPT_SORT_KEYS)).hexdigest()


async def test_answer_seed_is_sha256_of_canonical_request() -> None:
    body = chat("seeded")
    key = _asked_key(body)
    async with served(MockConfig()) as (s, url):
        # Key order in the request does not matter: the canonical form sorts keys.
        reordered = dict(reversed(list(body.items())))
        _, _, reply = await post(s, url, reordered)
        assert reply["id"] == f"chatcmpl-{key[:24]}"
        async with s.get(url + "/stats?hashes=1") as r:
            assert (await r.json())["hashes"] == {key: 1}


async def test_the_cap_changes_no_answer_but_stops_one_longer_than_it() -> None:
    # A model never sees max_tokens: it answers alike and stops where the cap says.
    async with served(MockConfig()) as (s, url):
        _, _, wide = await post(s, url, {**chat("capped"), "max_tokens": 4000})
        _, _, narrow = await post(s, url, {**chat("capped"), "max_completion_tokens": 3000})
        assert content_of(wide) == content_of(narrow) and wide["choices"][0]["finish_reason"] == "stop"
        used = wide["usage"]["completion_tokens"]
        assert used > 3
        _, _, cut = await post(s, url, {**chat("capped"), "max_tokens": used - 1})
        assert cut["choices"][0]["finish_reason"] == "length"
        assert cut["usage"]["completion_tokens"] == used - 1
        assert content_of(wide).startswith(content_of(cut)) and content_of(cut) != content_of(wide)
        async with s.get(url + "/stats") as r:
            assert (await r.json())["cut_off"] == 1


async def test_embedded_schema_and_plain_json_modes() -> None:
    prompt_schema = json.dumps(SCHEMA)
    async with served(MockConfig()) as (s, url):
        body = chat("Judge this.", schema=None,
                    system=f"Answer with JSON matching <json-schema>{prompt_schema}</json-schema> only.")
        _, _, reply = await post(s, url, body)
        msgspec.json.decode(content_of(reply), type=Verdict)
        json_object = chat("Judge this.", schema=None)
        json_object["response_format"] = {"type": "json_object"}
        _, _, reply = await post(s, url, json_object)
        assert content_of(reply) == "{}"
        status, _, reply = await post(s, url, chat("x", schema=None, system="<json-schema>{oops</json-schema>"))
        assert status == 400 and "not valid JSON" in reply["error"]["message"]


async def test_bad_requests_get_openai_shaped_400() -> None:
    async with served(MockConfig()) as (s, url):
        status, _, reply = await post(s, url, b"{not json")
        assert status == 400
        assert reply["error"]["type"] == "invalid_request_error"
        assert "not valid JSON" in reply["error"]["message"]
        status, _, reply = await post(s, url, {"model": "m"})
        assert status == 400 and "'messages' is required" in reply["error"]["message"]
        status, _, reply = await post(s, url, {"messages": [{"content": "no role"}]})
        assert status == 400 and "messages[0]" in reply["error"]["message"]
        bad_schema = chat("x", schema={"type": "array", "minItems": 3, "maxItems": 1})
        status, _, reply = await post(s, url, bad_schema)
        assert status == 400 and "unsupported response schema" in reply["error"]["message"]
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert stats["bad_requests"] == 4 and stats["requests"] == 4 and stats["ok"] == 0


async def test_models_endpoint() -> None:
    async with served(MockConfig(model="mock-7b")) as (s, url):
        async with s.get(url + "/v1/models") as r:
            assert [m["id"] for m in (await r.json())["data"]] == ["mock-7b"]


# -- quotas --------------------------------------------------------------------------------


async def test_tpm_uses_servers_own_token_count_hand_computed() -> None:
    clock = FakeClock()
    # tpm=600, burst=1 s: capacity 600*1/60 = 10 tokens, refilled at 10 tokens/s.
    async with served(MockConfig(tpm=600), clock) as (s, url):
        body = chat("Hello, world!", schema=None)
        # prompt: Hello , world ! = 4 tokens + 3 per message = 7; completion "{}" = 2 -> 9.
        status, headers, reply = await post(s, url, body)
        assert status == 200
        assert reply["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        assert headers["x-ratelimit-limit-tokens"] == "600"
        assert headers["x-ratelimit-remaining-tokens"] == "1"  # 10 - 9
        assert headers["x-ratelimit-reset-tokens"] == "900ms"  # (10 - 1) / 10 per s
        # Same instant: 9 needed, 1 left -> wait (9 - 1) / 10 = 0.8 s.
        status, headers, reply = await post(s, url, body)
        assert status == 429
        assert headers["Retry-After"] == "1" and headers["retry-after-ms"] == "800"
        assert reply["error"]["type"] == "rate_limit_exceeded"
        clock.now += 0.8
        status, headers, _ = await post(s, url, body)
        assert status == 200
        assert headers["x-ratelimit-remaining-tokens"] == "0"  # 1 + 8 - 9
        assert headers["x-ratelimit-reset-tokens"] == "1s"  # (10 - 0) / 10

        # Schema answer with two messages: "Be brief." = Be brief . = 3 and
        # "Is it true?" = Is it true ? = 4, plus 2 * 3 = 13 prompt tokens; the const
        # answer {"verdict": "yes"} is 9 completion tokens.
        const = {"type": "object", "properties": {"verdict": {"const": "yes"}},
                 "required": ["verdict"], "additionalProperties": False}
        clock.now += 0.5  # 0 + 0.5 * 10 = 5 tokens
        status, headers, _ = await post(s, url, chat("Is it true?", schema=const, system="Be brief."))
        # 22 tokens > capacity 10: admitted only when the bucket is full, (10 - 5) / 10 = 0.5 s.
        assert status == 429 and headers["retry-after-ms"] == "500"
        clock.now += 0.5
        status, headers, reply = await post(s, url, chat("Is it true?", schema=const, system="Be brief."))
        assert status == 200 and content_of(reply) == '{"verdict": "yes"}'
        assert reply["usage"] == {"prompt_tokens": 13, "completion_tokens": 9, "total_tokens": 22}
        # Debt: 10 - 22 = -12; full again after (10 + 12) / 10 = 2.2 s.
        assert headers["x-ratelimit-remaining-tokens"] == "0"
        assert headers["x-ratelimit-reset-tokens"] == "2.2s"
        status, headers, _ = await post(s, url, body)
        assert status == 429 and headers["retry-after-ms"] == "2100"  # (9 - -12) / 10
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert stats["prompt_tokens"] == 7 + 7 + 13 and stats["completion_tokens"] == 2 + 2 + 9
        assert stats["rate_limited"] == 3 and stats["ok"] == 3


async def test_rpm_bucket_exact_with_fake_clock() -> None:
    clock = FakeClock()
    # rpm=120, burst=1 s: capacity 2 requests, refilled at 2 requests/s.
    async with served(MockConfig(rpm=120), clock) as (s, url):
        statuses = []
        for i in range(3):
            status, headers, _ = await post(s, url, chat(f"q{i}"))
            statuses.append(status)
        assert statuses == [200, 200, 429]
        assert headers["retry-after-ms"] == "500" and headers["Retry-After"] == "1"
        assert headers["x-ratelimit-limit-requests"] == "120"
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["x-ratelimit-reset-requests"] == "1s"  # 2 missing at 2/s
        clock.now += 0.5
        status, headers, _ = await post(s, url, chat("q3"))
        assert status == 200 and headers["x-ratelimit-reset-requests"] == "1s"
        async with s.post(url + "/reset") as r:
            assert r.status == 200
        statuses = [(await post(s, url, chat(f"r{i}")))[0] for i in range(3)]
        assert statuses == [200, 200, 429]  # reset refilled the bucket


async def test_429_then_success_after_advertised_wait_real_clock() -> None:
    # rpm=120, burst=0.5 s: capacity 1 request, refilled at 2/s (wait at most 0.5 s).
    async with served(MockConfig(rpm=120, burst=0.5)) as (s, url):
        for i in range(5):
            status, headers, reply = await post(s, url, chat(f"probe {i}"))
            if status == 429:
                break
        assert status == 429
        assert headers["Retry-After"] == "1"
        wait_ms = int(headers["retry-after-ms"])
        assert 0 < wait_ms <= 500
        assert re.fullmatch(r"\d+ms", headers["x-ratelimit-reset-requests"])
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert reply["error"]["code"] == "rate_limit_exceeded"
        await asyncio.sleep(wait_ms / 1000)
        status, headers, _ = await post(s, url, chat("after the wait"))
        assert status == 200
        assert headers["x-ratelimit-limit-requests"] == "120"


# -- faults --------------------------------------------------------------------------------


def expected_fates(seed: int, n: int, error_rate: float, malformed_rate: float) -> dict[str, int]:
    """The k-th admitted request gets the k-th draw of random.Random(seed)."""
    rng = random.Random(seed)
    out = {"500": 0, "503": 0, "fenced": 0, "truncated": 0, "ok": 0}
    for _ in range(n):
        u = rng.random()
        if u < error_rate:
            out["500" if u < error_rate / 2 else "503"] += 1
        elif u < error_rate + malformed_rate:
            out["fenced" if u < error_rate + malformed_rate / 2 else "truncated"] += 1
        else:
            out["ok"] += 1
    return out


async def observe_fates(cfg: MockConfig, n: int) -> tuple[dict[str, int], dict[str, Any]]:
    counts = {"500": 0, "503": 0, "fenced": 0, "truncated": 0, "ok": 0}
    fence = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
    async with served(cfg) as (s, url):
        replies = await asyncio.gather(*(post(s, url, chat(f"claim {i}")) for i in range(n)))
        for status, _, reply in replies:
            if status != 200:
                assert reply["error"]["type"] in ("server_error", "service_unavailable")
                counts[str(status)] += 1
                continue
            text = content_of(reply)
            try:
                msgspec.json.decode(text, type=Verdict)
                counts["ok"] += 1
                continue
            except msgspec.DecodeError:
                pass
            m = fence.search(text)
            if m:  # recoverable: prose + fenced, valid JSON
                msgspec.json.decode(m.group(1), type=Verdict)
                counts["fenced"] += 1
            else:  # truncated: no way to decode
                with pytest.raises(json.JSONDecodeError):
                    json.loads(text)
                counts["truncated"] += 1
        async with s.get(url + "/stats") as r:
            stats = await r.json()
    return counts, stats


async def test_error_and_malformed_rates_reproducible() -> None:
    cfg = MockConfig(error_rate=0.2, malformed_rate=0.2, seed=11)
    n = 300
    first, stats = await observe_fates(cfg, n)
    second, _ = await observe_fates(cfg, n)
    assert first == second == expected_fates(11, n, 0.2, 0.2)
    # Roughly the configured shares (expected 60 each; +-25 is beyond 3 standard deviations).
    assert 35 <= first["500"] + first["503"] <= 85 and first["500"] > 0 and first["503"] > 0
    assert 35 <= first["fenced"] + first["truncated"] <= 85 and first["fenced"] > 0 and first["truncated"] > 0
    assert stats["errors"] == first["500"] + first["503"]
    assert stats["malformed"] == first["fenced"] + first["truncated"]
    assert stats["ok"] == first["ok"] and stats["requests"] == n


# -- stats ---------------------------------------------------------------------------------


async def test_stats_counters_and_duplicates() -> None:
    async with served(MockConfig()) as (s, url):
        a, b = chat("Hello, world!", schema=None), chat("Hi.", schema=None)
        await post(s, url, a)
        await post(s, url, a)
        await post(s, url, b)
        await post(s, url, b"garbage")
        async with s.get(url + "/stats?hashes=1") as r:
            stats = await r.json()
        assert stats["requests"] == 4 and stats["ok"] == 3 and stats["bad_requests"] == 1
        assert stats["distinct_requests"] == 2 and stats["duplicate_ok"] == 1
        # prompt: 2 * (4 + 3) for "Hello, world!" + (Hi . = 2) + 3 = 19; completion 3 * 2 = 6.
        assert stats["prompt_tokens"] == 19 and stats["completion_tokens"] == 6
        assert stats["in_flight"] == 0 and stats["max_in_flight"] == 1
        assert stats["first_request_at"] <= stats["last_request_at"]
        key_a = _asked_key(a)
        assert stats["hashes"][key_a] == 2 and sorted(stats["hashes"].values()) == [1, 2]
        async with s.post(url + "/reset") as r:
            assert r.status == 200
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert "hashes" not in stats
        assert stats["requests"] == stats["ok"] == stats["distinct_requests"] == 0
        assert stats["first_request_at"] is None
        await post(s, url, a)  # after a reset, an earlier request is not a duplicate
        async with s.get(url + "/stats") as r:
            assert (await r.json())["duplicate_ok"] == 0


async def test_in_flight_peak_with_latency() -> None:
    async with served(MockConfig(latency=0.3)) as (s, url):
        replies = await asyncio.gather(*(post(s, url, chat(f"c{i}")) for i in range(5)))
        assert [status for status, _, _ in replies] == [200] * 5
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert stats["max_in_flight"] == 5 and stats["in_flight"] == 0


# -- subprocess ----------------------------------------------------------------------------


async def test_subprocess_server_counts_real_report_tokens() -> None:
    with open(DATA / "drb" / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        reports = [json.loads(line) for line in f]
    report = next(r for r in reports if r["id"] == 60)["article"]  # an English report
    expected_prompt = len(re.findall(r"\w+|[^\w\s]", report)) + 3
    with MockServerProcess(MockConfig(rpm=6000, model="sub")) as mock:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", mock.url)
        async with aiohttp.ClientSession() as s:
            async with s.post(mock.url + "/chat/completions", json=chat(report)) as r:
                assert r.status == 200
                reply = await r.json()
        assert reply["usage"]["prompt_tokens"] == expected_prompt > 3000
        msgspec.json.decode(content_of(reply), type=Verdict)
        stats = mock.stats(hashes=True)
        assert stats["ok"] == 1 and stats["prompt_tokens"] == expected_prompt
        assert list(stats["hashes"].values()) == [1]
        mock.reset()
        assert mock.stats()["requests"] == 0
        port = mock.port
    with pytest.raises(OSError):  # the child is gone once the context exits
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


async def test_a_reserving_quota_charges_the_cap_and_gives_back_what_the_answer_left() -> None:
    # OpenAI's and Azure's limiters, by their documents: a character guess at the prompt plus
    # the whole max_tokens at admission; the unused cap given back when the answer leaves.
    clock = FakeClock()
    # tpm=6000, burst=60 s: capacity 6000 tokens, refilled at 100 tokens/s.
    async with served(MockConfig(tpm=6000, burst=60, tpm_charge="reserved"), clock) as (s, url):
        body = chat("Hello, world!", schema=None)  # max_tokens 200
        # "Hello, world!" is 13 characters: ceil(13 / 4) = 4, plus the cap of 200.
        status, headers, reply = await post(s, url, body)
        assert status == 200
        assert headers["x-ratelimit-remaining-tokens"] == str(6000 - 204)  # counted at admission
        assert reply["usage"]["completion_tokens"] == 2  # "{}": 198 of the cap unused
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert stats["tokens_level"] == 6000 - 4 - 2 and stats["quota_tokens"] == 6
        assert stats["tokens_given_back_dropped"] == 0  # 198 back to 5,796: under the top
        # A cap the bucket cannot hold waits, however short the answer: 4 + 5995 = 5999 against
        # 5994 left is (5999 - 5994) / 100 = 0.05 s.
        status, headers, _ = await post(s, url, {**body, "max_tokens": 5995})
        assert status == 429 and headers["retry-after-ms"] == "50"
        # max_completion_tokens counts as max_tokens does; without either, the window is reserved.
        clock.now += 0.06  # full again (5994 + 6 = 6000)
        newer = {k: v for k, v in body.items() if k != "max_tokens"} | {"max_completion_tokens": 1000}
        status, headers, _ = await post(s, url, newer)
        assert status == 200 and headers["x-ratelimit-remaining-tokens"] == str(6000 - 4 - 1000)
    async with served(MockConfig(tpm=60_000, burst=60, tpm_charge="reserved", context_window=8000),
                      FakeClock()) as (s, url):
        uncapped = {k: v for k, v in chat("Hello, world!", schema=None).items() if k != "max_tokens"}
        status, headers, _ = await post(s, url, uncapped)
        assert status == 200 and headers["x-ratelimit-remaining-tokens"] == str(60_000 - 4 - 8000)


async def test_an_input_token_quota_charges_the_prompt_alone() -> None:
    # Gemini's quota is of input tokens a minute, counted at admission: the answer is not charged.
    clock = FakeClock()
    async with served(MockConfig(tpm=6000, burst=60, tpm_charge="input"), clock) as (s, url):
        status, _, reply = await post(s, url, chat("Hello, world!", schema=None))
        assert status == 200 and reply["usage"]["completion_tokens"] > 0
        async with s.get(url + "/stats") as r:
            stats = await r.json()
        assert stats["quota_tokens"] == reply["usage"]["prompt_tokens"]
        assert stats["tokens_level"] == 6000 - reply["usage"]["prompt_tokens"]


async def test_the_gemini_profile_counts_a_prompt_at_its_native_count_tokens() -> None:
    async with served(MockConfig(profile="gemini")) as (s, url):
        body = chat("Rate this report on its depth.", schema=None, system="You judge reports.")
        async with s.post(url + "/v1beta/openai/chat/completions", json=body) as r:
            usage = (await r.json())["usage"]
        native = {"generateContentRequest": {
            "model": "models/judge-x", "systemInstruction": {"parts": [{"text": "You judge reports."}]},
            "contents": [{"role": "user", "parts": [{"text": "Rate this report on its depth."}]}]}}
        async with s.post(url + "/v1beta/models/judge-x:countTokens", json=native,
                          headers={"x-goog-api-key": "k"}) as r:
            assert r.status == 200
            counted = (await r.json())["totalTokens"]
        # the texts alone: the usage adds each message's overhead
        assert counted == usage["prompt_tokens"] - TOKENS_PER_MESSAGE * 2
        async with s.post(url + "/v1beta/models/judge-x:countTokens", json=native,
                          headers={"Authorization": "Bearer k"}) as r:
            assert r.status == 401 and (await r.json())["error"]["status"] == "UNAUTHENTICATED"
        async with s.get(url + "/stats") as r:
            assert (await r.json())["tokenize_requests"] == 1  # the refused one not counted
    async with served(MockConfig(profile="openai")) as (s, url):
        async with s.post(url + "/v1beta/models/judge-x:countTokens", json={"contents": []}) as r:
            assert r.status == 404


def test_the_quota_charge_must_be_one_the_mock_knows() -> None:
    with pytest.raises(ValueError, match="tpm_charge must be one of counted, reserved, input"):
        MockConfig(tpm_charge="estimated")
