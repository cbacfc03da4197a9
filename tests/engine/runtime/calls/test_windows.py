from drscore.engine.runtime.calls.windows import ModelWindow, base_model_name, window_of


def test_router_prefixes_are_dropped():
    assert base_model_name("openai/gpt-4.1") == "gpt-4.1"
    assert base_model_name("OpenRouter/x".lower()) == "openrouter/x"  # unknown router: kept
    assert base_model_name("google/gemini-2.5-pro") == "gemini-2.5-pro"


def test_longest_prefix_wins_over_a_shorter_family():
    assert window_of("gpt-4o-mini-2024-07-18") == ModelWindow(128_000, 16_384)
    assert window_of("o1-mini") == ModelWindow(128_000, 65_536)
    assert window_of("o1-2024-12-17") == ModelWindow(200_000, 100_000)
    assert window_of("openai/gpt-4.1") is not None and window_of("openai/gpt-4.1").context == 1_047_576


def test_unknown_model_has_no_window():
    assert window_of("my-azure-deployment") is None
    assert window_of("x", {"x": ModelWindow(10, 5)}) == ModelWindow(10, 5)
