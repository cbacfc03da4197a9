"""Token estimates used before a call; corrected later from the API's reported usage.

No tokenizer download is possible offline, so we estimate from UTF-8 bytes: about four
bytes a token for English and roughly one token per CJK character (three bytes).
"""
from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` (never zero for non-empty text)."""
    if not text:
        return 0
    if text.isascii():
        return max(1, math.ceil(len(text) / 4))
    # Wide chars (mostly 3-byte CJK) cost about one token each; counting the extra
    # UTF-8 bytes avoids a Python-level loop over long reports.
    n_wide = (len(text.encode("utf-8")) - len(text)) // 2
    n_ascii = max(0, len(text) - n_wide)
    return max(1, math.ceil(n_ascii / 4 + n_wide))


def estimate_messages(messages: list[dict[str, str]] | list, per_message: int = 4) -> int:
    """Estimate prompt tokens of chat messages (content plus a small per-message overhead)."""
    total = 0
    for m in messages:
        content = m["content"] if isinstance(m, dict) else m.content
        total += estimate_tokens(content) + per_message
    return total + 2
