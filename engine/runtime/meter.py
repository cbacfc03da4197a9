"""Per-item and per-method accounting of judge calls (real and planned)."""
from __future__ import annotations

from typing import Any

import msgspec


class Meter(msgspec.Struct):
    calls: int = 0  # network calls made
    cache_hits: int = 0  # answered from cache or by an identical call in flight
    planned: int = 0  # dry run: calls that would be made
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, judged: Any) -> None:
        if judged.source == "network":
            self.calls += 1
        elif judged.source == "dry":
            self.planned += 1
        else:
            self.cache_hits += 1
        self.input_tokens += judged.input_tokens
        self.output_tokens += judged.output_tokens
        self.cost_usd += judged.cost_usd

    def merge(self, other: Meter) -> None:
        for f in self.__struct_fields__:
            setattr(self, f, getattr(self, f) + getattr(other, f))
