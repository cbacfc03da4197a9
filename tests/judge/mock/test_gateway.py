"""The mock's AI gateway (judge.mock.gateway): a fixed window of tokens charged after each
answer, worked by hand on a fake clock."""
from __future__ import annotations

import orjson
import pytest

from drscore.judge.mock.gateway import GatewayWindow
from drscore.judge.mock.server import MockConfig


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_apisix_admits_under_the_limit_charges_after_and_starts_over_a_window_after_its_first_charge() -> None:
    clock = Clock()
    gw = GatewayWindow("apisix", limit=1000, window_s=10, clock=clock)
    # nothing charged yet: a whole window left, and Remaining one below the 1,000 left
    assert gw.headers() == {"X-AI-RateLimit-Limit-mock-instance": "1000",
                            "X-AI-RateLimit-Remaining-mock-instance": "999", "X-AI-RateLimit-Reset-mock-instance": "10"}
    assert gw.admit() and gw.admit()  # two calls in flight: nothing is charged before an answer
    clock.t += 2
    gw.charge(600)  # the window starts here, at 1002
    clock.t += 1
    gw.charge(700)  # 1,300: the second call overshot, as the last admitted does
    assert not gw.admit() and gw.refused == 1
    status, headers, body, _ = gw.rejection()
    # 1002 + 10 - 1003 = 9 s left
    assert status == 503 and headers["X-AI-RateLimit-Remaining-mock-instance"] == "0"
    assert headers["X-AI-RateLimit-Reset-mock-instance"] == "9" and "Retry-After" not in headers
    assert b"503 Service Temporarily Unavailable" in body
    clock.t = 1012  # the window's end: the counter starts over
    assert gw.admit() and gw.headers()["X-AI-RateLimit-Remaining-mock-instance"] == "999"
    gw.charge(10)
    assert gw.windows == 2


def test_kong_windows_are_aligned_to_the_clock_and_its_refusal_says_when_only_in_its_own_headers() -> None:
    clock = Clock()  # 1000: a 60 s window runs from 960 to 1020
    gw = GatewayWindow("kong", limit=500, window_s=60, clock=clock, fixed=True)
    gw.charge(480)
    assert gw.headers() == {"X-AI-RateLimit-Limit-minute-openai": "500", "X-AI-RateLimit-Remaining-minute-openai": "20"}
    gw.charge(30)
    assert not gw.admit()
    status, headers, body, _ = gw.rejection()
    assert status == 429 and "Retry-After" not in headers
    assert headers["X-AI-RateLimit-Retry-After"] == headers["X-AI-RateLimit-Reset-minute-openai"] == "20"
    assert orjson.loads(body) == {"message": "AI token rate limit exceeded for provider(s): openai"}
    clock.t = 1020
    assert gw.admit()
    # a window with no name of its own is named by its seconds
    assert "X-AI-RateLimit-Limit-300-openai" in GatewayWindow("kong", 5, 300, clock).headers()


def test_kongs_sliding_window_weighs_the_last_windows_charges_by_what_is_left_of_it() -> None:
    clock = Clock()  # 1000: the window 960-1020
    gw = GatewayWindow("kong", limit=500, window_s=60, clock=clock)
    gw.charge(400)
    clock.t = 1030  # a sixth into 1020-1080: 400 x 5/6 of the last window still counts
    assert gw.count() == pytest.approx(400 * 5 / 6)
    assert gw.headers()["X-AI-RateLimit-Remaining-minute-openai"] == "166"  # 500 - 333.3
    gw.charge(200)  # 533.3: refused
    assert not gw.admit()
    # under 500 again once 400 x (1 - f) < 300: f = 1/4, at 1035, 5 s from now
    assert gw.rejection()[1]["X-AI-RateLimit-Retry-After"] == "5"
    clock.t = 1035.5
    assert gw.admit()
    # charges past the limit in one window slide out over the next: 600 of 500 at 1079,
    # under it once 600 x (1 - f) < 500, f = 1/6, at 1090: 11 s
    clock.t = 1079
    gw.charge(400)
    assert gw.reset_s() == pytest.approx(11.0)
    # a window with nothing before it (a gap of more than a window) weighs nothing
    clock.t = 1300
    assert gw.count() == 0.0


def test_a_gateway_needs_a_token_limit_and_a_known_kind() -> None:
    with pytest.raises(ValueError, match="gateway must be one of apisix, kong"):
        MockConfig(gateway="nginx", tpm=1000)
    with pytest.raises(ValueError, match="needs tpm > 0"):
        MockConfig(gateway="apisix")
